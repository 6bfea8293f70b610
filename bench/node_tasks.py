"""Scores reference node managers and trained agents on the power or autoscaling task over held-out seeds.

    python bench/node_tasks.py --task power --seeds 100-104 --managers always_on,idle_off:600:1 \
        --checkpoint d3qn=models/power/d3qn_seed0_final.pt [workload options as main.py]
    python bench/node_tasks.py --task autoscaling --autoscale_preset easy --seeds 100-104

Prints one row per policy: mean return, its parts (power: energy cost and JCT cost in EUR; autoscaling: the
grade), average JCT over completed jobs and completed jobs, each averaged over the seeds (the same scenarios for
every policy).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agents.policy import load_policy  # noqa: E402
from config import RunConfig, TaskConfig, WorkloadConfig  # noqa: E402
from env.node_tasks import GRADERS, run_node_policy, task_scenario_config  # noqa: E402
from scenario.build import build_scenario  # noqa: E402


def _seeds(text: str) -> list[int]:
    if "-" in text:
        a, b = text.split("-")
        return list(range(int(a), int(b) + 1))
    return [int(x) for x in text.split(",")]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", choices=("power", "autoscaling"), default="power")
    p.add_argument("--seeds", default="100-104")
    p.add_argument(
        "--managers", default=None, help="comma-separated node managers (default: the task's usual)"
    )
    p.add_argument(
        "--checkpoint", action="append", default=[], help="NAME=PATH of a trained agent (repeatable)"
    )
    p.add_argument("--task_scheduler", default="easy")
    p.add_argument("--jct_weight", type=float, default=TaskConfig().jct_weight_eur_per_job_h)
    p.add_argument("--autoscale_preset", default="easy")
    p.add_argument("--difficulty", default="easy")
    p.add_argument("--num_jobs", type=int, default=None)
    p.add_argument("--load_factor", type=float, default=None)
    p.add_argument("--synthetic_profile", default="legacy")
    a = p.parse_args()
    cfg = RunConfig(
        workload=WorkloadConfig(
            difficulty=a.difficulty,
            num_jobs=a.num_jobs,
            load_factor=a.load_factor,
            synthetic_profile=a.synthetic_profile,
        ),
        task=TaskConfig(
            name=a.task,
            scheduler=a.task_scheduler,
            jct_weight_eur_per_job_h=a.jct_weight,
            autoscale_preset=a.autoscale_preset,
        ),
    )
    default = (
        "always_on,idle_off:600:1,idle_off:0:0"
        if a.task == "power"
        else "keep,always_on,idle_off:1800,provision_to_demand"
    )
    managers = (a.managers or default).split(",")
    agents = dict(c.split("=", 1) for c in a.checkpoint)
    seeds = _seeds(a.seeds)
    scenarios = [build_scenario(task_scenario_config(cfg), s) for s in seeds]
    print(f"task {a.task}, seeds {a.seeds}, jobs started by {a.task_scheduler}; {scenarios[0].cluster.name}")
    header = f"{'policy':<28}{'return':>12}{'energy EUR':>12}{'JCT EUR':>10}{'grade':>8}{'avg JCT s':>12}{'done':>7}{'s':>7}"
    print(header)
    for name in [*managers, *agents]:
        t0 = time.perf_counter()
        rows = []
        policy = load_policy(agents[name], device="cpu") if name in agents else None
        for sc in scenarios:
            env = run_node_policy(replace(cfg), sc, policy.act if policy else None, None if policy else name)
            r = env.sim.result(name, sc.seed)
            done = np.asarray(r.status) == "completed"
            arrival = np.array([j.arrival_s for j in r.jobs])
            jct = float(np.mean(r.end_s[done] - arrival[done])) if done.any() else float("nan")
            rows.append(
                (
                    env.episode_return,
                    getattr(env, "energy_cost_eur", float("nan")),
                    getattr(env, "jct_cost_eur", float("nan")),
                    GRADERS[a.task](env).score,
                    jct,
                    int(done.sum()),
                )
            )
        m = np.mean(np.array(rows, dtype=float), axis=0)
        print(
            f"{name:<28}{m[0]:>12.2f}{m[1]:>12.2f}{m[2]:>10.2f}{m[3]:>8.3f}{m[4]:>12.0f}{m[5]:>7.1f}"
            f"{time.perf_counter() - t0:>7.1f}"
        )


if __name__ == "__main__":
    main()
