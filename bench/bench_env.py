"""Benchmark: Gymnasium env steps/s with a random legal policy (resets included).

python bench/bench_env.py                      # medium synthetic scenario, 100,000 steps
python bench/bench_env.py --difficulty hard --steps 50000
python bench/bench_env.py --repeat 3           # best of 3 runs, wall clock and CPU time

Each run plays the same episodes (fixed seeds): a fresh env, reset(seed), then at each step a uniformly drawn
legal action, reset() after each episode. Wall-clock steps/s is the figure of a quiet machine; CPU steps/s
(time.process_time) is the one to compare while other work shares the machine.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bench.arguments import at_least  # noqa: E402
from config import DIFFICULTIES, RunConfig, WorkloadConfig  # noqa: E402
from env.gym_env import GPUClusterEnv  # noqa: E402


def run(cfg: RunConfig, steps: int, seed: int) -> tuple[float, float, int, float]:
    """(wall s, CPU s, episodes finished, first reset's wall s) of `steps` random legal steps."""
    env = GPUClusterEnv(cfg)
    rng = np.random.default_rng(seed)
    t0 = time.perf_counter()
    obs, info = env.reset(seed=seed)
    reset_s = time.perf_counter() - t0
    episodes = 0
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(steps):
        legal = np.flatnonzero(info["action_mask"])
        obs, _, done, truncated, info = env.step(int(legal[rng.integers(len(legal))]))
        if done or truncated:
            episodes += 1
            obs, info = env.reset()
    return time.perf_counter() - t0, time.process_time() - c0, episodes, reset_s


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--difficulty", default="medium", choices=DIFFICULTIES)
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--window", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=1, help="runs; the best wall and CPU times are printed")
    a = p.parse_args()
    for option, value in (("--steps", a.steps), ("--window", a.window), ("--repeat", a.repeat)):
        at_least(option, value)
    at_least("--seed", a.seed, 0)
    # BENCHMARKS.md's figures were measured on the legacy generator
    cfg = RunConfig(workload=WorkloadConfig(difficulty=a.difficulty, synthetic_profile="legacy"))
    cfg = replace(cfg, env=replace(cfg.env, window=a.window))
    runs = [run(cfg, a.steps, a.seed) for _ in range(a.repeat)]
    wall, cpu = min(r[0] for r in runs), min(r[1] for r in runs)
    episodes, reset_s = runs[0][2], runs[0][3]
    print(
        f"{a.difficulty}: {a.steps / wall:,.0f} env steps/s with a random legal policy, {a.steps / cpu:,.0f} per "
        f"CPU second ({a.steps} steps, {episodes} episodes incl. resets, best of {a.repeat}: {wall:.1f} s wall, "
        f"{cpu:.1f} s CPU; first reset {reset_s * 1000:.0f} ms)"
    )


if __name__ == "__main__":
    main()
