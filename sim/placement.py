"""Where a job goes and how long it runs there: the one placement rule shared by every policy and the Gymnasium env.

Rule (documented in docs/model.md):
- a job's duration on a placement is its reference runtime / the type's speed, x its multi-node factor when the
  placement spans nodes (`effective_speed`; a job's `Pace` says which of the two apply to it). A job with a job
  type (--job_types) has its own speed per type, solo and spread, in its Pace (sim/throughput.py); options are
  then ranked by its own durations.
- whole-GPU job of k GPUs: its options are one node of each acceptable speed group (types of equal speed) that
  has nodes of >= k GPUs, and, on each acceptable type whose nodes all have fewer than k GPUs (but together
  enough), a spread over nodes of that type. Options are ranked by estimated completion, i.e. by duration
  (faster effective speed first; ties -> one node before a spread, then the faster type). The job takes the
  first option that is free now. Within a one-node option: best fit (the node with the fewest free whole GPUs
  that still has k; ties -> lower node index). Within a spread: the nodes with the most free GPUs first, so
  that it spans as few nodes as possible. A job never spreads on a type that has a node big enough for it
  (it waits for such a node, or takes another option), and never waits while some option is free now (waiting
  for a busy, faster type is a policy's choice: EASY's reservation, not the placement rule's).
- fractional job (gpu_milli < 1000): one GPU with enough free share and memory, of the fastest acceptable type
  (for a typed job: by its own speed) that has one, best fit within it (the GPU with the smallest sufficient free share; ties -> lower GPU index),
  so partially used GPUs are packed before whole ones are broken.
- `alternatives` lists, in the same preference order, the other placements the rule could give: every node
  with >= k free GPUs of each one-node option (best-fit order), each free spread, and for a fractional job the
  best-fit GPU of each speed. EASY tries them when the first one would delay its reservation.
"""

from __future__ import annotations

from collections.abc import Iterator
from heapq import merge
from typing import NamedTuple

import numpy as np

from sim.cluster import FULL, Eligible, FreeState, Placement

_BIG = np.iinfo(np.int64).max
_tuple_new = tuple.__new__  # Placement(...) without the NamedTuple constructor's extra call (hot path)


class Pace(NamedTuple):
    """How one job's duration depends on its placement (hashable: part of a job's shape)."""

    multi_node_factor: float = 1.2
    """duration multiplier when the placement spans several nodes (1.0: no penalty)"""
    scales_with_speed: bool = True
    """False: the job runs its reference runtime on every GPU type"""
    job_speeds: tuple[tuple[float, float, float], ...] = ()
    """a job with a job type (sim/throughput.py): (layout type speed, its speed on one node, its speed spread
    over nodes) per distinct type speed of the layout; () = the type speed applies (no job type). Keyed by the
    layout's type speed so that every `effective_speed(type_speed, spans, pace)` call picks it up; types of equal
    layout speed have equal per-job speeds by construction (sim/throughput.py, checked by the JobTable)"""


DEFAULT_PACE = Pace()


def effective_speed(speed: float, spans_nodes: bool, pace: Pace) -> float:
    """Reference seconds of work done per second on a placement: duration = runtime_s / effective_speed.

    The one duration formula: the simulator, every policy and the env call it (or `duration_s`). `speed` is
    the placement's layout type speed (`layout.type_speed[type_idx]`)."""
    if pace.job_speeds:
        return _job_speed(speed, spans_nodes, pace)
    v = speed if pace.scales_with_speed else 1.0
    if spans_nodes:
        v /= pace.multi_node_factor
    return v


def _job_speed(speed: float, spans_nodes: bool, pace: Pace) -> float:
    """A typed job's own speed on the layout type of speed `speed` (its Pace's table)."""
    for v, solo, spread in pace.job_speeds:
        if v == speed:
            return spread if spans_nodes else solo
    raise ValueError(f"no per-job speed for GPU type speed {speed} in {pace.job_speeds}")


