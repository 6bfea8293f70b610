"""The plain arrival-order EASY scan (the rule is in schedulers/easy.py's docstring), kept unoptimised as the
reference the shape-by-shape schedulers/easy.py must match decision for decision."""

from __future__ import annotations

import heapq

from env.cluster import FreeState, Placement
from env.placement import place
from env.simulator import Decision, View
from schedulers.plan import Plan


def easy_reference(view: View) -> list[Decision]:
    jt = view.jobs
    now = view.now_s
    plan = Plan(view.free)
    queue = iter(view.queue)
    head = -1
    for i in queue:
        p = place(plan.free, jt.elig[i], jt.num_gpus[i], jt.milli[i], jt.mem_mb[i])
        if p is None:
            head = i
            break
        plan.add(i, p)
    if head < 0 or plan.exhausted():
        return plan.decisions
    started = [(now + view.duration_on(d.job, d.placement), d.placement) for d in plan.decisions]
    shadow_s, shadow = reservation(view, plan.free, head, started)
    h_elig, h_k, h_milli, h_mem = jt.elig[head], jt.num_gpus[head], jt.milli[head], jt.mem_mb[head]
    shape = jt.shape
    for i in queue:
        if plan.exhausted():
            break
        p = plan.place(shape[i])
        if p is None:
            continue
        if now + view.duration_on(i, p) > shadow_s:
            shadow.take(p)
            if place(shadow, h_elig, h_k, h_milli, h_mem) is None:
                shadow.give(p)
                continue
        plan.add(i, p)
    return plan.decisions


def reservation(
    view: View, free: FreeState, head: int, started: list[tuple[float, Placement]]
) -> tuple[float, FreeState]:
    """(shadow time, free capacity at that time) for `head`, releasing jobs in order of estimated end.

    `free` is the capacity after this instant's decisions; `started` are those decisions' (estimated end,
    placement). Returns (inf, capacity with everything released) if the head never fits (it was rejected at
    the start of the run in that case, so this is defensive).
    """
    jt = view.jobs
    elig, k, milli, mem = jt.elig[head], jt.num_gpus[head], jt.milli[head], jt.mem_mb[head]
    now = view.now_s
    shadow = free.copy()
    placements = view.placements
    running = ((end, placements[j]) for end, j in view.running)
    releases = (
        heapq.merge(running, sorted(started, key=lambda e: e[0]), key=lambda e: e[0]) if started else running
    )
    for end, p in releases:
        shadow.give(p)
        if place(shadow, elig, k, milli, mem) is not None:
            return max(end, now), shadow
    return float("inf"), shadow
