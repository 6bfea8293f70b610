"""Conservative backfilling: hand-computed schedules, the cross-check against the plain scan
(tests/cbf_reference.py) and the reservation guarantee."""

from __future__ import annotations

import bisect
import copy
import heapq
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config import ClusterConfig, RunConfig, SimConfig, WorkloadConfig
from scenario.build import build_scenario
from schedulers import POLICIES
from schedulers.cbf import _none_can_start, _Profile, cbf, cbf_schedule
from schedulers.plan import Plan
from sim.cluster import ClusterLayout
from sim.cluster_spec import ClusterSpec, NodeSpec, parse_cluster_spec
from sim.job import Workload
from sim.placement import place
from sim.simulator import Decision, Simulator
from tests.cbf_reference import cbf_reference
from tests.helpers import estimates, job, run, times
from tests.test_invariants import check_invariants, clusters, workloads

cbf_module = sys.modules["schedulers.cbf"]


def _same_schedule(a: Simulator, b: Simulator) -> bool:
    return a.placements == b.placements and np.array_equal(
        np.array(a.start_s), np.array(b.start_s), equal_nan=True
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads(), st.integers(0, 2**32 - 1), st.booleans())
def test_cbf_equals_the_plain_scan(spec, workload, seed, noisy):
    """Same decisions as tests/cbf_reference.py, with exact and with noisy (under- and over-) estimates."""
    layout = ClusterLayout(spec)
    known = estimates(workload, seed, noisy)
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
    estimated ends are the true ends), with whole-GPU and fractional jobs (with fractional jobs a rebuild that
    would start a job later than its previous reservation holds every job's previous slot instead)."""
    _check_first_reservations(spec, workload)


def _fractional_counterexample() -> dict:
    """One node of 4 A100s; 21 jobs at t=0 in queue order, each 1 GPU for 1 s except: 11 and 14 use 0.1 GPU, 13
    and 15 run 2 s, 19 takes all 4 GPUs."""
    jobs = [job(i, 0.0, 1.0) for i in range(21)]
    for i in (11, 14):
        jobs[i] = job(i, 0.0, 1.0, gpu_milli=100)
    for i in (13, 15):
        jobs[i] = job(i, 0.0, 2.0)
    jobs[19] = job(19, 0.0, 1.0, 4)
    spec = ClusterSpec("random", (NodeSpec("n0", "A100-80GB", 4, 80.0),))
    return dict(spec=spec, workload=Workload("random", tuple(jobs)))


@pytest.mark.parametrize("plain", [False, True])
def test_a_fractional_start_does_not_delay_a_later_reservation(plain):
    # Found by Hypothesis when CBF rebuilt every schedule from scratch. At 0 the 1-GPU 1-s jobs fill the node
    # second by second: 0-3 [0, 1), 4-7 [1, 2), 8-11 [2, 3), 12-15 [3, 4) (13 and 15 until 5), 16-17 [4, 5),
    # 18 and 20 [5, 6) (the 2 GPUs 13 and 15 leave free), 19 (all 4 GPUs) [6, 7). At 2, 14 (0.1 GPU, 1 s)
    # shares 11's GPU (both end at 3) instead of its whole GPU at 3, so 16 moves to [3, 4) and 17-18 to
    # [4, 5): from scratch 19 then takes [5, 6) and 20, reserved at 5, goes to [6, 7). Holding each job's
    # previous slot, 19 cannot take [5, 6) while 20 holds a GPU there: 20 starts at 5, 19 at 6.
    case = _fractional_counterexample()
    layout = ClusterLayout(case["spec"])
    sim = Simulator(case["workload"], layout)
    sim.run(cbf_reference if plain else POLICIES["cbf"])
    starts = dict(enumerate(sim.start_s))
    assert (starts[14], starts[16], starts[17], starts[18], starts[19], starts[20]) == (2, 3, 4, 4, 6, 5)
    if not plain:
        _check_first_reservations(**case)


def _check_first_reservations(spec, workload):
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


@pytest.mark.parametrize("noisy", [False, True])
def test_cbf_equals_the_plain_scan_on_a_long_type_constrained_queue(noisy):
    """A queue far longer than Hypothesis draws (overloaded, 50-70 waiting), on four types with jobs accepting one
    to three of them and spreads (16-GPU jobs on 8-GPU types): with exact runtimes the kept schedule goes on
    across hundreds of instants (its arrivals found by index, its earliest-start memo kept across instants);
    with noisy estimates it is rebuilt. Same decisions as the plain scan either way."""
    rng = np.random.default_rng(7)
    types = ("H100", "A100-80GB", "V100-32GB", "T4")
    jobs = []
    t = 0.0
    for i in range(180):
        t += float(rng.exponential(40.0))
        k = int(rng.choice([1, 2, 4, 8, 16], p=[0.5, 0.2, 0.15, 0.1, 0.05]))
        accept = (
            () if rng.random() < 0.25 else tuple(sorted(rng.choice(types, rng.integers(1, 4), replace=False)))
        )
        jobs.append(job(i, t, float(np.clip(rng.lognormal(7.0, 1.2), 60, 40000)), k, gpu_types=accept))
    workload = Workload("typed", tuple(jobs))
    layout = ClusterLayout(parse_cluster_spec("2xH100:8,1xA100-80GB:16,1xA100-80GB:8,2xV100-32GB:8,1xT4:16"))
    known = estimates(workload, 3, noisy)
    fast, plain = Simulator(workload, layout, known, 1.2), Simulator(workload, layout, known, 1.2)
    fast.run(POLICIES["cbf"])
    plain.run(cbf_reference)
    assert max(fast._timeline[3::4]) >= 50  # the queue did grow long
    assert _same_schedule(fast, plain)


def _at_instant(cluster: str, jobs, t_s: float, started: tuple[int, ...]) -> Simulator:
    """A simulator advanced to instant `t_s`, with jobs `started` (indices) started at their arrival."""
    layout = ClusterLayout(parse_cluster_spec(cluster))
    sim = Simulator(Workload("t", tuple(jobs)), layout)
    while sim.advance():
        for i in started:
            if i in sim.queue:
                sim.apply(Decision(i, place(sim.free, *sim.jobs.shape[i])))
        if sim.now_s >= t_s:
            return sim
    raise AssertionError("no such instant")


def test_none_can_start_on_one_node():
    # 1 node x 4 GPUs. A holds 3 GPUs during [0, 100). At 1: C (4 GPUs, 10 s) is reserved [100, 110), so the
    # free GPU stays free until 100 only. B (1 GPU, 200 s) would run until 201 > 100: it cannot start now;
    # D (1 GPU, 50 s) ends at 51 <= 100: it can.
    jobs = [job("A", 0, 100, 3), job("C", 1, 10, 4), job("B", 1, 200, 1), job("D", 1, 50, 1)]
    sim = _at_instant("1xA100-80GB:4", jobs, 1, (0,))
    view = sim.view()
    prof = _Profile(view, view.free, [], True)
    r, p = prof.reserve(1, Plan(view.free))
    assert (r.start_s, r.end_s, p) == (100, 110, None)
    assert _none_can_start(prof, [1, 2], 1)
    assert not _none_can_start(prof, [1, 2, 3], 1)


def test_none_can_start_spread():
    # 2 nodes x 2 GPUs. A holds 1 GPU of n0 during [0, 100). At 1: X (4 GPUs, 10 s, spread: x 1.2) is reserved
    # [100, 112). Y (3 GPUs, spread) runs 50 x 1.2 = 60 s: over [1, 61) n0 keeps 1 and n1 2 free, 3 in all ->
    # it can start now. Z (3 GPUs, 100 x 1.2 = 120 s) would run into X's reservation (0 free then) -> cannot.
    jobs = [job("A", 0, 100, 1), job("X", 1, 10, 4), job("Y", 1, 50, 3), job("Z", 1, 100, 3)]
    sim = _at_instant("2xA100-80GB:2", jobs, 1, (0,))
    view = sim.view()
    prof = _Profile(view, view.free, [], True)
    r, _ = prof.reserve(1, Plan(view.free))
    assert (r.start_s, r.end_s) == (100, 112)
    assert not _none_can_start(prof, [1, 2], 1)
    assert _none_can_start(prof, [1, 3], 1)


def test_with_estimates_cbf_builds_only_what_decides_the_instant(monkeypatch):
    """Estimates on a loaded one-type cluster: the schedule is built only until no later job can start now. Same
    decisions as building every reservation (the exact-runtime mode, forced here) and as the plain scan, with
    far fewer reservations."""
    cfg = RunConfig(
        cluster=ClusterConfig(spec="4xA100-80GB:8"),
        workload=WorkloadConfig(difficulty="easy", num_jobs=200, synthetic_profile="philly", load_factor=1.5),
        sim=SimConfig(runtime_info="estimate"),
    )
    calls = {"n": 0}
    reserve = _Profile.reserve

    def counting(self, i, plan):
        calls["n"] += 1
        return reserve(self, i, plan)

    monkeypatch.setattr(_Profile, "reserve", counting)
    lazy = build_scenario(cfg, 5).simulator()
    lazy.run(POLICIES["cbf"])
    lazy_calls, calls["n"] = calls["n"], 0
    full = build_scenario(cfg, 5).simulator()
    with monkeypatch.context() as m:
        m.setattr(cbf_module, "_run_facts", lambda jt: (any(x < 1000 for x in jt.milli), True))
        full.run(POLICIES["cbf"])
    plain = build_scenario(cfg, 5).simulator()
    plain.run(cbf_reference)
    assert _same_schedule(lazy, full) and _same_schedule(lazy, plain)
    assert lazy_calls < calls["n"] / 2, (lazy_calls, calls["n"])  # 789 against 2,687 when written


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads(), st.integers(0, 2**32 - 1))
def test_cbf_building_part_of_the_schedule_decides_as_building_all_of_it(spec, workload, seed):
    """Noisy estimates: the partial build (stopped once no job left can start now) against the build of every
    reservation (the exact-runtime mode, forced) and the plain scan."""
    layout = ClusterLayout(spec)
    known = estimates(workload, seed)
    lazy, full, plain = (Simulator(workload, layout, known, 1.2) for _ in range(3))
    lazy.run(POLICIES["cbf"])
    facts = cbf_module._run_facts
    cbf_module._run_facts = lambda jt: (facts(jt)[0], True)
    try:
        full.run(POLICIES["cbf"])
    finally:
        cbf_module._run_facts = facts
    plain.run(cbf_reference)
    assert _same_schedule(lazy, full) and _same_schedule(lazy, plain)


