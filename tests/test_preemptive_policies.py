"""SRTF and Tiresias: hand-computed schedules, and decision-for-decision agreement with the plain references of
tests/preemptive_reference.py on random small workloads."""

from __future__ import annotations

import importlib
from unittest.mock import patch

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedulers import POLICIES
from schedulers.tiresias import make_tiresias
from sim.cluster import ClusterLayout
from sim.cluster_spec import parse_cluster_spec
from sim.job import Workload
from sim.simulator import Simulator
from tests.helpers import estimates, job
from tests.preemptive_reference import srtf_reference, tiresias_reference
from tests.test_invariants import clusters, workloads


def _run(cluster: str, jobs, policy, overhead_s: float = 0.0, known=None) -> Simulator:
    layout = ClusterLayout(parse_cluster_spec(cluster))
    sim = Simulator(Workload("t", tuple(jobs)), layout, known, 1.2, overhead_s)
    sim.run(POLICIES[policy] if isinstance(policy, str) else policy)
    return sim


def _runs(sim: Simulator) -> dict[str, list[tuple[float, float]]]:
    """job id -> [(start, end)] of its runs, in order."""
    r = sim.result("x", 0)
    out: dict[str, list[tuple[float, float]]] = {}
    for i, s, e in zip(r.runs.job.tolist(), r.runs.start_s.tolist(), r.runs.end_s.tolist(), strict=True):
        out.setdefault(r.jobs[i].job_id, []).append((s, e))
    return out


# ---- SRTF, hand-computed --------------------------------------------------------------------------------


def test_srtf_preempts_for_a_shorter_arrival_and_restarts_after_the_overhead():
    # 1 GPU, restore overhead 60 s. a (10,000 s) runs from 0. b (10 s) arrives at 20: a has 9,980 left > 10 ->
    # a is preempted, b runs 20..30. At 30 c (5,000 s) arrives: 5,000 < a's 9,980 -> c runs 30..5,030. Then a
    # restarts: 60 s restore + 9,980 s -> ends 15,070.
    sim = _run("1xA100-80GB:1", [job("a", 0, 10000), job("b", 20, 10), job("c", 30, 5000)], "srtf", 60.0)
    assert _runs(sim) == {"a": [(0, 20), (5030, 15070)], "b": [(20, 30)], "c": [(30, 5030)]}
    r = sim.result("srtf", 0)
    assert r.preemptions.tolist() == [1, 0, 0] and r.overhead_s.tolist() == [60.0, 0.0, 0.0]


def test_srtf_does_not_preempt_on_a_tie():
    # a (110 s) has 100 s left at 10 when b (100 s) arrives: equal -> the running job keeps its GPU
    sim = _run("1xA100-80GB:1", [job("a", 0, 110), job("b", 10, 100)], "srtf")
    assert _runs(sim) == {"a": [(0, 110)], "b": [(110, 210)]}


def test_srtf_preempts_only_the_victims_it_needs():
    # 2 nodes x 2 GPUs. At 0, in SRTF order: w (1 GPU, 810 s) -> n0, v2 (2 GPUs, 910 s) -> n1, v1 (1 GPU, 1,010 s)
    # -> n0. At 10 j (2 GPUs, 100 s) arrives; left: v1 1,000, v2 900, w 800, all longer than j. Released lowest
    # priority first: v1 (n0 then has 1 free: no), v2 (n1 has 2: fits). v1 is then spared (v2 alone suffices),
    # so only v2 is preempted; j runs 10..110 on n1, v2 restarts there at 110 (no overhead) and ends 1,010.
    jobs = [job("v1", 0, 1010), job("w", 0, 810), job("v2", 0, 910, 2), job("j", 10, 100, 2)]
    sim = _run("2xA100-80GB:2", jobs, "srtf")
    assert _runs(sim) == {
        "v1": [(0, 1010)],
        "w": [(0, 810)],
        "v2": [(0, 10), (110, 1010)],
        "j": [(10, 110)],
    }
    r = sim.result("srtf", 0)
    assert r.placement[3] == "n1/0;n1/1"


