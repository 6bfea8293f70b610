"""A plain, unoptimised Gavel round (the rule is in schedulers/gavel.py), kept as the reference the policy must
match decision for decision: throughputs recomputed per job from the layout by loops, the LP solved again at
every boundary (no memo; the LP itself is cross-checked against a per-job LP in tests/test_gavel.py), attained
service recomputed from the run records, one Python sort per type, and full copies of the free state."""

from __future__ import annotations

import math

from schedulers.gavel_lp import agnostic_allocation, aware_allocation
from sim.cluster import FULL, gb_to_mb
from sim.placement import effective_speed, place
from sim.simulator import Decision, Preempt, View, WakeUp

ROUND_S = 360.0  # Gavel's default round (time_per_iteration)


def _throughput(view: View, i: int, t: int) -> float:
    """Reference seconds of work per second of job i on type t (spread when no acceptable node of t is big
    enough for it), 0 on a type it cannot use."""
    layout = view.layout
    elig, k, milli, _, pace = view.jobs.shape[i]
    nodes = [n for n in elig.nodes if layout.node_type[n] == t]
    if not nodes:
        return 0.0
    spans = milli == FULL and k > max(layout.node_num_gpus[n] for n in nodes)
    return effective_speed(layout.type_speed[t], spans, pace)


def _attained(view: View, i: int, running: bool) -> float:
    got = view.attained_gpu_s[i]
    if running:
        got += (view.now_s - view.run_start_s[i]) * view.jobs.gpu_demand[i]
    return got


def gavel_reference(aware: bool = True):
    def policy(view: View) -> list:
        import numpy as np

        now = view.now_s
        k = math.floor(now / ROUND_S)
        wake = WakeUp((k + 1) * ROUND_S)
        if k * ROUND_S != now:
            return [wake]
        jt = view.jobs
        layout = view.layout
        running = [j for _, j in view.running]
        active = sorted(list(view.queue) + running)
        if not active:
            return []
        types = range(len(layout.type_names))
        thr = np.array([[_throughput(view, i, t) for t in types] for i in active]).reshape(len(active), -1)
        scale = np.array([float(jt.num_gpus[i]) for i in active])
        gpus = np.array([float(g) for g in layout.type_num_gpus])
        x = aware_allocation(thr, scale, gpus) if aware else agnostic_allocation(thr > 0, scale, gpus)
        prio = {}
        for r, i in enumerate(active):
            stay = now - jt.arrival_s[i]
            frac = _attained(view, i, i in running) / (jt.gpu_demand[i] * stay) if stay > 0 else 0.0
            for t in types:
                xv = float(x[r, t])
                if xv <= 1e-9:
                    prio[i, t] = 0.0
                elif frac > 0:
                    prio[i, t] = xv / frac
                else:
                    prio[i, t] = xv * 1e9
        chosen: dict[int, int] = {}
        for t in types:
            left = layout.type_num_gpus[t]
            cands = [
                (
                    -prio[i, t],
                    -float(x[r, t]),
                    0 if i in running and view.placements[i].type_idx == t else 1,
                    i,
                )
                for r, i in enumerate(active)
                if thr[r, t] > 0
            ]
            cands.sort()
            for *_, i in cands:
                if left == 0:
                    break
                if i in chosen or jt.num_gpus[i] > left:
                    continue
                chosen[i] = t
                left -= jt.num_gpus[i]
        out: list = []
        free = view.free.copy()
        for i in running:
            if chosen.get(i) != view.placements[i].type_idx:
                free.give(view.placements[i])
                out.append(Preempt(i))
        for i, t in chosen.items():
            if i in running and view.placements[i].type_idx == t:
                continue
            _, k_gpus, milli, mem_mb, pace = jt.shape[i]
            elig_t = layout.eligible((layout.type_names[t],), gb_to_mb(jt.jobs[i].gpu_mem_gb))
            p = place(free, elig_t, k_gpus, milli, mem_mb, pace)
            if p is not None:
                free = free.copy()
                free.take(p)
                out.append(Decision(i, p))
        return [*out, wake]

    return policy
