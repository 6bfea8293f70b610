"""Print generated vs published statistics for every synthetic profile (docs/workloads.md's table).

    python bench/synthetic_stats.py [--num_jobs 400000] [--seed 0] [--difficulty hard] [--load_factor 1.0]

Each profile generates `num_jobs` jobs on the difficulty preset's cluster (hard by default: its largest GPU
type holds 64 GPUs, every profile's largest job) at the given load, and every statistic is measured on the
generated Jobs (workloads/profile_stats.py) and printed beside its published value and source; the arrival rows
depend on the jobs per day, which the load and cluster set. tests/test_synthetic_profiles.py asserts the same
rows; bench/fit_profiles.py fits the parameters that produce them.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from config import DIFFICULTIES  # noqa: E402
from sim.cluster_spec import parse_cluster_spec  # noqa: E402
from workloads.calibrated import generate_profile  # noqa: E402
from workloads.profile_stats import compare, measure  # noqa: E402
from workloads.profiles import PROFILES  # noqa: E402


def _fmt(value: float | None) -> str:
    if value is None:
        return "n/a"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.4g}"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num_jobs", type=int, default=400_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--difficulty", default="hard", choices=tuple(DIFFICULTIES))
    p.add_argument("--load_factor", type=float, default=1.0)
    p.add_argument("--profiles", default=",".join(PROFILES), help="comma-separated profile names")
    a = p.parse_args()
    cluster = parse_cluster_spec(DIFFICULTIES[a.difficulty].cluster)
    all_within = True
    for profile in (PROFILES[name] for name in a.profiles.split(",")):
        t0 = time.perf_counter()
        w = generate_profile(cluster, a.num_jobs, a.load_factor, np.random.default_rng(a.seed), profile)
        took_s = time.perf_counter() - t0
        rows = compare(measure(w.jobs), profile)
        days = w.report["arrival_window_s"] / 86_400.0
        print(
            f"\n**{profile.name}**: {a.num_jobs:,} jobs, {a.difficulty} cluster ({cluster.num_gpus} GPUs), "
            f"load {a.load_factor:g}, seed {a.seed}, {days:.0f} days, generated in {took_s:.2f} s\n"
        )
        print("| statistic | generated | published | error | within | source |")
        print("| --- | --- | --- | --- | --- | --- |")
        for r in rows:
            err = (
                ""
                if r.error is None
                else (f"{r.error:.1%}" if r.error_kind == "rel" else f"{r.error:.4g} {r.error_kind}")
            )
            ok = (
                ("not fitted" if r.published is not None else "")
                if r.within is None
                else ("yes" if r.within else "**NO**")
            )
            all_within &= r.within is not False
            print(
                f"| {r.statistic} | {_fmt(r.generated)} | {_fmt(r.published)} | {err} | {ok} | {r.source} |"
            )
    return 0 if all_within else 1


if __name__ == "__main__":
    raise SystemExit(main())
