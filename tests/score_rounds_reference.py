"""A plain, unoptimised score round (the rule is in schedulers/score_rounds.py), kept as the reference the policy
must match decision for decision: every feature recomputed per row by loops from the View (`attained_now`,
`progress_now`), scores as plain sums, one Python sort of (key, row) tuples, room counted in a dict, full copies of
the free state. It shares no code with the policy: only the simulator's View and its placement rule.

`weights` is {feature name: weight}; `grid` rounds every feature to a multiple of it before weighting (the test
uses 1e-6 on both sides so that the two implementations' last-bit differences in logarithms cannot reorder rows).
"""

from __future__ import annotations

import math

from sim.cluster import FULL, gb_to_mb
from sim.placement import effective_speed, place
from sim.simulator import Decision, Preempt, View, WakeUp


def _speed(view: View, i: int, t: int) -> float:
    """Job i's speed on type t (spread when no acceptable node of t is big enough), 0 if it cannot use t."""
    layout = view.layout
    elig, k, milli, _, pace = view.jobs.shape[i]
    nodes = [n for n in elig.nodes if layout.node_type[n] == t]
    if not nodes:
        return 0.0
    spans = milli == FULL and k > max(layout.node_num_gpus[n] for n in nodes)
    return max(effective_speed(layout.type_speed[t], spans, pace), 0.0)


def _lm(seconds: float) -> float:
    return math.log1p(seconds / 60.0)


def _features(view: View, i: int, t: int, running: dict[int, int]) -> dict[str, float]:
    """Row (i, t)'s features by name, straight from their definitions."""
    jt = view.jobs
    layout = view.layout
    now = view.now_s
    types = range(len(layout.type_names))
    v = _speed(view, i, t)
    best = max(_speed(view, i, u) for u in types)
    demand = jt.gpu_demand[i]
    known = jt.known_runtime_s[i]
    is_running = i in running
    attained = view.attained_now(i) if is_running else view.attained_gpu_s[i]
    done = view.progress_now(i) if is_running else view.progress_s[i]
    remaining = max(known - done, 0.0)
    here = is_running and running[i] == t
    if is_running:
        waited = 0.0
    elif view.preemptions[i]:
        waited = now - view.preempted_at_s[i]
    else:
        waited = now - jt.arrival_s[i]
    pays = (is_running and not here) or (not is_running and view.preemptions[i] > 0)
    left_here = remaining / v
    overhead = view.restore_overhead_s
    gpus_t = layout.type_num_gpus[t]
    return {
        "log_est_runtime": _lm(known),
        "log_gpu_demand": math.log1p(demand),
        "log_rel_speed": math.log(v / best),
        "rel_speed": v / best,
        "log_speed": math.log(v),
        "type_share": gpus_t / layout.num_gpus,
        "demand_share": demand / gpus_t,
        "log_est_remaining": _lm(remaining),
        "log_attained_gpu": _lm(attained),
        "log_attained_time": _lm(attained / demand),
        "log_time_in_system": _lm(now - jt.arrival_s[i]),
        "log_waiting": _lm(waited),
        "running": 1.0 if is_running else 0.0,
        "log_preemptions": math.log1p(view.preemptions[i]),
        "log_est_remaining_here": _lm(left_here),
        "runs_here": 1.0 if here else 0.0,
        "pays_restore": 1.0 if pays else 0.0,
        "restore_share": overhead / (overhead + left_here) if pays and overhead > 0 else 0.0,
    }


def _on_grid(x: float, grid: float) -> float:
    return math.floor(x / grid + 0.5) * grid if grid else x


def _placement_on(view: View, free, i: int, t: int):
    jt = view.jobs
    _, k, milli, mem_mb, pace = jt.shape[i]
    elig_t = view.layout.eligible((view.layout.type_names[t],), gb_to_mb(jt.jobs[i].gpu_mem_gb))
    return place(free, elig_t, k, milli, mem_mb, pace)


def score_rounds_reference(
    weights: dict[str, float], round_s: float, grid: float = 0.0, order=None, on_arrival: bool = False
):
    """The policy of weights `weights`; `order` is the feature order in which the weighted sum is taken;
    `on_arrival`: an instant at which some waiting job arrived is a round too."""
    names = list(order or weights)

    def score(f: dict[str, float]) -> float:
        s = 0.0
        for name in names:
            w = weights.get(name, 0.0)
            if w != 0.0:
                s += _on_grid(f[name], grid) * w
        return s

    def policy(view: View) -> list:
        now = view.now_s
        k = math.floor(now / round_s)
        wake = WakeUp((k + 1) * round_s)
        jt = view.jobs
        layout = view.layout
        types = range(len(layout.type_names))
        running = {j: view.placements[j].type_idx for _, j in view.running}
        waiting = list(view.queue)
        if not running and not waiting:
            return []
        at_round = k * round_s == now or (on_arrival and any(jt.arrival_s[i] == now for i in waiting))
        if not at_round:
            fits = [i for i in waiting if place(view.free, *jt.shape[i]) is not None]
            if not fits:
                return [wake]
            if len(fits) == 1:
                return [Decision(fits[0], place(view.free, *jt.shape[fits[0]])), wake]
            jobs = fits
        else:
            jobs = waiting + list(running)
        rows = []
        for i in jobs:
            for t in types:
                if _speed(view, i, t) > 0:
                    f = _features(view, i, t, running)
                    rows.append(((-score(f), 0 if f["runs_here"] else 1, i, t), i, t))
        rows.sort()
        ranked: list[int] = []
        for _, i, _ in rows:
            if i not in ranked:
                ranked.append(i)
        free = view.free.copy()
        out: list = []
        if at_round:
            room = {t: layout.type_num_gpus[t] * FULL for t in types}
            chosen: dict[int, int] = {}
            for i in sorted(running):  # still restoring: keeps its GPUs whatever the scores
                if view.restore_overhead_s > 0 and view.run_work_start_s[i] >= now:
                    chosen[i] = running[i]
                    room[running[i]] -= jt.num_gpus[i] * jt.milli[i]
            for _, i, t in rows:
                need = jt.num_gpus[i] * jt.milli[i]
                if i not in chosen and need <= room[t]:
                    chosen[i] = t
                    room[t] -= need
            released = sorted(i for i in running if chosen.get(i) != running[i])
            for i in released:
                free.give(view.placements[i])
            started = []
            for i, t in chosen.items():
                if i in running and running[i] == t:
                    continue
                p = _placement_on(view, free, i, t)
                if p is not None:
                    free.take(p)
                    started.append(Decision(i, p))
            begun = {d.job for d in started}
            for i in released:
                if i not in begun and free.fits(view.placements[i]):
                    free.take(view.placements[i])
                else:
                    out.append(Preempt(i))
            out += started
            candidates = [i for i in ranked if i not in begun and (i in waiting or Preempt(i) in out)]
        else:
            candidates = ranked
        for i in candidates:
            p = place(free, *jt.shape[i])
            if p is not None:
                free.take(p)
                out.append(Decision(i, p))
        return [*out, wake]

    return policy
