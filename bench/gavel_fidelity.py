"""Gavel's aware-vs-agnostic comparison on Gavel's own workload (workloads/gavel_workload.py): average JCT of a
steady-state window of a continuous trace, per job rate, as the paper's Fig. 9-10 measure it.

python bench/gavel_fidelity.py --rates 0.4,0.8,1.2 --cluster 3xV100:4,3xP100:4,3xK80:4 --num_jobs 1500 \
    --window 500,1000 [--multi_gpu] [--preempt_overhead_s 0] [--seed 0]
Gavel (scheduler/scripts/sweeps/run_sweep_continuous.py) measures the jobs with ids in [4000, 5000) of a trace
generated at a fixed rate on 36:36:36 GPUs; a scaled cluster (12:12:12 here) with the rate scaled alike and a
smaller window keeps each run to about a minute.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from schedulers import POLICIES  # noqa: E402
from sim.cluster import ClusterLayout  # noqa: E402
from sim.cluster_spec import parse_cluster_spec  # noqa: E402
from sim.simulator import Simulator  # noqa: E402
from sim.throughput import ThroughputError, load_matrix  # noqa: E402
from workloads.gavel_workload import gavel_workload  # noqa: E402


def window_jct_s(cluster: str, rate: float, args, algo: str) -> tuple[float, float, int]:
    """(mean JCT of the window's jobs, CPU seconds, preemptions) of one run."""
    matrix = load_matrix("gavel")
    layout = ClusterLayout(parse_cluster_spec(cluster))
    w = gavel_workload(args.num_jobs, rate, matrix, np.random.default_rng(args.seed), args.multi_gpu)
    sim = Simulator(w, layout, None, 1.2, args.preempt_overhead_s, matrix)
    t0 = time.process_time()
    sim.run(POLICIES[algo])
    cpu_s = time.process_time() - t0
    r = sim.result(algo, args.seed, preemptive=True)
    lo, hi = args.window
    arrival = np.array([j.arrival_s for j in w.jobs])
    jct = (r.end_s - arrival)[lo:hi]
    assert not np.isnan(jct).any(), "a window job did not complete"
    return float(jct.mean()), cpu_s, int(r.preemptions.sum())


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--rates", default="0.4,0.8,1.2", help="jobs per hour, comma-separated")
    p.add_argument("--cluster", default="3xV100:4,3xP100:4,3xK80:4")
    p.add_argument("--num_jobs", type=int, default=1500)
    p.add_argument("--window", default="500,1000", help="job ids [lo, hi) whose JCT is averaged")
    p.add_argument("--multi_gpu", action="store_true", help="Gavel's Philly scale factors (Fig. 10)")
    p.add_argument("--preempt_overhead_s", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    try:
        rates = [float(v) for v in a.rates.split(",")]
        a.window = tuple(int(v) for v in a.window.split(","))
    except ValueError as e:
        p.error(f"--rates takes numbers and --window two integers: {e}")
    if not all(r > 0 and r != float("inf") for r in rates):
        p.error(f"--rates must be positive and finite, got {a.rates}")
    if len(a.window) != 2 or not 0 <= a.window[0] < a.window[1] <= a.num_jobs:
        p.error(f"--window must be LO,HI with 0 <= LO < HI <= --num_jobs ({a.num_jobs}), got {a.window}")
    try:
        load_matrix("gavel")
    except ThroughputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    print(
        "| jobs/hour | avg JCT gavel (h) | gavel_agnostic (h) | agnostic / aware | CPU s (aware, agnostic) |"
    )
    print("| --- | --- | --- | --- | --- |")
    for rate in rates:
        aware, cpu_a, _ = window_jct_s(a.cluster, rate, a, "gavel")
        agnostic, cpu_b, _ = window_jct_s(a.cluster, rate, a, "gavel_agnostic")
        print(
            f"| {rate:g} | {aware / 3600:.1f} | {agnostic / 3600:.1f} | {agnostic / aware:.2f} | "
            f"{cpu_a:.0f}, {cpu_b:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
