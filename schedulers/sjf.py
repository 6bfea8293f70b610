"""Shortest-job-first: among waiting jobs that fit now, start the shortest known runtime first (no reservation).

"Runtime" is the known reference runtime (true or estimated, per --runtime_info); ties go to the earlier job.

The rule is a scan of the queue in (runtime, job) order that starts every job that fits on the capacity left.
It is run shape by shape: capacity only shrinks during the scan, so once one job of a shape does not fit, no
later job of that shape does, and the scan's next start is the smallest (runtime, job) among the next jobs of
the shapes still fitting (a heap of each shape's next job). So a scan costs O(shapes scanned + starts x log
shapes), whatever the queue's length, instead of one placement test per waiting job.

Between instants (`_Memo`): when a scan ends, no shape left waiting fits. If the next call finds exactly its
decisions applied since, capacity grew only where jobs released GPUs, so only the shapes that may use those
pools (a shape placed on one node there: that needs no more GPUs than some node of the pool has free; one
spread over the pool's type: no more than the type has free; a fractional shape), and the shapes of jobs that
arrived since that had no job waiting, can fit: the scan starts from those alone, and a call where none is left
returns at once. After a start, the shapes left are mostly refused (the start took the GPUs they were candidates
for): `Plan.refuses` says so from counts, without placing them.
"""

from __future__ import annotations

from collections.abc import Collection
from heapq import heapify, heappop, heappush, heapreplace
from weakref import WeakKeyDictionary, ref

from schedulers.plan import Plan, refusal_counts
from schedulers.shape_registry import ShapeRegistry
from sim.placement import place
from sim.simulator import Decision, View, starts_only
from sim.sorted_list import OnDemandDict

_tuple_new = tuple.__new__  # Decision(...) without the NamedTuple constructor's extra call


@starts_only
def sjf(view: View) -> list[Decision]:
    memo = _last[0]
    if memo is None or memo.jobs() is not view.jobs:
        memo = _memos.get(view.jobs)
        if memo is None:
            memo = _memos[view.jobs] = _Memo(view)
        _last[0] = memo
    candidates = memo.candidates(view)
    if candidates is None:
        candidates = memo.reset(view)
    if not candidates:
        memo.decisions = ()
        return []
    reg = memo.shapes
    heaps = memo.heaps
    if (
        heaps is not None and len(candidates) == 1
    ):  # the memo's heaps, one shape: its jobs in order while they fit
        (s,) = candidates
        h = heaps[id(s)]
        p = place(view.free, *s)  # (the plan's first placement, without a plan: most calls start one job)
        if p is None:
            decisions = []
        elif len(h) == 1:  # its last job (most arrivals start at once)
            decisions = [_tuple_new(Decision, (h[0][1], p))]
            memo.forget(s)
        else:
            plan = Plan(view.free)
            plan.add(heappop(h)[1], p)
            decisions = plan.decisions
            while not plan.exhausted():
                p = plan.place(s)
                if p is None:
                    break
                plan.add(heappop(h)[1], p)
                if not h:
                    memo.forget(s)
                    break
        return _end_call(memo, view, decisions)
    plan = Plan(view.free)
    if heaps is None:  # the simulator's (runtime, job) lists
        by_shape_runtime = view.queue_by_shape_runtime
        # (next (runtime, job) of the shape, position of that entry, the shape's entries, the shape); runtimes
        # of equal shapes never tie on the job, so the tuples compare on their first items alone
        heads = []
        for s in candidates:
            entries = by_shape_runtime[s]
            heads.append((entries[0], 0, entries, s))
        heapify(heads)
        while heads and not plan.exhausted():
            entry, pos, entries, s = heads[0]
            p = plan.place(s)
            if p is None:  # the shape no longer fits: none of its jobs does for the rest of the scan
                heappop(heads)
                continue
            plan.add(entry[1], p)
            pos += 1
            if pos < len(entries):
                heapreplace(heads, (entries[pos], pos, entries, s))
            else:  # its last job starts: the shape no longer waits
                heappop(heads)
                reg.drop(s)
    else:  # the memo's heaps: the same scan, each start popped from its shape's heap
        heads = []
        for s in candidates:
            h = heaps[id(s)]
            heads.append((h[0], s, h))
        heapify(heads)
        counts, refusals = memo.counts, {}
        while heads and not plan.exhausted():
            entry, s, h = heads[0]
            # after a start most shapes left are refused (it took the GPUs they were candidates for): from
            # counts where they say so, else by placing
            if plan.decisions:
                c = counts.get(id(s), counts)
                if c is counts:
                    c = counts[id(s)] = refusal_counts(s)
                if c is not None and plan.refuses(s, *c, refusals):
                    heappop(heads)
                    continue
            p = plan.place(s)
            if p is None:
                heappop(heads)
                continue
            plan.add(entry[1], p)
            heappop(h)
            if h:
                heapreplace(heads, (h[0], s, h))
            else:
                heappop(heads)
                memo.forget(s)
    return _end_call(memo, view, plan.decisions)


def _end_call(memo: _Memo, view: View, decisions: list[Decision]) -> list[Decision]:
    """Note what the live state must look like once `decisions` are applied, and register the shapes that
    arrived with no job of theirs waiting and still wait (registered only now)."""
    new = memo.new
    if new:
        heaps, reg = memo.heaps, memo.shapes
        for s in new:
            if id(s) in heaps:
                reg.add(s)
        new.clear()
    free = view.free
    memo.takes = free.version - free.gives + len(decisions)
    memo.queued -= len(decisions)
    memo.decisions = decisions
    return decisions


