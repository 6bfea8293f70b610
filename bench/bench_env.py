"""Benchmark: Gymnasium env steps/s with a random legal policy (resets included).

python bench/bench_env.py                      # medium synthetic scenario, 100,000 steps
python bench/bench_env.py --difficulty hard --steps 50000
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from config import RunConfig, WorkloadConfig  # noqa: E402
from env.gym_env import GPUClusterEnv  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--difficulty", default="medium")
    p.add_argument("--steps", type=int, default=100_000)
    p.add_argument("--window", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    # BENCHMARKS.md's figures were measured on the legacy generator
    cfg = RunConfig(workload=WorkloadConfig(difficulty=a.difficulty, synthetic_profile="legacy"))
    cfg = replace(cfg, env=replace(cfg.env, window=a.window))
    env = GPUClusterEnv(cfg)
    rng = np.random.default_rng(a.seed)
    t0 = time.perf_counter()
    obs, info = env.reset(seed=a.seed)
    episodes = 0
    reset_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(a.steps):
        legal = np.flatnonzero(info["action_mask"])
        obs, _, done, truncated, info = env.step(int(legal[rng.integers(len(legal))]))
        if done or truncated:
            episodes += 1
            obs, info = env.reset()
    dt = time.perf_counter() - t0
    print(
        f"{a.difficulty}: {a.steps / dt:,.0f} env steps/s with a random legal policy "
        f"({a.steps} steps, {episodes} episodes incl. resets, {dt:.1f} s; first reset {reset_s * 1000:.0f} ms)"
    )


if __name__ == "__main__":
    main()
