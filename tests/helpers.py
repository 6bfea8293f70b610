"""Small builders shared by the core tests."""

from __future__ import annotations

import numpy as np

from schedulers import POLICIES
from sim.cluster import ClusterLayout
from sim.cluster_spec import parse_cluster_spec
from sim.job import Job, Workload
from sim.simulator import Simulator


def job(job_id, arrival_s, runtime_s, num_gpus=1, **kw) -> Job:
    return Job(str(job_id), float(arrival_s), float(runtime_s), num_gpus, **kw)


def run(cluster: str, jobs, policy: str, uniform_speed: bool = False, factor: float = 1.2, known=None):
    """Run `policy` on `jobs` over the cluster spec; returns (simulator, result keyed by job id)."""
    layout = ClusterLayout(parse_cluster_spec(cluster), uniform_speed=uniform_speed)
    sim = Simulator(Workload("t", tuple(jobs)), layout, known, factor)
    sim.run(POLICIES[policy])
    r = sim.result(policy, 0)
    by_id = {
        j.job_id: (r.start_s[i], r.end_s[i], r.status[i], r.gpu_type[i], r.placement[i])
        for i, j in enumerate(jobs)
    }
    return sim, by_id


def times(by_id) -> dict[str, tuple[float, float]]:
    return {k: (float(v[0]), float(v[1])) for k, v in by_id.items()}


def estimates(workload: Workload, seed: int, noisy: bool = True) -> np.ndarray:
    """What policies are told of the jobs' runtimes: the true ones, or (noisy) each times a lognormal(0, 0.8)
    factor drawn from `seed`, so both under- and over-estimates occur."""
    known = np.array([j.runtime_s for j in workload.jobs])
    if noisy:
        known = known * np.random.default_rng(seed).lognormal(0.0, 0.8, len(workload.jobs))
    return known
