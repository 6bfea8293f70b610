"""The numeric ranges the simulator gives exact results within (times, runtimes, sizes) and the memory a run of
a given size needs; every workload source and the cluster parser check their values against them.

Why these edges: the simulated clock is a float64, whose resolution at t seconds is t x 2.2e-16. At 1e12 s (31,700
years) it is 0.2 ms, so arrivals up to MAX_ARRIVAL_S plus runtimes up to MAX_RUNTIME_S keep every start and end
exact to well below a millisecond. Beyond it a job arriving at 1e18 s "completes" with a JCT of 0 (the clock
steps 128 s at a time), and a runtime of 1e308 overflows every sum into inf/nan.
"""

from __future__ import annotations

import math

MAX_ARRIVAL_S = 1e12
"""latest arrival, in seconds after the first job's (after --time_scale)"""
MAX_RUNTIME_S = 1e9
"""longest runtime of one job in reference-GPU seconds (31.7 years)"""
MAX_ESTIMATE_S = 1e12
"""longest user runtime estimate (requested time) in seconds"""
TIME_SCALE_RANGE = (1e-6, 1e6)
"""--time_scale: arrival times are divided by it"""
MAX_JOBS = 10_000_000
"""jobs of one synthetic workload (--num_jobs)"""
MAX_GPUS = 1_000_000
"""GPUs of one cluster"""
MAX_GPUS_PER_NODE = 1_024
"""GPUs of one node"""

NOTICE_JOBS = 100_000
"""a run with more jobs (or NOTICE_GPUS more GPUs) prints its estimated memory first"""
NOTICE_GPUS = 100_000
BASE_MEMORY_MB = 110.0
MEMORY_PER_JOB_KB = 2.5
MEMORY_PER_GPU_KB = 0.22
"""resident memory of an eval run: BASE_MEMORY_MB + per job + per GPU (peak RSS of `python main.py --mode eval
--algo fcfs --difficulty easy --num_jobs N`, N = 20,000 and 100,000: 138 and 306 MB on the refitted profiles (158 and
354 MB before: the per-job figure is kept, pessimistic); --cluster 12500xA100:8 against 100xA100:8: +22 MB for 99,200
more GPUs; the 2-core development machine, Python 3.11)"""


def time_problem(what: str, value: float, limit: float) -> str | None:
    """Why `value` seconds is outside [0, limit] (or not finite), or None when it is inside."""
    if not math.isfinite(value):
        return f"{what} {value!r} is not a finite number of seconds"
    if value > limit:
        return (
            f"{what} {value:.6g} s is beyond {limit:g} s, the range the simulator keeps exact to below a "
            "millisecond (docs/model.md, Numeric ranges); check its unit"
        )
    return None


def estimated_memory_mb(num_jobs: int, num_gpus: int) -> float:
    return BASE_MEMORY_MB + (num_jobs * MEMORY_PER_JOB_KB + num_gpus * MEMORY_PER_GPU_KB) / 1024.0


def size_notice(num_jobs: int, num_gpus: int) -> str | None:
    """A one-line notice of the memory a run of this size needs, for runs above NOTICE_JOBS or NOTICE_GPUS."""
    if num_jobs <= NOTICE_JOBS and num_gpus <= NOTICE_GPUS:
        return None
    gb = estimated_memory_mb(num_jobs, num_gpus) / 1024.0
    return (
        f"note: {num_jobs:,} jobs on {num_gpus:,} GPUs: expect about {gb:.1f} GB of memory per simulated run "
        "and a long run (sim/limits.py)"
    )