# -- the profile's searches against their definitions --------------------------------------------------------


class _At:
    """Stands in for the view in `_Profile._take`, which reads only the instant."""

    def __init__(self, now_s: float):
        self.now_s = now_s


@st.composite
def _profiles(draw):
    """A profile of 1-5 nodes of 4 GPUs from now = 10 s: each row's steps at strictly increasing times (some
    shared between rows, as job ends often are) with 0-4 free GPUs each; and a search's k, duration, bound."""
    now = 10.0
    times_s = st.sampled_from([11.0, 12.5, 15.0, 20.0, 20.0 + 1e-9, 30.0, 45.0, 60.0, 100.0])
    rows_t, rows_f = [], []
    for _ in range(draw(st.integers(1, 5))):
        later = sorted(set(draw(st.lists(times_s, max_size=6))))
        rows_t.append([now, *later])
        rows_f.append(draw(st.lists(st.integers(0, 4), min_size=len(later) + 1, max_size=len(later) + 1)))
    prof = _Profile.__new__(_Profile)
    prof.view = _At(now)
    prof.t, prof.free = rows_t, rows_f
    prof.free_now = sum(f[0] for f in rows_f)
    prof.next_steps = []  # (move_to's index of rows whose second step begins; not used by the searches)
    k = draw(st.integers(1, 8))
    dur_s = draw(st.sampled_from([0.0, 1.0, 2.5, 5.0, 10.0, 35.0, 50.0, 200.0]))
    before_s = draw(st.sampled_from([float("inf"), 25.0, 60.0, 111.0]))
    return prof, k, dur_s, before_s


