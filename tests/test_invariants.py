"""Simulator invariants over random clusters x workloads x every scheduler (Hypothesis)."""

from __future__ import annotations

import importlib
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from config import RunConfig, WorkloadConfig
from scenario.build import build_scenario
from schedulers import POLICIES, PREEMPTIVE
from schedulers.plan import Plan
from schedulers.power_managers import deferring, make_manager, parse_manager
from sim.catalog import CATALOG
from sim.cluster import FULL, ClusterLayout, Placement
from sim.cluster_spec import ClusterSpec, NodeSpec
from sim.job import Job, Workload
from sim.placement import place
from sim.power import PowerModel
from sim.prices import synthetic_curve
from sim.simulator import Simulator
from sim.sorted_list import OnDemandDict
from tests.easy_reference import easy_reference, reservation
from tests.helpers import estimates
from tests.sjf_reference import sjf_reference

sjf_module = importlib.import_module("schedulers.sjf")  # (the package names its function `sjf`)

TYPES = ("A100-80GB", "V100-16GB", "H100", "T4")
# each job starts once and runs its whole duration: the preemptive policies are checked run by run in
# tests/test_preemptive_properties.py
NON_PREEMPTIVE = sorted(set(POLICIES) - PREEMPTIVE)
STARTS_ONLY = sorted(n for n, p in POLICIES.items() if getattr(p, "starts_only", False))


@st.composite
def clusters(draw):
    groups = draw(
        st.lists(
            st.tuples(st.sampled_from(TYPES), st.integers(1, 3), st.sampled_from([1, 2, 4, 8])),
            min_size=1,
            max_size=3,
        )
    )
    nodes = []
    for gpu_type, count, per_node in groups:
        for _ in range(count):
            nodes.append(NodeSpec(f"n{len(nodes)}", gpu_type, per_node, CATALOG[gpu_type].mem_gb))
    return ClusterSpec("random", tuple(nodes))


@st.composite
def workloads(draw):
    n = draw(st.integers(1, 25))
    jobs = []
    t = 0.0
    for i in range(n):
        t += draw(st.sampled_from([0.0, 0.0, 1.0, 5.0, 30.0]))
        fractional = draw(st.booleans()) and draw(st.booleans())
        k = 1 if fractional else draw(st.sampled_from([1, 1, 2, 4, 8, 16]))
        milli = draw(st.sampled_from([100, 250, 500, 700])) if fractional else FULL
        types = tuple(draw(st.sets(st.sampled_from(TYPES), max_size=2)))
        jobs.append(
            Job(
                job_id=str(i),
                arrival_s=t,
                runtime_s=float(draw(st.integers(1, 200))),
                num_gpus=k,
                gpu_milli=milli,
                gpu_mem_gb=float(draw(st.sampled_from([0, 8, 12, 20, 40]))),
                gpu_types=tuple(sorted(types)),
                priority=draw(st.integers(0, 2)),
                runtime_includes_spread=draw(st.booleans()),  # trace jobs: no multi-node factor
                speed_scaled=not (draw(st.booleans()) and draw(st.booleans())),  # services: no speed scaling
            )
        )
    return Workload("random", tuple(jobs))


