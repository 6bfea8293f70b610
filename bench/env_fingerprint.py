"""Fingerprint of the scheduling env's behaviour: SHA-256 (first 16 hex digits) of every observation, both action
masks (`info["action_mask"]`, `action_masks()`), action, reward, termination and truncation flag, and of each info's
keys, illegal-action flag, simulated and elapsed time and jobs in the system, over a random play (mostly legal
actions, some drawn from the whole action space), resets included.

Takes main.py's scenario and env options (--difficulty, --runtime_info, --reward, --window, --seed, ...). Run the
same command in two checkouts: equal fingerprints mean the env behaved identically, step for step.

python bench/env_fingerprint.py --difficulty medium --steps 5000
python bench/env_fingerprint.py --difficulty hard --runtime_info estimate --reward delay --seed 3
"""

from __future__ import annotations

import argparse
import hashlib
import struct
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from cli.parser import build_parser, config_from_args  # noqa: E402
from env.gym_env import GPUClusterEnv  # noqa: E402


def play(env: GPUClusterEnv, steps: int, seed: int, any_action: float) -> tuple[str, int]:
    """(fingerprint, episodes started) of `steps` steps of random play from `env.reset(seed=seed)`."""
    rng = np.random.default_rng(seed)
    h = hashlib.sha256()

    def record(obs, info, *step) -> None:
        h.update(np.ascontiguousarray(obs).tobytes())
        h.update(info["action_mask"].tobytes())
        h.update(env.action_masks().tobytes())
        h.update(struct.pack("<?ddq", info["illegal_action"], info["sim_time_s"], info["elapsed_s"], 0))
        h.update(repr((sorted(info), info["jobs_in_system"], *step)).encode())

    obs, info = env.reset(seed=seed)
    record(obs, info)
    episodes = 1
    for _ in range(steps):
        legal = np.flatnonzero(info["action_mask"])
        if rng.random() < any_action or not len(legal):
            action = int(rng.integers(env.action_space.n))
        else:
            action = int(legal[rng.integers(len(legal))])
        obs, reward, done, truncated, info = env.step(action)
        record(obs, info, action, struct.pack("<d", reward).hex(), done, truncated)
        if done or truncated:
            obs, info = env.reset()
            record(obs, info)
            episodes += 1
    return h.hexdigest()[:16], episodes


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument(
        "--any_action", type=float, default=0.05, help="share of actions drawn from the whole space"
    )
    p.add_argument("--max_steps", type=int, default=None, help="episode truncation (default: the env's)")
    p.add_argument(
        "--window_order", choices=("runtime", "arrival"), default=None, help="(default: the env's)"
    )
    a, rest = p.parse_known_args()
    cfg = config_from_args(build_parser().parse_args(["--mode", "eval", *rest]))
    if a.max_steps is not None:
        cfg = replace(cfg, env=replace(cfg.env, max_steps=a.max_steps))
    if a.window_order is not None:
        cfg = replace(cfg, env=replace(cfg.env, window_order=a.window_order))
    env = GPUClusterEnv(cfg)
    fp, episodes = play(env, a.steps, cfg.seed, a.any_action)
    print(f"{a.steps} steps, {episodes} episodes: fingerprint {fp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