def _steps_during(t: list[float], f: list[int], start_s: float, end_s: float) -> list[int]:
    """Free GPUs of every step of one row that overlaps [start_s, end_s) (the step holding start_s at least)."""
    return [
        f[j] for j in range(len(t)) if t[j] <= start_s < (t[j + 1] if j + 1 < len(t) else float("inf"))
    ] + [f[j] for j in range(len(t)) if start_s < t[j] < end_s]


def test_a_one_node_search_looks_only_at_the_pools_nodes_with_k_gpus_or_more():
    """`_nodes_of` with k: the nodes of the pools that have at least k GPUs, ascending (a smaller node never has
    k free: the one-node search leaves it out); without k, every node of the pools."""
    layout = ClusterLayout(parse_cluster_spec("2xH100:8,1xH100:4,1xA100-80GB:4,1xA100-80GB:16"))
    every = tuple(sorted(set(layout.node_pool)))
    for pools in {every, (layout.node_pool[0],), (layout.node_pool[-1],)}:
        of_pools = [n for n in range(layout.num_nodes) if layout.node_pool[n] in pools]
        assert cbf_module._nodes_of(layout, pools) == of_pools
        for k in range(1, 18):
            want = [n for n in of_pools if layout.node_num_gpus[n] >= k]
            assert cbf_module._nodes_of(layout, pools, k) == want


