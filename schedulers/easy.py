"""EASY backfilling: FCFS plus one reservation for the first blocked job; later jobs start only if they cannot delay it.

At each decision instant: start jobs in arrival order while they fit. The first job that does not fit (the
head) gets a reservation. Every running job (and every job started this instant) has an estimated end, now for
a job that overran its estimate; the shadow time is the earliest such end at which the head can be placed with
the core's placement rule once every job ending by then is released (all jobs ending at that same instant
included, so the result does not depend on the order of jobs in the workload), and the shadow state is the free
capacity at that time. A later job that fits now is backfilled
(a) on its preferred placement (sim/placement.py's `place`) if it is estimated to end there by the shadow time
    (the preferred placement is the fastest free now, so a job that fails this fails it everywhere), else
(b) on the first of its alternative placements (sim/placement.py's `alternatives`: every free node of each
    one-node option in best-fit order, each free spread, fractional jobs the best-fit GPU of each speed; all in
    the rule's preference order) after which the head still fits in the shadow state: the heterogeneous
    generalisation of EASY's "extra nodes". A spread whose first placement (most-free nodes first) would delay
    the head is followed by the spreads of its type that each keep one of the head's options free
    (`_protecting_spread`), so a job that can only spread is refused only when every spread of it would delay
    the head. Its GPUs then stay removed from the shadow state for the rest of the scan. A job with no such
    placement is refused.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from heapq import heapify, heappop, heappush
from itertools import accumulate, count, islice
from weakref import ref

from schedulers.plan import Plan, refusal_counts
from schedulers.run_facts import run_facts
from schedulers.shadow import CountShadow
from schedulers.shapes_by_first import ShapesByFirst
from sim.cluster import FULL, FreeState, Placement
from sim.placement import _options, alternative_placement, effective_speed, fit_type, place, spans_nodes_on
from sim.simulator import Decision, View, starts_only

_AFTER_ALL = 1 << 62  # larger than any job index
_INF = float("inf")
_tuple_new = tuple.__new__  # Decision(...) without the NamedTuple constructor's extra call


@starts_only
def easy_backfill(view: View) -> list[Decision]:
    jt = view.jobs
    now = view.now_s
    shape = jt.shape
    memo = _last[0]
    if memo is None or memo.jobs() is not jt:
        memo = _last[0] = _Memo(jt)
    head, kept = -1, None
    queue = view.queue
    tried = (
        memo.armed and memo.shadow is not None and now < memo.shadow_s and next(iter(queue), -1) == memo.head
    )
    if tried:
        # the reserved head still waits first: if the memo holds, it cannot fit before its shadow time (see
        # `_Memo`), so it is not placed again
        kept = memo.still_valid(view, memo.head)
        if kept is not None:
            if not kept and memo.only_arrivals_rescanned():
                decisions = _lone_arrival(view, memo)
                if decisions is not None:
                    return decisions
            head = memo.head
    plan = Plan(view.free)
    if head < 0:
        for i in queue:
            p = plan.place(shape[i])
            if p is None:
                head = i
                break
            plan.add(i, p)
        if head < 0:
            memo.armed = False
            return plan.decisions
        if not plan.decisions and not tried:  # (a memo that failed above fails again)
            kept = memo.still_valid(view, head)
    last_job = next(reversed(queue))
    if plan.exhausted():  # nothing can start: every waiting job fails
        if kept is None:
            memo.remember(view, head, last_job, plan.decisions, -1.0, None, True, False)
        else:
            memo.refresh(view, last_job)
            memo.remember_idle(view, last_job, plan.decisions)
        return plan.decisions
    shape_runtime = view.queue_by_shape_runtime
    known = jt.known_runtime_s
    fails_a = memo.fails_a
    type_speed = view.layout.type_speed
    speeds = memo.speeds
    # The scan in arrival order, done shape by shape: between two starts the plan and the shadow state do not
    # change, so every job of one shape gets the same placements and the same verdict on test (b), and passing
    # test (a) is monotone in the known runtime; the next job the arrival-order scan would start is the
    # earliest, over all shapes, that passes (a) or (b). The reservation is computed only once some job fits.
    # Each group is (shape, its waiting jobs, a job up to which they are known to fail: `_Memo`).
    tick = count()  # (a unique second key for the heap's entries: no two are ever compared further)
    if kept is None:
        shadow_s, shadow = -1.0, None
        recs = None
        heap = [(m.first(), next(tick), (s, m, -1)) for s, m in view.queue_by_shape.items()]
        heapify(heap)
    else:
        shadow_s, shadow = memo.shadow_s, memo.shadow
        heap, recs = memo.candidates(view, kept, memo.refresh(view, last_job), tick)
    spread_refused_at = _AFTER_ALL  # plan.decisions when (b) first refused a shape with a spread option
    refusals, counted = memo.refusals, None  # (`Plan.refuses`' arguments per shape, and its memo)
    pos = head
    while not plan.exhausted():
        best, best_s, best_p = _AFTER_ALL, None, None
        whole_left = plan.whole_left()  # no whole-GPU shape larger than this can fit
        # the groups in the order of their first job after `pos`, lazily (`_Memo.candidates`): each entry's
        # first number is at most that job (a lower bound, exact when above `lo`); so once a job passes, no
        # shape whose first job comes later is tested. A shape that does not fit, or has no job after `pos`,
        # has none for the rest of the call (capacity only shrinks, `pos` only grows): it is dropped.
        again = []  # the groups tested this round that stay in the scan
        while heap and heap[0][0] < best:
            bound, _, g = heappop(heap)
            if g.__class__ is list:  # a bucket's cursor: its next shape becomes a group
                bucket, at, k = g
                if k > whole_left:
                    continue  # (its shapes are all whole-GPU shapes of k GPUs)
                key, s = bucket[at]
                if at + 1 < len(bucket):
                    g[1] = at + 1
                    heappush(heap, (bucket[at + 1][0], next(tick), g))
                old = recs.get(id(s))
                if old is not None and key > old[2]:
                    continue  # a group already, whose jobs from `key` (its first) on are scanned
                g = recs[id(s)] = (s, memo.shapes.members[id(s)], -1)
            s, members, failing = g
            if failing >= 0 and recs[id(s)] is not g:
                continue  # (a bucket made it a group with every job)
            if s[1] > whole_left and s[2] == FULL:
                continue
            lo = pos if pos > failing else failing
            if bound <= lo:
                first = members.first_after(lo, _AFTER_ALL)
                if first != _AFTER_ALL:
                    heappush(heap, (first, next(tick), g))
                continue
            first = bound
            if plan.decisions and s[2] == FULL:  # after a start most shapes are refused: told from counts
                c = refusals.get(id(s))
                if c is None:
                    c = refusals[id(s)] = refusal_counts(s)
                if counted is None:
                    counted = {}
                if plan.refuses(s, *c, counted):
                    continue
            t = plan.fit_type(s)
            if t < 0:
                continue
            if shadow is None:
                started = [(now + view.duration_on(d.job, d.placement), d.placement) for d in plan.decisions]
                base = plan.snapshot()
                if base is view.free:  # (the shadow may outlive this call: its base must never change)
                    base = base.copy()
                shadow_s, shadow = reservation(view, base, head, started)
            again.append((first, next(tick), g))
            # the preferred placement is the fastest free now: if a job does not end by the shadow time on it,
            # it does not on any other
            by_t = speeds.get(id(s))
            if by_t is None:
                by_t = speeds[id(s)] = _speeds(s, type_speed)
            speed = by_t[t]
            if now + known[first] / speed <= shadow_s:  # (a) ends by the shadow time
                best, best_s, best_p = first, s, None
                continue
            harmless = _harmless(plan, shadow, s)
            if harmless is not None:  # (b) leaves room for the head at the shadow time
                best, best_s, best_p = first, s, harmless
                continue
            if spread_refused_at == _AFTER_ALL and _has_spread(s):
                spread_refused_at = len(plan.decisions)
            # later jobs of the shape can only pass (a), and those that do are its shortest; its jobs from
            # `first` up to an earlier call's known failures fail (a) again (`_Memo.fails_a`)
            f = fails_a.get(id(s))
            valid = (
                f is not None and f[0] <= first < f[1] and f[2] == shadow_s and f[3] == speed and now >= f[4]
            )
            j, hi = _earliest_passing(
                members,
                first,
                f[1] - 1 if valid else first,
                shape_runtime[s],
                lo,
                best,
                known,
                now,
                speed,
                shadow_s,
            )
            a, b = (f[0], max(hi, f[1])) if valid else (first, hi)
            fails_a[id(s)] = (a, b, shadow_s, speed, now)
            if j < best:
                best, best_s, best_p = j, s, None
        for e in again:
            heappush(heap, e)
        if best_s is None:
            break
        if best_p is None:
            plan.add(best, plan.place(best_s))
        else:
            p = best_p()
            plan.add(best, p)
            shadow.take(p)
        pos = best
    # a spread refused under (b) before a later start may pass at the next instant (its placement moved)
    stale = len(plan.decisions) > spread_refused_at
    memo.remember(view, head, last_job, plan.decisions, shadow_s, shadow, kept is None, stale)
    return plan.decisions


def _lone_arrival(view: View, memo: _Memo) -> list[Decision] | None:
    """The call's decisions when the memo holds, no job completed since the last call and at most one job
    arrived (`_Memo.only_arrivals_rescanned` true): that job is the scan's only candidate, and it starts (on
    the placement the scan would give it) if it fits and passes (a) or (b); None where the scan must decide
    (several jobs arrived, or the one that fits fails both tests: the scan records (a)'s failures)."""
    queue = view.queue
    last = reversed(queue)
    i = next(last)
    if i <= memo.last_job:  # no job arrived: none can start
        memo.refresh(view, i)
        memo.remember_idle(view, i, [])
        return []
    if next(last, -1) > memo.last_job:
        return None
    s = view.jobs.shape[i]
    free = view.free
    t = fit_type(free, *s)
    if t < 0:
        memo.refresh(view, i)
        memo.remember_idle(view, i, [])
        return []
    by_t = memo.speeds.get(id(s))
    if by_t is None:
        by_t = memo.speeds[id(s)] = _speeds(s, view.layout.type_speed)
    shadow = memo.shadow
    if view.now_s + view.jobs.known_runtime_s[i] / by_t[t] <= memo.shadow_s:  # (a)
        p = place(free, *s)
    else:
        harmless = _harmless(Plan(free), shadow, s)  # (b)
        if harmless is None:
            return None
        p = harmless()
        shadow.take(p)
    decisions = [_tuple_new(Decision, (i, p))]
    memo.refile(view)  # (a shape with no other job waiting is not filed: the next `refile` would drop it)
    memo.remember(view, memo.head, i, decisions, memo.shadow_s, shadow, False, False)
    return decisions


class _Memo:
    """What one EASY call leaves for the next, to compute only what changed while the head stays blocked.

    At the end of a call every waiting job up to `last_job` (the last one waiting then) was found unable to
    start: it did not fit, or failed both (a) and (b) (a job that fails at some point of the scan fails at
    every later one: capacity and the shadow only shrink, and `now` only grows; except a job with a spread
    option: a later start can move its spread off the nodes that delayed the head). In a run whose jobs are
    all whole-GPU and whose estimates are exact, if the next call finds the same head blocked and exactly this
    call's decisions applied since, plus the completions of the jobs estimated to end first (`ending`, if that
    is now; jobs end exactly at their estimates), then:
    - the reservation is the same: every job released into the shadow (ending by the shadow time) that
      completed since gave its GPUs to the free state instead; every job this call started by (a) ends by the
      shadow time, so the rebuilt walk releases it where this call's plan still held its GPUs free; every job
      started by (b) ends after it, and the shadow took its GPUs. The shadow is kept as it is (its base is a
      copy of the free state it was computed on, which nothing changes);
    - the head still cannot start before the shadow time: the release walk found it fitting at no earlier
      estimated end, and the capacity free now is at most the walk's by now (the jobs started since hold
      GPUs the walk counted free, and only jobs the walk released by now have completed);
    - a job up to `last_job` still cannot start if no job ended since where it could now go on one node (a
      node of a pool it may use on one node with as many whole GPUs free as it needs) and no job ended since
      on a type it may spread over that now has as many whole GPUs free as it needs: it does not fit, or its
      preferred placement is no faster and (a) fails, or its alternatives are fewer with unchanged verdicts
      and (b) fails. A job with a spread option is scanned again after a call that started a job after
      refusing it (`spreads_stale`), unless the shadow decides (b) from counts alone.
    tests/test_invariants.py checks the decisions against the plain scan (tests/easy_reference.py).
    """

    __slots__ = ("jobs", "allowed", "armed", "free", "by_shape", "version", "now", "head", "last_job", "decisions",
                 "shadow_s", "shadow", "ending_s", "ending", "spreads_stale", "shapes", "fails_a", "speeds",
                 "refusals")  # fmt: skip

    def __init__(self, jt):
        self.jobs = ref(jt)
        fractional, exact = run_facts(jt)
        self.allowed = exact and not fractional  # whether the run allows it (see above)
        self.armed = False  # whether the fields below describe the last call
        self.shapes = ShapesByFirst()  # every shape waiting at the last call's end (once armed)
        # per shape (id): (a, b, shadow time, speed, now): every job of the shape from a to b (excluded) was
        # found to fail (a) with that shadow time and speed at that time; it fails again at any later time
        # (a job's known runtime never changes; jobs arrive in index order, so none joins that range later:
        # only a policy's Preempt puts a job back in the queue, and EASY never preempts)
        self.fails_a: dict[int, tuple[int, int, float, float, float]] = {}
        self.speeds: dict[int, list[float]] = {}  # per shape (id): `_speeds`
        self.refusals: dict[int, tuple] = {}  # per shape (id): `refusal_counts`

    def still_valid(self, view: View, head: int) -> list[Placement] | None:
        """The placements of the jobs that completed since, if this memo holds for `view` (see above)."""
        if not self.armed or self.free is not view.free or head != self.head:
            return None
        if self.by_shape is not view.queue_by_shape:
            return None  # not the simulator's own queue (a view with some jobs held back, e.g.)
        now = view.now_s
        if now < self.now or (self.shadow is not None and self.shadow_s < now):
            return None
        placements = view.placements
        for i, p in self.decisions:
            if placements[i] is not p:
                return None  # this call's decisions were not applied
        if now < self.ending_s:
            completed = []
        elif now == self.ending_s:
            completed = self.ending
        else:
            return None  # called again only after the first estimated end
        if view.free.version != self.version + len(completed):
            return None  # something else changed the free state
        return completed

    def only_arrivals_rescanned(self) -> bool:
        """Whether, when nothing completed since the last call, only the jobs that arrived since are scanned
        (`candidates`: no fractional shape waits, and spread shapes are not all scanned again)."""
        return not self.shapes.always and not self._spreads_rescanned()

    def _spreads_rescanned(self) -> bool:
        """Whether every waiting shape with a spread option is scanned again (see `candidates`)."""
        sh = self.shadow
        # (b) of a spread alternative depends on which nodes the spread takes, unless the shadow decides every
        # whole-GPU shape's (b) from counts alone; with no shadow, every failing job failed to fit
        return self.spreads_stale and not (sh is None or (sh.full is None and sh.whole_type))

    def refresh(self, view: View, last_job: int) -> dict[int, tuple[tuple, int]]:
        """Bring `shapes` up to date after the last call (its decisions were applied, and jobs arrived since, up
        to `last_job`) and return the shapes of the jobs that arrived since: id(shape) -> (shape, its first job
        that arrived)."""
        self.refile(view)
        known = self.last_job
        if last_job <= known:
            return _NONE_ARRIVED
        by_shape = view.queue_by_shape
        shape = view.jobs.shape
        reg = self.shapes
        first = reg.first
        arrived: dict[int, tuple[tuple, int]] = {}
        for i in reversed(view.queue):
            if i <= known:
                break
            s = shape[i]
            arrived[id(s)] = (s, i)  # (the last store is the shape's first job to arrive)
        for key, (s, i) in arrived.items():
            if key not in first:  # (none of its jobs waited: i is its first)
                reg.file(s, i, by_shape[s])
        return arrived

    def refile(self, view: View) -> None:
        """`refresh`'s part for the last call's decisions (applied since): a shape whose first waiting job
        started is filed under its next one, or dropped."""
        by_shape = view.queue_by_shape
        shape = view.jobs.shape
        reg = self.shapes
        first = reg.first
        for i, _ in self.decisions:
            s = shape[i]
            if first.get(id(s)) == i:
                members = by_shape.get(s)
                if members is None:
                    reg.drop(s)
                else:
                    reg.file(s, members.first(), members)

    def candidates(self, view: View, completed: list[Placement], arrived: dict, tick) -> tuple[list, dict]:
        """The scan's groups as a heap of (a lower bound of its first job, `next(tick)`, group), with a cursor
        for each bucket of shapes whose jobs may pass now where they failed (its entry stands for the bucket's
        shapes from the cursor's on: [bucket, position, k]), and the groups made so far (id(shape) -> group).
        A group is (shape, its waiting jobs, a job up to which they are known to fail): the shapes of the jobs
        that arrived since (`refresh`), from `last_job` on, and every shape whose jobs may pass now where they
        failed, from the start; a shape of neither kind is left out."""
        reg = self.shapes
        members_of, first = reg.members, reg.first
        recs: dict[int, tuple] = {}
        heap = []
        stale = self._spreads_rescanned()
        for registered in (reg.always, reg.spreads) if stale else (reg.always,) if reg.always else ():
            for key, s in registered.items():
                g = recs[key] = (s, members_of[key], -1)
                heap.append((first[key], next(tick), g))
        known = self.last_job
        for key, (s, i) in arrived.items():
            if key not in recs:
                g = recs[key] = (s, members_of[key], known)
                heap.append((i, next(tick), g))
        # per pool where jobs completed: the most whole GPUs one of those nodes has free now (a one-node
        # placement on any other node of the pool was free before)
        free = view.free
        node_pool, whole = view.layout.node_pool, free.node_whole
        dirty: dict[int, int] = {}
        for p in completed:
            for n in p.nodes:
                q = node_pool[n]
                if whole[n] > dirty.get(q, -1):
                    dirty[q] = whole[n]
        type_whole, pool_type = free.type_whole, view.layout.pool_type
        for q, c in dirty.items():
            type_free = type_whole[pool_type[q]]  # (>= c)
            for by_k, most in ((reg.spread.get(q, ()), type_free), (reg.one_node.get(q, ()), c)):
                for k, bucket in by_k:  # (k ascending)
                    if k > most:
                        break
                    if bucket:
                        heap.append((bucket[0][0], next(tick), [bucket, 0, k]))
        heapify(heap)
        return heap, recs

    def remember_idle(self, view: View, last_job: int, decisions: list) -> None:
        """`remember` after a call that kept the memo and found no GPU free: no job completed since (one would
        have freed its GPUs) and none starts, so only the time and the last job waiting change (the shadow and
        the first estimated ends stay; no spread was scanned again)."""
        self.now = view.now_s
        self.last_job, self.decisions = last_job, decisions

    def remember(
        self, view: View, head, last_job, decisions, shadow_s, shadow, scanned_all: bool, stale: bool
    ) -> None:
        """Keep this call's facts for the next call (see above), when the run allows it."""
        if not self.allowed:
            self.armed = False
            return
        free = view.free
        self.armed = True
        self.free = free
        self.by_shape = view.queue_by_shape
        self.version = free.version + len(decisions)
        self.now = now = view.now_s
        self.head, self.last_job, self.decisions = head, last_job, decisions
        self.shadow_s, self.shadow = shadow_s, shadow
        self.spreads_stale = stale
        # the jobs estimated to end first, once the decisions apply
        running = view.running
        first = running[0][0] if running else _INF
        ending = []
        duration_on = view.duration_on
        for i, p in decisions:
            end = now + duration_on(i, p)
            if end < first:
                first, ending = end, [p]
            elif end == first:
                ending.append(p)
        placements = view.placements
        self.ending_s = first
        for end, j in running:
            if end != first:
                break
            ending.append(placements[j])
        self.ending = ending
        if scanned_all:  # every shape waiting may be asked for next time
            self.shapes.sync(view.queue_by_shape)


# the memo of the last run that called EASY (one slot: runs called in turn only lose their memos' speed-up)
_last: list[_Memo | None] = [None]
_NONE_ARRIVED: dict = {}  # `refresh`'s answer when no job arrived (never changed)


def _speeds(s: tuple, type_speed: list[float]) -> list[float | None]:
    """Per GPU type, the effective speed of shape s's preferred placement on it (None: a type it may not use)."""
    elig, k, milli, _, pace = s
    return [
        effective_speed(v, spans_nodes_on(elig, k, milli, t), pace) if t in elig.types else None
        for t, v in enumerate(type_speed)
    ]


def _has_spread(s: tuple) -> bool:
    """Whether whole-GPU shape s has a spread option."""
    return any(o.multi_type >= 0 for o in _options(s[0], s[1], s[4]))


def _harmless(plan: Plan, shadow: CountShadow, s: tuple) -> Callable[[], Placement] | None:
    """The first of the shape's alternative placements (sim/placement.py, preference order) after which the
    head still fits in the shadow state (built on demand: most verdicts need no placement), or None.

    One-node alternatives are judged once per (pool, shadow free GPUs of the node) while the shadow is kept as
    counts: the verdict depends on nothing else."""
    if s[2] < FULL:
        for p in plan.alternatives(s):
            if shadow.head_fits_without(p):
                return lambda p=p: p
        return None
    k = s[1]
    by_type = None  # per type, when the type alone decides (`head_fits_without_shape`)
    if shadow.whole_type and shadow.full is None:
        by_type = {t: shadow.head_fits_without_shape(s, t) for t in s[0].types}
        if not any(v is None or v for v in by_type.values()):
            return None
    free = plan.free
    node_type = free.layout.node_type
    verdicts: dict[tuple[int, int], bool] = {}
    for o, n, c in plan.alternative_slots(s):
        fits = None if by_type is None else by_type[node_type[n] if n >= 0 else o.multi_type]
        if fits is None and n < 0:  # a spread: if its first placement delays the head, another may not
            p = alternative_placement(free, o, n, c, k)
            if shadow.head_fits_without(p) or (p := _protecting_spread(free, shadow, s, o.multi_type)):
                return lambda p=p: p
            continue
        if fits is None:
            key = shadow.node_key(n) if n >= 0 else None
            fits = verdicts.get(key) if key is not None else None
            if fits is None:
                if key is not None:  # (counts: no placement is built for the verdict)
                    fits = verdicts[key] = shadow.head_fits_without_gpus_on(n, k)
                else:
                    fits = shadow.head_fits_without(alternative_placement(free, o, n, c, k))
        if fits:
            return lambda o=o, n=n, c=c: alternative_placement(free, o, n, c, k)
    return None


def _protecting_spread(free: FreeState, shadow: CountShadow, s: tuple, t: int) -> Placement | None:
    """A spread of shape `s` over type t (free now; its first spread, most-free nodes first, delays the head)
    that leaves the head one of its options in the shadow state, or None if no spread of s does.

    The head's options are tried in its placement order: on a one-node option, each of its nodes m (ascending)
    with room for the head in the shadow state; on a spread option, its nodes H. The candidate is the spread
    most-free nodes first over t's nodes where m gives at most its shadow GPUs beyond the head's need, or
    where H comes last and gives at most its shadow GPUs beyond the head's need in all. Any spread that keeps
    the head fitting keeps one such option free, and that option's candidate then exists: so a job is refused
    only when every spread of it would delay the head. A candidate equal to the first spread (the option does
    not touch t's nodes) is skipped: it was refused already."""
    elig, k = s[0], s[1]
    nodes = elig.type_nodes[t]
    node_whole, node_pool = free.node_whole, free.layout.node_pool
    slack = sum(node_whole[n] for n in nodes) - k  # free GPUs of t the spread leaves out
    if slack <= 0:
        return None  # it takes every free GPU of t: its first spread is its only one
    h_elig, h_k, h_milli, _, h_pace = shadow.shape
    h_need = 1 if h_milli < FULL else h_k
    for o in _options(h_elig, h_need, h_pace):
        pools = o.pools
        if o.multi_type < 0:
            # (a head with a one-node option keeps per-node counts, or a full copy: `whole_free` applies)
            whole_free = shadow.whole_free
            for m in nodes:
                f = node_whole[m]
                if not f or node_pool[m] not in pools:
                    continue
                room = whole_free(m) - h_need  # GPUs m can give while the head still fits on it
                if room < 0 or not 0 < f - room <= slack:
                    continue
                p = _spread_with(free, nodes, k, t, m, room, ())
                if shadow.head_fits_without(p):
                    return p
        elif o.multi_type == t:
            h_nodes = h_elig.type_nodes[t]
            shared = [n for n in nodes if node_pool[n] in pools]
            if not shared:
                continue
            spare = shadow.spread_spare(pools, h_nodes)
            inside = sum(node_whole[n] for n in shared)
            if spare < 0 or not 0 < inside - spare <= slack:
                continue
            p = _spread_with(free, nodes, k, t, -1, spare, frozenset(shared))
            if shadow.head_fits_without(p):
                return p
    return None


def _spread_with(
    free: FreeState, nodes: list[int], k: int, t: int, capped: int, cap: int, last: frozenset
) -> Placement:
    """k GPUs over `nodes` (of type t), most free first (ties -> lower index), with node `capped` giving at
    most `cap` of its free GPUs, or the nodes in `last` taken after the others and giving at most `cap` in all."""
    whole = free.node_whole
    avail = {n: (min(whole[n], cap) if n == capped else whole[n]) for n in nodes}
    order = sorted(nodes, key=lambda n: (n in last, -avail[n], n))
    gpus: list[int] = []
    used: list[int] = []
    counts: list[int] = []
    left, budget = k, cap
    for n in order:
        c = min(avail[n], left)
        if n in last:
            c = min(c, budget)
            budget -= c
        if c > 0:
            gpus.extend(free.free_gpus_on(n, c))
            used.append(n)
            counts.append(c)
            left -= c
            if not left:
                break
    return Placement(tuple(gpus), tuple(used), FULL, 0, t, -1, tuple(counts))


def _earliest_passing(
    members, first, skip, by_runtime, pos, best, known, now, speed, shadow_s
) -> tuple[int, int]:
    """The earliest job after `pos` (and before `best`, else `best`) whose run ends by `shadow_s`, and a bound
    below which no job from `first` on does (first is the first job after `pos`; the jobs after it up to `skip`
    are known to fail).

    Two exact searches run in lockstep and the first to finish answers: walking `members` (ascending) after
    `skip` until a job passes, and walking the passing prefix of `by_runtime` (runtime order) in full. Either
    can be long (short jobs cluster at the end of a long queue; or many pass), rarely both.
    """
    n_pass = by_runtime.bisect_left(True, key=lambda e: now + e[0] / speed > shadow_s)
    if not n_pass:
        return best, members.last() + 1  # none passes
    found = best
    prefix = islice(by_runtime, n_pass)
    # members first: when they run out, zip stops before taking (and losing) a prefix entry
    for j, (_, i) in zip(members.iter_after(skip), prefix, strict=False):
        if pos < i < found:
            found = i
        if j >= found:
            return found, found
        if now + known[j] / speed <= shadow_s:
            return j, j
    for _, i in prefix:  # the member walk ran out first: the rest of the prefix decides
        if pos < i < found:
            found = i
    return found, min(found, members.last() + 1)  # (jobs that arrive later are not known to fail)


def reservation(
    view: View, free: FreeState, head: int, started: list[tuple[float, Placement]]
) -> tuple[float, CountShadow]:
    """(shadow time, free capacity at that time) for `head`, releasing jobs in order of estimated end.

    `free` is the capacity after this instant's decisions, and must not change while the shadow is used;
    `started` are those decisions' (estimated end, placement); on equal ends, running jobs are released first.
    Returns (inf, capacity with everything released) if the head never fits (it was rejected at the start of
    the run in that case, so this is defensive).
    """
    now = view.now_s
    shadow = CountShadow(free, view.jobs.shape[head])
    if (
        shadow.counts_one_type
        and len(view.layout.type_names) == 1
        and 0 not in view.running_whole_gpus  # no fractional job running or starting
        and all(p.milli == FULL for _, p in started)
    ):
        end = _release_by_counts(view, shadow, started)
    else:
        placements = view.placements
        running = ((end, placements[j]) for end, j in view.running)
        releases = (
            heapq.merge(running, sorted(started, key=lambda e: e[0]), key=lambda e: e[0])
            if started
            else running
        )
        end = shadow.release_until_head_fits(releases, now)
    return (float("inf") if end is None else max(end, now)), shadow


def _release_by_counts(
    view: View, shadow: CountShadow, started: list[tuple[float, Placement]]
) -> float | None:
    """The release walk as a prefix sum over whole-GPU counts, for a one-type cluster whose running jobs all
    hold whole GPUs (every released GPU then counts for the head): the time the head fits, None if never."""
    running, counts = view.running, view.running_whole_gpus
    merged, merged_counts = running, counts
    if started:
        merged, merged_counts, prev = [], [], 0
        for end, p in sorted(started, key=lambda e: e[0]):
            r = bisect_right(running, (end, _AFTER_ALL))
            merged += running[prev:r]
            merged_counts += counts[prev:r]
            merged.append((end, p))
            merged_counts.append(len(p.gpus))
            prev = r
        merged += running[prev:]
        merged_counts += counts[prev:]
    totals = list(accumulate(merged_counts))
    n = bisect_left(totals, shadow.k - shadow.avail)
    if n < len(merged):  # the head fits at that end: release every job ending at the same instant too
        shadow_s = max(merged[n][0], view.now_s)
        n = bisect_right(merged, shadow_s, lo=n, key=lambda e: e[0]) - 1
    placements = view.placements

    def released() -> list[Placement]:
        return [x if isinstance(x, Placement) else placements[x] for _, x in merged[: n + 1]]

    shadow.release_in_bulk(totals[min(n, len(totals) - 1)] if totals else 0, released)
    return merged[n][0] if n < len(merged) else None