def duration_s(runtime_s: float, speed: float, spans_nodes: bool, pace: Pace) -> float:
    """How long a job of reference runtime `runtime_s` runs on a placement of that speed and node span."""
    return runtime_s / effective_speed(speed, spans_nodes, pace)


def spans_nodes_on(elig: Eligible, num_gpus: int, milli: int, type_idx: int) -> bool:
    """Whether the rule spreads a job of this shape over several nodes when it runs on type `type_idx`."""
    return milli == FULL and num_gpus > elig.type_max_node[type_idx]


class _Option(NamedTuple):
    rate: float  # effective speed on this option
    multi_type: int  # -1: one node of `pools`; else: spread over the acceptable nodes of this type
    pools: tuple[int, ...]


def _options(elig: Eligible, k: int, pace: Pace) -> tuple[_Option, ...]:
    """A whole-GPU shape's options in preference order (memoised on the Eligible object)."""
    key = (k, pace)
    opts = elig.options.get(key)
    if opts is None:
        layout = elig._layout
        ranked = []
        for g, (max_gpus, pools) in enumerate(elig.speed_groups):
            if max_gpus >= k:
                v = layout.pool_speed[pools[0]]
                ranked.append(((-effective_speed(v, False, pace), 0, -v, g), _Option(0.0, -1, pools)))
        for t in elig.types:
            if elig.type_max_node[t] < k <= elig.type_total[t]:
                v = layout.type_speed[t]
                ranked.append(
                    ((-effective_speed(v, True, pace), 1, -v, t), _Option(0.0, t, elig.type_pools[t]))
                )
        ranked.sort(key=lambda e: e[0])
        opts = elig.options[key] = tuple(o._replace(rate=-r[0]) for r, o in ranked)
    elig.options_by_k[k] = (pace, opts)
    return opts


def fastest_speed(elig: Eligible, num_gpus: int, milli: int, pace: Pace = DEFAULT_PACE) -> float:
    """The effective speed of the fastest option a job shape has in this cluster (0.0 if it has none): its
    shortest possible duration is runtime / this. A whole-GPU shape's options are `place`'s (one node of a
    big-enough type, or a spread where every node is too small); a fractional one runs on one GPU of any
    acceptable speed."""
    if milli < FULL:
        groups = elig.speed_groups
        return effective_speed(elig._layout.pool_speed[groups[0][1][0]], False, pace) if groups else 0.0
    opts = _options(elig, num_gpus, pace)
    return opts[0].rate if opts else 0.0


def place(
    free: FreeState, elig: Eligible, num_gpus: int, milli: int, mem_mb: int, pace: Pace = DEFAULT_PACE
) -> Placement | None:
    """A placement for the job shape on `free` now, or None if it does not fit now."""
    if milli < FULL:
        return _place_fraction(free, elig, milli, mem_mb, -1, pace)
    if _too_few_whole(free.type_whole, elig, num_gpus):
        return None
    hit = elig.options_by_k.get(num_gpus)
    opts = hit[1] if hit is not None and hit[0] is pace else _options(elig, num_gpus, pace)
    for _, t, pools in opts:
        if t < 0:
            found = _find_one_node(free, pools, num_gpus)
            if found is not None:
                return _gpus_on_node(free, found[0], num_gpus, found[1])
        elif _type_has(free, t, pools, num_gpus):
            return _place_multi_node(free, pools, num_gpus, t)
    return None


def alternatives(
    free: FreeState, elig: Eligible, num_gpus: int, milli: int, mem_mb: int, pace: Pace = DEFAULT_PACE
) -> Iterator[Placement]:
    """Every placement free now that the rule could give if the earlier ones were unavailable, in preference
    order (the first is `place`'s).

    Whole-GPU jobs: per option free now, in option order: for a one-node option every node with >= k free
    GPUs in best-fit order (fewest free first, ties -> lower node index); for a spread its one placement
    (most-free nodes first). Fractional jobs: the best-fit GPU within each acceptable speed, fastest first.
    """
    if milli < FULL:
        ranks = _fraction_key(elig, pace)[1] if pace.job_speeds else len(elig.speed_groups)
        for rank in range(ranks):
            p = _place_fraction(free, elig, milli, mem_mb, rank, pace)
            if p is not None:
                yield p
        return
    for o, node, c in alternative_slots(free, elig, num_gpus, pace):
        yield alternative_placement(free, o, node, c, num_gpus)


