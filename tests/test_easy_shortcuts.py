"""EASY's shortcuts (schedulers/easy.py) against its full scan: a call that a shortcut answers must take the
decisions the full scan takes, and leave the memo as the full scan leaves it. Each run goes in lockstep with
the same run where the shortcut always declines (the full scan decides every call), comparing the decisions
and the memo after every call, and its schedule is compared with the plain scan's (tests/easy_reference.py);
the shortcut must have answered, with starts and without."""

from __future__ import annotations

from collections import Counter

import numpy as np
from hypothesis import HealthCheck, given, settings

import schedulers.easy as easy_module
from schedulers import POLICIES
from sim.cluster import ClusterLayout
from sim.cluster_spec import ClusterSpec, NodeSpec
from sim.job import Job, Workload
from sim.simulator import Simulator
from tests.easy_reference import easy_reference
from tests.test_invariants import _same_schedule, clusters
from tests.test_shapes_by_first import whole_gpu_workloads


def _memo_state(memo: easy_module._Memo) -> tuple:
    """What of the memo decides later calls (`ending` as a set: its order does not matter; the shadow by its
    counts and its log of changes, or its full copy's per-node whole GPUs free; the shapes filed, by the jobs
    they are filed under that still wait once the call's decisions apply)."""
    if not memo.armed:
        return (False,)
    sh = memo.shadow
    if sh is not None:
        full = None if sh.full is None else list(sh.full.node_whole)
        log = [(sign, p.gpus) for sign, p in sh.log]
        sh = (sh.avail, sh.fit_nodes, sorted(sh.delta.items()), list(sh.pool_sum), log, full)
    ending = sorted(p.gpus for p in memo.ending)
    started = {i for i, _ in memo.decisions}  # (a shape filed under one of them is filed anew next call)
    first = sorted(i for i in memo.shapes.first.values() if i not in started)
    fails = sorted(memo.fails_a.values())
    return (
        memo.head,
        memo.last_job,
        memo.now,
        memo.shadow_s,
        sh,
        memo.ending_s,
        ending,
        memo.spreads_stale,
        first,
        fails,
    )


def _runs(workload: Workload, layout: ClusterLayout) -> tuple[Simulator, Counter]:
    """EASY's run, checked call by call against the run whose `_lone_arrival` always declines; and how often
    the shortcut answered, by decisions."""
    lone = easy_module._lone_arrival
    answered: Counter = Counter()

    def counted(view, memo):
        out = lone(view, memo)
        if out is not None:
            answered[len(out)] += 1
        return out

    sims = [Simulator(workload, layout, None, 1.2) for _ in range(2)]
    memos = [None, None]
    try:
        while True:
            more = [sim.advance() for sim in sims]
            assert more[0] == more[1]
            if not more[0]:
                break
            out = []
            for x, (sim, shortcut) in enumerate(zip(sims, (counted, lambda view, memo: None), strict=True)):
                easy_module._lone_arrival, easy_module._last[0] = shortcut, memos[x]
                out.append(POLICIES["easy"](sim.view()))
                memos[x] = easy_module._last[0]
            assert out[0] == out[1]
            assert _memo_state(memos[0]) == _memo_state(memos[1])
            for sim in sims:
                for d in out[0] if sim is sims[0] else out[1]:
                    sim.start(d)
    finally:
        easy_module._lone_arrival, easy_module._last[0] = lone, None
    return sims[0], answered


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), whole_gpu_workloads())
def test_a_lone_arrival_answered_early_gets_the_full_scans_decisions(spec, workload):
    layout = ClusterLayout(spec)
    fast, _ = _runs(workload, layout)
    plain = Simulator(workload, layout, None, 1.2)
    plain.run(easy_reference)
    assert _same_schedule(fast, plain)


def test_a_lone_arrival_is_answered_early_under_a_long_queue():
    """A deterministic case where the shortcut answers hundreds of calls, starting the new job at some and
    refusing it at others: three nodes of two types under a long queue of mixed shapes."""
    spec = ClusterSpec(
        "c",
        (
            NodeSpec("n0", "A100-80GB", 8, 80.0),
            NodeSpec("n1", "A100-80GB", 4, 80.0),
            NodeSpec("n2", "T4", 4, 16.0),
        ),
    )
    layout = ClusterLayout(spec)
    rng = np.random.default_rng(5)
    accepts = ((), ("T4",), ("A100-80GB",))
    jobs = tuple(
        Job(
            str(i),
            8.0 * i,
            float(rng.integers(2, 80)),
            int(rng.choice([1, 2, 4, 8])),
            gpu_types=accepts[i % 3],
        )
        for i in range(400)
    )
    workload = Workload("w", jobs)
    fast, answered = _runs(workload, layout)
    plain = Simulator(workload, layout, None, 1.2)
    plain.run(easy_reference)
    assert answered[1] > 40 and answered[0] > 80, answered
    assert _same_schedule(fast, plain)
