"""Where a job goes: the one placement rule shared by every policy and the Gymnasium env.

Rule (documented in the README):
- whole-GPU job of k GPUs with k <= the largest acceptable node: one node, best fit (the acceptable node with
  the fewest free whole GPUs that still has k; ties -> faster GPU type, then lower node index). It waits rather
  than spread while such a node exists in the cluster.
- larger whole-GPU job: several nodes of ONE type (fastest type with enough free GPUs first), taking the nodes
  with the most free GPUs first so that it spans as few nodes as possible.
- fractional job (gpu_milli < 1000): one GPU with enough free share and memory, best fit (the GPU left with the
  smallest free share; ties -> lower GPU index), so partially used GPUs are packed before whole ones are broken.
"""

from __future__ import annotations

import numpy as np

from env.cluster import FULL, Eligible, FreeState, Placement

_BIG = np.iinfo(np.int64).max


def place(free: FreeState, elig: Eligible, num_gpus: int, milli: int, mem_mb: int) -> Placement | None:
    """A placement for the job shape on `free` now, or None if it does not fit now."""
    if milli < FULL:
        return _place_fraction(free, elig, milli, mem_mb)
    tw = free.type_whole
    if len(elig.types) == 1:
        if tw[elig.types[0]] < num_gpus:
            return None
    elif sum(tw[t] for t in elig.types) < num_gpus:
        return None
    if num_gpus <= elig.max_node_gpus:
        return _place_one_node(free, elig, num_gpus)
    return _place_multi_node(free, elig, num_gpus)


def _place_one_node(free: FreeState, elig: Eligible, k: int) -> Placement | None:
    nodes = elig.nodes
    nw = free.node_whole[nodes]
    score = np.where(nw >= k, nw, _BIG)
    j = int(score.argmin())
    if score[j] == _BIG:
        return None
    node = int(nodes[j])
    layout = free.layout
    a = layout.node_first_gpu[node]
    if nw[j] == layout.node_num_gpus[node]:
        gpus = tuple(range(a, a + k))
    else:
        gpus = tuple((np.flatnonzero(free.free_milli[a : a + layout.node_num_gpus[node]] == FULL)[:k] + a).tolist())
    return Placement(gpus, (node,), FULL, 0, layout.node_type[node])


def _place_multi_node(free: FreeState, elig: Eligible, k: int) -> Placement | None:
    layout = free.layout
    for t in elig.types:  # fastest type first (type indices are ordered by speed)
        if free.type_whole[t] < k:
            continue
        nodes = elig.type_nodes[t]
        nw = free.node_whole[nodes]
        if int(nw.sum()) < k:
            continue
        order = np.argsort(-nw, kind="stable")
        gpus: list[int] = []
        used: list[int] = []
        for j in order.tolist():
            if nw[j] == 0:
                break
            node = int(nodes[j])
            a = layout.node_first_gpu[node]
            free_idx = np.flatnonzero(free.free_milli[a : a + layout.node_num_gpus[node]] == FULL) + a
            take = free_idx[: k - len(gpus)].tolist()
            gpus.extend(take)
            used.append(node)
            if len(gpus) == k:
                return Placement(tuple(gpus), tuple(used), FULL, 0, t)
    return None


def _place_fraction(free: FreeState, elig: Eligible, milli: int, mem_mb: int) -> Placement | None:
    if free.free_milli_total < milli:
        return None
    fm = free.free_milli
    ok = elig.gpu_mask & (fm >= milli) & (free.free_mem_mb >= mem_mb)
    score = np.where(ok, fm, _BIG)
    g = int(score.argmin())
    if score[g] == _BIG:
        return None
    layout = free.layout
    node = layout.gpu_node[g]
    return Placement((g,), (node,), milli, mem_mb, layout.node_type[node])