def alternative_slots(
    free: FreeState, elig: Eligible, k: int, pace: Pace
) -> Iterator[tuple[_Option, int, int]]:
    """`alternatives` of a whole-GPU shape before they are built: (option, node, its free GPUs) for a one-node
    alternative, (option, -1, 0) for a spread."""
    if _too_few_whole(free.type_whole, elig, k):
        return
    pool_free = free.pool_free
    for o in _options(elig, k, pace):
        if o.multi_type < 0:
            if len(o.pools) == 1:  # (most options: one pool, whose empty counts are skipped here)
                q = o.pools[0]
                by_c = pool_free[q]
                for c in range(k, len(by_c)):
                    if by_c[c]:
                        for n in free.nodes_ascending(q, c):
                            yield o, n, c
                continue
            for c in range(k, max(len(pool_free[q]) for q in o.pools)):
                for n in _nodes_with(free, o.pools, c):
                    yield o, n, c
        elif _type_has(free, o.multi_type, o.pools, k):
            yield o, -1, 0


def alternative_placement(free: FreeState, o: _Option, node: int, num_free: int, k: int) -> Placement:
    """The placement of one `alternative_slots` entry."""
    if node >= 0:
        return _gpus_on_node(free, node, k, num_free)
    return _place_multi_node(free, o.pools, k, o.multi_type)


def _too_few_whole(type_whole: list[int], elig: Eligible, k: int) -> bool:
    """Fewer than k whole GPUs free over all acceptable types (the cheap test that rejects most shapes)."""
    types = elig.types
    if len(types) == 1:
        return type_whole[types[0]] < k
    if len(types) == 2:
        return type_whole[types[0]] + type_whole[types[1]] < k
    if len(types) == len(type_whole):  # every type (a job that accepts any)
        return sum(type_whole) < k
    return sum(map(type_whole.__getitem__, types)) < k


def _type_has(free: FreeState, t: int, pools: tuple[int, ...], k: int) -> bool:
    """Whether a spread over type t has k whole GPUs free on its acceptable nodes (`pools`)."""
    if free.type_whole[t] < k:
        return False
    if len(pools) == free.layout.type_num_pools[t]:  # every pool of t: its whole GPUs free are the type's
        return True
    pool_free = free.pool_free
    return sum(c * len(by_c[c]) for q in pools for by_c in (pool_free[q],) for c in range(1, len(by_c))) >= k


def _find_one_node(free: FreeState, pools: tuple[int, ...], k: int) -> tuple[int, int] | None:
    """(node, its free whole GPUs) chosen by best fit over `pools`, or None."""
    pool_free = free.pool_free
    best_c = best_node = -1
    for q in pools:
        by_c = pool_free[q]
        for c in range(k, len(by_c)):
            if by_c[c]:
                if best_c < 0 or c < best_c:
                    best_c, best_node = c, free.min_node(q, c)
                elif c == best_c:
                    best_node = min(best_node, free.min_node(q, c))
                break
    return None if best_c < 0 else (best_node, best_c)


def _nodes_with(free: FreeState, pools: tuple[int, ...], c: int) -> Iterator[int]:
    """The nodes of `pools` with exactly c whole free GPUs, ascending (lazily: callers often need only the first
    few; a big pool's NodeSet is walked in order, a small pool's set sorted)."""
    pool_free = free.pool_free
    if len(pools) == 1:
        by_c = pool_free[pools[0]]
        return free.nodes_ascending(pools[0], c) if c < len(by_c) else iter(())
    qs = [q for q in pools if c < len(pool_free[q]) and pool_free[q][c]]
    big = free.layout.pool_big
    if not any(big[q] for q in qs):  # small pools: sorting their nodes (in C) beats a merge (in Python)
        return iter(sorted([n for q in qs for n in pool_free[q][c]]))
    its = [free.nodes_ascending(q, c) for q in qs]
    return its[0] if len(its) == 1 else merge(*its)


