"""Behaviour of the synthetic generator: calibration, shapes, fit, daily profile, bursts, determinism."""

from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from config import DIFFICULTIES
from sim.catalog import CATALOG
from sim.cluster_spec import ClusterSpec, parse_cluster_spec
from sim.job import Job
from sim.load import offered_load_factor
from workloads import synthetic
from workloads.synthetic import generate_synthetic

HARD = parse_cluster_spec(DIFFICULTIES["hard"].cluster)


def _fits_empty_cluster(job: Job, cluster: ClusterSpec) -> bool:
    """Some acceptable type has enough memory and either one node or, spanning nodes, enough GPUs in total."""
    cluster_types = {n.gpu_type for n in cluster.nodes}
    for gpu_type in job.gpu_types or cluster_types:
        nodes = [n for n in cluster.nodes if n.gpu_type == gpu_type and n.gpu_mem_gb >= job.gpu_mem_gb]
        if any(n.num_gpus >= job.num_gpus for n in nodes) or sum(n.num_gpus for n in nodes) >= job.num_gpus:
            return True
    return False


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_offered_load_matches_target_over_seeds(difficulty):
    preset = DIFFICULTIES[difficulty]
    cluster = parse_cluster_spec(preset.cluster)
    for seed in range(5):
        w = generate_synthetic(cluster, preset.num_jobs, preset.load_factor, np.random.default_rng(seed))
        assert len(w.jobs) == preset.num_jobs
        measured = offered_load_factor(w.jobs, cluster.num_gpus)
        assert measured == pytest.approx(preset.load_factor, rel=0.10)
        assert w.report["offered_load_factor"] == pytest.approx(measured)


def test_same_seed_same_jobs_different_seed_different():
    a = generate_synthetic(HARD, 500, 1.0, np.random.default_rng(7))
    b = generate_synthetic(HARD, 500, 1.0, np.random.default_rng(7))
    c = generate_synthetic(HARD, 500, 1.0, np.random.default_rng(8))
    assert a.jobs == b.jobs
    assert a.jobs != c.jobs


def test_jobs_sorted_rebased_with_ids_and_no_estimates():
    w = generate_synthetic(HARD, 2000, 0.8, np.random.default_rng(1))
    arrivals = [j.arrival_s for j in w.jobs]
    assert arrivals[0] == 0.0
    assert arrivals == sorted(arrivals)
    assert [j.job_id for j in w.jobs] == [str(i) for i in range(2000)]
    assert all(j.estimate_s is None and j.gpu_milli == 1000 for j in w.jobs)
    assert {j.priority for j in w.jobs} == {0, 1, 2}


def test_gpu_counts_follow_a_power_law():
    w = generate_synthetic(HARD, 20_000, 1.0, np.random.default_rng(2))
    counts = Counter(j.num_gpus for j in w.jobs)
    n = len(w.jobs)
    assert (counts[1] + counts[2]) / n > 0.75
    assert counts[1] > counts[2] > counts[4] > counts[8]
    assert sum(c for k, c in counts.items() if k >= 8) > 0
    assert set(counts) <= set(synthetic.GPU_COUNT_CHOICES)


def test_runtimes_clipped_and_growing_with_size():
    w = generate_synthetic(HARD, 20_000, 1.0, np.random.default_rng(3))
    runtime_s = np.array([j.runtime_s for j in w.jobs])
    gpus = np.array([j.num_gpus for j in w.jobs])
    assert runtime_s.min() >= synthetic.RUNTIME_MIN_S
    assert runtime_s.max() <= synthetic.RUNTIME_MAX_S
    assert np.median(runtime_s[gpus >= 4]) > np.median(runtime_s[gpus == 2]) > np.median(runtime_s[gpus == 1])


def test_memory_grows_with_size_and_types_have_enough_memory():
    cluster = parse_cluster_spec(DIFFICULTIES["medium"].cluster)
    present = {n.gpu_type for n in cluster.nodes}
    w = generate_synthetic(cluster, 20_000, 0.8, np.random.default_rng(4))
    for job in w.jobs:
        assert job.gpu_mem_gb > 0
        assert set(job.gpu_types) <= present
        qualifying = {t for t in present if CATALOG[t].mem_gb >= job.gpu_mem_gb}
        assert set(job.gpu_types or present) == qualifying
    mem_gb = np.array([j.gpu_mem_gb for j in w.jobs])
    gpus = np.array([j.num_gpus for j in w.jobs])
    assert np.median(mem_gb[gpus >= 4]) > np.median(mem_gb[gpus == 1])
    # Most jobs run anywhere; those above the smallest type's 16 GB are restricted.
    assert sum(not j.gpu_types for j in w.jobs) / len(w.jobs) > 0.5
    assert any(j.gpu_types == ("A100-80GB", "H100") for j in w.jobs)


@pytest.mark.parametrize("difficulty", sorted(DIFFICULTIES))
def test_every_job_fits_the_empty_preset_cluster(difficulty):
    cluster = parse_cluster_spec(DIFFICULTIES[difficulty].cluster)
    w = generate_synthetic(cluster, 5000, 1.0, np.random.default_rng(5))
    assert all(_fits_empty_cluster(j, cluster) for j in w.jobs)


