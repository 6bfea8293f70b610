"""The plain arrival-order EASY scan (the rule is in schedulers/easy.py's docstring), kept unoptimised as the
reference the shape-by-shape schedulers/easy.py must match decision for decision: full per-GPU copies of the
free state, every job tested one by one, every release applied one by one."""

from __future__ import annotations

from schedulers.plan import Plan
from sim.cluster import FreeState, Placement
from sim.placement import alternatives, place
from sim.simulator import Decision, View


def easy_reference(view: View) -> list[Decision]:
    jt = view.jobs
    now = view.now_s
    plan = Plan(view.free)
    queue = iter(view.queue)
    head = -1
    for i in queue:
        p = place(plan.free, *jt.shape[i])
        if p is None:
            head = i
            break
        plan.add(i, p)
    if head < 0 or plan.exhausted():
        return plan.decisions
    started = [(now + view.duration_on(d.job, d.placement), d.placement) for d in plan.decisions]
    shadow_s, shadow = reservation(view, plan.free.copy(), head, started)
    refused: set[tuple] = set()  # shapes no alternative of which passes (b) since the last start
    for i in queue:
        if plan.exhausted():
            break
        p = place(plan.free, *jt.shape[i])
        if p is None:
            continue
        if now + view.duration_on(i, p) <= shadow_s:  # (a) ends by the shadow time
            plan.add(i, p)
            refused.clear()
            continue
        if jt.shape[i] in refused:
            continue
        for alt in alternatives(plan.free, *jt.shape[i]):  # (b) some placement leaves room for the head
            shadow.take(alt)
            if place(shadow, *jt.shape[head]) is not None:
                plan.add(i, alt)
                refused.clear()
                break
            shadow.give(alt)
        else:
            refused.add(jt.shape[i])
    return plan.decisions


def reservation(
    view: View, free: FreeState, head: int, started: list[tuple[float, Placement]]
) -> tuple[float, FreeState]:
    """(shadow time, free capacity at that time) for `head`.

    `free` (modified) is the capacity after this instant's decisions; `started` are those decisions' (estimated
    end, placement). Every running or started job has an estimated end, max(its estimate, now); the shadow time
    is the earliest such end at which the head fits once every job ending by then is released. Returns (inf,
    capacity with everything released) if the head never fits (it was rejected at the start of the run in that
    case, so this is defensive).
    """
    now = view.now_s
    ends = [(max(end, now), view.placements[j]) for end, j in view.running]
    ends += [(max(end, now), p) for end, p in started]
    shadow = free
    for t in sorted({end for end, _ in ends}):
        for end, p in ends:
            if end == t:
                shadow.give(p)
        if place(shadow, *view.jobs.shape[head]) is not None:
            return t, shadow
    return float("inf"), shadow