def check_invariants(sim: Simulator, layout: ClusterLayout, workload: Workload, factor: float) -> None:
    r = sim.result("x", 0)
    usage = defaultdict(list)  # gpu -> [(start, end, milli, mem_mb)]
    for i, j in enumerate(workload.jobs):
        if r.status[i] == "rejected":
            assert sim.reject_reason[i]
            continue
        # every accepted job finishes when the cluster can run it, starts once, after it arrived
        assert r.status[i] == "completed", (i, r.status[i])
        assert r.start_s[i] >= j.arrival_s
        p = sim.placements[i]
        assert len(p.gpus) == j.num_gpus and len(set(p.gpus)) == j.num_gpus
        node_types = {layout.nodes[layout.gpu_node[g]].gpu_type for g in p.gpus}
        assert len(node_types) == 1, "all GPUs of one type"
        (gpu_type,) = node_types
        assert not j.gpu_types or gpu_type in j.gpu_types
        assert all(layout.node_mem_mb[layout.gpu_node[g]] >= j.gpu_mem_gb * 1000 for g in p.gpus)
        elig = layout.eligible(j.gpu_types, int(round(j.gpu_mem_gb * 1000)))
        if j.num_gpus <= elig.type_max_node[p.type_idx]:
            assert len(p.nodes) == 1, "a job that fits one node of its type gets one node"
        # runs exactly its runtime on the type it got (services: on any type), x the factor when spread unless
        # its runtime already includes the spreading (docs/model.md)
        speed = CATALOG[gpu_type].speed if j.speed_scaled else 1.0
        spread = len(p.nodes) > 1 and not j.runtime_includes_spread
        expected = j.runtime_s / speed * (factor if spread else 1.0)
        assert np.isclose(r.end_s[i] - r.start_s[i], expected, rtol=1e-12, atol=1e-9)
        for g in p.gpus:
            usage[g].append((r.start_s[i], r.end_s[i], p.milli, p.mem_mb))
    for g, spans in usage.items():
        # sweep: releases before acquisitions at equal times
        events = sorted(
            [(s, 1, m, mem) for s, _, m, mem in spans] + [(e, 0, m, mem) for _, e, m, mem in spans]
        )
        milli = mem_used = 0
        for _, kind, m, mem in events:
            sign = 1 if kind else -1
            milli += sign * m
            mem_used += sign * mem
            assert milli <= FULL, f"GPU {g} over-committed"
            assert mem_used <= layout.gpu_mem_mb_np[g], f"GPU {g} memory over-committed"
    # the free state is back to empty
    assert sim.free.free_milli_total == FULL * layout.num_gpus
    assert (sim.free.free_milli == FULL).all()
    assert sim.free.node_whole == layout.node_num_gpus


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads(), st.sampled_from(NON_PREEMPTIVE), st.sampled_from([1.0, 1.2, 2.0]))
def test_invariants_hold_for_every_policy(spec, workload, policy, factor):
    layout = ClusterLayout(spec)
    sim = Simulator(workload, layout, None, factor)
    sim.run(POLICIES[policy])
    check_invariants(sim, layout, workload, factor)


def check_free_state(free, layout: ClusterLayout) -> None:
    """The free state's counters agree with its per-GPU shares: a GPU's bit in its node's mask is set exactly
    when the GPU is completely free, and each node's count of such GPUs is the number of set bits."""
    whole = free.free_milli == FULL
    for n in range(layout.num_nodes):
        a, k = layout.node_first_gpu[n], layout.node_num_gpus[n]
        expected = sum(1 << g for g in range(k) if whole[a + g])
        assert free.node_free_bits[n] == expected, n
        assert free.node_whole[n] == bin(expected).count("1"), n
        if free.node_whole[n]:
            assert n in free.pool_free[layout.node_pool[n]][free.node_whole[n]]
    assert not any(by_c[0] for by_c in free.pool_free)  # nodes without a free GPU are not kept


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads(), st.sampled_from(sorted(POLICIES)))
def test_free_gpu_bits_follow_the_per_gpu_shares_at_every_instant(spec, workload, policy):
    # every policy, preemptive ones included (their preemptions give GPUs back mid-run); the running jobs'
    # parallel lists too
    layout = ClusterLayout(spec)
    sim = Simulator(workload, layout, None, 1.2, 30.0)
    decide = POLICIES[policy]
    while sim.advance():
        check_free_state(sim.free, layout)
        check_running_lists(sim)
        for d in decide(sim.view()):
            sim.apply(d)
            check_free_state(sim.free, layout)
            check_running_lists(sim)
    check_free_state(sim.free, layout)
    check_running_lists(sim)


def check_running_lists(sim: Simulator) -> None:
    """The lists kept in `running`'s order say what each running job's placement says."""
    placements = [sim.placements[j] for _, j in sim.running]
    assert sim.running_type == [p.type_idx for p in placements]
    assert sim.running_whole_gpus == [len(p.gpus) if p.milli == FULL else 0 for p in placements]


