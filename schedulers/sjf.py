"""Shortest-job-first: among waiting jobs that fit now, start the shortest known runtime first (no reservation).

"Runtime" is the known reference runtime (true or estimated, per --runtime_info); ties go to the earlier job.

The rule is a scan of the queue in (runtime, job) order that starts every job that fits on the capacity left.
It is run shape by shape: capacity only shrinks during the scan, so once one job of a shape does not fit, no
later job of that shape does, and the scan's next start is the smallest (runtime, job) among the next jobs of
the shapes still fitting (a heap of each shape's next job). So a scan costs O(shapes waiting + starts x log
shapes), whatever the queue's length, instead of one placement test per waiting job.

Between instants (`_Memo`): when a scan ends, no shape left waiting fits. If the next call finds exactly its
decisions applied since, capacity grew only where jobs released GPUs, so only the shapes that may use those
pools (and, for a shape placed on one node, that need no more GPUs than some node of the pool has free), and
the shapes of jobs that arrived since, can fit: the scan starts from those alone.
"""

from __future__ import annotations

from heapq import heapify, heappop, heapreplace
from weakref import WeakKeyDictionary, ref

from schedulers.plan import Plan
from sim.cluster import FULL
from sim.placement import _options
from sim.simulator import Decision, View


def sjf(view: View) -> list[Decision]:
    plan = Plan(view.free)
    by_shape_runtime = view.queue_by_shape_runtime
    memo = _MEMO.pop(view.jobs, None)
    candidates = None if memo is None else memo.candidates(view)
    scan_all = candidates is None
    if scan_all:
        candidates = by_shape_runtime.keys()
    # (next (runtime, job) of the shape, position of that entry, the shape's entries); runtimes of equal
    # shapes never tie on the job, so the tuples compare on their first items alone
    heads = [(entries[0], 0, entries) for entries in map(by_shape_runtime.__getitem__, candidates)]
    heapify(heads)
    shape = view.jobs.shape
    while heads and not plan.exhausted():
        entry, pos, entries = heads[0]
        i = entry[1]
        p = plan.place(shape[i])
        if p is None:  # the shape no longer fits: none of its jobs does for the rest of the scan
            heappop(heads)
            continue
        plan.add(i, p)
        pos += 1
        if pos < len(entries):
            heapreplace(heads, (entries[pos], pos, entries))
        else:
            heappop(heads)
    _remember(view, plan.decisions, memo, scan_all)
    return plan.decisions


class _Memo:
    """The end of one SJF call: every shape still waiting then did not fit on the capacity left."""

    __slots__ = ("jobs", "free", "by_shape", "takes", "pool_gives", "decisions", "last_job", "queued", "by_pool",
                 "seen")  # fmt: skip

    def candidates(self, view: View) -> list[tuple] | None:
        """The shapes that may fit now, if exactly this call's decisions were applied since (and nothing but
        completions and arrivals happened); else None (scan every shape)."""
        free = view.free
        if self.jobs() is not view.jobs or self.free is not free or free.version - free.gives != self.takes:
            return None
        if self.by_shape is not view.queue_by_shape:
            return None  # not the simulator's own queue (a view with some jobs held back, e.g.)
        placements = view.placements
        for i, p in self.decisions:
            if placements[i] is not p:
                return None
        by_shape = view.queue_by_shape
        shape = view.jobs.shape
        out: dict[int, tuple] = {}
        arrived = 0
        for i in reversed(view.queue):
            if i <= self.last_job:
                break
            arrived += 1
            s = shape[i]
            if by_shape[s][0] > self.last_job:  # none of its jobs waited then: a shape not known not to fit
                out[id(s)] = s
                self._add(s)
        if len(view.queue) != self.queued + arrived:
            return None  # a job came back to the queue (preempted)
        for q, (now, then) in enumerate(zip(free.pool_gives, self.pool_gives, strict=True)):
            if now != then:
                # a shape placed on one node that needs more GPUs than any node of the pool has free now did
                # not fit before either (no node of the pool had them: it would have fitted)
                by_c = free.pool_free[q]
                most = next((c for c in range(len(by_c) - 1, 0, -1) if by_c[c]), 0)
                for k, s in self.by_pool.get(q, ()):
                    if k <= most and s in by_shape:
                        out[id(s)] = s
        return list(out.values())

    def _add(self, s: tuple) -> None:
        """Register shape s under each pool it may use, with the GPUs one node of the pool must have free for
        it to fit there (0 when that does not decide: fractional shapes and shapes with a spread option)."""
        if id(s) not in self.seen:
            self.seen.add(id(s))
            elig, k, milli, _, pace = s
            one_node = milli == FULL and all(o.multi_type < 0 for o in _options(elig, k, pace))
            for t in elig.types:
                for q in elig.type_pools[t]:
                    self.by_pool.setdefault(q, []).append((k if one_node else 0, s))


_MEMO: WeakKeyDictionary = WeakKeyDictionary()  # JobTable -> _Memo of the run's last call


def _remember(view: View, decisions: list[Decision], old: _Memo | None, scanned_all: bool) -> None:
    """Keep this call's end for the next call (see _Memo)."""
    if not view.queue_by_shape:
        return
    free = view.free
    m = _Memo()
    m.jobs = ref(view.jobs)
    m.free = free
    m.by_shape = view.queue_by_shape
    m.takes = free.version - free.gives + len(decisions)
    m.pool_gives = list(free.pool_gives)
    m.decisions = decisions
    m.last_job = next(reversed(view.queue))
    m.queued = len(view.queue) - len(decisions)
    m.by_pool, m.seen = ({}, set()) if old is None else (old.by_pool, old.seen)
    if scanned_all:  # every shape waiting may have to be scanned again (a full scan registers each)
        for s in view.queue_by_shape:
            m._add(s)
    _MEMO[view.jobs] = m
