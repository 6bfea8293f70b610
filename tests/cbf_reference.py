"""The plain conservative-backfilling scan (the rule is in schedulers/cbf.py's docstring), kept unoptimised as the
reference schedulers/cbf.py must match decision for decision: no fast path, the profile as a list of
(time, free GPUs per node) rows built one release at a time, every start row and node checked by loops."""

from __future__ import annotations

from weakref import WeakKeyDictionary

import numpy as np

from schedulers.plan import Plan
from sim.cluster import FULL, Placement
from sim.placement import _options, effective_speed
from sim.simulator import Decision, View


def cbf_reference(view: View) -> list[Decision]:
    """In a run with fractional jobs and exact runtimes: the schedule from scratch, unless it starts a job later
    than its previous reservation (one that starts now or later), in which case the rebuild holding every
    previous slot. Otherwise the schedule from scratch."""
    jt = view.jobs
    exact = list(jt.known_runtime_s) == list(jt.runtime_s)
    if not (exact and any(m < FULL for m in jt.milli)):
        return _scan(view, {})[0]
    now = view.now_s
    last = _PREVIOUS.get(jt)
    prev = last[1] if last is not None and last[0] <= now else {}
    decisions, res = _scan(view, {})
    if any(prev[i][0] >= now and res[i][0] > prev[i][0] for i in res if i in prev):
        decisions, res = _scan(view, prev)
    _PREVIOUS[jt] = (now, {i: r for i, r in res.items() if not r[5]})
    return decisions


_PREVIOUS: WeakKeyDictionary = WeakKeyDictionary()
"""JobTable -> (time, job -> (start, end, nodes, counts, type, starts now)) of the last call"""


def _scan(view: View, prev: dict) -> tuple[list[Decision], dict]:
    """(decisions, job -> (start, end, nodes, counts, type, starts now)) of the scan in queue order, where each
    job's previous slot in `prev` (if it starts now or later and still fits) is held until the job's turn, and
    kept if the job's new reservation would start later."""
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

    held = {}
    for i in view.queue:
        h = prev.get(i)
        if h is not None and h[0] >= now and _fits(times, rows, *h[:4]):
            _hold(times, rows, *h[:4], -1)
            held[i] = h
    out = {}
    for i in view.queue:
        h = held.get(i)
        if h is not None:
            _hold(times, rows, *h[:4], 1)
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
            shared = _shared_now(view, plan, i, shared_until, best[0] if best else np.inf)
            if shared is not None:
                plan.add(i, shared)
                end = now + view.duration_on(i, shared)
                shared_until[shared.gpus[0]] = max(shared_until.get(shared.gpus[0], -1.0), end)
                out[i] = (now, end, shared.nodes, (), shared.type_idx, True)
                continue
        if h is not None and (best is None or times[best[1]] > h[0]):
            start, end, take_n, take_c, t = h[0], h[1], list(h[2]), list(h[3]), h[4]
        elif best is None:
            continue  # no option frees (its nodes are off)
        else:
            end, a, take_n, take_c, t = best
            start = times[a]
        _hold(times, rows, start, end, take_n, take_c, -1)
        now_start = start == now
        out[i] = (start, end, tuple(take_n), tuple(take_c), t, now_start)
        if now_start:
            p = _placement_now(plan, take_n, take_c, t, k, milli, mem_mb)
            plan.add(i, p)
            if milli < FULL:
                g = p.gpus[0]
                shared_until[g] = max(shared_until.get(g, -1.0), now + view.duration_on(i, p))
    return plan.decisions, out


def _at(times: list, rows: list, t: float) -> int:
    """The row that starts at t (split from the row holding t if none does)."""
    if t not in times:
        b = max(r for r in range(len(times)) if times[r] < t)
        times.insert(b + 1, t)
        rows.insert(b + 1, list(rows[b]))
    return times.index(t)


def _window(times: list, rows: list, start: float, end: float) -> list[int]:
    """The rows of [start, end) (a zero-length run holds its GPUs until the next instant)."""
    end = max(end, float(np.nextafter(start, np.inf)))
    a = _at(times, rows, max(start, times[0]))
    _at(times, rows, end)
    return [r for r in range(a, len(times)) if r == a or times[r] < end]


def _fits(times, rows, start, end, nodes, counts) -> bool:
    return all(
        rows[r][n] >= c for r in _window(times, rows, start, end) for n, c in zip(nodes, counts, strict=True)
    )


def _hold(times, rows, start, end, nodes, counts, sign: int) -> None:
    """Add sign x counts[x] GPUs to node nodes[x] during [start, end)."""
    for r in _window(times, rows, start, end):
        for n, c in zip(nodes, counts, strict=True):
            rows[r][n] += sign * c


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