def test_one_node_walk_off_a_row_below_k_finds_no_start_there_and_a_run_to_the_last_step_fits():
    """The walk's two row ends: a row whose last step has fewer than k free (a node switched off) holds no
    start once the walk runs past it, wherever the walk began; a run of steps with k free that reaches a row's
    last step (which lasts forever) fits any duration."""
    prof = _Profile.__new__(_Profile)
    prof.view = _At(10.0)
    prof.t = [[10.0, 20.0, 30.0], [10.0, 50.0]]
    prof.free = [[0, 4, 1], [1, 3]]  # node 0: 4 free during [20, 30), then 1 for ever; node 1: 3 from 50 on
    nodes = [0, 1]
    inf = float("inf")
    assert prof._one_node(nodes, 2, 5.0, inf) == (20.0, 0)
    assert prof._one_node(nodes, 2, 15.0, inf) == (50.0, 1)  # node 0's hole is too short, then below k
    assert prof._one_node(nodes, 2, 15.0, inf, 25.0) == (50.0, 1)  # begun past node 0's hole
    assert prof._one_node(nodes, 2, 1e9, inf) == (50.0, 1)
    assert prof._one_node(nodes, 2, 15.0, 60.0) is None  # 50 + 15 is past the bound
    assert prof._one_node(nodes, 4, 5.0, inf) == (20.0, 0)
    assert prof._one_node(nodes, 4, 15.0, inf) is None  # node 1 never has 4 free


@settings(max_examples=300, deadline=None)
@given(_profiles())
def test_one_node_search_is_the_earliest_best_fit_start(case):
    """`_one_node` (a walk over each row) against its definition checked at every step of every row: the
    earliest start at which some node keeps k free until the end, the end before the bound; ties -> fewest
    free at the start, then the lower node."""
    prof, k, dur_s, before_s = case
    nodes = list(range(len(prof.t)))
    fits = [
        (t[j], f[j], n)
        for n, t, f in zip(nodes, prof.t, prof.free, strict=True)
        for j in range(len(t))
        if t[j] + dur_s < before_s and min(_steps_during(t, f, t[j], t[j] + dur_s)) >= k
    ]
    want = None if not fits else (min(fits)[0], min(fits)[2])
    assert prof._one_node(nodes, k, dur_s, before_s) == want


@settings(max_examples=300, deadline=None)
@given(_profiles())
def test_spread_search_is_the_earliest_start_with_k_gpus_summed(case):
    """`_spread` against its definition: the earliest step time (of any row) from which the rows' minima over
    the run sum to >= k, the end before the bound; with those minima."""
    prof, k, dur_s, before_s = case
    nodes = list(range(len(prof.t)))
    want = None
    for s in sorted({x for t in prof.t for x in t}):
        if s + dur_s >= before_s:
            break
        avail = [min(_steps_during(t, f, s, s + dur_s)) for t, f in zip(prof.t, prof.free, strict=True)]
        if sum(avail) >= k:
            want = (s, avail)
            break
    assert prof._spread(nodes, k, dur_s, before_s) == want


def _moved_eagerly(prof: _Profile, now_s: float) -> None:
    """What `_Profile.move_to` did before it touched only the rows whose second step began: every row trimmed
    to the step holding now, whose start becomes now."""
    for tl, fl in zip(prof.t, prof.free, strict=True):
        if len(tl) > 1 and tl[1] <= now_s:
            j = bisect.bisect_right(tl, now_s) - 1
            del tl[:j]
            del fl[:j]
        tl[0] = now_s
    prof.free_now = sum(fl[0] for fl in prof.free)
    prof.view = _At(now_s)


