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
    generalisation of EASY's "extra nodes". Its GPUs then stay removed from the shadow state for the rest of the
    scan. A job with no such placement is refused.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from itertools import accumulate, islice

from schedulers.plan import Plan
from schedulers.shadow import CountShadow
from sim.cluster import FULL, FreeState, Placement
from sim.placement import alternative_placement, effective_speed, spans_nodes_on
from sim.simulator import Decision, View

_AFTER_ALL = 1 << 62  # larger than any job index


def easy_backfill(view: View) -> list[Decision]:
    jt = view.jobs
    now = view.now_s
    plan = Plan(view.free)
    shape = jt.shape
    head = -1
    for i in view.queue:
        p = plan.place(shape[i])
        if p is None:
            head = i
            break
        plan.add(i, p)
    if head < 0 or plan.exhausted():
        return plan.decisions
    shape_runtime = view.queue_by_shape_runtime
    known = jt.known_runtime_s
    type_speed = view.layout.type_speed
    groups = list(view.queue_by_shape.items())
    # The scan in arrival order, done shape by shape: between two starts the plan and the shadow state do not
    # change, so every job of one shape gets the same placements and the same verdict on test (b), and passing
    # test (a) is monotone in the known runtime; the next job the arrival-order scan would start is the
    # earliest, over all shapes, that passes (a) or (b). The reservation is computed only once some job fits.
    shadow_s, shadow = -1.0, None
    pos = head
    while not plan.exhausted():
        best, best_s, best_p = _AFTER_ALL, None, None
        free = plan.free
        whole_left = sum(free.type_whole)  # no whole-GPU shape larger than this can fit
        for s, members in groups:
            if s[1] > whole_left and s[2] == FULL:
                continue
            k = bisect_right(members, pos)
            if k == len(members) or members[k] >= best:
                continue
            t = plan.fit_type(s)
            if t < 0:
                continue
            if shadow is None:
                started = [(now + view.duration_on(d.job, d.placement), d.placement) for d in plan.decisions]
                shadow_s, shadow = reservation(view, plan.snapshot(), head, started)
            elig, k_gpus, milli, _, pace = s
            # the preferred placement is the fastest free now: if a job does not end by the shadow time on it,
            # it does not on any other
            speed = effective_speed(type_speed[t], spans_nodes_on(elig, k_gpus, milli, t), pace)
            first = members[k]
            if now + known[first] / speed <= shadow_s:  # (a) ends by the shadow time
                best, best_s, best_p = first, s, None
                continue
            harmless = _harmless(plan, shadow, s)
            if harmless is not None:  # (b) leaves room for the head at the shadow time
                best, best_s, best_p = first, s, harmless
                continue
            # later jobs of the shape can only pass (a), and those that do are its shortest
            j = _earliest_passing(members, k + 1, shape_runtime[s], pos, best, known, now, speed, shadow_s)
            if j < best:
                best, best_s, best_p = j, s, None
        if best_s is None:
            break
        if best_p is None:
            plan.add(best, plan.place(best_s))
        else:
            p = best_p()
            plan.add(best, p)
            shadow.take(p)
        pos = best
    return plan.decisions


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
    by_type = {t: shadow.head_fits_without_shape(s, t) for t in s[0].types}  # when the type alone decides
    if not any(v is None or v for v in by_type.values()):
        return None
    free = plan.free
    node_type = free.layout.node_type
    verdicts: dict[tuple[int, int], bool] = {}
    for o, n, c in plan.alternative_slots(s):
        fits = by_type[node_type[n] if n >= 0 else o.multi_type]
        if fits is None:
            key = shadow.node_key(n) if n >= 0 else None
            fits = verdicts.get(key) if key is not None else None
            if fits is None:
                fits = shadow.head_fits_without(alternative_placement(free, o, n, c, k))
                if key is not None:
                    verdicts[key] = fits
        if fits:
            return lambda o=o, n=n, c=c: alternative_placement(free, o, n, c, k)
    return None


def _earliest_passing(members, k, by_runtime, pos, best, known, now, speed, shadow_s) -> int:
    """The earliest job after `pos` (and before `best`, else `best`) whose run ends by `shadow_s`.

    Two exact searches run in lockstep and the first to finish answers: walking `members` (ascending) from
    index k until a job passes, and walking the passing prefix of `by_runtime` (runtime order) in full. Either
    can be long (short jobs cluster at the end of a long queue; or many pass), rarely both.
    """
    n_pass = bisect_left(by_runtime, True, key=lambda e: now + e[0] / speed > shadow_s)
    if not n_pass:
        return best
    found = best
    prefix = islice(by_runtime, n_pass)
    # members first: when they run out, zip stops before taking (and losing) a prefix entry
    for j, (_, i) in zip(islice(members, k, None), prefix, strict=False):
        if pos < i < found:
            found = i
        if j >= found:
            return found
        if now + known[j] / speed <= shadow_s:
            return j
    for _, i in prefix:  # the member walk ran out first: the rest of the prefix decides
        if pos < i < found:
            found = i
    return found


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