@settings(max_examples=30, deadline=None)
@given(clusters(), workloads(), st.sampled_from(NON_PREEMPTIVE), st.integers(0, 2**32 - 1))
def test_invariants_hold_with_noisy_estimates(spec, workload, policy, seed):
    layout = ClusterLayout(spec)
    rng = np.random.default_rng(seed)
    known = np.array([j.runtime_s for j in workload.jobs]) * rng.lognormal(0.4, 0.8, len(workload.jobs))
    sim = Simulator(workload, layout, known, 1.2)
    sim.run(POLICIES[policy])
    check_invariants(sim, layout, workload, 1.2)


def test_with_infinitely_many_gpus_nobody_waits():
    """Queueing law (Ciw-style): with capacity for every job at once, wait is 0 for every policy."""
    rng = np.random.default_rng(0)
    jobs = tuple(
        Job(str(i), float(t), float(r), 1)
        for i, (t, r) in enumerate(
            zip(np.sort(rng.uniform(0, 1000, 200)), rng.uniform(1, 500, 200), strict=True)
        )
    )
    spec = ClusterSpec("big", tuple(NodeSpec(f"n{i}", "A100-80GB", 8, 80.0) for i in range(25)))
    for name, policy in POLICIES.items():
        if name.startswith("gavel"):
            continue  # round-based: a job arriving mid-round waits for the next round by design
        sim = Simulator(Workload("w", jobs), ClusterLayout(spec))
        sim.run(policy)
        r = sim.result("x", 0)
        assert np.allclose(r.start_s, [j.arrival_s for j in jobs])


def _same_schedule(a: Simulator, b: Simulator) -> bool:
    return a.placements == b.placements and np.array_equal(
        np.array(a.start_s), np.array(b.start_s), equal_nan=True
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads(), st.integers(0, 2**32 - 1), st.booleans())
def test_easy_by_shape_equals_the_plain_arrival_order_scan(spec, workload, seed, noisy):
    """EASY scans the queue shape by shape for speed; it must take exactly the decisions of the plain scan
    (tests/easy_reference.py), with exact and with overrunning estimates. The simulator's per-shape index of
    the queue is checked against the queue at every decision instant on the way."""
    layout = ClusterLayout(spec)
    rng = np.random.default_rng(seed)
    known = np.array([j.runtime_s for j in workload.jobs])
    if noisy:
        known = known * rng.lognormal(0.0, 0.8, len(workload.jobs))

    def checked_easy(view):
        by_shape = defaultdict(list)
        for i in view.queue:
            by_shape[view.jobs.shape[i]].append(i)
        assert {s: list(m) for s, m in view.queue_by_shape.items()} == dict(by_shape)
        return POLICIES["easy"](view)

    fast, plain = Simulator(workload, layout, known, 1.2), Simulator(workload, layout, known, 1.2)
    fast.run(checked_easy)
    plain.run(easy_reference)
    assert _same_schedule(fast, plain)


def _spreads(free, nodes: list[int], k: int, t: int):
    """Every spread of k whole GPUs over `nodes` (type t) free now, as placements (each node's lowest free
    GPUs: a node's free GPUs are interchangeable for whole-GPU jobs and for a fractional head)."""
    layout = free.layout

    def counts(x: int, left: int):
        if left == 0:
            yield ()
            return
        if x == len(nodes):
            return
        for c in range(min(free.node_whole[nodes[x]], left), -1, -1):
            for rest in counts(x + 1, left - c):
                yield (c, *rest)

    for cs in counts(0, k):
        used = [(n, c) for n, c in zip(nodes, cs, strict=False) if c]
        gpus = []
        for n, c in used:
            first = layout.node_first_gpu[n]
            own = range(first, first + layout.node_num_gpus[n])
            gpus += [g for g in own if free.free_milli[g] == FULL][:c]
        yield Placement(tuple(gpus), tuple(n for n, _ in used), FULL, 0, t, -1, tuple(c for _, c in used))