@settings(max_examples=300, deadline=None)
@given(_profiles(), st.data())
def test_a_profile_moved_lazily_searches_as_one_trimmed_row_by_row(case, data):
    """A kept profile moved to a later instant keeps first steps that started earlier (read as starting now):
    its searches, its capacity now and further takes and moves agree with the profile trimmed row by row."""
    prof, k, dur_s, before_s = case
    prof.next_steps = [(tl[1], n) for n, tl in enumerate(prof.t) if len(tl) > 1]
    heapq.heapify(prof.next_steps)
    eager = copy.deepcopy(prof)
    nodes = list(range(len(prof.t)))
    for _ in range(2):
        now_s = data.draw(st.sampled_from([10.0, 11.0, 14.0, 20.0, 20.0 + 1e-9, 44.0, 70.0]))
        now_s = max(now_s, prof.view.now_s)
        prof.move_to(_At(now_s))
        _moved_eagerly(eager, now_s)
        assert prof.free_now == eager.free_now
        for from_s in (-float("inf"), now_s, now_s + 3.0):
            assert prof._one_node(nodes, k, dur_s, before_s, from_s) == eager._one_node(
                nodes, k, dur_s, before_s, from_s
            )
            assert prof._spread(nodes, k, dur_s, before_s, from_s) == eager._spread(
                nodes, k, dur_s, before_s, from_s
            )
        start_s = data.draw(st.sampled_from([now_s, now_s + 2.0, now_s + 15.0]))
        n = data.draw(st.sampled_from(nodes))
        for p in (prof, eager):
            p._take(start_s, start_s + dur_s, [n], [1])
        assert prof.free_now == eager.free_now


@settings(max_examples=200, deadline=None)
@given(_profiles(), st.data())
def test_take_removes_gpus_over_the_interval_only(case, data):
    """After `_take`, every instant's free count on the row is the old one less c inside [start, end) and
    unchanged elsewhere; steps stay strictly increasing; `free_now` is the sum of the rows' first steps."""
    prof, _, dur_s, _ = case
    n = data.draw(st.integers(0, len(prof.t) - 1))
    start_s = data.draw(st.sampled_from([10.0, 12.5, 17.0, 30.0]))
    end_s = start_s + dur_s
    c = data.draw(
        st.integers(0, min(_steps_during(prof.t[n], prof.free[n], start_s, max(end_s, start_s + 1e-6))))
    )

    def free_at(t, f, x):
        return f[max(j for j in range(len(t)) if t[j] <= x)]

    old_t, old_f = list(prof.t[n]), list(prof.free[n])
    prof._take(start_s, end_s, [n], [c])
    t, f = prof.t[n], prof.free[n]
    assert t[0] == 10.0 and all(a < b for a, b in zip(t, t[1:], strict=False))
    held_until = end_s if end_s > start_s else np.nextafter(start_s, np.inf)
    for x in sorted({*old_t, *t, start_s, end_s, 1000.0}):
        inside = start_s <= x < held_until
        assert free_at(t, f, x) == free_at(old_t, old_f, x) - (c if inside else 0), x
    assert prof.free_now == sum(row[0] for row in prof.free)


def _take_keeping_every_step(prof: _Profile, start_s: float, end_s: float, n: int, c: int) -> None:
    """A plain `_Profile._take` of c GPUs of node n: a step at start_s (after now) and at end_s, the free count
    lowered in between, no step ever merged."""
    end_s = max(end_s, np.nextafter(start_s, np.inf))
    tl, fl = prof.t[n], prof.free[n]
    for x in (start_s, end_s):
        if x > prof.view.now_s and x not in tl:
            j = bisect.bisect_left(tl, x)
            tl.insert(j, x)
            fl.insert(j, fl[j - 1])
    for j in range(len(tl)):
        if (j == 0 and start_s <= prof.view.now_s or tl[j] >= start_s) and tl[j] < end_s:
            fl[j] -= c
    if start_s <= prof.view.now_s:
        prof.free_now -= c


def _merged(rows_t: list[list[float]], rows_f: list[list[int]]) -> None:
    """Drop every step (after the first) whose free count equals the one before it."""
    for tl, fl in zip(rows_t, rows_f, strict=True):
        for j in range(len(tl) - 1, 0, -1):
            if fl[j] == fl[j - 1]:
                del tl[j], fl[j]


