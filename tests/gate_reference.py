"""Plain, unoptimised sjf_gate and ect (rules in schedulers/sjf_gate.py and schedulers/ect.py), kept as the
references the schedulers must match decision for decision: a full per-GPU free-state copy per job, the fastest
option found by trying every acceptable type, and ECT's releases re-applied from scratch for every instant."""

from __future__ import annotations

from schedulers.sjf_gate import DEFAULT_GATE_S
from sim.cluster import FULL
from sim.placement import effective_speed, place, spans_nodes_on
from sim.simulator import Decision, View


def best_speed(view: View, job: int) -> float:
    """The effective speed of the fastest type the job could ever run on in this cluster, type by type."""
    elig, k, milli, _, pace = view.jobs.shape[job]
    speeds = [
        effective_speed(view.layout.type_speed[t], spans_nodes_on(elig, k, milli, t), pace)
        for t in elig.types
        if milli < FULL or elig.type_total[t] >= k
    ]
    return max(speeds, default=0.0)


def speed_of(view: View, job: int, p) -> float:
    return effective_speed(view.layout.type_speed[p.type_idx], len(p.nodes) > 1, view.jobs.shape[job][4])


def sjf_gate_reference(view: View, gate_s: float = DEFAULT_GATE_S) -> list[Decision]:
    free = view.free.copy()
    decisions: list[Decision] = []
    for _, i in sorted((view.jobs.known_runtime_s[i], i) for i in view.queue):
        p = place(free, *view.jobs.shape[i])
        if p is None:
            continue
        r = view.jobs.known_runtime_s[i]
        extra = r / speed_of(view, i, p) - r / best_speed(view, i)
        if (view.running or decisions) and extra > gate_s:
            continue
        free.take(p)
        decisions.append(Decision(i, p))
    return decisions


def ect_reference(view: View) -> list[Decision]:
    """Repeatedly start the first job in SJF order that passes the rule, rescanning the whole queue."""
    now = view.now_s
    free = view.free.copy()
    decisions: list[Decision] = []
    ends: list[tuple[float, object]] = [(end, view.placements[j]) for end, j in view.running]
    while True:
        for i in sorted((view.jobs.known_runtime_s[i], i) for i in view.queue):
            i = i[1]
            if any(d.job == i for d in decisions):
                continue
            p = place(free, *view.jobs.shape[i])
            if p is None:
                continue
            r, v = view.jobs.known_runtime_s[i], speed_of(view, i, p)
            if v < best_speed(view, i) and not _ends_first(view, free, ends, i, now + r / v, v):
                continue
            free.take(p)
            decisions.append(Decision(i, p))
            ends.append((now + r / v, p))
            break
        else:
            return decisions


def _ends_first(view: View, free, ends, i: int, end_now: float, v: float) -> bool:
    now, r = view.now_s, view.jobs.known_runtime_s[i]
    for t in sorted({max(end, now) for end, _ in ends}):
        later = free.copy()
        for end, q in ends:
            if max(end, now) <= t:
                later.give(q)
        q = place(later, *view.jobs.shape[i])
        if q is not None and speed_of(view, i, q) > v:
            return end_now <= t + r / speed_of(view, i, q)
    return True
