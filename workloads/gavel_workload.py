"""Gavel's synthetic continuous trace (the workload of its simulations, OSDI'20 §7.2): Poisson arrivals at a
given rate, Philly-shaped durations and GPU counts, job types drawn from the throughput matrix.

Rules, as Gavel's generator draws them (`generate_job`, `_generate_duration`, `_generate_scale_factor` in
scheduler/utils.py and the arrivals of scheduler/scheduler.py's simulation, github.com/stanford-futuredata/gavel):
- inter-arrival time exponential with mean 3600 / jobs_per_hour seconds (first job at t = 0);
- GPU count (Gavel's scale factor) 1, or with `multi_gpu` 1 / 2 / 4 / 8 with probability 0.7 / 0.1 / 0.15 /
  0.05 (Gavel: "the Philly distribution");
- duration on a V100 (Gavel's reference worker type): 60 x 10^u seconds, u uniform in [1.5, 3] with
  probability 0.8, in [3, 4] with probability 0.2;
- job type uniform among the matrix's models measured at that GPU count (Gavel: a uniform job template,
  redrawn until it is a distributed one for a multi-GPU job).
The job's `runtime_s` is its duration on the catalog's reference type, i.e. the V100 duration x the V100's
catalog speed (sim/throughput.py anchors every measured job type there), so it runs exactly its Gavel duration
on a V100. Draws come from the passed Generator in this order per job: arrival gap, scale, duration, type.
"""

from __future__ import annotations

import numpy as np

from sim.catalog import CATALOG
from sim.job import Job, Workload
from sim.throughput import ANCHOR_TYPE, ThroughputMatrix

SCALES = (1, 2, 4, 8)
SCALE_CUMULATIVE = (0.7, 0.8, 0.95, 1.0)
"""Gavel's `_generate_scale_factor`: r < 0.7 -> 1, < 0.8 -> 2, < 0.95 -> 4, else 8"""
SHORT_PROBABILITY = 0.8
SHORT_EXPONENT = (1.5, 3.0)
LONG_EXPONENT = (3.0, 4.0)
"""Gavel's `_generate_duration`: 60 x 10^U(1.5, 3) s with probability 0.8, else 60 x 10^U(3, 4) s"""


def gavel_workload(
    num_jobs: int, jobs_per_hour: float, matrix: ThroughputMatrix, rng: np.random.Generator, multi_gpu: bool
) -> Workload:
    """`num_jobs` jobs of Gavel's continuous trace (see the module docstring)."""
    v100_speed = CATALOG[ANCHOR_TYPE].speed
    by_scale = {s: [m for m in matrix.models if s in matrix.model_scales[m]] for s in SCALES}
    jobs = []
    t = 0.0
    for i in range(num_jobs):
        if i > 0:
            t += rng.exponential(3600.0 / jobs_per_hour)
        r = rng.random()
        scale = SCALES[int(np.searchsorted(SCALE_CUMULATIVE, r, side="right"))] if multi_gpu else 1
        lo, hi = SHORT_EXPONENT if rng.random() < SHORT_PROBABILITY else LONG_EXPONENT
        duration_v100_s = 60.0 * 10 ** rng.uniform(lo, hi)
        models = by_scale[scale]
        model = models[int(rng.integers(len(models)))]
        jobs.append(Job(f"g{i}", t, duration_v100_s * v100_speed, scale, job_type=model))
    report = {"generator": "gavel", "jobs_per_hour": jobs_per_hour, "multi_gpu": multi_gpu}
    return Workload(f"gavel-{jobs_per_hour:g}jph", tuple(jobs), report)
