"""Gives a workload's jobs job types (models of a throughput matrix, sim/throughput.py) with a documented mix.

Mix (Gavel's own job generator, `generate_job` in scheduler/utils.py of github.com/stanford-futuredata/gavel):
a job's model is drawn uniformly among the models measured at its GPU count, and a multi-GPU job only among
the models Gavel measured distributed (ResNet-18, ResNet-50, Transformer, LM; A3C, CycleGAN and Recommendation
are single-GPU). Here the GPU count is the workload's own (the synthetic profile's or the CSV's), and a job of
k GPUs draws among the models measured at the largest scale factor <= k over the whole file (Gavel's scales
are 1, 2, 4, 8: a 16-GPU job draws among the 8-GPU models). Jobs that already have a job type (a jobs CSV's
`job_type` column) keep it. One uniform draw per job without a type, in job order, from the passed Generator
after every other draw of the workload, so workloads without job types are unchanged byte for byte.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from sim.job import Workload
from sim.throughput import ThroughputMatrix


def assign_job_types(workload: Workload, matrix: ThroughputMatrix, rng: np.random.Generator) -> Workload:
    """The workload with a job type on every job (see the module docstring); report counts per model."""
    jobs = workload.jobs
    todo = [i for i, j in enumerate(jobs) if not j.job_type]
    draws = rng.random(len(todo))
    all_scales = sorted({s for m in matrix.models for s in matrix.model_scales[m]})
    by_scale = {s: [m for m in matrix.models if s in matrix.model_scales[m]] for s in all_scales}
    out = list(jobs)
    for i, u in zip(todo, draws.tolist(), strict=True):
        fitting = [s for s in all_scales if s <= jobs[i].num_gpus]
        candidates = by_scale[fitting[-1] if fitting else all_scales[0]]
        out[i] = replace(jobs[i], job_type=candidates[int(u * len(candidates))])
    counts: dict[str, int] = {}
    for j in out:
        counts[j.job_type] = counts.get(j.job_type, 0) + 1
    report = dict(
        workload.report,
        job_types=matrix.path,
        job_types_drawn=len(todo),
        jobs_per_job_type=dict(sorted(counts.items())),
    )
    return Workload(workload.name, tuple(out), report)
