"""Gavel's continuous-trace workload (workloads/gavel_workload.py): the draw rules replayed by hand, and the
distributions over many jobs."""

from __future__ import annotations

import numpy as np

from sim.throughput import load_matrix
from tests.test_throughput import GAVEL, needs_gavel
from workloads.gavel_workload import gavel_workload


@needs_gavel
def test_first_jobs_replay_the_documented_draws():
    # per job: gap (not for the first), scale draw, short/long draw, exponent, model index; duration on a V100 is
    # 60 x 10^u s and runtime_s (A100 reference) = that x 0.5 (V100 catalog speed)
    m = load_matrix(str(GAVEL))
    w = gavel_workload(3, 2.0, m, np.random.default_rng(7), multi_gpu=True)
    rng = np.random.default_rng(7)
    t = 0.0
    for i, j in enumerate(w.jobs):
        if i > 0:
            t += rng.exponential(1800.0)  # 3600 / 2 jobs per hour
        r = rng.random()
        scale = 1 if r < 0.7 else 2 if r < 0.8 else 4 if r < 0.95 else 8
        lo, hi = (1.5, 3.0) if rng.random() < 0.8 else (3.0, 4.0)
        u = rng.uniform(lo, hi)
        models = [x for x in m.models if scale in m.model_scales[x]]
        model = models[int(rng.integers(len(models)))]
        assert (j.arrival_s, j.num_gpus, j.job_type) == (t, scale, model)
        assert j.runtime_s == 60.0 * 10**u * 0.5


@needs_gavel
def test_distributions_over_many_jobs():
    m = load_matrix(str(GAVEL))
    n = 4000
    w = gavel_workload(n, 3.0, m, np.random.default_rng(0), multi_gpu=True)
    scales = np.array([j.num_gpus for j in w.jobs])
    for s, p in ((1, 0.7), (2, 0.1), (4, 0.15), (8, 0.05)):
        # binomial standard deviation at n = 4000 is at most 0.0073; 4 sigma
        assert abs((scales == s).mean() - p) < 0.03, s
    v100_s = np.array([j.runtime_s for j in w.jobs]) / 0.5
    assert v100_s.min() >= 60 * 10**1.5 and v100_s.max() <= 60 * 10**4
    long_share = (v100_s > 60 * 10**3).mean()
    assert abs(long_share - 0.2) < 0.03
    gaps = np.diff([j.arrival_s for j in w.jobs])
    assert abs(gaps.mean() / 1200.0 - 1) < 0.08  # 3600 / 3; relative sd of the mean 1 / sqrt(3999) = 0.016
    for j in w.jobs:
        assert j.num_gpus in m.model_scales[j.job_type]  # multi-GPU jobs only among distributed models
    single = gavel_workload(200, 3.0, m, np.random.default_rng(0), multi_gpu=False)
    assert {j.num_gpus for j in single.jobs} == {1}