def can_place(
    free: FreeState, elig: Eligible, num_gpus: int, milli: int, mem_mb: int, pace: Pace = DEFAULT_PACE
) -> bool:
    """Whether `place` would find a placement (from free counts alone for whole-GPU shapes)."""
    return fit_type(free, elig, num_gpus, milli, mem_mb, pace) >= 0


def fit_type(
    free: FreeState, elig: Eligible, num_gpus: int, milli: int, mem_mb: int, pace: Pace = DEFAULT_PACE
) -> int:
    """The GPU type index `place` would use now, or -1 if the job does not fit now (cheaper than `place`:
    whole-GPU shapes are decided from free counts alone). Whether it spans nodes: `spans_nodes_on`."""
    if milli < FULL:
        p = _place_fraction(free, elig, milli, mem_mb, -1, pace)
        return -1 if p is None else p.type_idx
    if _too_few_whole(free.type_whole, elig, num_gpus):
        return -1
    hit = elig.options_by_k.get(num_gpus)
    opts = hit[1] if hit is not None and hit[0] is pace else _options(elig, num_gpus, pace)
    for _, t, pools in opts:
        if t < 0:
            if len(pools) == 1:  # (most options) a node of the pool has k free GPUs: the pool's type
                q = pools[0]
                tq = free.layout.pool_type[q]
                if num_gpus == 1 and free.layout.type_num_pools[tq] == 1:  # the type's only pool: its count
                    if free.type_whole[tq]:
                        return tq
                    continue
                if any(free.pool_free[q][num_gpus:]):
                    return tq
                continue
            found = _find_one_node(free, pools, num_gpus)
            if found is not None:
                return free.layout.node_type[found[0]]
        elif _type_has(free, t, pools, num_gpus):
            return t
    return -1


def _gpus_on_node(free: FreeState, node: int, k: int, num_free: int) -> Placement:
    """The node's k lowest-indexed free GPUs."""
    layout = free.layout
    t = layout.node_type[node]
    if num_free == layout.node_num_gpus[node]:
        a = layout.node_first_gpu[node]
        return _tuple_new(Placement, (layout.gpu_ids[a : a + k], (node,), FULL, 0, t, a, ()))
    m = free.node_free_bits[node]
    if k == 1:
        g = layout.gpu_ids[layout.node_first_gpu[node] + (m & -m).bit_length() - 1]
        return _tuple_new(Placement, ((g,), (node,), FULL, 0, t, g, ()))
    gpus = free.free_gpus_on(node, k)
    first = gpus[0] if gpus[-1] - gpus[0] == k - 1 else -1
    return _tuple_new(Placement, (tuple(gpus), (node,), FULL, 0, t, first, ()))


def _place_multi_node(free: FreeState, pools: tuple[int, ...], k: int, t: int) -> Placement:
    """k GPUs on the nodes of `pools` (acceptable pools of type t, which have them: `_type_has`)."""
    layout = free.layout
    node_first, node_size, bits = layout.node_first_gpu, layout.node_num_gpus, free.node_free_bits
    ids = layout.gpu_ids
    gpus: list[int] = []
    nodes: list[int] = []
    counts: list[int] = []
    left = k
    # nodes with the most free GPUs first (fewest nodes), ties -> lower node index; on each, its lowest free GPUs
    # (`FreeState.free_gpus_on`, inlined)
    for c in range(max(len(free.pool_free[q]) for q in pools) - 1, 0, -1):
        for n in _nodes_with(free, pools, c):
            take = c if c < left else left
            a = node_first[n]
            if c == node_size[n]:  # all free: the first ones
                gpus.extend(ids[a : a + take])
            else:
                offsets = _OFFSETS.get(bits[n]) or _offsets(bits[n])
                gpus.extend([ids[a + j] for j in offsets[:take]])
            nodes.append(n)
            counts.append(take)
            left -= take
            if not left:
                return Placement(tuple(gpus), tuple(nodes), FULL, 0, t, -1, tuple(counts))
    raise AssertionError(f"type {t} has fewer than {k} free GPUs on acceptable nodes")