_TYPES = ("T4", "V100-32GB", "A10", "A100-40GB", "A100-80GB", "H100")


@settings(max_examples=40, deadline=None)
@given(
    items=st.lists(
        st.tuples(st.integers(1, 6), st.sampled_from(_TYPES), st.sampled_from((1, 2, 3, 4, 8))),
        min_size=1,
        max_size=4,
    ),
    seed=st.integers(0, 2**32 - 1),
)
def test_every_job_fits_random_clusters(items, seed):
    cluster = parse_cluster_spec(",".join(f"{c}x{t}:{g}" for c, t, g in items))
    w = generate_synthetic(cluster, 300, 0.7, np.random.default_rng(seed))
    assert all(_fits_empty_cluster(j, cluster) for j in w.jobs)
    assert offered_load_factor(w.jobs, cluster.num_gpus) == pytest.approx(0.7, rel=0.10)


def test_large_jobs_only_where_the_cluster_allows():
    small = parse_cluster_spec("1xT4:2")
    w = generate_synthetic(small, 2000, 0.5, np.random.default_rng(6))
    assert {j.num_gpus for j in w.jobs} == {1, 2}
    assert all(j.gpu_mem_gb <= 16 and j.gpu_types == () for j in w.jobs)


def test_daily_profile_busier_in_working_hours():
    w = generate_synthetic(HARD, 30_000, 1.0, np.random.default_rng(9))
    arrival_s = np.array([j.arrival_s for j in w.jobs])
    assert arrival_s[-1] > 5 * synthetic.DAY_S  # a multi-day workload
    hour = (arrival_s % synthetic.DAY_S) / 3600.0
    working = np.sum((hour >= 9) & (hour < 17))
    night = np.sum((hour >= 21) | (hour < 5))
    assert working > 2.0 * night


def test_bursts_share_instant_and_shape():
    w = generate_synthetic(HARD, 5000, 1.0, np.random.default_rng(10))
    by_arrival: dict[float, list[Job]] = {}
    for j in w.jobs:
        by_arrival.setdefault(j.arrival_s, []).append(j)
    bursts = [js for js in by_arrival.values() if len(js) > 1]
    assert len(bursts) >= 10
    assert all(len(js) <= synthetic.BURST_SIZE_MAX for js in bursts)
    for js in bursts:
        shapes = {(j.num_gpus, j.gpu_mem_gb, j.gpu_types, j.priority) for j in js}
        assert len(shapes) == 1
    in_bursts = sum(len(js) for js in bursts) / len(w.jobs)
    assert 0.05 < in_bursts < 0.2
    assert w.report["jobs_in_bursts"] == sum(len(js) for js in bursts)


def test_tiny_workloads_and_bad_arguments():
    one = generate_synthetic(HARD, 1, 1.0, np.random.default_rng(0))
    assert len(one.jobs) == 1 and one.jobs[0].arrival_s == 0.0
    two = generate_synthetic(HARD, 2, 1.0, np.random.default_rng(0))
    assert offered_load_factor(two.jobs, HARD.num_gpus) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="num_jobs"):
        generate_synthetic(HARD, 0, 1.0, np.random.default_rng(0))
    with pytest.raises(ValueError, match="load_factor"):
        generate_synthetic(HARD, 10, 0.0, np.random.default_rng(0))


def test_offered_load_factor_definition():
    jobs = [Job("a", 10.0, 100.0, 2), Job("b", 110.0, 50.0, 1, gpu_milli=500)]
    assert offered_load_factor(jobs, 4) == pytest.approx((200.0 + 25.0) / (4 * 100.0))
    same_instant = [Job("a", 5.0, 100.0, 2), Job("b", 5.0, 300.0, 1)]
    assert offered_load_factor(same_instant, 2) == pytest.approx(500.0 / (2 * 300.0))
    assert offered_load_factor([], 2) == 0.0


def test_hundred_thousand_jobs():
    w = generate_synthetic(HARD, 100_000, 1.0, np.random.default_rng(11))  # speed: bench/bench_sim.py
    assert len(w.jobs) == 100_000 and [j.job_id for j in w.jobs[:3]] == ["0", "1", "2"]


@pytest.mark.parametrize("generator", ["legacy", "profile"])
@pytest.mark.parametrize(
    ("num_jobs", "load", "nodes", "message"),
    [
        (0, 1.0, True, "num_jobs must be > 0, got 0"),
        (10, 0.0, True, "load_factor must be > 0, got 0.0"),
        (10, float("nan"), True, "load_factor must be > 0, got nan"),
        (10, 1.0, False, "cluster 'empty' has no nodes"),
    ],
)
def test_both_generators_refuse_a_draw_that_cannot_be_made(generator, num_jobs, load, nodes, message):
    from sim.cluster_spec import ClusterSpec
    from workloads.calibrated import generate_profile
    from workloads.profiles import PROFILES

    cluster = HARD if nodes else ClusterSpec("empty", ())
    rng = np.random.default_rng(0)
    with pytest.raises(ValueError, match=re.escape(message)):
        if generator == "legacy":
            generate_synthetic(cluster, num_jobs, load, rng)
        else:
            generate_profile(cluster, num_jobs, load, rng, PROFILES["philly"])
