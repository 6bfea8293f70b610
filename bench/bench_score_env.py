"""Benchmark: the score env (GPUClusterScore-v0) and the same mechanism without an env (`run_with_scorer`): steps/s
and episode time, with las_speed's weights or random scores.

Times are the process's CPU time (steady on a shared machine); one episode per scenario seed.

python bench/bench_score_env.py                                  # medium, estimated runtimes, seeds 0-4
python bench/bench_score_env.py --difficulty hard --seeds 0,1 --scores random
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from config import RunConfig, SimConfig, WorkloadConfig  # noqa: E402
from env.score_env import GPUClusterScoreEnv, run_with_scorer  # noqa: E402
from scenario.build import build_scenario  # noqa: E402
from schedulers.score_rounds import LAS_SPEED_WEIGHTS, LinearScorer  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--difficulty", default="medium")
    p.add_argument("--seeds", default="0,1,2,3,4")
    p.add_argument("--runtime_info", default="estimate", choices=("oracle", "estimate"))
    p.add_argument("--scores", default="las_speed", choices=("las_speed", "random"))
    p.add_argument("--max_rows", type=int, default=1024)
    a = p.parse_args()
    cfg = RunConfig(
        workload=WorkloadConfig(difficulty=a.difficulty), sim=SimConfig(runtime_info=a.runtime_info)
    )
    scorer = LinearScorer.from_named(LAS_SPEED_WEIGHTS)
    rng = np.random.default_rng(0)
    steps = rounds = 0
    env_s = native_s = 0.0
    seeds = [int(s) for s in a.seeds.split(",")]
    for seed in seeds:
        sc = build_scenario(cfg, seed)
        env = GPUClusterScoreEnv(cfg, scenario=sc, max_rows=a.max_rows)
        t0 = time.process_time()
        obs, info = env.reset(seed=seed)
        done = False
        while not done:
            rounds += info["at_round"]
            scores = scorer(obs["rows"]) if a.scores == "las_speed" else rng.normal(size=a.max_rows)
            obs, _, done, _, info = env.step(scores)
            steps += 1
        env_s += time.process_time() - t0
        if a.scores == "las_speed":
            t0 = time.process_time()
            run_with_scorer(sc, scorer)
            native_s += time.process_time() - t0
    n = len(seeds)
    print(
        f"{a.difficulty}, {a.scores} scores: {steps / env_s:,.0f} env steps/s ({rounds / steps:.0%} of them round "
        f"boundaries), {steps / n:,.0f} steps and {env_s / n:.2f} CPU s per episode (mean of {n})"
    )
    if a.scores == "las_speed":
        print(f"the same runs without the env (run_with_scorer): {native_s / n:.2f} CPU s per episode")


if __name__ == "__main__":
    main()
