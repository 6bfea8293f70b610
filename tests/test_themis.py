"""Themis (schedulers/themis.py): hand-computed schedules, and decision-for-decision agreement with the plain
reference of tests/themis_reference.py on random small workloads."""

from __future__ import annotations

import importlib
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedulers import POLICIES, PREEMPTIVE
from schedulers.themis import lease_ended, make_themis, next_lease_end
from sim.cluster import ClusterLayout
from sim.cluster_spec import parse_cluster_spec
from sim.job import Workload
from sim.simulator import Simulator
from tests.helpers import estimates, job
from tests.test_invariants import clusters, workloads
from tests.test_preemptive_policies import _runs, _same
from tests.themis_reference import themis_reference

themis_module = importlib.import_module("schedulers.themis")  # the package's `themis` is the policy function


def _run(cluster: str, jobs, policy, overhead_s: float = 0.0) -> Simulator:
    layout = ClusterLayout(parse_cluster_spec(cluster))
    sim = Simulator(Workload("t", tuple(jobs)), layout, None, 1.2, overhead_s)
    sim.run(policy)
    return sim


def test_registered_as_preemptive():
    assert "themis" in POLICIES and "themis" in PREEMPTIVE


def test_a_worse_off_job_takes_the_gpu_at_the_lease_end_only():
    # 1 GPU, lease 300 s, f = 0.2, overhead 60 s. a (1,000 s) runs from 0. b (100 s) arrives at 50.
    # N = 2 jobs on G = 1 GPU: T_id = runtime x max(1, 2 x 1 / 1) = 2 x runtime.
    # At 50: rho_a = (50 + 950) / 2,000 = 0.5, rho_b = (0 + 100) / 200 = 0.5: a tie, and a's lease runs to 300.
    # At 300 (a's lease end, a wake-up): rho_b = (250 + 100) / 200 = 1.75 > rho_a = 0.5; ceil(0.8 x 2) = 2 jobs
    # considered, so b is; a is preempted and b runs 300..400. a restarts at 400: 60 s restore + 700 s left
    # -> ends 1,160.
    sim = _run("1xA100-80GB:1", [job("a", 0, 1000), job("b", 50, 100)], POLICIES["themis"], 60.0)
    assert _runs(sim) == {"a": [(0, 300), (400, 1160)], "b": [(300, 400)]}
    r = sim.result("themis", 0)
    assert r.preemptions.tolist() == [1, 0] and r.overhead_s.tolist() == [60.0, 0.0]


def test_a_lease_is_renewed_when_no_waiting_job_is_worse_off():
    # 1 GPU, lease 300 s. a (1,000 s) runs from 0; b (1,000 s) arrives at 300, a's lease end. N = 2, T_id =
    # 2,000 for both: rho_a = (300 + 700) / 2,000 = 0.5, rho_b = (0 + 1,000) / 2,000 = 0.5: a tie -> a keeps the
    # GPU, its lease renewed to 600. At 600 rho_b = (300 + 1,000) / 2,000 = 0.65 > rho_a = 0.5 -> b runs from
    # 600. At 900 (b's lease end) rho_a = (900 + 400) / 2,000 = 0.65 = rho_b (600 + 700) / 2,000: a tie, b keeps
    # it. At 1,200 rho_a = (1,200 + 400) / 2,000 = 0.8 > 0.65 -> a runs its 400 s, 1,200..1,600; b restarts at
    # 1,600 (no overhead) with 400 s left -> 2,000: the two time-share in leases.
    sim = _run("1xA100-80GB:1", [job("a", 0, 1000), job("b", 300, 1000)], POLICIES["themis"])
    assert _runs(sim) == {"a": [(0, 600), (1200, 1600)], "b": [(600, 1200), (1600, 2000)]}