@settings(max_examples=300, deadline=None)
@given(_profiles(), st.data())
def test_a_profile_keeping_only_changes_searches_as_one_keeping_every_step(case, data):
    """`_take` keeps in a row only the steps where its free count changes (a merged step starts no run that its
    predecessor does not start as well or sooner): after any takes, no two neighbouring steps of a row are equal
    and every search (one node, spread) gives what it gives on the same profile with every step kept."""
    prof, k, dur_s, before_s = case
    _merged(prof.t, prof.free)
    prof.free_now = sum(f[0] for f in prof.free)
    plain = copy.deepcopy(prof)
    nodes = list(range(len(prof.t)))
    for _ in range(data.draw(st.integers(1, 6))):
        n = data.draw(st.sampled_from(nodes))
        start_s = data.draw(st.sampled_from([10.0, 11.0, 12.5, 17.0, 20.0, 30.0, 45.0, 60.0]))
        end_s = start_s + data.draw(st.sampled_from([0.0, 1.5, 3.0, 10.0, 20.0, 70.0]))
        held = _steps_during(prof.t[n], prof.free[n], start_s, max(end_s, start_s + 1e-6))
        c = data.draw(st.integers(-2, min(held)))  # < 0: a held slot given back (`_Profile.hold`)
        prof._take(start_s, end_s, [n], [c])
        _take_keeping_every_step(plain, start_s, end_s, n, c)
        for tl, fl in zip(prof.t, prof.free, strict=True):
            assert all(fl[j] != fl[j - 1] for j in range(1, len(fl))), (tl, fl)
        assert prof.free_now == plain.free_now == sum(f[0] for f in prof.free)
        for d in (dur_s, 0.0, 4.0):
            for from_s in (-float("inf"), 10.0):
                args = (nodes, k, d, before_s, from_s)
                assert prof._one_node(*args) == plain._one_node(*args)
                assert prof._spread(*args) == plain._spread(*args)


@settings(max_examples=300, deadline=None)
@given(_profiles(), st.data())
def test_a_search_after_capacity_is_taken_starts_no_earlier(case, data):
    """The shortcut of `_Profile.earliest`: once a search of an option found its earliest start s for a duration
    d, a later search of it in the same profile for a duration >= d, after any reservations took capacity, finds
    no start before s: begun at s (`from_s`) it gives the answer of a search from now, and if s + d' >= the bound
    there is none."""
    prof, k, dur_s, before_s = case
    nodes = list(range(len(prof.t)))
    spread = data.draw(st.booleans())
    search = prof._spread if spread else prof._one_node
    first_bound_s = data.draw(
        st.sampled_from([float("inf"), before_s])
    )  # any bound: a hit is the earliest start
    first = search(nodes, k, dur_s, first_bound_s)
    for _ in range(data.draw(st.integers(0, 3))):
        n = data.draw(st.integers(0, len(nodes) - 1))
        start_s = data.draw(st.sampled_from([10.0, 12.5, 17.0, 30.0, 60.0]))
        end_s = start_s + data.draw(st.sampled_from([0.0, 3.0, 20.0, 70.0]))
        held = _steps_during(prof.t[n], prof.free[n], start_s, max(end_s, start_s + 1e-6))
        prof._take(start_s, end_s, [n], [data.draw(st.integers(0, min(held)))])
    later_s = dur_s + data.draw(st.sampled_from([0.0, 0.5, 10.0]))
    want = search(nodes, k, later_s, before_s)
    if first is None:
        return
    assert search(nodes, k, later_s, before_s, first[0]) == want
    if first[0] + later_s >= before_s:
        assert want is None


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.sampled_from([1.0, 2.0, 2.5, 4.0, 8.0]), st.integers(0, 4)),
        max_size=12,
    )
)
def test_earliest_memo_answers_the_latest_start_found_for_a_run_as_short_or_shorter(records):
    """`_found` keeps `_Profile.earliest`'s pairs so that a look-up for duration d (the entry of the longest
    duration <= d) gives the largest start recorded for any duration <= d, as long as the records come from a
    profile that only loses capacity from now on: there the earliest start grows with time and with the
    duration. Modelled here as start = max(now, (sum of the delays so far) + duration / 2), with now advancing
    too (a kept profile's later instants). Starts by now bound nothing (a search begins now anyway) and may be
    dropped: the look-up must give the same bound, max(entry, now)."""
    earliest: dict = {}
    delay = 0
    now_s = 0.0
    found: list[tuple[float, float]] = []
    for step, dur_s, advance in records:
        delay += step
        now_s += advance
        start_s = max(now_s, delay + dur_s / 2)
        cbf_module._found(earliest, "option", dur_s, start_s, now_s)
        found.append((dur_s, start_s))
    ds, starts = earliest.get("option", ([], []))
    assert ds == sorted(set(ds)) and starts == sorted(starts)
    assert all(a > now_s for a in starts)  # the ones by now were dropped
    for d in (0.5, 1.0, 2.0, 2.5, 3.0, 4.0, 8.0, 9.0):
        x = bisect.bisect_right(ds, d) - 1
        want = max((a for dur, a in found if dur <= d), default=-np.inf)
        assert max(starts[x] if x >= 0 else -np.inf, now_s) == max(want, now_s), d


