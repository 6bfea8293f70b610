"""The plain conservative-backfilling scan (the rule is in schedulers/cbf.py's docstring), kept unoptimised as the
reference schedulers/cbf.py must match decision for decision: no fast path, the profile as a list of
(time, free GPUs per node) rows built one release at a time, every start row and node checked by loops."""

from __future__ import annotations

import numpy as np

from schedulers.plan import Plan
from sim.cluster import FULL, Placement
from sim.placement import _options, effective_speed
from sim.simulator import Decision, View


def cbf_reference(view: View) -> list[Decision]:
    jt = view.jobs
    layout = view.layout
    now = view.now_s
    after_now = float(np.nextafter(now, np.inf))  # where an overrunning job is assumed to end
    plan = Plan(view.free)
    # releases: (time, node, GPUs); a GPU shared by fractional jobs is released whole when its last one ends
    releases = []
    shared_until: dict[int, float] = {}
    for end, j in view.running:
        p = view.placements[j]
        if p.milli == FULL:
            counts = p.node_counts or (len(p.gpus),)
            releases += [(max(end, after_now), n, c) for n, c in zip(p.nodes, counts, strict=True)]
        else:
            shared_until[p.gpus[0]] = max(shared_until.get(p.gpus[0], end), end)
    releases += [(max(end, after_now), layout.gpu_node[g], 1) for g, end in shared_until.items()]
    times = [now] + sorted({t for t, _, _ in releases})
    rows = [list(view.free.node_whole)]
    for t in times[1:]:
        row = list(rows[-1])
        for tr, n, c in releases:
            if tr == t:
                row[n] += c
        rows.append(row)

    for i in view.queue:
        elig, k, milli, mem_mb, pace = jt.shape[i]
        known = jt.known_runtime_s[i]
        need = 1 if milli < FULL else k
        best = None  # (completion, start row, nodes, counts, type)
        for o in _options(elig, need, pace):
            d = known / o.rate
            nodes = [n for n in range(layout.num_nodes) if layout.node_pool[n] in o.pools]
            for a in range(len(times)):
                if best is not None and times[a] + d >= best[0]:
                    break
                window = [r for r in range(a, len(times)) if r == a or times[r] < times[a] + d]
                low = {n: min(rows[r][n] for r in window) for n in nodes}
                if o.multi_type < 0:
                    ok = [n for n in nodes if low[n] >= need]
                    if ok:
                        n = min(ok, key=lambda n: (rows[a][n], n))
                        best = (times[a] + d, a, [n], [need], layout.node_type[n])
                        break
                elif sum(low.values()) >= k:
                    take_n, take_c, left = [], [], k
                    for n in sorted(nodes, key=lambda n: (-low[n], n)):
                        c = min(low[n], left)
                        if c > 0:
                            take_n.append(n)
                            take_c.append(c)
                            left -= c
                    best = (times[a] + d, a, take_n, take_c, o.multi_type)
                    break
        if milli < FULL:
            shared = _shared_now(view, plan, i, shared_until, best[0])
            if shared is not None:
                plan.add(i, shared)
                shared_until[shared.gpus[0]] = max(
                    shared_until.get(shared.gpus[0], -1.0), now + view.duration_on(i, shared)
                )
                continue
        end, a, take_n, take_c, t = best
        # reserve: split the row holding `end` (a zero-length run holds its GPUs until the next instant), then
        # remove the GPUs from every row of [start, end)
        end = max(end, float(np.nextafter(times[a], np.inf)))
        if end not in times:
            b = max(r for r in range(len(times)) if times[r] < end)
            times.insert(b + 1, end)
            rows.insert(b + 1, list(rows[b]))
        for r in range(a, len(times)):
            if r == a or times[r] < end:
                for n, c in zip(take_n, take_c, strict=True):
                    rows[r][n] -= c
        if a == 0:
            p = _placement_now(plan, take_n, take_c, t, k, milli, mem_mb)
            plan.add(i, p)
            if milli < FULL:
                g = p.gpus[0]
                shared_until[g] = max(shared_until.get(g, -1.0), now + view.duration_on(i, p))
    return plan.decisions


def _shared_now(view: View, plan: Plan, i: int, shared_until: dict, before_s: float) -> Placement | None:
    jt = view.jobs
    layout = view.layout
    elig, _, milli, mem_mb, pace = jt.shape[i]
    free = plan.free
    found = []
    for g, until in shared_until.items():
        n = layout.gpu_node[g]
        if not (milli <= free.free_milli[g] < FULL and free.free_mem_mb[g] >= mem_mb and n in elig.nodes):
            continue
        v = layout.type_speed[layout.node_type[n]]
        end = view.now_s + jt.known_runtime_s[i] / effective_speed(v, False, pace)
        if end <= until and end <= before_s:
            found.append((-v, int(free.free_milli[g]), g))
    if not found:
        return None
    g = min(found)[2]
    n = layout.gpu_node[g]
    return Placement((g,), (n,), milli, mem_mb, layout.node_type[n])


def _placement_now(plan: Plan, nodes, counts, t, k, milli, mem_mb) -> Placement:
    free = plan.free
    layout = free.layout
    gpus = []
    for n, c in zip(nodes, counts, strict=True):
        own = range(layout.node_first_gpu[n], layout.node_first_gpu[n] + layout.node_num_gpus[n])
        if milli < FULL:
            ok = [g for g in own if free.free_milli[g] >= milli and free.free_mem_mb[g] >= mem_mb]
            g = min(ok, key=lambda g: (free.free_milli[g], g))
            return Placement((g,), (n,), milli, mem_mb, t)
        gpus += [g for g in own if free.free_milli[g] == FULL][:c]
    if len(nodes) > 1:
        return Placement(tuple(gpus), tuple(nodes), FULL, 0, t, -1, tuple(counts))
    first = gpus[0] if gpus[-1] - gpus[0] == k - 1 else -1
    return Placement(tuple(gpus), tuple(nodes), FULL, 0, t, first)