def test_the_fairness_knob_filters_who_may_preempt():
    # 1 node x 2 GPUs (G = 2), lease 100 s. a (1 GPU, 1,000 s) starts at 0, y (1 GPU, 1,000 s) at 5 (its lease
    # ends at 105, 205, ...: never with a's). b (1 GPU, 50 s) and w (2 GPUs, 10 s) arrive at 10 and wait.
    # At 100 (a's lease end), N = 4: 1-GPU jobs T_id = 2 x runtime, w's = max(1, 4 x 2 / 2) = 4 x 10 = 40:
    # rho_a = rho_y = (elapsed + left) / 2,000 = 0.5, rho_b = (90 + 50) / 100 = 1.4, rho_w = (90 + 10) / 40 = 2.5.
    # w goes first but releasing a alone frees 1 GPU of its 2: it waits. Then b:
    # - f = 0.9: ceil(0.1 x 4) = 1 job considered (w): b may not preempt. a ends 1,000 and b takes its GPU
    #   (1,000..1,050); y ends 1,005 but w needs b's GPU too, whose lease started at 1,000: w runs 1,050..1,060.
    # - f = 0: every job considered: b preempts a at 100 (b runs 100..150). At 105 (y's lease end), N = 4:
    #   rho_a = (105 + 900) / 2,000 = 0.5025 > rho_y = (100 + 900) / 2,000 = 0.5 -> a takes y's GPU, 105..1,005.
    #   At 150 b ends, N = 3: rho_w = (140 + 10) / 30 = 5, but w needs 2 GPUs and a's lease (from 105) has not
    #   ended: w waits; y restarts on the free GPU with 900 s left, 150..1,050 (leases of a at 405, 705, ... and
    #   of y at 450, 750, ... never end together). a ends 1,005, y 1,050: w runs 1,050..1,060.
    jobs = [job("a", 0, 1000), job("y", 5, 1000), job("b", 10, 50), job("w", 10, 10, 2)]
    filtered = _run("1xA100-80GB:2", jobs, make_themis(100.0, 0.9))
    assert _runs(filtered) == {
        "a": [(0, 1000)],
        "y": [(5, 1005)],
        "b": [(1000, 1050)],
        "w": [(1050, 1060)],
    }
    everyone = _run("1xA100-80GB:2", jobs, make_themis(100.0, 0.0))
    assert _runs(everyone) == {
        "a": [(0, 100), (105, 1005)],
        "y": [(5, 105), (150, 1050)],
        "b": [(100, 150)],
        "w": [(1050, 1060)],
    }


def test_lease_arithmetic():
    # a run started at 7 with 100 s leases ends them at 107, 207, ...
    assert lease_ended(107.0, 7.0, 100.0) and lease_ended(207.0, 7.0, 100.0)
    assert not lease_ended(7.0, 7.0, 100.0) and not lease_ended(150.0, 7.0, 100.0)
    assert next_lease_end(7.0, 7.0, 100.0) == 107.0
    assert next_lease_end(107.0, 7.0, 100.0) == 207.0
    assert next_lease_end(150.0, 7.0, 100.0) == 207.0


@pytest.mark.parametrize("lease_s, knob", [(0.0, 0.2), (-5.0, 0.2), (300.0, 1.0), (300.0, -0.1)])
def test_bad_knobs_are_rejected(lease_s, knob):
    with pytest.raises(ValueError):
        make_themis(lease_s, knob)


# ---- cross-check against the plain reference ----------------------------------------------------------

_REFERENCE_CASES = (
    clusters(),
    workloads(),
    st.sampled_from([(20.0, 0.0), (50.0, 0.5), (300.0, 0.2), (30.0, 0.9)]),
    st.sampled_from([0.0, 5.0]),
    st.integers(0, 2**32 - 1),
    st.booleans(),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(*_REFERENCE_CASES)
def test_themis_equals_the_plain_reference(spec, workload, knobs, overhead_s, seed, noisy):
    """The policy's single wake-up must lose no decision the reference's wake-up at every lease end makes."""
    _same_as_reference(spec, workload, knobs, overhead_s, seed, noisy)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(*_REFERENCE_CASES)
def test_themis_in_numpy_equals_the_plain_reference(spec, workload, knobs, overhead_s, seed, noisy):
    """The same with the per-running-job arithmetic (lease ends, rho) done by numpy at every instant, as it is
    from themis._VECTOR_MIN running jobs on: the same floats, so the same decisions."""
    with patch.object(themis_module, "_VECTOR_MIN", 0):
        _same_as_reference(spec, workload, knobs, overhead_s, seed, noisy)


def _same_as_reference(spec, workload, knobs, overhead_s, seed, noisy) -> None:
    layout = ClusterLayout(spec)
    known = estimates(workload, seed, noisy)
    fast = Simulator(workload, layout, known, 1.2, overhead_s)
    plain = Simulator(workload, layout, known, 1.2, overhead_s)
    fast.run(make_themis(*knobs))
    plain.run(themis_reference(*knobs))
    assert _same(fast, plain)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    clusters(),
    workloads(),
    st.sampled_from([(20.0, 0.0), (50.0, 0.5), (300.0, 0.2)]),
    st.sampled_from([0.0, 5.0]),
)
def test_preemptions_happen_only_at_lease_ends(spec, workload, knobs, overhead_s):
    """Every run but a job's last ends by preemption, so it lasted a whole number (>= 1) of leases."""
    lease_s = knobs[0]
    sim = Simulator(workload, ClusterLayout(spec), None, 1.2, overhead_s)
    sim.run(make_themis(*knobs))
    r = sim.result("themis", 0)
    runs: dict[int, list[tuple[float, float]]] = {}
    for i, s, e in zip(r.runs.job.tolist(), r.runs.start_s.tolist(), r.runs.end_s.tolist(), strict=True):
        runs.setdefault(i, []).append((s, e))
    for i, spans in runs.items():
        for s, e in spans[:-1]:
            k = round((e - s) / lease_s)
            assert k >= 1 and abs(e - (s + k * lease_s)) <= 1e-6, (i, s, e)
        assert r.preemptions[i] == len(spans) - 1
