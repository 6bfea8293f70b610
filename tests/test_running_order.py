"""The simulator's `running` list when a completing job is found at its head without a bisection
(`_running_sorted`), against the same run in which every completion bisects (what every run did before): the
same list, `running_whole_gpus` and `running_type` at every policy call, with tied ends, NaN and infinite
estimates, and preemptions. (A NaN estimate breaks the tuples' order: a later job can be inserted after it and a
completion then removes another job's entry, so such a run ends in an error or with wrong lists; from the first
NaN on the bisection decides again, so the run does exactly what it did before.)"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from sim.cluster import ClusterLayout
from sim.cluster_spec import parse_cluster_spec
from sim.job import Workload
from sim.placement import place
from sim.simulator import Decision, Preempt, Simulator
from tests.helpers import job

_LAYOUTS = (
    ClusterLayout(parse_cluster_spec("2xA100-80GB:2"), uniform_speed=True),
    ClusterLayout(parse_cluster_spec("1xA100-80GB:2,1xV100-32GB:2")),  # two speeds: ends that are no integers
)


class _AlwaysBisect(Simulator):
    """The simulator as it was: `running` never counts as sorted, so every completion bisects."""

    @property
    def _running_sorted(self):
        return False

    @_running_sorted.setter
    def _running_sorted(self, value):
        pass


def _key(e: float) -> str:
    return repr(e)  # (NaN equals NaN here)


def _run(cls, workload: Workload, layout: ClusterLayout, known: np.ndarray, preempt_every: int):
    """Run a first-fit policy that preempts the highest-indexed running job at every `preempt_every`-th call
    (0: never); records `running` and its parallel lists at each call, then the outcome."""
    sim = cls(workload, layout, known)
    seen = []

    def policy(view):
        if not any(math.isnan(e) for e in known):
            assert list(view.running) == sorted(view.running)
        seen.append(
            (
                view.now_s,
                [(_key(e), i) for e, i in view.running],
                list(view.running_whole_gpus),
                list(sim.running_type),
            )
        )
        out = []
        if preempt_every and len(seen) % preempt_every == 0 and view.running:
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

    try:
        sim.run(policy)
    except (IndexError, ValueError) as e:  # (NaN estimates: see the module's docstring)
        assert any(math.isnan(e) for e in known)
        return seen, type(e).__name__, str(e)
    r = sim.result("t", 0)
    return seen, [_key(x) for x in r.start_s.tolist() + r.end_s.tolist()], ""


_estimate = st.one_of(
    st.integers(0, 6).map(float),
    st.sampled_from([math.nan, math.inf, 0.5, 2.5]),
)


@settings(max_examples=150, deadline=None)
@example(  # equal estimated ends, the second job completing first while a job waits: not the head's entry
    rows=[(0, 4, 1, 4.0), (0, 2, 1, 4.0), (0, 1, 2, 9.0), (0, 1, 2, 1.0), (0, 1, 2, 1.0)],
    exact=False,
    typed=False,
    preempt_every=0,
)
@example(  # a NaN estimate, then jobs inserted after it: the head's job completes, the bisection misses it
    rows=[(0, 1, 1, 2.0), (0, 5, 1, math.nan), (0, 5, 1, 1.0), (0, 5, 1, 1.5)],
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
def test_head_removal_keeps_the_bisections_list(rows, exact, typed, preempt_every):
    rows = sorted(rows, key=lambda r: r[0])
    workload = Workload("t", tuple(job(n, a, r, g) for n, (a, r, g, _) in enumerate(rows)))
    # exact estimates: completions come in `running`'s order (most at its head); else any order
    known = np.array([r if exact else e for _, r, _, e in rows], dtype=float)
    layout = _LAYOUTS[typed]
    assert _run(Simulator, workload, layout, known, preempt_every) == _run(
        _AlwaysBisect, workload, layout, known, preempt_every
    )


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
