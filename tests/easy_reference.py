"""The plain arrival-order EASY scan (the rule is in schedulers/easy.py's docstring), kept unoptimised as the
reference the shape-by-shape schedulers/easy.py must match decision for decision: full per-GPU copies of the
free state, every job tested one by one, every release applied one by one."""

from __future__ import annotations

from schedulers.plan import Plan
from sim.cluster import FULL, FreeState, Placement
from sim.placement import _options, alternatives, place
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
        for alt in _with_other_spreads(plan.free, shadow, jt.shape[i], jt.shape[head]):
            shadow.take(alt)  # (b) some placement leaves room for the head
            if place(shadow, *jt.shape[head]) is not None:
                plan.add(i, alt)
                refused.clear()
                break
            shadow.give(alt)
        else:
            refused.add(jt.shape[i])
    return plan.decisions


def _with_other_spreads(free: FreeState, shadow: FreeState, shape: tuple, head_shape: tuple):
    """The shape's alternatives, each spread followed by the spreads of its type that protect one head option
    each (in the head's option order): for a one-node option, each of its nodes m (ascending) where the head
    fits in the shadow state, m giving at most its shadow GPUs beyond the head's need; for a spread option of
    the same type, its nodes last and giving at most their shadow GPUs beyond the head's need in all."""
    elig, k, milli = shape[:3]
    layout = free.layout
    h_elig, h_k, h_milli, _, h_pace = head_shape
    need = 1 if h_milli < FULL else h_k
    for alt in alternatives(free, *shape):
        yield alt
        if milli < FULL or len(alt.nodes) == 1:
            continue
        t = alt.type_idx
        nodes = [n for n in elig.nodes if layout.node_type[n] == t]
        for o in _options(h_elig, need, h_pace):
            h_nodes = [n for n in h_elig.nodes if layout.node_pool[n] in o.pools]
            if o.multi_type < 0:
                for m in h_nodes:
                    room = shadow.node_whole[m] - need
                    if room >= 0:
                        cap = {
                            n: min(free.node_whole[n], room) if n == m else free.node_whole[n] for n in nodes
                        }
                        p = _spread(free, nodes, cap, set(), k, k, t)
                        if p is not None:
                            yield p
            else:
                spare = sum(shadow.node_whole[n] for n in h_nodes) - h_k
                if spare >= 0:
                    cap = {n: free.node_whole[n] for n in nodes}
                    p = _spread(free, nodes, cap, set(h_nodes), spare, k, t)
                    if p is not None:
                        yield p


def _spread(free: FreeState, nodes, cap: dict, last: set, budget: int, k: int, t: int) -> Placement | None:
    """k GPUs over `nodes`, at most cap[n] on node n and `budget` over the nodes in `last`, taken from the nodes
    not in `last` first, then most capacity first, then lower index; None if they hold fewer than k."""
    gpus, used, counts = [], [], []
    for n in sorted(nodes, key=lambda n: (n in last, -cap[n], n)):
        c = min(cap[n], k - len(gpus))
        if n in last:
            c = min(c, budget)
            budget -= c
        if c > 0:
            first = free.layout.node_first_gpu[n]
            own = range(first, first + free.layout.node_num_gpus[n])
            gpus += [g for g in own if free.free_milli[g] == FULL][:c]
            used.append(n)
            counts.append(c)
    if len(gpus) < k:
        return None
    return Placement(tuple(gpus), tuple(used), FULL, 0, t, -1, tuple(counts))


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