def _spread_case() -> tuple[ClusterSpec, Workload]:
    """tests/test_schedulers.py's case where the first spread delays the head and another spread does not."""
    nodes = tuple(NodeSpec(f"n{n}", "A100-80GB", 8, 80.0) for n in range(3))
    arrivals = [("x", 0, 100, 1), ("f7", 0, 1, 7), ("y", 0, 5000, 2), ("f6", 0, 1, 6), ("z", 0, 5000, 5)]
    arrivals += [("h", 2, 10, 8), ("j", 2, 1000, 9), ("a1", 2, 50, 7)]
    jobs = tuple(Job(i, float(a), float(r), k) for i, a, r, k in arrivals)
    return ClusterSpec("spread", nodes), Workload("spread", jobs)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads())
@example(*_spread_case())
def test_easy_refuses_a_spread_job_only_when_every_spread_delays_the_head(spec, workload):
    """After each instant's decisions, every waiting job that fits now by a spread but does not end by the
    shadow time was refused: no spread of it (all node-count splits over each type it may spread on, checked
    one by one) leaves the head a placement in the shadow state."""
    layout = ClusterLayout(spec)
    sim = Simulator(workload, layout)
    while sim.advance():
        for d in POLICIES["easy"](sim.view()):
            sim.start(d)
        view = sim.view()
        queue = list(view.queue)
        if not queue or place(view.free, *view.jobs.shape[queue[0]]) is not None:
            continue
        head = queue[0]
        shadow_s, shadow = reservation(view, view.free.copy(), head, [])
        for j in queue[1:]:
            elig, k, milli, _, pace = view.jobs.shape[j]
            p = place(view.free, *view.jobs.shape[j])
            if p is None or milli < FULL or view.now_s + view.duration_on(j, p) <= shadow_s:
                continue
            for t in elig.types:
                if elig.type_max_node[t] >= k:
                    continue  # no spread on t
                for q in _spreads(view.free, elig.type_nodes[t], k, t):
                    shadow.take(q)
                    assert place(shadow, *view.jobs.shape[head]) is None, (view.now_s, j, q)
                    shadow.give(q)


@pytest.mark.parametrize(("difficulty", "seed"), [("medium", 100), ("hard", 0), ("hard", 1)])
def test_easy_by_shape_equals_the_plain_scan_on_synthetic_scenarios(difficulty, seed):
    """Larger cases than Hypothesis draws: seed 100 once exposed a shadow that shared the plan's free state."""
    cfg = RunConfig(workload=WorkloadConfig(difficulty=difficulty))
    fast, plain = build_scenario(cfg, seed).simulator(), build_scenario(cfg, seed).simulator()
    fast.run(POLICIES["easy"])
    plain.run(easy_reference)
    assert _same_schedule(fast, plain)


@pytest.mark.parametrize("profile", ["legacy", "philly", "helios", "itp"])
@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_easy_asked_again_after_each_start_gives_the_rest_on_synthetic_scenarios(difficulty, profile):
    """The property the env's one start per step relies on (docs/schedulers.md): at every instant, EASY asked
    again right after each of its starts returns exactly the decisions (jobs and placements) it had left."""
    cfg = RunConfig(workload=WorkloadConfig(difficulty=difficulty, num_jobs=300, synthetic_profile=profile))
    sim = build_scenario(cfg, 7).simulator()
    easy = POLICIES["easy"]
    starts = 0
    while sim.advance():
        ds = easy(sim.view())
        for n, d in enumerate(ds):
            sim.start(d)
            assert easy(sim.view()) == ds[n + 1 :], (sim.now_s, n)
        starts += len(ds)
    assert starts == 300 - sim.num_rejected


RICC = Path(__file__).resolve().parents[2] / "shared" / "traces" / "swf-pwa" / "RICC-2010-2.swf.gz"


@pytest.mark.skipif(not RICC.exists(), reason=f"shared trace copy absent: {RICC}")
def test_easy_by_shape_equals_the_plain_scan_on_the_first_ricc_jobs():
    """Multi-node whole-GPU heads on a one-type cluster: the prefix-sum reservation path."""
    cfg = RunConfig(workload=WorkloadConfig(workload_type="swf", workload_path=str(RICC), max_jobs=4000))
    fast, plain = build_scenario(cfg, 0).simulator(), build_scenario(cfg, 0).simulator()
    fast.run(POLICIES["easy"])
    plain.run(easy_reference)
    assert _same_schedule(fast, plain)