def test_cbf_shortcut_keeps_the_option_order_when_an_overrun_makes_equal_speeds_tie():
    # H100 (speed 2) held by A (10 s reference, told 2 s: estimated end 1, so it overran at 3 and is assumed to
    # end right after now); the A100 is free. B is not speed-scaled (3 s on either type): on the A100 now it ends
    # at 3 + 3 = 6; on the H100 from the instant after 3 it ends at nextafter(3) + 3, which rounds to 6 too. The
    # rule breaks that tie by option order (the faster type first), so B waits for the H100 (A ends at 5): the
    # start-now shortcut once took the A100 here and parted from the plain scan (found by Hypothesis).
    jobs = [job("A", 0, 10, 1, gpu_types=("H100",)), job("B", 3, 3.0, 1, speed_scaled=False)]
    known = np.array([2.0, 3.0])
    for policy in ("cbf", "cbf_reference"):
        layout = ClusterLayout(parse_cluster_spec("1xH100:1,1xA100-80GB:1"))
        sim = Simulator(Workload("t", tuple(jobs)), layout, known, 1.2)
        sim.run(POLICIES["cbf"] if policy == "cbf" else cbf_reference)
        r = sim.result(policy, 0)
        assert (r.start_s[1], r.end_s[1], r.gpu_type[1]) == (5.0, 8.0, "H100"), policy


@pytest.mark.parametrize("fractional", [False, True])
def test_cbf_is_not_asked_while_nothing_is_free_unless_it_keeps_slots_between_calls(fractional):
    """CBF decides from the view alone (so `Simulator.run` skips it at instants with nothing free) except in a run
    of fractional jobs with exact runtimes, where it keeps each job's slot between calls and is asked at every
    decision instant. One 2-GPU node: a 2-GPU job runs from 0 to 100, three more arrive at 10, 20, 30 while
    nothing is free (and, with a fractional job in the run, the same)."""
    jobs = [job(k, 10.0 * k, 100.0, 2) for k in range(4)]
    if fractional:
        jobs.append(job(9, 1000.0, 50.0, 1, gpu_milli=500))
    layout = ClusterLayout(parse_cluster_spec("1xA100-80GB:2"))
    wl = Workload("t", tuple(jobs))
    asked = {True: [], False: []}
    runs = {}
    for skipping in (True, False):

        def policy(view, skipping=skipping):
            asked[skipping].append((view.now_s, view.free.free_milli_total))
            return cbf(view)

        if skipping:
            policy.starts_only = cbf.starts_only
        runs[skipping] = sim = Simulator(wl, layout)  # exact runtimes
        sim.run(policy)
    assert [t for t, _ in asked[False]][:4] == [0.0, 10.0, 20.0, 30.0]
    if fractional:
        assert asked[True] == asked[False]
    else:
        assert asked[True] == [(t, f) for t, f in asked[False] if f > 0]
        assert [t for t, _ in asked[True]][:2] == [0.0, 100.0]
    a, b = (runs[s].result("cbf", 0) for s in (True, False))
    assert list(a.start_s) == list(b.start_s) == [0.0, 100.0, 200.0, 300.0, *([1000.0] if fractional else [])]