def test_srtf_never_preempts_a_shorter_running_job_for_a_longer_waiting_one():
    # a (50 s) runs; b (500 s) arrives at 1: b waits although it arrived with the cluster full
    sim = _run("1xA100-80GB:1", [job("a", 0, 50), job("b", 1, 500)], "srtf")
    assert _runs(sim) == {"a": [(0, 50)], "b": [(50, 550)]}


# ---- Tiresias, hand-computed ----------------------------------------------------------------------------


def test_tiresias_demotes_at_the_threshold_and_keeps_fifo_within_a_queue():
    # 1 GPU, overhead 60 s, thresholds 3,250 / 7,200 GPU-s. a (10,000 s) runs from 0 in Q0; b (10 s) at 20 and
    # c (5,000 s) at 30 wait in Q0 behind the running a (same queue: no preemption). At 3,250 a crosses into Q1
    # (a wake-up) -> b preempts it: 3,250..3,260; then c (Q0) 3,260..8,260 (it reaches Q1 at 6,510, where a
    # waits: running first, so c keeps running). a restarts at 8,260: 60 + 6,750 s left -> 15,070.
    jobs = [job("a", 0, 10000), job("b", 20, 10), job("c", 30, 5000)]
    sim = _run("1xA100-80GB:1", jobs, "tiresias", 60.0)
    assert _runs(sim) == {"a": [(0, 3250), (8260, 15070)], "b": [(3250, 3260)], "c": [(3260, 8260)]}


def test_tiresias_attained_service_counts_gpus():
    # 2 GPUs. a (2 GPUs, 5,000 s) crosses 3,250 GPU-s at 1,625 s (2 GPUs); b (1 GPU, 100 s) arrived at 10 and
    # waits in Q0 behind it. At 1,625 a is demoted and preempted, b runs 1,625..1,725 (a needs both GPUs, so it
    # waits), then a restarts with 5,000 - 1,625 = 3,375 s left -> 5,100.
    jobs = [job("a", 0, 5000, 2), job("b", 10, 100)]
    sim = _run("1xA100-80GB:2", jobs, "tiresias")
    assert _runs(sim) == {"a": [(0, 1625), (1725, 5100)], "b": [(1625, 1725)]}


def test_tiresias_promotes_starving_jobs_with_the_knob():
    # 1 GPU, one threshold 100 GPU-s (2 queues), PROMOTEKNOB 1, no overhead. a (300 s) from 0, b (1,000 s) at 50.
    # 100: a reaches Q1 -> b (Q0) preempts it. 200: b reaches Q1, and a (waited 100 s >= 1 x its 100 s run) is
    #      promoted to Q0 -> a preempts b; a's service counts from 0 again.
    # 300: a reaches Q1 (100 s since its restart); b waited 100 s >= 1 x 100 s -> promoted -> b preempts a.
    # 400: b reaches Q1 again; a (executed 200 s, waited 100 s) is not promoted yet: same queue, b keeps running.
    # 500: a has waited 200 s >= 1 x 200 s -> promoted -> preempts b; a has 100 s left -> ends 600.
    # 600: b (executed 300 s, waited 100 s: not promoted) is alone -> runs its last 700 s -> ends 1,300.
    policy = make_tiresias((100.0,), promote_knob=1.0)
    sim = _run("1xA100-80GB:1", [job("a", 0, 300), job("b", 50, 1000)], policy)
    assert _runs(sim) == {"a": [(0, 100), (200, 300), (500, 600)], "b": [(100, 200), (300, 500), (600, 1300)]}


