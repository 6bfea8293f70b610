"""Earliest completion time: a job starts now on a slower GPU only if it would finish no later than on the next
faster placement expected to free up.

Rule, at each decision instant, over waiting jobs in SJF order (known runtime, ties -> earlier job): place the
job by the core placement rule (sim/placement.py). If it fits on an option as fast as the fastest it has in
this cluster (`fastest_speed`), it starts. Otherwise the running jobs (and those started earlier at this
instant) give their GPUs back on a copy of the free capacity, one estimated-end instant at a time
(`view.running`; an end already past counts as now), until the placement rule would put the job on a faster
placement: that instant t_fast and the job's duration d_fast there give its completion there. The job starts
now iff `now + d_now <= t_fast + d_fast` (ties start now); it always starts if nothing faster can free up.
A start changes the capacity and the releases, so after each start the jobs held so far are judged again,
shortest first: the decisions are those of repeatedly starting the first job in SJF order that passes the rule
(asking the policy again after any of its starts gives the rest of its decisions: the env relies on it).
Each job is judged alone: the freed faster GPUs are not reserved, so other jobs (shorter ones, in SJF order)
may take them first. Durations are estimates from known runtimes (true or estimated, per --runtime_info).
"""

from __future__ import annotations

import heapq

from schedulers.plan import Plan
from sim.cluster import Placement
from sim.placement import effective_speed, fastest_speed, place
from sim.simulator import Decision, View


def ect(view: View) -> list[Decision]:
    jt = view.jobs
    now = view.now_s
    plan = Plan(view.free)
    shape = jt.shape
    type_speed = view.layout.type_speed
    best: dict[tuple, float] = {}
    faster: dict[
        tuple, tuple[float, float] | None
    ] = {}  # shape -> (t_fast, speed there), for this plan state
    started: list[
        tuple[float, int, Placement]
    ] = []  # (estimated end, job, placement) of this instant's starts
    held: list[tuple[float, int]] = []  # jobs that fit but wait, in SJF order

    def judge(r: float, i: int) -> bool | None:
        """None: does not fit now; True: start; False: wait for a faster placement."""
        s = shape[i]
        p = plan.place(s)
        if p is None:
            return None
        elig, k, milli, _, pace = s
        v_best = best.get(s)
        if v_best is None:
            v_best = best[s] = fastest_speed(elig, k, milli, pace)
        v = effective_speed(type_speed[p.type_idx], len(p.nodes) > 1, pace)
        if v < v_best:
            if s not in faster:
                faster[s] = _first_faster(view, plan, started, s, v)
            found = faster[s]
            if found is not None and now + r / v > found[0] + r / found[1]:
                return False
        plan.add(i, p)
        started.append((now + r / v, i, p))
        faster.clear()  # capacity and releases changed
        return True

    for r, i in view.queue_by_runtime:
        if plan.exhausted():
            break
        verdict = judge(r, i)
        if verdict is False:
            held.append((r, i))
        elif verdict:
            # a start changes the capacity and the releases: the jobs held so far (earlier in SJF order) are
            # judged again, first one first, as a fresh call of the policy would
            n = 0
            while n < len(held) and not plan.exhausted():
                verdict = judge(*held[n])
                if verdict is False:
                    n += 1
                    continue
                del held[n]  # it started (judge the earlier held ones again) or no longer fits
                if verdict:
                    n = 0
    return plan.decisions


def _first_faster(
    view: View, plan: Plan, started: list[tuple[float, int, Placement]], s: tuple, v: float
) -> tuple[float, float] | None:
    """(t_fast, effective speed) of the first estimated-release instant at which shape `s` would be placed
    faster than `v`; None if no release frees such a placement."""
    now, placements, type_speed = view.now_s, view.placements, view.layout.type_speed
    pace = s[4]
    running = ((end, j, placements[j]) for end, j in view.running)
    releases = heapq.merge(running, started) if started else running
    free = plan.free.copy()
    pending_t = None
    for end, _, p in releases:
        t = max(end, now)
        if pending_t is not None and t > pending_t:
            found = _faster_on(free, s, v, type_speed, pace)
            if found is not None:
                return pending_t, found
        free.give(p)
        pending_t = t
    if pending_t is not None:
        found = _faster_on(free, s, v, type_speed, pace)
        if found is not None:
            return pending_t, found
    return None


def _faster_on(free, s: tuple, v: float, type_speed, pace) -> float | None:
    q = place(free, *s)
    if q is None:
        return None
    vq = effective_speed(type_speed[q.type_idx], len(q.nodes) > 1, pace)
    return vq if vq > v else None
