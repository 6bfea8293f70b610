"""Trains agent variants side by side (one process and one thread each) and scores every checkpoint on
validation seeds: how the agent defaults were chosen. Prints a table; `--out` also writes the curves as CSV.

    python bench/sweep_agents.py --variants d3qn_pure,d3qn_demo --minutes 6 --processes 2
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import multiprocessing as mp
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

VALIDATION_SEEDS = (200, 201, 202, 203, 204)  # never trained on; the docs use test seeds 100-109

# name -> (algo, env overrides, agent overrides)
_DEMO = {"demo_policy": "sjf"}
_DQN_DEMO = _DEMO | {"eps_start": 0.05, "eps_end": 0.01}
_DELAY = {"reward": "delay"}
VARIANTS: dict[str, tuple[str, dict, dict]] = {
    "d3qn_pure": ("d3qn", {}, {}),
    "d3qn_demo": ("d3qn", {}, _DQN_DEMO),
    "d3qn_delay": ("d3qn", _DELAY, {}),
    "d3qn_delay_g99": ("d3qn", _DELAY, {"gamma": 0.99}),
    "d3qn_delay_demo": ("d3qn", _DELAY, _DQN_DEMO),
    "d3qn_delay_demo_g99": ("d3qn", _DELAY, _DQN_DEMO | {"gamma": 0.99}),
    "d3qn_delay_demo_g99_m01": ("d3qn", _DELAY, _DQN_DEMO | {"gamma": 0.99, "demo_margin": 0.1}),
    "d3qn_delay_demo_g99_w01": ("d3qn", _DELAY, _DQN_DEMO | {"gamma": 0.99, "demo_weight": 0.1}),
    "d3qn_delay_demo_g95": ("d3qn", _DELAY, _DQN_DEMO | {"gamma": 0.95}),
    "sac_pure": ("sac", {}, {}),
    "sac_delay_g99": ("sac", _DELAY, {"gamma": 0.99}),
    "sac_delay_demo": ("sac", _DELAY, _DEMO),
    "sac_delay_demo_g99": ("sac", _DELAY, _DEMO | {"gamma": 0.99}),
    "sac_delay_demo_g99_w01": ("sac", _DELAY, _DEMO | {"gamma": 0.99, "demo_weight": 0.1}),
    "sac_delay_demo_g95": ("sac", _DELAY, _DEMO | {"gamma": 0.95}),
    "sac_delay_g99_lr1e4": ("sac", _DELAY, {"gamma": 0.99, "learning_rate": 1e-4}),
    "sac_delay_demo_g99_lr1e4": ("sac", _DELAY, _DEMO | {"gamma": 0.99, "learning_rate": 1e-4}),
}


def run_variant(name: str, minutes: float, total_steps: int, device: str, every: int) -> tuple:
    import numpy as np

    from agents.trainer import train
    from cli.train import heuristic_demonstrator
    from config import RunConfig
    from env.gym_env import GPUClusterEnv, run_policy_in_env
    from metrics.summary import summarize
    from scenario.build import build_scenario

    algo, env_over, agent_over = VARIANTS[name]
    base = RunConfig(mode="train", algo=algo)
    base = dataclasses.replace(base, workload=dataclasses.replace(base.workload, synthetic_profile="legacy"))
    cfg = dataclasses.replace(
        base,
        env=dataclasses.replace(base.env, **({"reward": "jct_at_start"} | env_over)),
        **{algo: dataclasses.replace(getattr(base, algo), **agent_over)},
    )
    eval_cfg = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, reward="jct"))
    scenarios = [build_scenario(eval_cfg, s) for s in VALIDATION_SEEDS]

    def evaluate(policy):
        jcts = [summarize(run_policy_in_env(eval_cfg, sc, policy.act, algo)).avg_jct_s for sc in scenarios]
        return {"val_avg_jct_s": float(np.mean(jcts))}

    demo = getattr(cfg, algo).demo_policy
    with tempfile.TemporaryDirectory() as tmp:
        result = train(
            algo,
            lambda s: GPUClusterEnv(cfg),
            cfg,
            seed=0,
            total_steps=total_steps,
            device=device,
            models_dir=f"{tmp}/models",
            run_dir=f"{tmp}/run",
            checkpoint_every_episodes=every,
            progress=False,
            eval_fn=evaluate,
            time_limit_s=minutes * 60,
            demonstrator=heuristic_demonstrator(demo) if demo else None,
        )
    rows = [(name, step, scores["val_avg_jct_s"]) for step, scores in result.eval_history]
    return name, device, result.global_step, result.steps_per_s, rows


def _run(task: tuple) -> tuple:
    return run_variant(*task)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--minutes", type=float, default=6.0, help="training time per variant")
    parser.add_argument("--total_steps", type=int, default=500_000, help="schedules span this many steps")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--every", type=int, default=25, help="episodes between scored checkpoints")
    parser.add_argument("--cuda", default="", help="also train this variant on CUDA (speed and curve)")
    parser.add_argument("--out", default="", help="CSV of (variant, device, step, validation avg JCT)")
    args = parser.parse_args()
    names = [n for n in args.variants.split(",") if n]
    unknown = [n for n in names + ([args.cuda] if args.cuda else []) if n not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    jobs = [(n, "cpu") for n in names] + ([(args.cuda, "cuda")] if args.cuda else [])
    t0 = time.perf_counter()
    results = []
    tasks = [(n, args.minutes, args.total_steps, dev, args.every) for n, dev in jobs]
    with mp.get_context("spawn").Pool(args.processes, maxtasksperchild=1) as pool:
        for name, dev, steps, sps, rows in pool.imap_unordered(_run, tasks):
            results.append((name, dev, steps, sps, rows))
            best = min(rows, key=lambda r: r[2]) if rows else (name, 0, float("nan"))
            last = rows[-1][2] if rows else float("nan")
            print(
                f"{name:22s} {dev:4s} {steps:8d} steps {sps:6.0f}/s  val JCT last {last:8.0f}  "
                f"best {best[2]:8.0f} @{best[1]}  ({time.perf_counter() - t0:.0f} s)",
                flush=True,
            )
    if args.out:
        with open(args.out, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["variant", "device", "step", "val_avg_jct_s", "steps_per_s"])
            for name, dev, _, sps, rows in results:
                for _, step, jct in rows:
                    w.writerow([name, dev, step, f"{jct:.1f}", f"{sps:.0f}"])


if __name__ == "__main__":
    main()
