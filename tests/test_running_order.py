"""The simulator's `running` list (sorted (estimated end, job) pairs, with `running_whole_gpus` and `running_type` in
its order) while completions at its head skip the bisection: at every policy call it equals a plain model built
from the jobs running then (tied ends, infinite estimates, preemptions); NaN estimates are refused (a NaN end
would break the order the bisections rely on)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sim.cluster import FULL, ClusterLayout
from sim.cluster_spec import parse_cluster_spec
from sim.job import Workload
from sim.placement import place
from sim.simulator import Decision, Preempt, Simulator
from tests.helpers import job

_LAYOUTS = (
    ClusterLayout(parse_cluster_spec("2xA100-80GB:2"), uniform_speed=True),
    ClusterLayout(parse_cluster_spec("1xA100-80GB:2,1xV100-32GB:2")),  # two speeds: ends that are no integers
)


def _plain_running(sim: Simulator) -> tuple[list, list, list]:
    """`running` and its parallel lists rebuilt from scratch: every job whose run is in flight, by (estimated end,
    job); its whole GPUs (0 for a fractional job) and its GPU type."""
    jobs = sorted((sim._est_end[i], i) for i, ev in enumerate(sim._event) if ev is not None)
    whole = [len(sim.placements[i].gpus) if sim.placements[i].milli == FULL else 0 for _, i in jobs]
    return jobs, whole, [sim.placements[i].type_idx for _, i in jobs]


def _run_checked(workload: Workload, layout: ClusterLayout, known: np.ndarray, preempt_every: int) -> int:
    """Run a first-fit policy that preempts the highest-indexed running job at every `preempt_every`-th call
    (0: never), checking at each call that `running` and its parallel lists equal `_plain_running`; returns the
    number of completions that found their job at `running`'s head."""
    sim = Simulator(workload, layout, known)
    calls = [0]

    def policy(view):
        calls[0] += 1
        assert (list(view.running), list(view.running_whole_gpus), list(sim.running_type)) == _plain_running(
            sim
        )
        out = []
        if preempt_every and calls[0] % preempt_every == 0 and view.running:
            out.append(Preempt(max(i for _, i in view.running)))
        free = view.free.copy()
        for i in view.queue:
            if out and i == out[0].job:
                continue
            p = place(free, *view.jobs.shape[i])
            if p is not None:
                free.take(p)
                out.append(Decision(i, p))
        return out

    heads = [0]
    real = sim._on_complete

    def on_complete(event):  # (counts the head removals, then completes as the simulator does)
        i = event._value
        if sim._event[i] is event and sim.running[0][1] == i:
            heads[0] += 1
        real(event)

    sim._complete_cbs = [on_complete]
    sim.run(policy)
    assert sim.running == [] and sim.running_whole_gpus == [] and sim.running_type == []
    assert sim.num_completed == len(workload.jobs)
    return heads[0]


_estimate = st.one_of(st.integers(0, 6).map(float), st.sampled_from([math.inf, 0.5, 2.5]))


@settings(max_examples=150, deadline=None)
@example(  # equal estimated ends, the second job completing first while a job waits: not the head's entry
    rows=[(0, 4, 1, 4.0), (0, 2, 1, 4.0), (0, 1, 2, 9.0), (0, 1, 2, 1.0), (0, 1, 2, 1.0)],
    exact=False,
    typed=False,
    preempt_every=0,
)
@given(
    rows=st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 6), st.integers(1, 2), _estimate),
        min_size=1,
        max_size=30,
    ),
    exact=st.booleans(),
    typed=st.booleans(),
    preempt_every=st.sampled_from([0, 0, 3, 5]),
)
def test_running_equals_the_plain_list_of_the_jobs_in_flight_at_every_call(rows, exact, typed, preempt_every):
    rows = sorted(rows, key=lambda r: r[0])
    workload = Workload("t", tuple(job(n, a, r, g) for n, (a, r, g, _) in enumerate(rows)))
    # exact estimates: completions come in `running`'s order (most at its head); else any order
    known = np.array([r if exact else e for _, r, _, e in rows], dtype=float)
    _run_checked(workload, _LAYOUTS[typed], known, preempt_every)


def test_most_completions_with_exact_estimates_are_found_at_the_head():
    jobs = tuple(job(n, 2 * n, 5 + (7 * n) % 11, 1 + n % 2) for n in range(40))
    heads = _run_checked(Workload("t", jobs), _LAYOUTS[1], np.array([j.runtime_s for j in jobs]), 0)
    assert heads >= 30


def test_nan_estimates_are_refused_by_name():
    jobs = (job("a", 0, 5), job("b", 0, 5), job("c", 1, 5))
    with pytest.raises(ValueError, match=r"known_runtime_s .*NaN for job\(s\) b, c"):
        Simulator(Workload("t", jobs), _LAYOUTS[0], np.array([5.0, math.nan, math.nan]))
    with pytest.raises(ValueError, match=r"needs one number per job \(3\), got 2 values"):
        Simulator(Workload("t", jobs), _LAYOUTS[0], np.array([5.0, 5.0]))


def test_tied_ends_order_by_job():
    """Jobs of equal estimated end, started out of index order, sit in `running` by job index within the tie;
    completing, each removes its own entry (the head's or a bisection's)."""
    jobs = [job(0, 0, 4, 2), job(1, 0, 4, 1), job(2, 0, 4, 1)]
    sim = Simulator(Workload("t", tuple(jobs)), _LAYOUTS[0])
    sim.advance()
    view = sim.view()
    free = view.free.copy()
    for i in (2, 1, 0):  # start in reverse index order
        p = place(free, *view.jobs.shape[i])
        free.take(p)
        sim.start(Decision(i, p))
    assert sim.running == [(4.0, 0), (4.0, 1), (4.0, 2)]
    assert sim.running_whole_gpus == [2, 1, 1]
    sim.preempt(Preempt(1))
    assert sim.running == [(4.0, 0), (4.0, 2)]
    assert sim.running_whole_gpus == [2, 1]
    assert sim.advance()  # t = 4: jobs 2 and 0 complete, in their start order (job 2 not at the head)
    assert sim.now_s == 4.0 and list(sim.queue) == [1]
    assert sim.running == [] and sim.running_type == [] and sim.running_whole_gpus == []