def fcfs_reference(view):
    """The plain FCFS scan: every call places the waiting jobs in arrival order until one does not fit."""
    plan = Plan(view.free)
    for i in view.queue:
        p = place(plan.free, *view.jobs.shape[i])
        if p is None:
            break
        plan.add(i, p)
    return plan.decisions


REFERENCES = {"fcfs": fcfs_reference, "sjf": sjf_reference, "easy": easy_reference}


def test_fcfs_does_not_take_another_runs_blocked_head_for_its_own():
    """Two runs at the same instant whose first waiting job has the same index and whose free states have the
    same version: in one it does not fit (4 GPUs busy), in the other it does (1 of 4 busy)."""
    spec = ClusterSpec("c", (NodeSpec("n0", "A100-80GB", 4, 80.0),))
    runs = []
    for k in (4, 1):
        jobs = (Job("a", 0.0, 100.0, k), Job("b", 1.0, 100.0, k))
        runs.append(Simulator(Workload("w", jobs), ClusterLayout(spec)))
    for sim in runs:  # t = 0: job a starts in both (one take: version 1 in both)
        assert sim.advance()
        for d in POLICIES["fcfs"](sim.view()):
            sim.start(d)
    started = []
    for sim in runs:  # t = 1: job b is first in both
        assert sim.advance() and sim.now_s == 1.0
        started.append([d.job for d in POLICIES["fcfs"](sim.view())])
    assert started == [[], [1]]


def _interleaved(
    layout: ClusterLayout, workloads_: tuple[Workload, ...], seed: int, name: str
) -> list[Simulator]:
    """Runs of the workloads driven in turn, one instant each, under policy `name`, whose every call must
    decide as its plain scan (REFERENCES) on the same view; the finished runs."""
    runs = [Simulator(w, layout, estimates(w, seed, False), 1.2) for w in workloads_]
    live = list(runs)
    while live:
        for sim in list(live):
            if not sim.advance():
                live.remove(sim)
                continue
            ds = POLICIES[name](sim.view())
            assert ds == REFERENCES[name](sim.view())
            for d in ds:
                sim.start(d)
    return runs


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads(), workloads(), st.integers(0, 2**32 - 1))
def test_fcfs_decides_as_the_plain_scan_with_two_runs_interleaved(spec, w1, w2, seed):
    """FCFS skips a call whose first job did not fit at its last call on an unchanged free state (it remembers
    that one state); two runs driven in turn, one instant each, must each get the plain scan's schedule."""
    layout = ClusterLayout(spec)
    runs = _interleaved(layout, (w1, w2), seed, "fcfs")
    for sim, w in zip(runs, (w1, w2), strict=True):
        plain = Simulator(w, layout, estimates(w, seed, False), 1.2)
        plain.run(fcfs_reference)
        assert _same_schedule(sim, plain)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads(), st.integers(0, 2**32 - 1), st.booleans())