class _Memo:
    """One run's memory between SJF calls: the end of the last call (every shape still waiting then, `shapes`,
    did not fit on the capacity left) and what the live state must look like if exactly its decisions were
    applied since, with completions and arrivals only.

    While that has held since the run's first call, the memo also keeps each waiting shape's jobs as a heap of
    (runtime, job) (`heaps`), so that the simulator never has to keep its own per-shape sorted lists
    (`View.queue_by_shape_runtime`, built only once read) up to date: two sorted-list updates a job. After any
    other change (`reset` a second time) it reads the simulator's lists from then on."""

    __slots__ = ("jobs", "armed", "resets", "free", "by_shape", "takes", "gives", "pool_gives", "decisions",
                 "last_job", "queued", "shapes", "heaps", "new", "counts")  # fmt: skip

    def __init__(self, view: View):
        self.jobs = ref(view.jobs)
        self.armed = False  # whether the fields below describe the last call's end
        self.resets = 0
        self.shapes = ShapeRegistry()  # the shapes waiting at the last call's end (once armed)
        self.heaps: dict[int, list[tuple[float, int]]] | None = None  # id(shape) -> heap of (runtime, job)
        # with the heaps: the shapes of this call's arrivals that had no job waiting (candidates, not registered
        # yet: most start their job at once, and registering a shape costs a store per pool it may use)
        self.new: list[tuple] = []
        self.counts: dict[int, tuple | None] = {}  # id(shape) -> refusal_counts(shape)

    def forget(self, s: tuple) -> None:
        """The heaps' shape `s` has no job left waiting: forgotten."""
        key = id(s)
        if key in self.shapes.live:  # (most such shapes arrived with this call and were never registered)
            self.shapes.drop(s)
        del self.heaps[key]

    def reset(self, view: View) -> list[tuple]:
        """Forget the last call: every shape waiting may fit (returned), and registered from now on."""
        free = view.free
        self.armed = True
        self.free = free
        self.by_shape = by_shape = view.queue_by_shape
        self.gives = free.gives
        self.pool_gives = list(free.pool_gives)
        queue = view.queue
        # jobs that arrive later have larger indices than every job waiting now (none waiting: any index)
        self.last_job = next(reversed(queue)) if queue else -1
        self.queued = len(queue)
        self.takes = free.version - free.gives
        self.resets += 1
        if self.resets == 1 and type(view.queue_by_shape_runtime) is OnDemandDict:
            key = view.queue_key_s
            self.heaps = {id(s): [(key[i], i) for i in members] for s, members in by_shape.items()}
            for h in self.heaps.values():
                heapify(h)
        else:
            self.heaps = None
        self.new.clear()
        reg = self.shapes
        reg.clear()
        shapes = list(by_shape)
        for s in shapes:
            reg.add(s)
        return shapes

    def candidates(self, view: View) -> Collection[tuple] | None:
        """The shapes that may fit now (a dict's values: no list built), if exactly the last call's decisions were applied since (and nothing
        but completions and arrivals happened), and the memo brought up to date for the arrivals and
        releases since; else None (scan every shape)."""
        free = view.free
        if not self.armed or self.free is not free or free.version - free.gives != self.takes:
            return None
        if self.by_shape is not view.queue_by_shape:
            return None  # not the simulator's own queue (a view with some jobs held back, e.g.)
        placements = view.placements
        for i, p in self.decisions:
            if placements[i] is not p:
                return None
        queue = view.queue
        reg = self.shapes
        out: dict[int, tuple] = {}
        # the queue grows only by arrivals and preempted jobs coming back, and shrinks only by starts (this
        # memo's decisions: checked above): the same length means neither happened
        if len(queue) != self.queued:
            last_job = self.last_job
            live = reg.live
            shape = view.jobs.shape
            heaps = self.heaps
            key_s = view.queue_key_s
            new = self.new
            arrived = 0
            for i in reversed(queue):
                if i <= last_job:
                    break
                arrived += 1
                s = shape[i]
                key = id(s)
                if key in live:
                    if heaps is not None:
                        heappush(heaps[key], (key_s[i], i))
                elif heaps is None:  # no job of its shape waited: one not known not to fit
                    out[key] = s
                    reg.add(s)
                elif key in out:  # (an earlier arrival of this call)
                    heappush(heaps[key], (key_s[i], i))
                else:
                    out[key] = s
                    heaps[key] = [(key_s[i], i)]
                    new.append(s)
            if len(queue) != self.queued + arrived:
                return None  # a job came back to the queue (preempted)
            self.queued += arrived
            self.last_job = next(reversed(queue))
        gives = free.gives
        if gives == self.gives:
            return out.values()
        self.gives = gives
        seen = self.pool_gives
        one_node, spread = reg.one_node, reg.spread
        pool_type, type_whole, pool_free = free.layout.pool_type, free.type_whole, free.pool_free
        for q, now in enumerate(free.pool_gives):
            if now == seen[q]:
                continue
            seen[q] = now
            # a shape spread over the pool's type that needs more GPUs than the type has free now did not fit
            # before either; likewise a shape placed on one node that needs more GPUs than any node of the pool
            # has free now (no node of the pool had them: it would have fitted)
            type_free = type_whole[pool_type[q]]
            by_k = spread.get(q)
            if by_k:
                for k, registered in by_k:
                    if k > type_free:
                        break
                    out.update(registered)
            by_k = one_node.get(q)
            if by_k:
                by_c = pool_free[q]  # nodes by whole GPUs free
                most = len(by_c) - 1
                if most > type_free:  # (no node has more free than its type)
                    most = type_free
                while most and not by_c[most]:
                    most -= 1
                for k, registered in by_k:
                    if k > most:
                        break
                    out.update(registered)
        out.update(reg.always)
        return out.values()


# each run's memo, by its job table; the last one looked up first
_memos: WeakKeyDictionary = WeakKeyDictionary()
_last: list[_Memo | None] = [None]
