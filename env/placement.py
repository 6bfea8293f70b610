"""Where a job goes: the one placement rule shared by every policy and the Gymnasium env.

Rule (documented in the README):
- whole-GPU job of k GPUs with k <= the largest acceptable node: one node of the fastest acceptable type that
  has a node with k free GPUs, best fit within that type (the node with the fewest free whole GPUs that still
  has k; ties -> lower node index). It waits rather than spread while such a node exists in the cluster.
- larger whole-GPU job: several nodes of ONE type (fastest type with enough free GPUs first), taking the nodes
  with the most free GPUs first so that it spans as few nodes as possible.
- fractional job (gpu_milli < 1000): one GPU with enough free share and memory, of the fastest acceptable type
  that has one, best fit within it (the GPU with the smallest sufficient free share; ties -> lower GPU index),
  so partially used GPUs are packed before whole ones are broken.
"""

from __future__ import annotations

import numpy as np

from env.cluster import FULL, Eligible, FreeState, Placement
from env.duration import DurationRule

_BIG = np.iinfo(np.int64).max


def place(
    free: FreeState, elig: Eligible, num_gpus: int, milli: int, mem_mb: int, rule: DurationRule | None = None
) -> Placement | None:
    """A placement for the job shape on `free` now, or None if it does not fit now. `rule` (the job's duration
    rule, env/duration.py, the last element of a shape) lets shapes unpack into this call; placement does not
    use it yet."""
    if milli < FULL:
        return _place_fraction(free, elig, milli, mem_mb)
    if _too_few_whole(free.type_whole, elig, num_gpus):
        return None
    if num_gpus <= elig.max_node_gpus:
        return _place_one_node(free, elig, num_gpus)
    t = _multi_node_type(free, elig, num_gpus)
    return None if t < 0 else _place_multi_node(free, elig, num_gpus, t)


def _too_few_whole(type_whole: list[int], elig: Eligible, k: int) -> bool:
    """Fewer than k whole GPUs free over all acceptable types (the cheap test that rejects most shapes)."""
    if len(elig.types) == 1:
        return type_whole[elig.types[0]] < k
    return sum(map(type_whole.__getitem__, elig.types)) < k


def _multi_node_type(free: FreeState, elig: Eligible, k: int) -> int:
    """The type the multi-node rule uses: the fastest with k whole GPUs free on acceptable nodes; -1 if none."""
    tw, pool_free = free.type_whole, free.pool_free
    for t in elig.types:  # type indices are ordered by speed
        if tw[t] < k:
            continue
        by_cs = [pool_free[q] for q in elig.type_pools[t]]
        if sum(c * len(by_c[c]) for by_c in by_cs for c in range(1, len(by_c))) >= k:
            return t
    return -1


def _find_one_node(free: FreeState, elig: Eligible, k: int) -> tuple[int, int] | None:
    """(node, its free whole GPUs) chosen by the single-node rule, or None."""
    pool_free = free.pool_free
    for max_gpus, pools in elig.speed_groups:
        if max_gpus < k:
            continue
        best_c = best_node = -1
        for q in pools:
            by_c = pool_free[q]
            for c in range(k, len(by_c)):
                if by_c[c]:
                    if best_c < 0 or c < best_c:
                        best_c, best_node = c, min(by_c[c])
                    elif c == best_c:
                        best_node = min(best_node, min(by_c[c]))
                    break
        if best_c >= 0:
            return best_node, best_c
    return None


def _place_one_node(free: FreeState, elig: Eligible, k: int) -> Placement | None:
    found = _find_one_node(free, elig, k)
    return None if found is None else _gpus_on_node(free, found[0], k, found[1])


def can_place(
    free: FreeState, elig: Eligible, num_gpus: int, milli: int, mem_mb: int, rule: DurationRule | None = None
) -> bool:
    """Whether `place` would find a placement (from free counts alone for whole-GPU shapes)."""
    return fit_type(free, elig, num_gpus, milli, mem_mb) >= 0


def fit_type(
    free: FreeState, elig: Eligible, num_gpus: int, milli: int, mem_mb: int, rule: DurationRule | None = None
) -> int:
    """The GPU type index `place` would use now, or -1 if the job does not fit now (cheaper than `place`:
    whole-GPU shapes are decided from free counts alone)."""
    if milli < FULL:
        p = _place_fraction(free, elig, milli, mem_mb)
        return -1 if p is None else p.type_idx
    if _too_few_whole(free.type_whole, elig, num_gpus):
        return -1
    if num_gpus > elig.max_node_gpus:
        return _multi_node_type(free, elig, num_gpus)
    found = _find_one_node(free, elig, num_gpus)
    return -1 if found is None else free.layout.node_type[found[0]]


def _gpus_on_node(free: FreeState, node: int, k: int, num_free: int) -> Placement:
    layout = free.layout
    a = layout.node_first_gpu[node]
    n = layout.node_num_gpus[node]
    if num_free == n:
        return Placement(tuple(range(a, a + k)), (node,), FULL, 0, layout.node_type[node], a)
    gpus = [a + g for g, m in enumerate(free.free_milli[a : a + n].tolist()) if m == FULL][:k]
    first = gpus[0] if gpus[-1] - gpus[0] == k - 1 else -1
    return Placement(tuple(gpus), (node,), FULL, 0, layout.node_type[node], first)


def _place_multi_node(free: FreeState, elig: Eligible, k: int, t: int) -> Placement:
    """k GPUs on acceptable nodes of type t (which has them: `_multi_node_type`)."""
    layout = free.layout
    fm = free.free_milli
    by_cs = [free.pool_free[q] for q in elig.type_pools[t]]
    gpus: list[int] = []
    nodes: list[int] = []
    counts: list[int] = []
    # nodes with the most free GPUs first (fewest nodes), ties -> lower node index
    for c in range(max(len(by_c) for by_c in by_cs) - 1, 0, -1):
        same = sorted(n for by_c in by_cs if c < len(by_c) for n in by_c[c])
        for n in same:
            a = layout.node_first_gpu[n]
            take = min(c, k - len(gpus))
            gpus.extend(
                [a + g for g, m in enumerate(fm[a : a + layout.node_num_gpus[n]].tolist()) if m == FULL][
                    :take
                ]
            )
            nodes.append(n)
            counts.append(take)
            if len(gpus) == k:
                return Placement(tuple(gpus), tuple(nodes), FULL, 0, t, -1, tuple(counts))
    raise AssertionError(f"type {t} has fewer than {k} free GPUs on acceptable nodes")


def _place_fraction(free: FreeState, elig: Eligible, milli: int, mem_mb: int) -> Placement | None:
    if free.free_milli_total < milli:
        return None
    fm = free.free_milli
    ok = elig.gpu_mask & (fm >= milli) & (free.free_mem_mb >= mem_mb)
    score = np.where(ok, free.layout.gpu_speed_key_np + fm, _BIG)
    g = int(score.argmin())
    if score[g] == _BIG:
        return None
    layout = free.layout
    node = layout.gpu_node[g]
    return Placement((g,), (node,), milli, mem_mb, layout.node_type[node])
