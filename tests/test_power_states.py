"""Node power states in the simulator: PowerOn/PowerOff, capacity of nodes that are not on, power managers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedulers import POLICIES, REPLAYS
from schedulers.power_managers import deferring, idle_off, make_manager, parse_manager
from sim.cluster import ClusterLayout
from sim.cluster_spec import ClusterSpec, NodeSpec, parse_cluster_spec
from sim.job import Workload
from sim.power import BOOTING, OFF, ON, SHUTTING_DOWN, PowerModel, PowerOff, PowerOn
from sim.prices import PriceCurve
from sim.simulator import Decision, Simulator, WakeUp
from tests.helpers import job
from tests.power_reference import idle_off_reference
from tests.test_invariants import clusters, workloads

MODEL = PowerModel(boot_s=260.0, shutdown_s=60.0)

# every scheduler but Gavel, whose LP rounds make one Hypothesis example take seconds (Gavel keeps to ON nodes
# by the same FreeState rule; its own properties are in tests/test_gavel.py), and the replays of the authors'
# simulators, which have no power states: a job they cannot place on an ON node waits for their next event,
# which may never come, so the CLI refuses them with any manager but always_on (tests/test_replays_cli.py)
SCHEDULERS = sorted(set(POLICIES) - {"gavel", "gavel_agnostic"} - REPLAYS)


def _sim(cluster: str, jobs, initial=None, model=MODEL) -> Simulator:
    layout = ClusterLayout(parse_cluster_spec(cluster))
    return Simulator(Workload("t", tuple(jobs)), layout, None, 1.2, power=model, initial_power=initial)


def test_off_node_offers_no_capacity_until_booted():
    # 2 A100 nodes of 8 GPUs, n1 OFF at t=0; the manager boots it at once (ready at 0 + 260 = 260).
    # FCFS: j0 (8 GPUs, 100 s) starts on n0 at 0; j1 (8 GPUs) cannot use n1 while it boots, so it starts on
    # n0 when j0 ends at 100 and ends at 200; j2 (4 GPUs, arrives 10) waits behind j1 (FCFS), starts at 200 on
    # n0 and ends at 250 -- before n1 is even on.
    jobs = [job(0, 0, 100, 8), job(1, 0, 100, 8), job(2, 10, 50, 4)]
    sim = _sim("2xA100-80GB:8", jobs, initial=(ON, OFF))

    def boot_n1(view):
        return [PowerOn(1)] if view.queue and view.node_power.state[1] == OFF else []

    sim.run(POLICIES["fcfs"], manager=boot_n1)
    r = sim.result("fcfs", 0)
    assert r.start_s.tolist() == [0.0, 100.0, 200.0]
    assert r.end_s.tolist() == [100.0, 200.0, 250.0]
    assert all(p.startswith("n0/") for p in r.placement)
    assert r.power_log_t_s.tolist() == [0.0, 260.0]
    assert r.power_log_node.tolist() == [1, 1]
    assert r.power_log_state.tolist() == [BOOTING, ON]
    assert r.power_initial == (ON, OFF)
    assert r.end_of_run_s == 260.0


def test_power_off_and_on_move_capacity_out_and_back():
    sim = _sim("2xA100-80GB:8,1xT4:4", [job(0, 0, 10, 1)])
    free = sim.free
    a100 = sim.layout.type_names.index("A100-80GB")
    assert free.type_whole[a100] == 16
    sim.apply(PowerOff(1))
    assert sim.node_power.state[1] == SHUTTING_DOWN and sim.node_power.until_s[1] == 60.0
    assert free.type_whole[a100] == 8 and free.node_whole[1] == 0
    with pytest.raises(ValueError, match="not OFF"):
        sim.apply(PowerOn(1))  # still shutting down
    with pytest.raises(ValueError, match="not ON"):
        sim.apply(PowerOff(1))
    sim.apply(WakeUp(500.0))
    while sim.advance() and sim.now_s < 60.0:
        for d in POLICIES["fcfs"](sim.view()):
            sim.apply(d)
    assert sim.now_s == 60.0 and sim.node_power.state[1] == OFF
    sim.apply(PowerOn(1))
    assert sim.node_power.state[1] == BOOTING and free.type_whole[a100] == 8
    while sim.advance():
        pass
    assert sim.node_power.state[1] == ON and free.type_whole[a100] == 16
    assert sim.node_power.idle_since_s[1] == 320.0  # booted at 60, on at 60 + 260
    assert sim.now_s == 500.0  # the WakeUp kept the run going to 500 s


def test_power_off_of_a_node_with_jobs_is_impossible():
    sim = _sim("1xA100-80GB:8", [job(0, 0, 100, 1, gpu_milli=250)])
    sim.advance()
    for d in POLICIES["fcfs"](sim.view()):
        sim.apply(d)
    with pytest.raises(ValueError, match="has jobs on it"):
        sim.apply(PowerOff(0))
    assert sim.node_power.state[0] == ON
    with pytest.raises(ValueError, match="not ON"):
        sim.apply(PowerOff(7))
    with pytest.raises(TypeError):
        sim.apply(("not", "a decision"))


def test_power_decisions_need_a_power_model():
    layout = ClusterLayout(parse_cluster_spec("1xA100-80GB:8"))
    sim = Simulator(Workload("t", (job(0, 0, 1),)), layout)
    assert sim.view().node_power is None
    with pytest.raises(ValueError, match="power model"):
        sim.apply(PowerOff(0))


def test_wake_up_in_the_past_is_refused():
    sim = _sim("1xA100-80GB:8", [job(0, 5, 1)])
    sim.advance()
    with pytest.raises(ValueError, match="past"):
        sim.apply(WakeUp(1.0))


def test_idle_off_hand_computed():
    # 2 A100 nodes, idle_off:100 with reserve 0. j0 (8 GPUs, 50 s) at 0 lands on n0 (best fit, lower index).
    # n1 is idle from 0 -> PowerOff at its deadline 100, off at 160. n0 idle from 50 -> PowerOff at 150, off at
    # 210. j1 (8 GPUs, 10 s) arrives at 400: both OFF -> the wake rule boots the fastest-then-smallest-then-
    # lowest-index node that fits: n0 at 400, on at 660; j1 runs 660..670; n0 idle again from 670 ->
    # PowerOff at 770, off at 830.
    jobs = [job(0, 0, 50, 8), job(1, 400, 10, 8)]
    sim = _sim("2xA100-80GB:8", jobs)
    sim.run(POLICIES["fcfs"], manager=make_manager(parse_manager("idle_off:100:0")))
    r = sim.result("fcfs", 0)
    assert r.start_s.tolist() == [0.0, 660.0] and r.end_s.tolist() == [50.0, 670.0]
    log = list(
        zip(r.power_log_t_s.tolist(), r.power_log_node.tolist(), r.power_log_state.tolist(), strict=True)
    )
    assert log == [
        (100.0, 1, SHUTTING_DOWN),
        (150.0, 0, SHUTTING_DOWN),
        (160.0, 1, OFF),
        (210.0, 0, OFF),
        (400.0, 0, BOOTING),
        (660.0, 0, ON),
        (770.0, 0, SHUTTING_DOWN),
        (830.0, 0, OFF),
    ]


def test_idle_off_keeps_the_reserve_and_nodes_queued_jobs_accept():
    # reserve 1 per type: of the idle A100 nodes n0, n1 only n1 may go off; the T4 node n2 is the T4 reserve.
    sim = _sim("2xA100-80GB:8,1xT4:4", [])
    view = sim.view()._replace(now_s=1000.0)
    assert idle_off(view, 600.0, 1) == [PowerOff(1)]
    assert idle_off(view, 600.0, 0) == [PowerOff(0), PowerOff(1), PowerOff(2)]
    # before the deadline: a WakeUp at it
    assert idle_off(sim.view()._replace(now_s=10.0), 600.0, 0) == [WakeUp(600.0)]


def _non_on_intervals(r) -> dict[int, list[tuple[float, float]]]:
    """node -> [start, end) intervals during which it was not ON (end = inf if never on again)."""
    out: dict[int, list[tuple[float, float]]] = {}
    since = {n: 0.0 for n, s in enumerate(r.power_initial) if s != ON}
    for t, n, s in zip(
        r.power_log_t_s.tolist(), r.power_log_node.tolist(), r.power_log_state.tolist(), strict=True
    ):
        if s == ON:
            out.setdefault(n, []).append((since.pop(n), t))
        elif n not in since:
            since[n] = t
    for n, t in since.items():
        out.setdefault(n, []).append((t, float("inf")))
    return out


def _check_only_on_nodes(sim: Simulator) -> None:
    """Every execution interval (RunResult.runs: a preempted job has several) lies where its nodes were ON."""
    r = sim.result("x", 0)
    blocked = _non_on_intervals(r)
    node_index = {n.node_id: k for k, n in enumerate(r.nodes)}
    runs = r.runs
    for s, e, placement in zip(runs.start_s.tolist(), runs.end_s.tolist(), runs.placement, strict=True):
        e = e if e == e else float("inf")
        for n in {node_index[label.rsplit("/", 1)[0]] for label in placement.split(";")}:
            for a, b in blocked.get(n, ()):
                assert not (a < e and s < b), (n, (s, e), (a, b))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cluster=clusters(),
    workload=workloads(),
    algo=st.sampled_from(SCHEDULERS),
    seed=st.integers(0, 2**16),
    boot_s=st.sampled_from([0.0, 5.0, 260.0]),
)
def test_no_job_runs_on_a_node_that_is_not_on(cluster, workload, algo, seed, boot_s):
    """A random manager switches random eligible nodes on and off at every decision instant; then idle_off."""
    _run_under_chaos(cluster, workload, algo, seed, boot_s)


def test_cbf_rebuilds_its_kept_schedule_after_a_node_changes_power():
    """CBF keeps an instant's schedule for the next one when nothing but arrivals changed (schedulers/cbf.py,
    _Kept): a node switched off or on in between changes the free GPUs too. In this case (Hypothesis found it)
    the manager switches nodes between two calls while the schedule is kept; before the kept schedule was
    checked against the power log, it placed the 4-GPU job on GPUs that were not free (ValueError from
    Simulator.start)."""
    cluster = ClusterSpec("c", tuple(NodeSpec(f"n{k}", "A100-80GB", 2, 80.0) for k in range(3)))
    spec = [(0, 1, 1), (0, 1, 1), (0, 1, 1), (1, 1, 1), (1, 1, 1), (1, 2, 1), (1, 1, 4)]
    workload = Workload("w", tuple(job(k, a, r, g) for k, (a, r, g) in enumerate(spec)))
    _run_under_chaos(cluster, workload, "cbf", 112, 0.0)


def _run_under_chaos(cluster, workload, algo, seed, boot_s):
    """Run `algo` while a random manager (seeded by `seed`) switches random eligible nodes on and off at the
    first 30 decision instants, then idle_off; check that every run lay on ON nodes and every job ended."""
    layout = ClusterLayout(cluster)
    rng = np.random.default_rng(seed)
    initial = tuple(int(x) for x in rng.choice([ON, OFF], size=layout.num_nodes))
    model = PowerModel(boot_s=boot_s, shutdown_s=boot_s / 2)
    sim = Simulator(workload, layout, None, 1.2, power=model, initial_power=initial)
    steps = [0]

    def chaos(view):
        steps[0] += 1
        if steps[0] > 30:  # then idle_off's wake rule takes over so that every job completes
            return idle_off(view, 50.0, 0)
        state = view.node_power.state
        out = []
        for n in range(layout.num_nodes):
            empty = view.free.node_whole[n] == layout.node_num_gpus[n]
            if state[n] == ON and empty and rng.random() < 0.3:
                out.append(PowerOff(n))
            elif state[n] == OFF and rng.random() < 0.5:
                out.append(PowerOn(n))
        return out + [WakeUp(view.now_s + 7.0)]

    sim.run(POLICIES[algo], manager=chaos)
    _check_only_on_nodes(sim)
    r = sim.result(algo, 0)
    assert all(s in ("completed", "rejected") for s in r.status)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters(), workload=workloads(), algo=st.sampled_from(SCHEDULERS))
def test_always_on_power_model_changes_no_job_record(cluster, workload, algo):
    layout = ClusterLayout(cluster)
    plain = Simulator(workload, layout)
    plain.run(POLICIES[algo])
    powered = Simulator(workload, layout, None, 1.2, power=MODEL)
    powered.run(POLICIES[algo])
    a, b = plain.result(algo, 0), powered.result(algo, 0)
    assert a.start_s.tobytes() == b.start_s.tobytes() and a.end_s.tobytes() == b.end_s.tobytes()
    assert a.placement == b.placement and a.status == b.status
    assert b.power_log_t_s.size == 0 and a.power_model is None


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters(), workload=workloads(), algo=st.sampled_from(SCHEDULERS))
def test_idle_off_is_deterministic_and_completes_every_job(cluster, workload, algo):
    runs = []
    for _ in range(2):
        sim = Simulator(workload, ClusterLayout(cluster), None, 1.2, power=MODEL)
        sim.run(POLICIES[algo], manager=make_manager(parse_manager("idle_off:30:0")))
        _check_only_on_nodes(sim)
        runs.append(sim.result(algo, 0))
    a, b = runs
    assert all(s in ("completed", "rejected") for s in a.status)
    for name in ("start_s", "end_s", "power_log_t_s", "power_log_node", "power_log_state"):
        assert getattr(a, name).tobytes() == getattr(b, name).tobytes()
    assert a.placement == b.placement


def test_decision_dispatch_starts_jobs():
    sim = _sim("1xA100-80GB:8", [job(0, 0, 10, 8)])
    sim.advance()
    (d,) = POLICIES["fcfs"](sim.view())
    assert isinstance(d, Decision)
    sim.apply(d)
    assert sim.start_s[0] == 0.0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cluster=clusters(),
    workload=workloads(),
    algo=st.sampled_from(SCHEDULERS),
    idle_s=st.sampled_from([0.0, 3.0, 40.0]),
    reserve=st.integers(0, 2),
)
def test_idle_off_matches_the_plain_reference(cluster, workload, algo, idle_s, reserve):
    """At every decision instant the manager's decisions equal tests/power_reference.py's."""
    layout = ClusterLayout(cluster)
    initial = tuple(OFF if n % 2 else ON for n in range(layout.num_nodes))
    sim = Simulator(
        workload, layout, None, 1.2, power=PowerModel(boot_s=7.0, shutdown_s=3.0), initial_power=initial
    )
    checked = [0]

    def both(view):
        mine = idle_off(view, idle_s, reserve)
        # the same decisions (their order within an instant does not matter: boots and shutdowns commute)
        assert sorted(mine, key=repr) == sorted(idle_off_reference(view, idle_s, reserve), key=repr), (
            view.now_s
        )
        checked[0] += 1
        return mine

    sim.run(POLICIES[algo], manager=both)
    assert checked[0] >= 1 or sim.num_rejected == len(workload.jobs)
    assert all(s in ("completed", "rejected") for s in sim.result(algo, 0).status)


def test_price_aware_defers_low_priority_jobs_to_the_cheapest_slot():
    # Price 100 EUR/MWh on [0, 3600), 50 on [3600, 7200), repeating. price_aware:7200 (T 600, R 1: the one node
    # is its type's reserve, never off). j0 (priority 0, arrives 0): the lowest price in [0, 7200) is 50 < 100,
    # so it is held and starts at 3600 (a WakeUp at the price change). j1 (priority 1) is never held: starts
    # at 0. j2 (priority 0) arrives at 5000: the price then is already the lowest of [5000, 12200) -> starts at
    # once. j3 (priority 0, arrives 7200 at price 100): the cheapest of [7200, 14400) is 50 from 10800 on.
    curve = PriceCurve("step", 3600.0, np.array([100.0, 50.0]), np.array([0.0, 0.0]))
    jobs = [job(0, 0, 100, 1), job(1, 0, 100, 1, priority=1), job(2, 5000, 100, 1), job(3, 7200, 100, 1)]
    sim = _sim("1xA100-80GB:8", jobs)
    spec = parse_manager("price_aware:7200")
    sim.run(deferring(POLICIES["fcfs"], curve, spec.defer_s), manager=make_manager(spec, curve))
    r = sim.result("fcfs", 0)
    assert r.start_s.tolist() == [3600.0, 0.0, 5000.0, 10800.0]


def test_price_aware_releases_at_the_deferral_bound():
    # Prices 100, 90, 80, 10 per hour. price_aware:5400: j0 (arrives 0) sees [0, 5400) whose lowest price is 90
    # (from 3600): held until 3600, where 90 is the lowest of [3600, 5400) -> starts at 3600, never waiting for
    # the 10 at 10800 beyond its bound. j1 arrives 100 with bound 100 + 60 = 160 (price_aware:60 runs apart).
    curve = PriceCurve("fall", 3600.0, np.array([100.0, 90.0, 80.0, 10.0]), np.zeros(4))
    sim = _sim("1xA100-80GB:8", [job(0, 0, 100, 1)])
    spec = parse_manager("price_aware:5400")
    sim.run(deferring(POLICIES["fcfs"], curve, spec.defer_s), manager=make_manager(spec, curve))
    assert sim.start_s == [3600.0]
    sim = _sim("1xA100-80GB:8", [job(0, 100, 100, 1)])
    spec = parse_manager("price_aware:60")
    sim.run(deferring(POLICIES["fcfs"], curve, spec.defer_s), manager=make_manager(spec, curve))
    assert sim.start_s == [100.0]  # [100, 160) holds one price: nothing cheaper within the bound


def test_idle_off_restores_its_reserve():
    # 3 A100 nodes, n1 and n2 OFF; idle_off:100:1. j0 (8 GPUs, 1000 s) takes n0 at 0, leaving no A100 node idle
    # or booting -> n1 (the lowest-indexed OFF node) boots at 0, on at 260, idle: the reserve (n2 stays off).
    # At 1000 j0 ends: n0 and n1 idle; the reserve is n0 (lowest index); n1 idle since 260 is past its deadline
    # 360 -> PowerOff(1) at 1000, off at 1060.
    sim = _sim("3xA100-80GB:8", [job(0, 0, 1000, 8)], initial=(ON, OFF, OFF))
    sim.run(POLICIES["fcfs"], manager=make_manager(parse_manager("idle_off:100:1")))
    r = sim.result("fcfs", 0)
    log = list(
        zip(r.power_log_t_s.tolist(), r.power_log_node.tolist(), r.power_log_state.tolist(), strict=True)
    )
    assert log == [(0.0, 1, BOOTING), (260.0, 1, ON), (1000.0, 1, SHUTTING_DOWN), (1060.0, 1, OFF)]
    assert r.start_s.tolist() == [0.0] and r.placement[0].startswith("n0/")
