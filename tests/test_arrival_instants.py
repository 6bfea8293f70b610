"""The simulator's arrival instants, kept off SimPy's event heap and merged with it by `advance`, against a plain
model of the instants: the policy is asked exactly at each instant at which a job waits or a wake-up falls,
seeing every arrival and completion of that instant, and `next_event_s` is the next arrival or SimPy event."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cluster import ClusterLayout
from sim.cluster_spec import parse_cluster_spec
from sim.job import Workload
from sim.placement import place
from sim.simulator import Decision, Simulator, WakeUp
from tests.helpers import job

_LAYOUT = ClusterLayout(parse_cluster_spec("2xA100-80GB:2"), uniform_speed=True)


def _fcfs_with_wakeups(wake_at: list[float]):
    """Start waiting jobs in arrival order while they fit (skipping none); ask to be woken at `wake_at`'s times
    (from the first call on). Records (now, queue, running jobs, next_event_s) at each call."""
    calls = []

    def policy(view, sim):
        calls.append((view.now_s, list(view.queue), sorted(i for _, i in view.running), sim.next_event_s()))
        free = view.free.copy()
        out = []
        for i in view.queue:
            p = place(free, *view.jobs.shape[i])
            if p is None:
                break
            free.take(p)
            out.append(Decision(i, p))
        if len(calls) == 1:
            out += [WakeUp(t) for t in wake_at if t >= view.now_s]
        return out

    return policy, calls


def _model(arrivals: list[float], runtimes: list[float], gpus: list[int], wake_at: list[float]):
    """The same policy's calls, from a plain instant-by-instant model: instants are the distinct arrival,
    completion and requested wake-up times; the policy is asked at an instant where a job waits or a wake-up
    falls (a wake-up requested for the current instant is none)."""
    n = len(arrivals)
    ends: dict[int, float] = {}
    queue: list[int] = []
    running: list[int] = []
    free = 4  # two nodes of two GPUs: a job of k GPUs fits while some node has k free
    node_free = [2, 2]
    where: dict[int, int] = {}
    wakes: set[float] = set()
    calls = []
    arrived = 0
    now = -1.0
    first = True
    while True:
        future = [arrivals[arrived]] if arrived < n else []
        future += [ends[i] for i in running] + sorted(wakes)
        if not future:
            break
        now = min(future)
        while arrived < n and arrivals[arrived] == now:
            queue.append(arrived)
            arrived += 1
        for i in [i for i in running if ends[i] == now]:
            running.remove(i)
            node_free[where[i]] += gpus[i]
            free += gpus[i]
        woken = now in wakes
        wakes.discard(now)
        if not queue and not woken:
            continue
        nxt = [arrivals[arrived]] if arrived < n else []
        nxt += [ends[i] for i in running] + sorted(wakes)
        calls.append((now, list(queue), sorted(running), min(nxt, default=float("inf"))))
        for i in list(queue):
            fit = [m for m in (0, 1) if node_free[m] >= gpus[i]]
            if not fit:
                break
            m = min(fit, key=lambda m: (node_free[m], m))  # best fit, lower node first
            node_free[m] -= gpus[i]
            free -= gpus[i]
            where[i] = m
            queue.remove(i)
            running.append(i)
            ends[i] = now + runtimes[i]
        if first:
            wakes |= {t for t in wake_at if t > now}
            first = False
    return calls


@settings(max_examples=150, deadline=None)
@given(
    gaps=st.lists(st.sampled_from([0.0, 1.0, 2.0, 3.0]), min_size=1, max_size=14),
    runtimes=st.lists(st.sampled_from([0.0, 1.0, 2.0, 3.0, 5.0]), min_size=14, max_size=14),
    gpus=st.lists(st.sampled_from([1, 2]), min_size=14, max_size=14),
    wake_at=st.lists(st.sampled_from([0.0, 1.0, 2.0, 4.0, 7.0, 30.0]), max_size=3),
)
def test_instants_match_a_plain_model(gaps, runtimes, gpus, wake_at):
    arrivals = []
    t = 0.0
    for g in gaps:
        t += g
        arrivals.append(t)
    n = len(arrivals)
    jobs = [job(i, arrivals[i], runtimes[i], gpus[i]) for i in range(n)]
    sim = Simulator(Workload("w", tuple(jobs)), _LAYOUT)
    policy, calls = _fcfs_with_wakeups(wake_at)
    sim.run(lambda view: policy(view, sim))
    assert calls == _model(arrivals, runtimes[:n], gpus[:n], wake_at)
    assert sim.num_completed == n and sim.num_arrived == n
    assert not sim.has_future_events and sim.next_event_s() == float("inf")


def test_next_event_is_the_next_arrival_before_the_run_and_the_first_instant_is_the_first_arrival():
    jobs = [job(0, 5.0, 10.0), job(1, 5.0, 1.0), job(2, 8.0, 1.0)]
    sim = Simulator(Workload("w", tuple(jobs)), _LAYOUT)
    assert sim.env.peek() == float("inf")  # arrivals are no SimPy events
    assert sim.next_event_s() == 5.0 and sim.has_future_events
    assert sim.step_instant() and sim.now_s == 5.0 and list(sim.queue) == [0, 1]
    assert sim.next_event_s() == 8.0
