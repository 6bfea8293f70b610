"""Probe: how much room the score rounds leave above `las_speed`, with hand-set scorers and a lower bound.

Runs `las_speed` and a few hand-set alternatives of the same mechanism (finer rounds, rounds at arrivals, more
weight on the remaining estimate, shortest remaining time or remaining GPU-time first) on main.py's scenario
options over several seeds, plus SRTF and Gavel, and prints each one's mean avg JCT and its paired difference
from `las_speed` (mean of the per-seed relative differences, 95 % bootstrap interval, wins). With
`--runtime_info oracle` the remaining estimates are exact, so the SRPT rows are clairvoyant. The last line is a
lower bound no scheduler can beat: every job alone on the cluster, on its fastest type, from its arrival.
Use seeds the held-out report never evaluates (it uses 900-909).

python bench/score_headroom.py --difficulty medium --runtime_info oracle --seeds 300,301,302,303,304,305,306,307
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from cli.parser import build_parser, config_from_args  # noqa: E402
from config import UserError  # noqa: E402
from env.score_env import run_with_scorer  # noqa: E402
from evaluation.paired import paired_relative_difference  # noqa: E402
from metrics.summary import summarize  # noqa: E402
from scenario.build import build_scenario  # noqa: E402
from schedulers import make_policy  # noqa: E402
from schedulers.score_features import static_of  # noqa: E402
from schedulers.score_rounds import LAS_SPEED_WEIGHTS, LinearScorer  # noqa: E402

LAS = dict(LAS_SPEED_WEIGHTS)
SRPT_GPU = {"log_est_remaining": -1.0, "log_gpu_demand": -1.0, "log_rel_speed": 2.0, "runs_here": 0.5}
# name -> (weights, round length in s, rounds at arrivals)
CANDIDATES = {
    "las_speed": (LAS, 360.0, False),
    "las_speed, rounds at arrivals": (LAS, 360.0, True),
    "las_speed, 60-s rounds": (LAS, 60.0, False),
    "las_speed, log_est_remaining -1": ({**LAS, "log_est_remaining": -1.0}, 360.0, False),
    "shortest remaining time on the type, arrival rounds": (
        {"log_est_remaining_here": -1.0, "runs_here": 0.1},
        360.0,
        True,
    ),
    "shortest remaining GPU-time": (SRPT_GPU, 360.0, False),
    "shortest remaining GPU-time, arrival rounds": (SRPT_GPU, 360.0, True),
}
HEURISTICS = ("srtf", "gavel")


def avg_jct_s(result) -> float:
    """summary.csv's avg_jct_s of a run (mean JCT of its completed jobs); a run that leaves jobs unfinished or
    rejected says so on stderr (its mean is over fewer jobs than the others')."""
    row = summarize(result)
    if row.unfinished or row.rejected:
        print(f"note: {result.scheduler} seed {result.seed}: {row.unfinished} unfinished, {row.rejected} rejected",
              file=sys.stderr)  # fmt: skip
    return row.avg_jct_s


def no_wait_bound_s(sc) -> float:
    """Mean over jobs of its reference runtime on its fastest type: every job alone, started at arrival."""
    sim = sc.simulator()
    st = static_of(sim.view())
    best = np.maximum.reduceat(st.row_speed, st.row_start[:-1])
    runtime = np.array([j.runtime_s for j in sc.workload.jobs])
    return float(np.mean(runtime / best))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="300,301,302,303", help="comma-separated scenario seeds")
    a, rest = p.parse_known_args()
    try:
        seeds = [int(s) for s in a.seeds.split(",")]
    except ValueError:
        print(f"error: --seeds must be comma-separated integers, got {a.seeds!r}", file=sys.stderr)
        return 2
    cfg = config_from_args(build_parser().parse_args(["--mode", "eval", "--algo", "las_speed", *rest]))
    try:
        scenarios = [build_scenario(cfg, s) for s in seeds]
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    jct: dict[str, np.ndarray] = {}
    for name, (weights, round_s, on_arrival) in CANDIDATES.items():
        scorer = LinearScorer.from_named(weights)
        jct[name] = np.array(
            [
                avg_jct_s(run_with_scorer(sc, scorer, round_s=round_s, on_arrival=on_arrival))
                for sc in scenarios
            ]
        )
    for algo in HEURISTICS:
        runs = []
        for sc in scenarios:
            sim = sc.simulator()
            sim.run(make_policy(algo, seed=sc.seed, matrix=sc.throughput))
            runs.append(avg_jct_s(sim.result(algo, sc.seed, True)))
        jct[algo] = np.array(runs)
    jct["lower bound: alone, fastest type"] = np.array([no_wait_bound_s(sc) for sc in scenarios])
    base = jct["las_speed"]
    print(
        f"{cfg.sim.runtime_info} runtimes, seeds {a.seeds}; paired difference from las_speed (negative: better)"
    )
    for name, v in jct.items():
        d = paired_relative_difference(v, base)
        print(
            f"{name:<52} {v.mean():>10,.0f} s  {100 * d.mean_rel:+6.1f} % "
            f"[{100 * d.boot_lo:+.1f}, {100 * d.boot_hi:+.1f}]  better on {d.wins}/{d.n}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