_OFFSETS: dict[int, tuple[int, ...]] = {}  # a node's free-GPU bits -> the offsets of its free GPUs, ascending


def _offsets(bits: int) -> tuple[int, ...]:
    """The positions of the set bits of `bits`, ascending (memoised in _OFFSETS)."""
    out = _OFFSETS[bits] = tuple(j for j in range(bits.bit_length()) if bits >> j & 1)
    return out


def _fraction_key(elig: Eligible, pace: Pace) -> tuple[np.ndarray, int]:
    """A typed job's per-GPU rank key (its own speed rank x 2000, fastest = 0; ties -> faster layout speed)
    and the number of ranks (memoised on the Eligible object)."""
    key = ("fraction", pace)
    hit = elig.options.get(key)
    if hit is None:
        layout = elig._layout
        ranked = sorted(pace.job_speeds, key=lambda e: (-e[1], -e[0]))
        rank = {e[0]: r for r, e in enumerate(ranked)}
        hit = elig.options[key] = (
            np.asarray([rank[layout.node_speed[n]] * 2000 for n in layout.gpu_node], dtype=np.int64),
            len(ranked),
        )
    return hit


def _place_fraction(
    free: FreeState, elig: Eligible, milli: int, mem_mb: int, speed_rank: int = -1, pace: Pace = DEFAULT_PACE
) -> Placement | None:
    """Best-fit GPU for a fractional share; only among GPUs of the `speed_rank`-th fastest acceptable speed
    when that is >= 0 (for a job with a job type: the `speed_rank`-th of its own speeds, `_fraction_key`)."""
    if free.free_milli_total < milli:
        return None
    fm = free.free_milli
    ok = elig.gpu_mask & (fm >= milli) & (free.free_mem_mb >= mem_mb)
    if pace.job_speeds:
        speed_key = _fraction_key(elig, pace)[0]
        if speed_rank >= 0:
            ok &= speed_key == speed_rank * 2000
    else:
        speed_key = free.layout.gpu_speed_key_np
        if speed_rank >= 0:
            layout = free.layout
            v = layout.pool_speed[elig.speed_groups[speed_rank][1][0]]
            ok &= layout.gpu_speed_np == v
    score = np.where(ok, speed_key + fm, _BIG)
    g = int(score.argmin())
    if score[g] == _BIG:
        return None
    layout = free.layout
    node = layout.gpu_node[g]
    return Placement((g,), (node,), milli, mem_mb, layout.node_type[node])


def fits_after_release(free: FreeState, elig: Eligible, k: int, pace: Pace, gained: dict[int, int]) -> bool:
    """Whether `place` would find a placement for a whole-GPU shape of k GPUs on `free` once node n has gained
    `gained[n]` whole free GPUs (released whole-GPU jobs), without building that state: the test of `place`'s
    options (one node of the option's pools with k whole GPUs free, or k whole GPUs free over the pools of a
    spread's type), from counts alone."""
    node_whole = free.node_whole
    node_pool = free.layout.node_pool
    pool_free = free.pool_free
    hit = elig.options_by_k.get(k)
    opts = hit[1] if hit is not None and hit[0] is pace else _options(elig, k, pace)
    for _, t, pools in opts:
        if t < 0:
            for n, g in gained.items():
                if node_pool[n] in pools and node_whole[n] + g >= k:
                    return True
            if any(pool_free[q][c] for q in pools for c in range(k, len(pool_free[q]))):
                return True
        else:
            have = sum(g for n, g in gained.items() if node_pool[n] in pools)
            have += sum(c * len(nodes) for q in pools for c, nodes in enumerate(pool_free[q]))
            if have >= k:
                return True
    return False
