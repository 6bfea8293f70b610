"""Shortest-job-first: among waiting jobs that fit now, start the shortest known runtime first (no reservation).

"Runtime" is the known reference runtime (true or estimated, per --runtime_info); ties go to the earlier job.

The rule is a scan of the queue in (runtime, job) order that starts every job that fits on the capacity left.
It is run shape by shape: capacity only shrinks during the scan, so once one job of a shape does not fit, no
later job of that shape does, and the scan's next start is the smallest (runtime, job) among the next jobs of
the shapes still fitting (a heap of each shape's next job). So a scan costs O(shapes waiting + starts x log
shapes), whatever the queue's length, instead of one placement test per waiting job.

Between instants (`_Memo`): when a scan ends, no shape left waiting fits. If the next call finds exactly its
decisions applied since, capacity grew only where jobs released GPUs, so only the shapes that may use those
pools (a shape placed on one node there: that needs no more GPUs than some node of the pool has free; one
spread over the pool's type: no more than the type has free), and the shapes of jobs that arrived since, can
fit: the scan starts from those alone.
"""

from __future__ import annotations

from heapq import heapify, heappop, heapreplace
from weakref import ref

from schedulers.plan import Plan
from sim.cluster import FULL
from sim.placement import _options
from sim.simulator import Decision, View


def sjf(view: View) -> list[Decision]:
    plan = Plan(view.free)
    by_shape_runtime = view.queue_by_shape_runtime
    memo = _last[0]
    if memo is None or memo.jobs() is not view.jobs:
        memo = _last[0] = _Memo(view)
    candidates = memo.candidates(view)
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
    memo.remember(view, plan.decisions, scan_all)
    return plan.decisions


class _Memo:
    """One run's memory between SJF calls: the shapes seen, by the pools they may use (`_add`), and the end of
    the last call (`remember`): every shape still waiting then did not fit on the capacity left."""

    __slots__ = ("jobs", "armed", "free", "by_shape", "takes", "gives", "pool_gives", "decisions", "last_job",
                 "queued", "by_pool", "entries")  # fmt: skip

    def __init__(self, view: View):
        self.jobs = ref(view.jobs)
        self.armed = False  # whether the fields below describe the last call's end
        self.by_pool: dict[int, dict[int, tuple[int, bool, tuple]]] = {}  # pool -> id(shape) -> its entry
        self.entries: dict[int, list[tuple[int, tuple]]] = {}  # id(shape) -> (pool, entry) of each pool

    def remember(self, view: View, decisions: list[Decision], scanned_all: bool) -> None:
        """Keep this call's end for the next call."""
        by_shape = view.queue_by_shape
        if not by_shape:
            self.armed = False  # the next call scans only the jobs that arrive meanwhile
            return
        free = view.free
        self.armed = True
        self.free = free
        self.by_shape = by_shape
        self.takes = free.version - free.gives + len(decisions)
        self.gives = free.gives
        self.pool_gives = list(free.pool_gives)
        self.decisions = decisions
        self.last_job = next(reversed(view.queue))
        self.queued = len(view.queue) - len(decisions)
        if scanned_all:  # every shape waiting may have to be scanned again (a full scan registers each)
            for s in by_shape:
                self._add(s)

    def candidates(self, view: View) -> list[tuple] | None:
        """The shapes that may fit now, if exactly the last call's decisions were applied since (and nothing
        but completions and arrivals happened); else None (scan every shape)."""
        free = view.free
        if not self.armed or self.free is not free or free.version - free.gives != self.takes:
            return None
        if self.by_shape is not view.queue_by_shape:
            return None  # not the simulator's own queue (a view with some jobs held back, e.g.)
        placements = view.placements
        for i, p in self.decisions:
            if placements[i] is not p:
                return None
        by_shape = view.queue_by_shape
        shape = view.jobs.shape
        last_job = self.last_job
        out: dict[int, tuple] = {}
        arrived = 0
        for i in reversed(view.queue):
            if i <= last_job:
                break
            arrived += 1
            s = shape[i]
            if by_shape[s][0] > last_job:  # none of its jobs waited then: a shape not known not to fit
                out[id(s)] = s
                self._add(s)
        if len(view.queue) != self.queued + arrived:
            return None  # a job came back to the queue (preempted)
        if free.gives == self.gives:
            return list(out.values())
        pool_type = free.layout.pool_type
        for q, (now, then) in enumerate(zip(free.pool_gives, self.pool_gives, strict=True)):
            if now != then:
                # a shape placed on one node that needs more GPUs than any node of the pool has free now did
                # not fit before either (no node of the pool had them: it would have fitted); likewise a shape
                # spread over the pool's type that needs more GPUs than the type has free
                by_c = free.pool_free[q]
                most = next((c for c in range(len(by_c) - 1, 0, -1) if by_c[c]), 0)
                type_free = free.type_whole[pool_type[q]]
                registered = self.by_pool.get(q)
                if not registered:
                    continue
                gone = []
                for key, (k, spread, s) in registered.items():
                    if s not in by_shape:
                        gone.append(key)  # registered again (`_add`) when a job of it arrives
                    elif k <= type_free if spread else k <= most:
                        out[key] = s
                for key in gone:
                    del registered[key]
        return list(out.values())

    def _add(self, s: tuple) -> None:
        """Register waiting shape s under each pool it may use, as (GPUs, spread, s): a whole-GPU shape of k
        GPUs placed on one node of the pool's type needs a node of the pool with k whole GPUs free, (k, False);
        one spread over the pool's type needs k whole GPUs free on that type, (k, True); a fractional shape may
        fit wherever capacity was released, (0, False). A pool's shapes that no longer wait are dropped when
        it is next looked at."""
        key = id(s)
        entries = self.entries.get(key)
        if entries is None:
            elig, k, milli, _, pace = s
            whole = milli == FULL
            spread_types = {o.multi_type for o in _options(elig, k, pace)} if whole else ()
            entries = self.entries[key] = [
                (q, (k, t in spread_types, s) if whole else (0, False, s))
                for t in elig.types
                for q in elig.type_pools[t]
            ]
        by_pool = self.by_pool
        for q, entry in entries:
            registered = by_pool.get(q)
            if registered is None:
                registered = by_pool[q] = {}
            registered[key] = entry


# the memo of the last run that called sjf (one slot: runs called in turn only lose their memos' speed-up)
_last: list[_Memo | None] = [None]
