"""Conservative backfilling: hand-computed schedules, the cross-check against the plain scan
(tests/cbf_reference.py) and the reservation guarantee."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config import RunConfig, SimConfig, WorkloadConfig
from env.cluster import ClusterLayout
from env.scenario import build_scenario
from env.simulator import Simulator
from schedulers import POLICIES
from schedulers.cbf import cbf_schedule
from tests.cbf_reference import cbf_reference
from tests.helpers import job, run, times
from tests.test_invariants import check_invariants, clusters, workloads


def _same_schedule(a: Simulator, b: Simulator) -> bool:
    return a.placements == b.placements and np.array_equal(
        np.array(a.start_s), np.array(b.start_s), equal_nan=True
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads(), st.integers(0, 2**32 - 1), st.booleans())
def test_cbf_equals_the_plain_scan(spec, workload, seed, noisy):
    """Same decisions as tests/cbf_reference.py, with exact and with noisy (under- and over-) estimates."""
    layout = ClusterLayout(spec)
    known = np.array([j.runtime_s for j in workload.jobs])
    if noisy:
        known = known * np.random.default_rng(seed).lognormal(0.0, 0.8, len(workload.jobs))
    fast, plain = Simulator(workload, layout, known, 1.2), Simulator(workload, layout, known, 1.2)
    fast.run(POLICIES["cbf"])
    plain.run(cbf_reference)
    assert _same_schedule(fast, plain)
    check_invariants(fast, layout, workload, 1.2)


def test_cbf_refuses_a_backfill_that_delays_the_first_reservation_and_takes_one_that_does_not():
    # 1 node x 4. A holds 3 GPUs until 100; B needs all 4 -> reservation [100, 110). C (1 GPU, 200 s) would hold
    # a GPU at 100 -> reserved after B: [110, 310). D (1 GPU, 50 s) ends at 53 <= 100 on the free GPU -> now.
    jobs = [job("A", 0, 100, 3), job("B", 1, 10, 4), job("C", 2, 200, 1), job("D", 3, 50, 1)]
    _, r = run("1xA100:4", jobs, "cbf")
    assert times(r) == {"A": (0, 100), "D": (3, 53), "B": (100, 110), "C": (110, 310)}


def test_cbf_protects_every_reservation_where_easy_protects_only_the_head():
    # 1 node x 4. A holds 3 until 100. B (3 GPUs, 10 s) -> [100, 110), leaving 1 GPU spare then. C (4 GPUs,
    # 100 s) does not fit before B ends -> [110, 210). D (1 GPU, 300 s) at 3: on the free GPU it would run
    # [3, 303), through C's reservation (0 free in [110, 210)) -> CBF reserves it after C: [210, 510).
    # EASY only protects the head B (1 spare GPU at 100), so it starts D at 3 and C waits for D: [303, 403).
    jobs = [job("A", 0, 100, 3), job("B", 1, 10, 3), job("C", 2, 100, 4), job("D", 3, 300, 1)]
    _, r = run("1xA100:4", jobs, "cbf")
    assert times(r) == {"A": (0, 100), "B": (100, 110), "C": (110, 210), "D": (210, 510)}
    _, r = run("1xA100:4", jobs, "easy")
    assert times(r) == {"A": (0, 100), "B": (100, 110), "D": (3, 303), "C": (303, 403)}


def test_cbf_waits_for_a_faster_type_when_that_completes_earlier():
    # A100 (speed 1) held by A until 10; V100-32GB (speed 0.5) free. B (1 GPU, 100 s reference) at 1: now on
    # the V100 it would end at 1 + 100 / 0.5 = 201; on the A100 from 10 at 10 + 100 = 110 -> CBF waits.
    # EASY (like the placement rule) never waits while an option is free: B runs on the V100, [1, 201).
    jobs = [job("A", 0, 10, 1, gpu_types=("A100-80GB",)), job("B", 1, 100, 1)]
    _, r = run("1xA100-80GB:1,1xV100-32GB:1", jobs, "cbf")
    assert times(r) == {"A": (0, 10), "B": (10, 110)} and r["B"][3] == "A100-80GB"
    _, r = run("1xA100-80GB:1,1xV100-32GB:1", jobs, "easy")
    assert times(r) == {"A": (0, 10), "B": (1, 201)} and r["B"][3] == "V100-32GB"


def test_cbf_compresses_the_schedule_when_a_job_ends_before_its_estimate():
    # A (4 GPUs) is estimated at 100 s but runs 50 s. At 1, B (4 GPUs, 10 s) is reserved [100, 110) and at 2,
    # C (2 GPUs, 10 s) [110, 120). A ends at 50: the schedule is rebuilt -> B [50, 60), C [60, 70).
    jobs = [job("A", 0, 50, 4), job("B", 1, 10, 4), job("C", 2, 10, 2)]
    _, r = run("1xA100:4", jobs, "cbf", known=np.array([100.0, 10.0, 10.0]))
    assert times(r) == {"A": (0, 50), "B": (50, 60), "C": (60, 70)}


def test_cbf_reserves_a_spread_over_nodes():
    # 2 nodes x 4 A100s. A (2 GPUs, 100 s) best-fits n0 (tie -> lower index). B (8 GPUs) must spread: from
    # 100, for 10 x 1.2 = 12 s -> [100, 112) on both nodes. C (2 GPUs, 50 s) at 2 ends by 100 -> now, best fit
    # n0 (2 free). D (4 GPUs, 200 s) at 3 would run through B's reservation wherever it starts before 112
    # -> [112, 312), on n0 (both nodes free then, tie -> lower index).
    jobs = [job("A", 0, 100, 2), job("B", 1, 10, 8), job("C", 2, 50, 2), job("D", 3, 200, 4)]
    _, r = run("2xA100-80GB:4", jobs, "cbf")
    assert times(r) == {"A": (0, 100), "B": (100, 112), "C": (2, 52), "D": (112, 312)}
    assert r["B"][4] == "n0/0;n0/1;n0/2;n0/3;n1/0;n1/1;n1/2;n1/3"
    assert r["C"][4] == "n0/2;n0/3" and r["D"][4] == "n0/0;n0/1;n0/2;n0/3"


def test_cbf_fractional_jobs_reserve_a_whole_gpu_or_share_without_delaying_anyone():
    # 1 node x 2 GPUs. F1 (half a GPU, 100 s) reserves a whole GPU now: n0/0 (best fit, lower index).
    # W (2 whole GPUs, 10 s) at 1 -> reserved [100, 110), when n0/0's only resident leaves.
    # F2 (half, 50 s) at 2 shares n0/0 and ends at 52 <= 100 (F1's end): it delays no one -> now.
    # F3 (half, 200 s) at 3: n0/0 is full; a whole GPU from now would overlap W -> reserved [110, 310).
    # F4 (0.3, 90 s) at 4: a whole GPU [4, 94) is free -> now on n0/1. F5 (half, 80 s) at 5 shares n0/1
    # (0.7 free) and ends at 85 <= 94 -> now.
    half = {"gpu_milli": 500}
    jobs = [
        job("F1", 0, 100, **half),
        job("W", 1, 10, 2),
        job("F2", 2, 50, **half),
        job("F3", 3, 200, **half),
        job("F4", 4, 90, gpu_milli=300),
        job("F5", 5, 80, **half),
    ]
    _, r = run("1xA100-80GB:2", jobs, "cbf")
    assert times(r) == {
        "F1": (0, 100),
        "W": (100, 110),
        "F2": (2, 52),
        "F3": (110, 310),
        "F4": (4, 94),
        "F5": (5, 85),
    }
    assert [r[x][4] for x in ("F1", "F2", "F4", "F5")] == ["n0/0", "n0/0", "n0/1", "n0/1"]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads())
def test_with_exact_runtimes_no_job_starts_after_its_first_reservation(spec, workload):
    """Conservative backfilling's guarantee: a job's reservation, once made, is never delayed (exact runtimes:
    estimated ends are the true ends)."""
    layout = ClusterLayout(spec)
    first: dict[int, float] = {}

    def recording(view):
        decisions, reservations = cbf_schedule(view, want_reservations=True)
        for r in reservations:
            first.setdefault(r.job, r.start_s)
        return decisions

    sim = Simulator(workload, layout)
    sim.run(recording)
    for i, s in first.items():
        assert sim.start_s[i] <= s, (i, sim.start_s[i], s)


@pytest.mark.parametrize(("profile", "runtime_info"), [("philly", "oracle"), ("helios", "estimate")])
def test_cbf_equals_the_plain_scan_on_a_synthetic_scenario(profile, runtime_info):
    """Longer queues than Hypothesis draws, where the kept schedule (schedulers/cbf.py's _Kept) is reused most:
    exact runtimes keep it across instants, estimates make it rebuild whenever a job ends off its estimate."""
    cfg = RunConfig(
        workload=WorkloadConfig(difficulty="easy", num_jobs=150, synthetic_profile=profile),
        sim=SimConfig(runtime_info=runtime_info),
    )
    fast, plain = build_scenario(cfg, 3).simulator(), build_scenario(cfg, 3).simulator()
    fast.run(POLICIES["cbf"])
    plain.run(cbf_reference)
    assert _same_schedule(fast, plain)
