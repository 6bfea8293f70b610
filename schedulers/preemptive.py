"""The priority-preemptive allocation step shared by SRTF and Tiresias: who keeps running, who starts, who is
preempted, given one priority order over waiting and running jobs.

Rule (docs/schedulers.md, Preemption): jobs are visited in priority order (highest first). A running job keeps its GPUs. A
waiting job starts on its preferred placement (sim/placement.py's `place`) if that is free; otherwise, if
suspending running jobs of STRICTLY lower priority lets it start, the fewest of them are preempted: victims are
released lowest priority first until the job fits, then each victim but the last released is spared again
(highest priority first) if the job still fits without it; the job then starts on its preferred placement in
the capacity so freed. A job that does not fit even with every lower-priority running job released waits. So a
job is preempted only when that lets a higher-priority job start, never for a tie, and never for nothing. A job
preempted at an instant is a waiting job for the rest of that instant's walk (at its place in the order), so it
restarts at once wherever capacity is left for it (a migration, paying the restore overhead).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable

from schedulers.plan import Plan
from sim.cluster import FULL, FreeState
from sim.placement import fits_after_release, place
from sim.simulator import Decision, View

_tuple_new = tuple.__new__  # Decision(...) without the NamedTuple constructor's extra call


def lone_start(view: View) -> list | None:
    """`[Decision]` starting the only waiting job on its preferred placement where it fits on the free capacity,
    else None: what `allocate` decides then whatever the priority order (the job is visited first and placed;
    nothing is preempted), computed without building the order. The common instant of a cluster that is not
    full: one job arrived and fits."""
    queue = view.queue
    if len(queue) != 1:
        return None
    for i in queue:
        p = place(view.free, *view.jobs.shape[i])
        return None if p is None else [_tuple_new(Decision, (i, p))]
    return None


def allocate(
    view: View,
    queued: Iterable[tuple[object, int]],
    lower: Callable[[object], list[int]],
    requeue_key: Callable[[int], object],
) -> Plan:
    """Apply the rule to the waiting jobs `queued`, (priority key, job) in priority order (highest first).

    `lower(key)` lists the running jobs of strictly lower priority than a waiting job of that key, lowest
    priority first; along `queued` these lists must only shrink (every running job ranks either above or below
    each waiting job). Running jobs not preempted keep their GPUs. A job preempted here waits from then on: it is
    visited again at its place in the order, with key `requeue_key(job)` (which ranks it after the job that
    preempted it), and may start again at once elsewhere (paying the restore overhead). Returns the plan: its
    decisions (Preempt and Decision, in the order to apply). Stops early once no capacity is left and nothing
    lower remains to preempt.
    """
    plan = Plan(view.free)
    shape = view.jobs.shape
    placements = view.placements
    preempted: set[int] = set()
    hopeless: set = set()  # shapes that did not fit with every victim released (victims only shrink)
    requeued: list[tuple[object, int]] = []  # heap of jobs preempted at this instant, as waiting jobs
    can_preempt = True  # False once a job found no victim: keys only grow, so no later job finds one
    queued = iter(queued)
    nxt = next(queued, None)
    while True:
        if requeued and (nxt is None or requeued[0] < nxt):
            key, j = heapq.heappop(requeued)
        elif nxt is not None:
            key, j = nxt
            nxt = next(queued, None)
        else:
            break
        exhausted = plan.exhausted()
        s = shape[j]
        if not exhausted:
            p = plan.place(s)
            if p is not None:
                plan.add(j, p)
                continue
        if not can_preempt:
            if exhausted:
                break
            continue
        if s in hopeless:
            continue
        victims = [v for v in lower(key) if v not in preempted]
        if not victims:
            can_preempt = False
            if exhausted:
                break
            continue
        chosen = _fewest_victims(plan, s, victims, placements)
        if chosen is None:
            hopeless.add(s)
            continue
        for v in chosen:
            plan.preempt(v, placements[v])
            preempted.add(v)
            heapq.heappush(requeued, (requeue_key(v), v))
        plan.add(j, plan.place(s))
    return plan


def _fewest_victims(plan: Plan, s: tuple, victims: list[int], placements) -> list[int] | None:
    """Victims (lowest priority first) whose release lets shape `s` start, per the module's rule; None if none do."""
    free = plan.free
    elig, k, milli = s[0], s[1], s[2]
    if milli == FULL:  # cheap bound first: whole GPUs free or held by victims on acceptable types
        types = elig.types
        held = sum(len(placements[v].gpus) for v in victims if placements[v].type_idx in types)
        if sum(free.type_whole[t] for t in types) + held < k:
            return None
        if all(placements[v].milli == FULL for v in victims):
            return _fewest_whole_victims(free, s, victims, placements)
    trial = free.copy()
    chosen: list[int] = []
    for v in victims:
        trial.give(placements[v])
        chosen.append(v)
        if place(trial, *s) is not None:
            break
    else:
        return None
    for v in reversed(chosen[:-1]):  # spare the higher-priority victims first
        without = trial.copy()
        without.take(placements[v])  # exactly undoes its release
        if place(without, *s) is not None:
            trial = without
            chosen.remove(v)
    return chosen


def _fewest_whole_victims(free: FreeState, s: tuple, victims: list[int], placements) -> list[int] | None:
    """`_fewest_victims` for a whole-GPU shape whose victims all hold whole GPUs: the same choice, decided from
    the whole GPUs each release gives each node (sim/placement.py's `fits_after_release`) instead of releasing
    them on a copy of the free state; the case with every victim released is tested first (most calls fail)."""
    elig, k, pace = s[0], s[1], s[4]
    gains: list[tuple[tuple[int, ...], tuple[int, ...]]] = []  # per victim: (nodes, whole GPUs on each)
    total: dict[int, int] = {}
    for v in victims:
        p = placements[v]
        counts = p.node_counts if len(p.nodes) > 1 else (len(p.gpus),)
        gains.append((p.nodes, counts))
        for n, c in zip(p.nodes, counts, strict=True):
            total[n] = total.get(n, 0) + c
    if not fits_after_release(free, elig, k, pace, total):
        return None
    gained: dict[int, int] = {}
    m = 0
    while True:  # the shortest prefix that fits (the whole list does)
        nodes, counts = gains[m]
        for n, c in zip(nodes, counts, strict=True):
            gained[n] = gained.get(n, 0) + c
        if fits_after_release(free, elig, k, pace, gained):
            break
        m += 1
    chosen = victims[: m + 1]
    for j in range(m - 1, -1, -1):  # spare the higher-priority victims first
        nodes, counts = gains[j]
        without = dict(gained)
        for n, c in zip(nodes, counts, strict=True):
            without[n] -= c
        if fits_after_release(free, elig, k, pace, without):
            gained = without
            chosen.remove(victims[j])
    return chosen
