"""Conservative backfilling (Mu'alem & Feitelson, IEEE TPDS 12(6), 2001): every queued job holds a reservation.

At each decision instant the schedule is rebuilt from scratch (the paper's "compression": a job that ends
before its estimate moves every later reservation as early as it can go). The profile is the number of free
whole GPUs per node over future time, from the capacity free now and the estimated end of every running job
(max(estimated end, now): a job that overran its estimate is assumed to end at the next instant, a zero-length
row after the actual capacity now, so a reservation there waits for that job's completion event). Queued jobs,
in arrival order, each take a reservation in the profile:
- whole-GPU job of k GPUs: for each of its placement options (sim/placement.py: one node of a speed group, or
  a spread over one type) the earliest profile row from which its estimated duration on that option fits
  throughout (one node with >= k free GPUs all along; for a spread, k GPUs summed over the type's nodes, each
  counted at its minimum over the interval). The reservation is the option with the EARLIEST ESTIMATED
  COMPLETION (ties -> the placement rule's option order), so a job may wait for a faster type rather than start
  now on a slower one. Within a one-node option the node with the fewest free GPUs at the start (best fit, ties
  -> lower index); within a spread the nodes with the most GPUs free all along first (ties -> lower index).
- fractional job (gpu_milli < 1000), a documented limit: in the profile it reserves a whole GPU (one node of a
  speed group, as above). It may instead start now on a GPU already shared by running fractional jobs if it
  fits there now and is estimated to end by the time that GPU's last resident ends (so it delays no
  reservation), when that completes no later than its whole-GPU reservation. A now-start of a whole-GPU
  reservation takes the best-fit GPU (smallest sufficient free share, ties -> lower index) of the reserved
  node: node free-GPU counts stay exact, since the reserved GPU is then left whole instead.
A job starts now exactly when its reservation starts now; no reservation ever delays an earlier one (each is
made on the capacity left by all earlier ones). In a run with fractional jobs and exact runtimes, a rebuild
that would start some job later than its previous reservation is replaced by one that holds every job's
previous slot until its turn (`cbf_schedule`, `_rebuild_holding`): a fractional job that starts early on a
shared GPU frees its whole-GPU reservation, and a rebuild from scratch could let an earlier job take a later
job's slot. Per-GPU identities are not reserved: GPUs of one node are interchangeable for whole-GPU jobs, so
node counts decide feasibility exactly.

Shortcuts (same decisions; tests/cbf_reference.py has none, and the tests cross-check each against it):
- while every queued job so far starts now on its first option (the fastest; equal speeds in option order: a
  later option of the same speed may tie on completion with the first one starting right after now), the
  reservations so far all start now, so the profile only grows with time, and the next job that can start now
  on its first option gets that reservation without the profile being built;
- the schedule is kept between instants while it provably equals the rebuilt one (`_Kept`);
- with whole-GPU jobs only, an option on which the job starts now ends the search over its options (no later,
  slower option completes sooner or as soon);
- when the estimates are not the true runtimes (a kept schedule would rarely last) a rebuild stops once no job
  left can start now (`_none_can_start`): later reservations only take capacity, so they cannot change this
  instant's starts;
- within one profile (and a kept one's later instants), a search of an option begins at the earliest start
  an earlier search of it found for a run as short or shorter, or is skipped when that start cannot end before
  the best option so far (`_Profile.earliest`): capacity from now on only shrinks as reservations are added.
The profile's rows are short Python lists walked in Python (numpy's fixed cost per call dominated on them).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from heapq import heapify, heappop, heappush
from math import nextafter
from typing import NamedTuple
from weakref import WeakKeyDictionary

import numpy as np

from schedulers.plan import Plan
from schedulers.run_facts import run_facts
from schedulers.run_facts import run_facts as _run_facts  # what the build's shortcuts read (tests force it)
from sim.cluster import FULL, ClusterLayout, FreeState, Placement
from sim.placement import _gpus_on_node, _options, effective_speed
from sim.simulator import Decision, View, starts_only_when

_AFTER_ALL = 1 << 62  # larger than any job index
_tuple_new = tuple.__new__  # a NamedTuple of all its fields without its constructor's extra call
_INF = float("inf")


class Reservation(NamedTuple):
    """Where and when one queued job is planned to run (estimated)."""

    job: int
    start_s: float
    end_s: float
    type_idx: int
    nodes: tuple[int, ...]
    starts_now: bool
    counts: tuple[int, ...] = ()
    """GPUs on each of `nodes` (whole-GPU jobs)"""


def _decides_from_the_view(jobs) -> bool:
    """Whether CBF decides from the view alone in a run of `jobs`: always but with fractional jobs and exact
    runtimes, where it keeps each job's slot between calls (`cbf_schedule`). The kept schedule (`_KEPT`) is a
    shortcut to what a rebuild from scratch gives, so it does not count."""
    any_fractional, exact = run_facts(jobs)
    return not (any_fractional and exact)


@starts_only_when(_decides_from_the_view)
def cbf(view: View) -> list[Decision]:
    # in a run of whole-GPU jobs a kept schedule is taken up here, as `_from_scratch` would take it up (its
    # `whole_run` is the run's fact, fixed per run, read when it was kept), without the checks on the way there
    jt = view.jobs
    kept = _KEPT.get(id(jt))
    if kept is not None and kept.whole_run and kept.jobs is jt:
        del _KEPT[id(jt)]
        arrivals = kept.arrivals_if_valid(view)
        if arrivals is not None:
            return kept.go_on(view, arrivals)
    return cbf_schedule(view)[0]


def cbf_schedule(view: View, want_reservations: bool = False) -> tuple[list[Decision], list[Reservation]]:
    """This instant's starts, and (if asked) every queued job's reservation in arrival order.

    In a run with fractional jobs and exact runtimes, the schedule rebuilt from scratch is kept only if it
    starts no job later than the reservation the previous call gave it; else the rebuild holds each job's
    previous slot (`_rebuild_holding`)."""
    any_fractional, exact = run_facts(view.jobs)
    if not (any_fractional and exact):
        return _from_scratch(view, want_reservations)
    jt = view.jobs
    now = view.now_s
    last = _SLOTS.get(jt)
    prev = last[1] if last is not None and last[0] <= now else {}
    decisions, res = _from_scratch(view, True)
    for r in res:
        was = prev.get(r.job)
        if was is not None and r.start_s > was.start_s >= now:
            decisions, res = _rebuild_holding(view, prev)
            break
    _SLOTS[jt] = (now, {r.job: r for r in res if not r.starts_now})
    return decisions, res if want_reservations else []


_SLOTS: WeakKeyDictionary = WeakKeyDictionary()
"""JobTable -> (time, the future reservations of its last call) in a run with fractional jobs and exact runtimes"""


def _rebuild_holding(view: View, prev: dict[int, Reservation]) -> tuple[list[Decision], list[Reservation]]:
    """The schedule rebuilt in queue order with each job's previous slot (`prev`) held in the profile until its
    turn (a slot that starts before now or no longer fits is not held): at its turn a job gives its slot back
    and takes its earliest-completion reservation as usual, unless that starts later than the slot, which it
    then keeps. So no reservation starts later than the previous one while the capacity it counted on is
    there (exact runtimes)."""
    jt = view.jobs
    now = view.now_s
    plan = Plan(view.free)
    prof = _Profile(view, plan.snapshot(), [], not _has_fractional(view))
    held: dict[int, Reservation] = {}
    for i in view.queue:
        h = prev.get(i)
        if h is not None and h.start_s >= now and prof.fits_all_along(h):
            prof.hold(h, 1)
            held[i] = h
    res: list[Reservation] = []
    for i in view.queue:
        h = held.pop(i, None)
        if h is not None:
            prof.hold(h, -1)
        r, p = prof.reserve(i, plan)
        if h is not None and (r is None or r.start_s > h.start_s):
            if r is not None:
                prof.hold(r, -1)
            prof.hold(h, 1)
            r, p = h, None
            if h.start_s == now:
                _, k, milli, mem_mb, _ = jt.shape[i]
                if len(h.nodes) == 1:
                    p = _on_node(plan.free, h.nodes[0], k, milli, mem_mb)
                else:
                    p = _spread_placement(plan.free, list(h.nodes), list(h.counts), h.type_idx)
            r = r._replace(starts_now=p is not None)
        if r is None:
            continue
        if p is not None:
            plan.add(i, p)
            prof.started_now(i, p)
        res.append(r)
    return plan.decisions, res


def _from_scratch(view: View, want_reservations: bool) -> tuple[list[Decision], list[Reservation]]:
    """The schedule rebuilt from scratch in queue order (the module docstring's rule)."""
    jt = view.jobs
    now = view.now_s
    # reuse the last instant's schedule when it provably equals the rebuilt one (see _Kept)
    any_fractional, exact = _run_facts(jt)  # exact: a kept schedule lasts
    whole_only = not (any_fractional and _has_fractional(view))
    stateful = whole_only and not want_reservations
    # with runtime estimates the kept schedule rarely survives the next completion: build only as much of the
    # schedule as decides this instant's starts (`_none_can_start`), keeping it only if it got built whole
    lazy = stateful and not exact
    if stateful:
        kept = _KEPT.pop(id(jt), None)
        if kept is not None and kept.jobs is jt:
            arrivals = kept.arrivals_if_valid(view)
            if arrivals is not None:
                return kept.go_on(view, arrivals), []
    plan = Plan(view.free)
    shape = jt.shape
    known = jt.known_runtime_s
    layout = view.layout
    type_speed = layout.type_speed
    reservations: list[Reservation] = []
    started: list[tuple[float, Placement]] = []
    started_jobs: list[tuple[float, int]] = []
    queue = iter(view.queue)
    rest = None
    for i in queue:
        elig, k, milli, _, pace = shape[i]
        if milli < FULL:
            rest = i
            break
        p = plan.place(shape[i])
        if p is None:
            rest = i
            break
        rate = effective_speed(type_speed[p.type_idx], len(p.nodes) > 1, pace)
        first = _options(elig, k, pace)[0]
        if rate != first.rate or not _on_option(layout, p, first):
            # a later option of the same speed is not the first option: the first one may tie on completion
            rest = i
            break
        end = now + known[i] / rate
        plan.add(i, p)
        started.append((end, p))
        started_jobs.append((end, i))
        if want_reservations:
            reservations.append(Reservation(i, now, end, p.type_idx, p.nodes, True))
    if rest is None:
        return plan.decisions, reservations
    prof = _Profile(view, plan.snapshot(), started, whole_only)
    todo = [rest, *queue]
    later: list[Reservation] = []
    if not (want_reservations or stateful):
        # the fewest whole GPUs any job from here on needs (a fractional job: 1, or a share of a shared GPU):
        # once the capacity now cannot start any of them, later reservations cannot change this instant's starts
        need_k = [0] * len(todo)
        any_frac = [False] * len(todo)
        k_min, frac = 1 << 62, False
        for x in range(len(todo) - 1, -1, -1):
            _, k, milli, _, _ = shape[todo[x]]
            if milli < FULL:
                k, frac = 1, True
            k_min = min(k_min, k)
            need_k[x], any_frac[x] = k_min, frac
    unreservable = False
    cut = False
    check_at = 0  # when to test whether any later job can start now: after 0, 1, 2, 4, 8 ... reservations
    for x, i in enumerate(todo):
        if not (want_reservations or stateful) and prof.free_now < need_k[x]:
            free = plan.free
            if not (any_frac[x] and free.free_milli_total > FULL * sum(free.type_whole)):
                cut = True
                break
        if lazy and x == check_at:
            check_at = 2 * x or 1
            if _none_can_start(prof, todo, x):
                cut = True
                break
        r, p = prof.reserve(i, plan)
        if r is None:  # capacity it needs is powered off: it waits; the schedule is rebuilt next instant
            unreservable = True
            continue
        if p is not None:
            plan.add(i, p)
            prof.started_now(i, p)
            started_jobs.append((r.end_s, i))
        else:
            later.append(r)
        if want_reservations:
            reservations.append(r)
    if stateful and later and not unreservable and not cut:
        _KEPT.clear()  # one run at a time is kept
        _KEPT[id(jt)] = _Kept(view, prof, later, started_jobs, not any_fractional)
    return plan.decisions, reservations


def _on_option(layout: ClusterLayout, p: Placement, o) -> bool:
    """Whether placement p is on option o (one node of o's speed group, or a spread over o's type)."""
    if o.multi_type < 0:
        return len(p.nodes) == 1 and layout.node_pool[p.nodes[0]] in o.pools
    return len(p.nodes) > 1 and p.type_idx == o.multi_type


def _none_can_start(prof: _Profile, todo: list[int], x: int) -> bool:
    """Whether no job of todo[x:] (whole-GPU jobs) can start now whatever the reservations before it, so that
    this instant's starts are decided: the profile only loses capacity as reservations are added, and a job
    starts now only where k GPUs stay free from now for at least its shortest duration (fastest option): on one
    node (some row keeps >= k free until then), or, where some node type is too small for k GPUs, spread (the
    rows' minima over that window sum to >= k)."""
    view = prof.view
    jt = view.jobs
    shape = jt.shape
    known = jt.known_runtime_s
    rt, rf = prof.t, prof.free
    forever = max([min(fl) for fl in rf])  # some node keeps this many GPUs free from now on
    shortest: dict[int, float] = {}  # GPUs -> shortest duration of a job left that needs that many
    for y in todo[x:]:
        elig, k, _, _, pace = shape[y]
        if k <= forever:
            return False
        opts = _options(elig, k, pace)
        if opts:
            d = known[y] / opts[0].rate
            if d < shortest.get(k, _INF):
                shortest[k] = d
    now = view.now_s
    layout = prof.layout
    for k, d in shortest.items():
        end = now + d
        for tl, fl in zip(rt, rf, strict=True):
            for j, c in enumerate(fl):  # the row's first step with fewer than k free must start after `end`
                if c < k:
                    if end <= (tl[j] if j else now):  # the first step starts now (`move_to`)
                        return False
                    break
            else:
                return False
        if k > _smallest_max_node(layout):
            # each row's minimum over its steps that start before `end` (the first one starts now)
            spread = 0
            for tl, fl in zip(rt, rf, strict=True):
                spread += min(fl[: max(bisect_left(tl, end), 1)])
            if spread >= k:
                return False
    return True


def _smallest_max_node(layout: ClusterLayout) -> int:
    """The GPUs of the largest node of the type whose largest node is smallest (a job needing more can spread
    on that type)."""
    hit = _SMALLEST_MAX_NODE.get(id(layout))
    if hit is None or hit[0] is not layout:
        biggest: dict[int, int] = {}
        for n in range(layout.num_nodes):
            t = layout.node_type[n]
            biggest[t] = max(biggest.get(t, 0), layout.node_num_gpus[n])
        _SMALLEST_MAX_NODE.clear()
        hit = _SMALLEST_MAX_NODE[id(layout)] = (layout, min(biggest.values()))
    return hit[1]


_SMALLEST_MAX_NODE: dict[int, tuple[ClusterLayout, int]] = {}


def _has_fractional(view: View) -> bool:
    """A fractional job runs or waits (only asked when the workload has some)."""
    return 0 in view.running_whole_gpus or any(s[2] < FULL for s in view.queue_by_shape)


_KEPT: dict[int, _Kept] = {}


class _Kept:
    """The schedule left by one instant, kept for the next (per run: keyed by the JobTable).

    With whole-GPU jobs only, if every job that ended since did so exactly at its estimated end (so now, since
    the policy is called at every completion while jobs wait), no reservation started in between, no node was
    switched off or on (a power manager), the decisions were applied and only new jobs arrived, rebuilding the schedule from scratch gives back every kept
    reservation: each job's profile is unchanged (same running ends; started jobs end where reserved; later
    arrivals come after it), and its earliest-completion search now runs over a subset of the candidates it
    had, which contains its choice (a start at an instant inside a step ranks below that step's start). So
    only the new arrivals get new reservations. Anything else rebuilds (tested against tests/cbf_reference.py).

    Per instant it costs O(log queue) per reservation that starts or is made, plus a C-speed comparison of the
    running list (bounded by the cluster's GPUs): the future reservations are a dict in queue order and a heap
    by start time, and the simulator's live queue (the same object at every call) is checked by its
    length, its arrivals found by index (`arrivals_if_valid`), not compared entry by entry (any other queue is
    compared whole).
    """

    def __init__(
        self,
        view: View,
        prof: _Profile,
        later: list[Reservation],
        started: list[tuple[float, int]],
        whole_run: bool,
    ):
        self.jobs = view.jobs
        self.whole_run = whole_run
        """no job of the run is fractional (`cbf` then takes the schedule up directly)"""
        self.prof = prof
        self.res = {r.job: (r.end_s, r.type_idx, r.nodes, r.counts) for r in later}
        """the future reservations in queue order, job -> (end, type, nodes, GPUs on each): plain tuples of
        numbers, which the cyclic garbage collector stops tracking (a Reservation, a tuple subclass, it would scan
        at every full collection for as long as its job waits: overloaded, 300,000 jobs, the collections during
        the run took 1.27 CPU s with them against 0.57 without)"""
        self.starts = [(r.start_s, r.job) for r in later]  # a heap: the next reservation to start first
        heapify(self.starts)
        self.seen = max(view.queue, default=-1)
        """the highest job index seen in the queue (the jobs above it that are in the queue arrived since)"""
        self.power_changes = _power_changes(view)
        """node power changes so far: one since means capacity came or went outside the schedule"""
        self._expect(view, started)

    def _expect(self, view: View, started: list[tuple[float, int]]) -> None:
        """Remember this instant and the running jobs once its starts apply (a copy of `view.running`: its
        entries are the simulator's own tuples, so the next comparison is mostly identity checks)."""
        self.now = view.now_s
        self.queue = view.queue
        exp = self.expected = list(view.running)
        for e in started:
            insort(exp, e)

    def arrivals_if_valid(self, view: View) -> list[int] | None:
        """The jobs that arrived since, if the kept schedule is still the rebuilt one; else None (the kept
        object is then spoilt: it is dropped)."""
        now = view.now_s
        if now < self.now or self.starts[0][0] < now or _power_changes(view) != self.power_changes:
            return None
        exp = self.expected
        # while jobs wait the policy is called at every completion, so every job estimated to end since the
        # last call must have ended right now, and nothing else may have changed
        k = 0
        if exp and exp[0][0] <= now:
            if exp[0][0] < now:
                return None  # it ended off its estimate (an early end would have called us before)
            k = bisect_right(exp, (now, _AFTER_ALL))
        running = view.running
        if len(running) != len(exp) - k:
            return None
        if k:
            del exp[:k]
        if running != exp:
            return None  # a job ended before its estimate, or the decisions were not applied
        queue = view.queue
        res = self.res
        n = len(res)
        m = len(queue) - n
        if queue is self.queue:
            # the simulator's live queue, as at the last call: it changed only by arrivals at its end and by
            # starts and preemptions, which would have shown in `running` above; so it is the kept
            # reservations followed by the m jobs that arrived since. Job indices follow arrival order, so
            # those are the first m indices above the last one seen that are in the queue (a job refused at
            # arrival never enters it)
            if m <= 0:
                return [] if m == 0 else None
            arrivals = []
            i = self.seen
            last = len(self.jobs) - 1
            while i < last:
                i += 1
                if i in queue:
                    arrivals.append(i)
                    if len(arrivals) == m:
                        return arrivals
            return None
        queue = list(queue)
        if queue[:n] != list(res):
            return None
        return queue[n:]

    def go_on(self, view: View, arrivals: list[int]) -> list[Decision]:
        jt = view.jobs
        now = view.now_s
        starts = self.starts
        if not arrivals and starts[0][0] > now:
            # nothing arrives and no reservation starts (an instant where jobs only ended, as expected): the
            # schedule stands as it is, and `expected` is the running list already (`arrivals_if_valid`); the
            # profile moves to the next instant that needs it
            self.now = now
            _KEPT.clear()
            _KEPT[id(jt)] = self
            return []
        prof = self.prof
        prof.move_to(view)
        plan = _NowStarts(view.free)
        started: list[tuple[float, int]] = []
        res = self.res
        if starts[0][0] == now:
            due = []
            while starts and starts[0][0] == now:
                due.append(heappop(starts)[1])
            due.sort()  # queue order (the queue is in job index order): the GPUs each one gets depend on it
            for i in due:
                end_s, t, nodes, counts = res.pop(i)
                k = jt.num_gpus[i]
                if len(nodes) == 1:
                    p = _on_node(plan.free, nodes[0], k, FULL, 0)
                else:
                    p = _spread_placement(plan.free, list(nodes), list(counts), t)
                plan.add(i, p)
                started.append((end_s, i))
        for i in arrivals:
            r, p = prof.reserve(i, plan)
            if r is None:  # capacity it needs is powered off: forget the kept schedule, rebuild next instant
                _KEPT.clear()
                return plan.decisions
            if p is not None:
                plan.add(i, p)
                started.append((r.end_s, i))
            else:
                res[i] = (r.end_s, r.type_idx, r.nodes, r.counts)
                heappush(starts, (r.start_s, i))
        if res:
            if started:
                self._expect(view, started)
            else:  # `expected` is the running list already (`arrivals_if_valid`)
                self.now = now
                self.queue = view.queue
            if arrivals:
                self.seen = arrivals[-1]
            _KEPT.clear()
            _KEPT[id(jt)] = self
        return plan.decisions


class _NowStarts:
    """A kept schedule's starts this instant (whole-GPU jobs only: see _Kept) and the free whole GPUs of each
    node they leave: the part of a `Plan` and of its FreeState that `go_on`, `_Profile.reserve`, `_on_node` and
    `_spread_placement` read (`free` is the object itself). Two short per-node lists are copied instead of the
    cluster's FreeState (whose per-pool node sets cost about 16 µs to copy on the typed cluster), picking the
    same GPUs."""

    __slots__ = ("layout", "node_whole", "node_free_bits", "decisions")

    free_gpus_on = FreeState.free_gpus_on

    def __init__(self, free: FreeState):
        self.layout = free.layout
        self.node_whole = list(free.node_whole)
        self.node_free_bits = list(free.node_free_bits)
        self.decisions: list[Decision] = []

    @property
    def free(self) -> _NowStarts:
        return self

    def add(self, job: int, p: Placement) -> None:
        """Start `job` on whole-GPU placement `p` (as `FreeState.take` counts it)."""
        self.decisions.append(_tuple_new(Decision, (job, p)))
        layout = self.layout
        gpu_node, gpu_bit, bits, whole = layout.gpu_node, layout.gpu_bit, self.node_free_bits, self.node_whole
        for g in p.gpus:
            n = gpu_node[g]
            bits[n] &= ~gpu_bit[g]
            whole[n] -= 1


_POOL_NODES: dict[int, tuple[ClusterLayout, dict]] = {}


def _pool_cache(layout: ClusterLayout) -> dict:
    """`_nodes_of`'s cache for `layout` (pools -> nodes; (pools, k) -> those of them with k GPUs or more)."""
    hit = _POOL_NODES.get(id(layout))
    if hit is None or hit[0] is not layout:
        hit = _POOL_NODES[id(layout)] = (layout, {})
    return hit[1]


def _nodes_of(layout: ClusterLayout, pools: tuple[int, ...], k: int = 0) -> list[int]:
    """The nodes of `pools` with at least k GPUs, ascending (cached per layout: under `pools` for k = 0, else
    under (pools, k))."""
    cache = _pool_cache(layout)
    key = (pools, k) if k else pools
    got = cache.get(key)
    if got is None:
        want = set(pools)
        got = cache[key] = [
            n for n in range(layout.num_nodes) if layout.node_pool[n] in want and layout.node_num_gpus[n] >= k
        ]
    return got


class _Profile:
    """Free whole GPUs of each node over time, one step function per node (row n of `t`/`free`, Python lists:
    the rows are short, a few steps to a few dozen, so walking them beats numpy's per-call cost): node n has
    `free[n][j]` free GPUs during [t[n][j], t[n][j + 1]); the last step lasts forever. `free_now` is the sum
    of the rows' first steps.

    `_take` keeps in a row only the steps where its count changes: a step with the count of the one before it
    starts no run that its predecessor does not start as well or sooner, so no search's answer depends on it
    (the earliest fit is always at a change or now), and with a long queue back-to-back reservations on a node
    would otherwise leave a step at every seam for each later walk to cross (on the overloaded type-constrained
    cluster, 100,000 jobs: 375 steps a row instead of 1,071, 5.5 steps walked per node searched instead of 15)."""

    def __init__(
        self, view: View, free: FreeState, started: list[tuple[float, Placement]], whole_only: bool = False
    ):
        self.view = view
        self.whole_only = whole_only
        """no fractional job queued or running: each node's free capacity now is its first step"""
        self.layout = layout = view.layout
        now = view.now_s
        placements = view.placements
        gpu_node = layout.gpu_node
        # releases (end, node, GPUs): whole-GPU one-node jobs (the common case) by comprehension, the rest below
        running = view.running
        held = [placements[j] for _, j in running]
        releases = [
            (end, p.nodes[0], len(p.gpus))
            for (end, _), p in zip(running, held, strict=True)
            if p.milli == FULL and not p.node_counts
        ]
        releases += [(end, p.nodes[0], len(p.gpus)) for end, p in started if not p.node_counts]
        # when each shared GPU's last fractional resident ends (it then counts as a whole free GPU)
        self.shared_until: dict[int, float] = {}
        self.pool_nodes = _pool_cache(layout)
        """pools -> their nodes (`_nodes_of`'s cache, filled as asked)"""
        self.earliest: dict[tuple, tuple[list[float], list[float]]] = {}
        """(pools, k, option kind) -> (durations d, earliest starts), both ascending: the searches of that option
        that found a start. The profile only loses capacity at every time from now on (reservations are added;
        `move_to` only drops the past, so the entries outlive it), and a longer run fits only where a shorter
        one does, so a later search of the option for a duration >= d cannot start before d's start"""
        shared_until = self.shared_until
        if len(releases) < len(running) + len(started):
            others = [
                (end, p) for (end, _), p in zip(running, held, strict=True) if p.milli < FULL or p.node_counts
            ]
            others += [(end, p) for end, p in started if p.node_counts]
            for end, p in others:
                if p.milli == FULL:
                    releases += [(end, n, c) for n, c in zip(p.nodes, p.node_counts, strict=True)]
                else:
                    g = p.gpus[0]
                    if shared_until.get(g, -1.0) < end:
                        shared_until[g] = end
            releases += [(end, gpu_node[g], 1) for g, end in shared_until.items()]
        num_nodes = layout.num_nodes
        whole = np.asarray(free.node_whole, dtype=np.int64)
        self.next_steps: list[tuple[float, int]] = []
        """a heap of (start of a row's second step, row): `move_to` trims only rows whose entry is due"""
        if not releases:
            self.t = [[now] for _ in range(num_nodes)]
            self.free = [[c] for c in free.node_whole]
            self.free_now = sum(free.node_whole)
            return
        # an end at or before now (an overrun) is assumed to come right after now
        rel = np.array(releases, dtype=float)
        t_arr = np.maximum(rel[:, 0], _after(now))
        n_arr = rel[:, 1].astype(np.int64)
        order = np.lexsort((t_arr, n_arr))
        t_arr, n_arr, c_arr = t_arr[order], n_arr[order], rel[order, 2].astype(np.int64)
        first = np.ones(len(t_arr), dtype=bool)
        first[1:] = (n_arr[1:] != n_arr[:-1]) | (t_arr[1:] != t_arr[:-1])
        at = np.flatnonzero(first)
        t_u, n_u, c_u = t_arr[at], n_arr[at], np.add.reduceat(c_arr, at)
        per_node = np.bincount(n_u, minlength=num_nodes)
        width = int(per_node.max()) + 1
        rank = np.arange(len(n_u)) - np.searchsorted(n_u, n_u, side="left")
        t = np.full((num_nodes, width), np.inf)
        t[:, 0] = now
        t[n_u, rank + 1] = t_u
        delta = np.zeros((num_nodes, width), dtype=np.int64)
        delta[:, 0] = whole
        delta[n_u, rank + 1] = c_u
        count = (per_node + 1).tolist()
        self.t = [row[:c] for row, c in zip(t.tolist(), count, strict=True)]
        self.free = [row[:c] for row, c in zip(np.cumsum(delta, axis=1).tolist(), count, strict=True)]
        self.free_now = int(whole.sum())
        self.next_steps = [(tl[1], n) for n, tl in enumerate(self.t) if len(tl) > 1]
        heapify(self.next_steps)

    def move_to(self, view: View) -> None:
        """Move a kept profile (see _Kept) to `view.now_s`: drop the steps that ended by then. Only the rows
        whose second step has begun are touched (`next_steps`); every row's first step is read as starting
        now, whatever time it holds. The capacity from now on is unchanged, so `earliest` stays valid."""
        now = view.now_s
        self.view = view
        rt, rf = self.t, self.free
        pending = self.next_steps
        while pending and pending[0][0] <= now:
            n = heappop(pending)[1]
            tl = rt[n]
            if len(tl) > 1 and tl[1] <= now:  # (else an entry left by an earlier change of the row)
                fl = rf[n]
                j = bisect_right(tl, now) - 1
                self.free_now += fl[j] - fl[0]
                del tl[:j]
                del fl[:j]
                if len(tl) > 1:
                    heappush(pending, (tl[1], n))

    # -- the profile -------------------------------------------------------------------------------------

    def _one_node(
        self, nodes: list[int], k: int, dur_s: float, before_s: float, from_s: float = -_INF
    ) -> tuple[float, int] | None:
        """(start, node) of the earliest run on one of `nodes` (ascending) with k GPUs free all along that ends
        before `before_s`; best fit at the start (ties -> lower node index). None if none. A caller that knows no
        run starts before `from_s` lets the walk begin there.

        On one node the earliest start is where one of its own steps begins, so each row is walked from its
        first step: a step with k free fits if the first later step with fewer than k free starts at or after its
        end (the row's last step lasts forever); that step rules out every start from the steps before it up to
        it. The walk over steps with fewer than k free runs off the row's end (IndexError) only where the last
        step has fewer than k free (nodes switched off): then no start is on that node."""
        rt, rf = self.t, self.free
        now = self.view.now_s  # every row's first step starts now (whatever time it holds: `move_to`)
        best_s = _INF
        best_free = 0
        best_n = -1
        for n in nodes:
            fl = rf[n]
            if (
                best_s == now
            ):  # a start now is found: only a start now on a node with fewer free GPUs beats it
                if best_free == k:
                    break  # no node has fewer
                if not k <= fl[0] < best_free:
                    continue
            tl = rt[n]
            m = len(tl)
            j = 0 if from_s <= now else bisect_left(tl, from_s)
            try:
                while True:
                    while fl[j] < k:  # past the row's last step (IndexError): no start on this node
                        j += 1
                    s = tl[j] if j else now
                    if s > best_s:
                        break
                    end = s + dur_s
                    if not end < before_s:
                        break
                    # the run of steps with k free from j: it fits if the run outlasts `end`
                    x = j + 1
                    while x < m and fl[x] >= k:
                        x += 1
                    if x == m or tl[x] >= end:
                        if s < best_s or fl[j] < best_free:
                            best_s, best_free, best_n = s, fl[j], n
                        break
                    j = x + 1
            except IndexError:
                pass
        if best_n < 0:
            return None
        return float(best_s), best_n

    def _spread(
        self, nodes: list[int], k: int, dur_s: float, before_s: float, from_s: float = -_INF
    ) -> tuple[float, list[int]] | None:
        """(start, GPUs free all along per node of `nodes`) of the earliest run with k GPUs summed over `nodes`
        that ends before `before_s` (a window's minimum only grows as its start moves to a step). None if none.
        A caller that knows no run starts before `from_s` skips the earlier steps."""
        ts = [self.t[n] for n in nodes]
        fs = [self.free[n] for n in nodes]
        now = self.view.now_s  # every row's first step starts now (whatever time it holds: `move_to`)
        # the candidate starts, ascending: now (unless before from_s), and every step of the rows from
        # max(from_s, now) on; swept with each row's step holding the candidate (`at`) and the sum of their
        # counts, which bounds the window minima's sum: a candidate below k needs no window walked
        if now >= from_s:
            s = now
        else:
            s = _INF
            for tl in ts:
                j = bisect_left(tl, from_s)
                if j < len(tl) and tl[j] < s:
                    s = tl[j]
            if s == _INF:
                return None
        at = [bisect_right(tl, s) - 1 for tl in ts]
        nxt = [tl[j + 1] if j + 1 < len(tl) else _INF for tl, j in zip(ts, at, strict=True)]
        vals = [fl[j] for fl, j in zip(fs, at, strict=True)]
        total = sum(vals)
        rows = range(len(ts))
        while True:
            end = s + dur_s
            if end >= before_s:
                return None
            if total >= k:
                avail = []
                for r in rows:
                    # the step holding s, then every step that starts before the end
                    tl, fl = ts[r], fs[r]
                    j = at[r]
                    v = fl[j]
                    j += 1
                    m = len(tl)
                    while j < m and tl[j] < end:
                        if fl[j] < v:
                            v = fl[j]
                        j += 1
                    avail.append(v)
                if sum(avail) >= k:
                    return float(s), avail
            s = min(nxt)
            if s == _INF:
                return None
            for r in rows:
                if nxt[r] == s:
                    tl = ts[r]
                    j = at[r] = at[r] + 1
                    nxt[r] = tl[j + 1] if j + 1 < len(tl) else _INF
                    v = fs[r][j]
                    total += v - vals[r]
                    vals[r] = v

    def _take(self, start_s: float, end_s: float, nodes, counts) -> None:
        """Remove counts[x] GPUs of node nodes[x] during [start_s, end_s) (a zero-length run holds them
        during [start_s, the next instant)). Each row gains a step at start_s (if after now) and at end_s
        unless it has one there; the new step copies the value of the step it splits."""
        end_s = max(end_s, _after(start_s))
        now = self.view.now_s  # every row's first step starts now
        rt, rf = self.t, self.free
        for n, c in zip(nodes, counts, strict=True):
            tl = rt[n]
            fl = rf[n]
            a = 0
            if start_s > now:
                a = bisect_left(tl, start_s)
                if a == len(tl) or tl[a] != start_s:
                    tl.insert(a, start_s)
                    fl.insert(a, fl[a - 1])
            else:
                self.free_now -= c
            b = bisect_left(tl, end_s, a)
            if b == len(tl) or tl[b] != end_s:
                tl.insert(b, end_s)
                fl.insert(b, fl[b - 1])
            for j in range(a, b):
                fl[j] -= c
            # a row keeps only the steps where its count changes (see the class): the steps of [a, b) lost c
            # alike, so only its ends can have come to equal their neighbours
            if fl[b] == fl[b - 1]:
                del tl[b]
                del fl[b]
            if a and fl[a] == fl[a - 1]:
                del tl[a]
                del fl[a]
            if a <= 1 and len(tl) > 1:  # the row's second step may have changed
                heappush(self.next_steps, (tl[1], n))

    def fits_all_along(self, r: Reservation) -> bool:
        """Whether r's nodes keep r's GPUs free during [r.start_s, r.end_s) (its slot could be taken)."""
        end = max(r.end_s, _after(r.start_s))
        now = self.view.now_s
        for n, c in zip(r.nodes, r.counts, strict=True):
            tl, fl = self.t[n], self.free[n]
            j = max(bisect_right(tl, r.start_s) - 1, 0) if r.start_s > now else 0
            while j < len(tl) and (j == 0 or tl[j] < end):
                if fl[j] < c:
                    return False
                j += 1
        return True

    def hold(self, r: Reservation, sign: int) -> None:
        """Take r's slot from the profile (sign 1) or give it back (-1); capacity given back voids `earliest`."""
        self._take(r.start_s, r.end_s, r.nodes, [sign * c for c in r.counts])
        if sign < 0:
            self.earliest = {}

    # -- reservations ------------------------------------------------------------------------------------

    def reserve(self, i: int, plan: Plan | _NowStarts) -> tuple[Reservation | None, Placement | None]:
        """Job i's reservation (taken from the profile) and its placement if it starts now; (None, None) when no
        option of the job ever frees in the profile (nodes that are powered off hold their GPUs out)."""
        view = self.view
        jt = view.jobs
        elig, k, milli, mem_mb, pace = jt.shape[i]
        known = jt.known_runtime_s[i]
        now = view.now_s
        layout = self.layout
        best = None  # (completion, start row, option kind, data, type, rate)
        bound = _INF  # best's completion
        earliest = self.earliest
        pool_nodes = self.pool_nodes
        for o in _options(elig, 1 if milli < FULL else k, pace):
            d = known / o.rate
            if now + d >= bound:  # cannot complete before the best option so far even if it started now
                continue
            pools = o.pools
            key = (pools, k, o.multi_type)
            low = earliest.get(key)
            from_s = now
            if low is not None:
                x = bisect_right(low[0], d) - 1
                if x >= 0:
                    from_s = low[1][x]  # it starts no earlier (see `earliest`)
                    if from_s + d >= bound:
                        continue  # so it cannot end before the bound
            if o.multi_type < 0:
                # only a node with k GPUs or more can ever hold the run (a smaller one's walk would cross every
                # step of its row from from_s on)
                nodes = pool_nodes.get((pools, k))
                if nodes is None:
                    nodes = _nodes_of(layout, pools, k)
                hit = self._one_node(nodes, k, d, bound, from_s)
                if hit is not None:
                    a, n = hit
                    _found(earliest, key, d, a, now)
                    bound = a + d
                    best = (bound, a, -1, n, layout.node_type[n], d)
                    if a == now and self.whole_only:
                        break  # the earliest start there is: no later (slower) option completes sooner or as soon
            else:
                nodes = pool_nodes.get(pools) or _nodes_of(layout, pools)
                hit = self._spread(nodes, k, d, bound, from_s)
                if hit is not None:
                    a, avail = hit
                    _found(earliest, key, d, a, now)
                    bound = a + d
                    best = (bound, a, o.multi_type, (nodes, avail), o.multi_type, d)
        if milli < FULL:
            shared = self._shared_now(i, plan.free, bound)
            if shared is not None:
                p, end = shared
                return Reservation(i, now, end, p.type_idx, p.nodes, True), p
        if best is None:  # no option frees in the profile (its nodes are off): no reservation this instant
            return None, None
        end, start, kind, data, t, d = best
        if kind < 0:
            n = data
            counts = (1 if milli < FULL else k,)
            self._take(start, end, [n], counts)
            nodes = (n,)
            p = None
            if start == now:
                free = plan.free
                p = _on_node(free, n, k, milli, mem_mb)
        else:
            cols, avail = data
            order = sorted(range(len(cols)), key=lambda x: (-int(avail[x]), int(cols[x])))
            take_n, take_c = [], []
            left = k
            for x in order:
                if left == 0:
                    break
                c = min(int(avail[x]), left)
                if c > 0:
                    take_n.append(int(cols[x]))
                    take_c.append(c)
                    left -= c
            self._take(start, end, take_n, take_c)
            nodes = tuple(take_n)
            counts = tuple(take_c)
            p = _spread_placement(plan.free, take_n, take_c, kind) if start == now else None
        return _tuple_new(Reservation, (i, start, float(end), t, nodes, p is not None, counts)), p

    def _shared_now(self, i: int, free: FreeState, before_s: float) -> tuple[Placement, float] | None:
        """A fractional job's start now on a shared GPU where it ends by the GPU's last resident's end and by
        `before_s` (its whole-GPU reservation's end: ties go to sharing); fastest speed first, then best fit
        (smallest sufficient free share), ties -> lower GPU index."""
        view = self.view
        jt = view.jobs
        elig, _, milli, mem_mb, pace = jt.shape[i]
        layout = self.layout
        now = view.now_s
        fm = free.free_milli
        fmem = free.free_mem_mb
        best = None  # (-speed, free share, gpu)
        for g, until in self.shared_until.items():
            if fm[g] < milli or fmem[g] < mem_mb or fm[g] == FULL:
                continue
            n = layout.gpu_node[g]
            if not elig.accepts((n,)):
                continue
            v = layout.type_speed[layout.node_type[n]]
            end = now + jt.known_runtime_s[i] / effective_speed(v, False, pace)
            if end > until or end > before_s:
                continue
            key = (-v, int(fm[g]), g)
            if best is None or key < best[0]:
                best = (key, end)
        if best is None:
            return None
        g = best[0][2]
        n = layout.gpu_node[g]
        return Placement((g,), (n,), milli, mem_mb, layout.node_type[n]), best[1]

    def started_now(self, i: int, p: Placement) -> None:
        """Record a fractional start now on a GPU (its GPU is shared until at least the job's end)."""
        if p.milli < FULL:
            view = self.view
            g = p.gpus[0]
            end = view.now_s + view.duration_on(i, p)
            if self.shared_until.get(g, -1.0) < end:
                self.shared_until[g] = end


def _power_changes(view: View) -> int:
    """How many node power state changes the run has had (a node switched off or on changes the free GPUs without
    a job starting or ending); -1 without a power model."""
    power = view.node_power
    return -1 if power is None else len(power.log)


def _found(earliest: dict, key: tuple, dur_s: float, start_s: float, now_s: float) -> None:
    """Record in `_Profile.earliest` that a search of option `key` for `dur_s` found `start_s`: it replaces the
    entries it makes useless (a duration as long or longer with a start as early or earlier, or a start by
    `now_s`, which bounds nothing)."""
    low = earliest.get(key)
    if low is None:
        low = earliest[key] = ([], [])
    ds, starts = low
    x = bisect_right(ds, dur_s)
    if x and ds[x - 1] == dur_s:
        x -= 1
    y = x
    while y < len(ds) and starts[y] <= start_s:
        y += 1
    ds[x:y] = [dur_s]
    starts[x:y] = [start_s]
    if starts[0] <= now_s:  # the starts ascend: drop the prefix up to now
        x = bisect_right(starts, now_s)
        del ds[:x]
        del starts[:x]


def _after(t: float) -> float:
    """The next instant after t (the next float): where an overrunning job is assumed to end."""
    return nextafter(t, _INF)


def _on_node(free: FreeState, n: int, k: int, milli: int, mem_mb: int) -> Placement:
    if milli == FULL:
        return _gpus_on_node(free, n, k, free.node_whole[n])
    layout = free.layout
    a = layout.node_first_gpu[n]
    m = layout.node_num_gpus[n]
    fm = free.free_milli[a : a + m].tolist()
    fmem = free.free_mem_mb[a : a + m].tolist()
    g = min((x for x in range(m) if fm[x] >= milli and fmem[x] >= mem_mb), key=lambda x: (fm[x], x))
    return Placement((a + g,), (n,), milli, mem_mb, layout.node_type[n])


def _spread_placement(free: FreeState, nodes: list[int], counts: list[int], t: int) -> Placement:
    gpus: list[int] = []
    for n, c in zip(nodes, counts, strict=True):
        gpus.extend(free.free_gpus_on(n, c))
    return Placement(tuple(gpus), tuple(nodes), FULL, 0, t, -1, tuple(counts))