def test_sjf_by_shape_equals_the_plain_runtime_order_scan(spec, workload, seed, noisy):
    """SJF scans shape by shape and starts each call from what the previous one left (schedulers/sjf.py); it
    must take exactly the decisions of the plain scan (tests/sjf_reference.py). In a plain run its memo holds
    throughout, so its own heaps serve every call: the simulator's per-shape runtime lists are never built."""
    layout = ClusterLayout(spec)
    known = estimates(workload, seed, noisy)
    fast, plain = Simulator(workload, layout, known, 1.2), Simulator(workload, layout, known, 1.2)
    fast.run(POLICIES["sjf"])
    plain.run(sjf_reference)
    assert _same_schedule(fast, plain)
    assert type(fast.queue_by_shape_runtime) is OnDemandDict


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads(), workloads(), st.integers(0, 2**32 - 1))
def test_sjf_decides_as_the_plain_scan_with_two_runs_interleaved(spec, w1, w2, seed):
    """SJF keeps one memo per run (its job table): two runs driven in turn, one instant each, must each get
    the plain scan's decisions at every call, each from its own memo and heaps, which hold throughout (neither
    run's simulator builds its per-shape runtime lists)."""
    runs = _interleaved(ClusterLayout(spec), (w1, w2), seed, "sjf")
    assert all(type(sim.queue_by_shape_runtime) is OnDemandDict for sim in runs)
    memos = [sjf_module._memos.get(sim.jobs) for sim in runs]  # (None: never called, every job rejected)
    assert all(m is None or m.resets == 1 for m in memos)  # each memo held throughout


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads(), st.integers(0, 2**32 - 1), st.booleans(), st.sampled_from(sorted(REFERENCES)))
def test_policies_that_remember_between_calls_decide_as_the_plain_scan_whatever_was_applied(
    spec, workload, seed, noisy, name
):
    """FCFS, SJF and EASY keep what one call found for the next (schedulers/fcfs.py, sjf.py, easy.py) only while
    exactly their decisions were applied since. Called at every instant with some of their decisions applied, none, or all
    one by one with a call after each, they answer as the plain scan on every view."""
    layout = ClusterLayout(spec)
    rng = np.random.default_rng(seed)
    policy, reference = POLICIES[name], REFERENCES[name]
    sim = Simulator(workload, layout, estimates(workload, seed, noisy), 1.2)
    while sim.advance():
        ds = policy(sim.view())
        assert ds == reference(sim.view())
        mode = rng.integers(3)
        if mode == 1:  # asked again before anything is applied
            assert policy(sim.view()) == ds
        if mode == 2 and ds:  # asked again after each start
            for n, d in enumerate(ds):
                sim.start(d)
                rest = policy(sim.view())
                assert rest == ds[n + 1 :] == reference(sim.view())
        else:
            for d in ds:
                sim.start(d)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads(), st.sampled_from(sorted(REFERENCES)), st.booleans())
def test_remembering_policies_decide_as_the_plain_scan_with_nodes_powering_off_or_jobs_held(
    spec, workload, name, held
):
    """Power managers take and give back whole nodes, and `deferring` (price_aware) hides held jobs from the
    view: neither may be mistaken for the changes a remembering policy expects."""
    layout = ClusterLayout(spec)
    manager_spec = parse_manager("price_aware:7200" if held else "idle_off:30:0")
    curve = synthetic_curve()
    runs = []
    for policy in (POLICIES[name], REFERENCES[name]):
        sim = Simulator(workload, layout, None, 1.2, power=PowerModel())
        if held:
            policy = deferring(policy, curve, manager_spec.defer_s)
        sim.run(policy, manager=make_manager(manager_spec, curve))
        runs.append(sim)
    assert _same_schedule(*runs)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads(), st.integers(0, 2**32 - 1), st.booleans(), st.sampled_from(STARTS_ONLY))
def test_a_starts_only_policy_is_not_asked_while_nothing_is_free_and_schedules_as_if_asked(
    spec, workload, seed, noisy, name
):
    """`Simulator.run` does not call a policy marked `starts_only` (FCFS, SJF, EASY; CBF but in a run of
    fractional jobs with exact runtimes) at an instant with no GPU share free; the run's schedule is the one of
    the same policy called at every decision instant."""
    assert STARTS_ONLY == ["cbf", "easy", "fcfs", "sjf"]
    layout = ClusterLayout(spec)
    known = estimates(workload, seed, noisy)
    policy = POLICIES[name]
    free_when_asked = []

    def marked(view):
        free_when_asked.append(view.free.free_milli_total)
        return policy(view)

    marked.starts_only = policy.starts_only  # (the policy's own mark: a test of the run's jobs)
    skipping, asked_always = Simulator(workload, layout, known, 1.2), Simulator(workload, layout, known, 1.2)
    skipping.run(marked)
    asked = []
    asked_always.run(lambda view: asked.append(view.free.free_milli_total) or policy(view))
    fractional_exact = any(j.gpu_milli < 1000 for j in workload.jobs) and not noisy
    skips = name != "cbf" or not fractional_exact
    if skips:
        assert all(f > 0 for f in free_when_asked)
        assert len(free_when_asked) == sum(f > 0 for f in asked)
    else:
        assert len(free_when_asked) == len(asked)
    assert _same_schedule(skipping, asked_always)
