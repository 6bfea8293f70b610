"""Benchmark: one heuristic's simulation CPU time on a main.py scenario, with a fingerprint of the schedule it made.

Takes main.py's scenario options (workload, cluster, --runtime_info, --seed, ...) and times only the policy run
(`time.process_time`, best of --repeat), so start-up, metrics and plots do not blur a comparison. The fingerprint
(the first 16 hex digits of a SHA-256 of every job's start, end, held time, GPU types, placement, status and runs:
`fingerprint` below) lets two versions of a policy be checked decision for decision: run the same command in both
checkouts and compare the printed fingerprints.

python bench/bench_scenario.py --algo cbf --difficulty hard --runtime_info estimate --seed 900
python bench/bench_scenario.py --algo cbf --difficulty hard --runtime_info estimate --seed 900 --num_jobs 1500
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bench.arguments import at_least, names, user_errors  # noqa: E402
from cli.parser import build_parser, config_from_args  # noqa: E402
from scenario.build import build_scenario  # noqa: E402
from schedulers import POLICIES, PREEMPTIVE, make_policy  # noqa: E402


def fingerprint(result) -> str:
    """SHA-256 (first 16 hex digits) of every job's start, end and held time, GPU types, placement, status and
    runs (bench_gavel.py prints the same)."""
    h = hashlib.sha256()
    for arr in (result.start_s, result.end_s, result.runtime_actual_s):
        h.update(np.ascontiguousarray(arr, dtype=float).tobytes())
    h.update(repr((result.gpu_type, result.placement, result.status, result.runs)).encode())
    return h.hexdigest()[:16]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--algo", default="cbf", help=f"a heuristic: {', '.join(sorted(POLICIES))}")
    p.add_argument("--repeat", type=int, default=1, help="runs; the best CPU time is printed")
    a, rest = p.parse_known_args()
    names("--algo", a.algo, POLICIES)
    at_least("--repeat", a.repeat)
    cfg = config_from_args(build_parser().parse_args(["--mode", "eval", "--algo", a.algo, *rest]))
    at_least("--seed", cfg.seed, 0)
    with user_errors():
        sc = build_scenario(cfg, cfg.seed)
    best = float("inf")
    prints = set()
    for _ in range(a.repeat):
        sim = sc.simulator()
        c0 = time.process_time()
        sim.run(make_policy(a.algo, seed=sc.seed, matrix=sc.throughput))  # as the CLI builds it
        best = min(best, time.process_time() - c0)
        r = sim.result(a.algo, cfg.seed, a.algo in PREEMPTIVE)
        prints.add(fingerprint(r))
    n = len(sc.workload.jobs)
    done = int((np.asarray(r.status) == "completed").sum())
    print(
        f"{a.algo}: {best:.2f} CPU s ({n / best:.0f} jobs/s), {done}/{n} completed, "
        f"{len(r.timeline_t_s)} decision instants, fingerprint {' '.join(sorted(prints))}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