def test_tiresias_ignores_known_runtimes():
    # Tiresias never reads runtimes: noisy estimates give the same schedule as the truth
    rng = np.random.default_rng(3)
    jobs = [
        job(str(i), float(t), float(r), int(k))
        for i, (t, r, k) in enumerate(
            zip(
                np.sort(rng.uniform(0, 5000, 40)),
                rng.uniform(10, 8000, 40),
                rng.choice([1, 2, 4], 40),
                strict=True,
            )
        )
    ]
    noisy = np.array([j.runtime_s for j in jobs]) * rng.lognormal(0, 1, len(jobs))
    a = _run("2xA100-80GB:4", jobs, "tiresias", 60.0)
    b = _run("2xA100-80GB:4", jobs, "tiresias", 60.0, known=noisy)
    assert _runs(a) == _runs(b)


# ---- cross-checks against the plain references --------------------------------------------------------


def _same(a: Simulator, b: Simulator) -> bool:
    ra, rb = a.result("x", 0), b.result("x", 0)
    return (
        np.array_equal(ra.runs.job, rb.runs.job)
        and np.array_equal(ra.runs.start_s, rb.runs.start_s)
        and np.array_equal(ra.runs.end_s, rb.runs.end_s, equal_nan=True)
        and ra.runs.placement == rb.runs.placement
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads(), st.integers(0, 2**32 - 1), st.booleans(), st.sampled_from([0.0, 5.0, 60.0]))
def test_srtf_equals_the_plain_reference(spec, workload, seed, noisy, overhead_s):
    layout = ClusterLayout(spec)
    known = estimates(workload, seed, noisy)
    fast = Simulator(workload, layout, known, 1.2, overhead_s)
    plain = Simulator(workload, layout, known, 1.2, overhead_s)
    fast.run(POLICIES["srtf"])
    plain.run(srtf_reference)
    assert _same(fast, plain)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads(), st.integers(0, 2**32 - 1), st.sampled_from([0, 10**9]))
def test_srtf_sorting_its_queue_or_reading_the_index_equals_the_plain_reference(
    spec, workload, seed, sort_max
):
    """The same with the waiting jobs always taken from the simulator's by-runtime index (sort_max 0) or always
    sorted by the policy (whatever the queue's length): the same keys, so the same decisions."""
    layout = ClusterLayout(spec)
    known = estimates(workload, seed, True)
    fast = Simulator(workload, layout, known, 1.2, 60.0)
    plain = Simulator(workload, layout, known, 1.2, 60.0)
    with patch.object(importlib.import_module("schedulers.srtf"), "_SORT_MAX", sort_max):
        fast.run(POLICIES["srtf"])
    plain.run(srtf_reference)
    assert _same(fast, plain)
    if sort_max:  # the policy never read the index, so the simulator never kept it
        assert not fast.queue_by_runtime.active


_THRESHOLDS = st.sampled_from([(20.0,), (30.0, 200.0), (3250.0, 7200.0)])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads(), _THRESHOLDS, st.sampled_from([0.0, 0.5, 2.0]), st.sampled_from([0.0, 5.0]))
def test_tiresias_equals_the_plain_reference(spec, workload, thresholds, knob, overhead_s):
    """The fast policy's filtered wake-ups must lose no decision the reference's wake-up at every crossing makes."""
    _tiresias_same_as_reference(spec, workload, thresholds, knob, overhead_s)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads(), _THRESHOLDS, st.sampled_from([0.0, 5.0]))
def test_tiresias_in_numpy_equals_the_plain_reference(spec, workload, thresholds, overhead_s):
    """The same with the running jobs' levels, victim order and crossing instants computed by numpy at every
    instant, as they are from tiresias._VECTOR_MIN running jobs on (without promotion): the same floats."""
    with patch.object(importlib.import_module("schedulers.tiresias"), "_VECTOR_MIN", 0):
        _tiresias_same_as_reference(spec, workload, thresholds, 0.0, overhead_s)


def _tiresias_same_as_reference(spec, workload, thresholds, knob, overhead_s) -> None:
    layout = ClusterLayout(spec)
    fast = Simulator(workload, layout, None, 1.2, overhead_s)
    plain = Simulator(workload, layout, None, 1.2, overhead_s)
    fast.run(make_tiresias(thresholds, knob))
    plain.run(tiresias_reference(thresholds, knob))
    assert _same(fast, plain)
