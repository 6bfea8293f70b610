"""Who holds which GPU: the static cluster layout and the free-capacity state, the only code that changes ownership.

GPU shares are integers in 1/1000 of a GPU (`milli`) and memory in MB, so sharing arithmetic is exact.
A whole-GPU allocation takes the GPU's entire share and memory; a fractional one takes its `milli` and `mem_mb`.
"""

from __future__ import annotations

from collections.abc import Iterator
from operator import itemgetter
from typing import NamedTuple

import numpy as np

from sim.catalog import CATALOG
from sim.cluster_spec import ClusterSpec
from sim.records import NodeInfo
from sim.sorted_list import NodeBits, NodeSet

FULL = 1000  # milli-GPU of a whole GPU
BIG_POOL = (
    64  # nodes in a pool above which FreeState keeps them in NodeSets (ordered, cheap copies), not sets
)
BITS_MAX = (
    2048  # nodes in a big pool up to which FreeState keeps them in NodeBits (one int) instead of NodeSets
)


def gb_to_mb(gb: float) -> int:
    return int(round(gb * 1000))


class Placement(NamedTuple):
    """The GPUs one job holds: all of one type; `milli`/`mem_mb` are taken from each of them.

    (A NamedTuple rather than a frozen dataclass: equally immutable, 5x cheaper to build on the hot path.)
    """

    gpus: tuple[int, ...]
    nodes: tuple[int, ...]  # distinct nodes, in order
    milli: int
    mem_mb: int
    type_idx: int
    first: int = -1  # gpus == range(first, first + len(gpus)) when >= 0 (fast slice updates)
    node_counts: tuple[int, ...] = ()  # GPUs taken on each of `nodes` (multi-node placements)


class ClusterLayout:
    """Static facts about nodes and GPUs (arrays indexed by node or by flat GPU index)."""

    def __init__(self, spec: ClusterSpec, uniform_speed: bool = False):
        self.spec = spec
        # fastest first; equal speeds by name, never by set iteration order (hash-randomised per process)
        self.type_names: list[str] = sorted(
            {n.gpu_type for n in spec.nodes}, key=lambda t: (-CATALOG[t].speed, t)
        )
        type_index = {t: i for i, t in enumerate(self.type_names)}
        self.nodes: tuple[NodeInfo, ...] = tuple(
            NodeInfo(
                n.node_id,
                n.gpu_type,
                n.num_gpus,
                n.gpu_mem_gb,
                1.0 if uniform_speed else CATALOG[n.gpu_type].speed,
                CATALOG[n.gpu_type].peak_tflops,
                n.kind,
            )
            for n in spec.nodes
        )
        self.num_nodes = len(self.nodes)
        self.node_type = [type_index[n.gpu_type] for n in self.nodes]
        self.node_num_gpus = [n.num_gpus for n in self.nodes]
        self.node_mem_mb = [gb_to_mb(n.gpu_mem_gb) for n in self.nodes]
        self.node_speed = [n.speed for n in self.nodes]
        self.node_first_gpu = [0] * self.num_nodes
        gpu_node: list[int] = []
        for i, n in enumerate(self.nodes):
            self.node_first_gpu[i] = len(gpu_node)
            gpu_node.extend([i] * n.num_gpus)
        self.num_gpus = len(gpu_node)
        self.gpu_node = gpu_node  # python list: scalar lookups on the hot path
        # every GPU index as one shared int object: a placement's GPUs are slices or items of it, so no placement
        # allocates an int per GPU (above 256 each would be its own object: ~7M of them kept by a RICC replay)
        self.gpu_ids: tuple[int, ...] = tuple(range(self.num_gpus))
        # each GPU's bit in its node's free-GPU mask (FreeState.node_free_bits) and its memory, as python ints
        self.gpu_bit = [1 << (g - self.node_first_gpu[gpu_node[g]]) for g in range(len(gpu_node))]
        self.gpu_mem_mb = [self.node_mem_mb[n] for n in gpu_node]
        self.gpu_node_np = np.asarray(gpu_node, dtype=np.int64)
        self.gpu_mem_mb_np = np.asarray(self.gpu_mem_mb, dtype=np.int64)
        speeds = sorted({n.speed for n in self.nodes}, reverse=True)
        self.gpu_speed_np = np.asarray([self.nodes[n].speed for n in gpu_node], dtype=float)
        # fractional best fit key: speed rank first (fastest = 0), then free share
        self.gpu_speed_key_np = np.asarray(
            [speeds.index(self.nodes[n].speed) * 2000 for n in gpu_node], dtype=np.int64
        )
        self.type_speed = [1.0 if uniform_speed else CATALOG[t].speed for t in self.type_names]
        self.type_tflops_x10 = [int(round(CATALOG[t].peak_tflops * 10)) for t in self.type_names]
        self.type_num_gpus = [0] * len(self.type_names)
        for i, n in enumerate(self.nodes):
            self.type_num_gpus[self.node_type[i]] += n.num_gpus
        pool_key: dict[tuple[int, int], int] = {}
        self.node_pool = []
        for i in range(self.num_nodes):
            self.node_pool.append(
                pool_key.setdefault((self.node_type[i], self.node_mem_mb[i]), len(pool_key))
            )
        self.pool_type = [t for t, _ in pool_key]
        self.type_num_pools = [self.pool_type.count(t) for t in range(len(self.type_names))]
        self.pool_speed = [self.type_speed[t] for t, _ in pool_key]
        self.pool_max_gpus = [0] * len(pool_key)
        for i in range(self.num_nodes):
            q = self.node_pool[i]
            self.pool_max_gpus[q] = max(self.pool_max_gpus[q], self.node_num_gpus[i])
        # pools of more than BIG_POOL nodes keep their nodes in NodeSets, or up to BITS_MAX nodes in NodeBits
        # (FreeState.min_node: min() of a set walks the whole set; a copy of either shares its content)
        pool_nodes = [0] * len(pool_key)
        for q in self.node_pool:
            pool_nodes[q] += 1
        self.pool_big = [c > BIG_POOL for c in pool_nodes]
        self.pool_bits = [BIG_POOL < c <= BITS_MAX for c in pool_nodes]  # (the big pools kept in NodeBits)
        # per pool, the distinct GPU counts of its nodes (a node is empty when it has that many free GPUs)
        self.pool_node_sizes = [
            tuple(sorted({self.node_num_gpus[i] for i in range(self.num_nodes) if self.node_pool[i] == q}))
            for q in range(len(pool_key))
        ]
        self._gpu_labels: list[str] | None = None  # placement_label's, built on first use
        self._eligible_by_nodes: dict[tuple[int, ...], Eligible] = {}
        self._eligible: dict[tuple[tuple[str, ...], int], Eligible] = {}

    def eligible(self, gpu_types: tuple[str, ...], mem_mb: int) -> Eligible:
        """Nodes a job with these type constraints and per-GPU memory minimum may use (cached per shape)."""
        key = (gpu_types, mem_mb)
        e = self._eligible.get(key)
        if e is None:
            e = Eligible(self, gpu_types, mem_mb)
            # shapes with the same eligible nodes share one object (policies and the env memoise per object)
            e = self._eligible_by_nodes.setdefault(tuple(e.nodes), e)
            self._eligible[key] = e
        return e

    def whole_node(self, n: int) -> Placement:
        """All GPUs of node n as one placement (what a node that is not powered on withholds from FreeState)."""
        a = self.node_first_gpu[n]
        k = self.node_num_gpus[n]
        return Placement(self.gpu_ids[a : a + k], (n,), FULL, 0, self.node_type[n], a)

    def gpu_label(self, g: int) -> str:
        n = self.gpu_node[g]
        return f"{self.nodes[n].node_id}/{g - self.node_first_gpu[n]}"

    def placement_label(self, gpus: tuple[int, ...]) -> str:
        """The GPUs' labels (`gpu_label`), `;`-joined: a placement as jobs.csv writes it (labels built once)."""
        labels = self._gpu_labels
        if labels is None:
            labels = self._gpu_labels = [self.gpu_label(g) for g in range(self.num_gpus)]
        if len(gpus) < 2:  # (itemgetter of one index returns the item itself, of none fails)
            return labels[gpus[0]] if gpus else ""
        return ";".join(itemgetter(*gpus)(labels))  # (the lookups in C)


class Eligible:
    """The nodes (and GPUs) that satisfy one job shape: acceptable type and enough memory per GPU.

    Nodes are grouped into pools (same type and memory); `speed_groups` lists the eligible pools by speed,
    fastest first, so placement tries the fastest acceptable type first.
    """

    __slots__ = (
        "nodes",
        "_node_set",
        "types",
        "max_node_gpus",
        "type_nodes",
        "type_total",
        "speed_groups",
        "type_pools",
        "type_max_node",
        "options",
        "options_by_k",
        "_gpu_mask",
        "_layout",
    )

    def __init__(self, layout: ClusterLayout, gpu_types: tuple[str, ...], mem_mb: int):
        accept = set(gpu_types)
        ok = [
            i
            for i in range(layout.num_nodes)
            if (not accept or layout.nodes[i].gpu_type in accept) and layout.node_mem_mb[i] >= mem_mb
        ]
        self.nodes = ok
        self._node_set = frozenset(ok)
        self.types = tuple(sorted({layout.node_type[i] for i in ok}))
        self.max_node_gpus = max((layout.node_num_gpus[i] for i in ok), default=0)
        self.type_nodes = {t: [i for i in ok if layout.node_type[i] == t] for t in self.types}
        self.type_total = {
            t: sum(layout.node_num_gpus[i] for i in ok if layout.node_type[i] == t) for t in self.types
        }
        pools = sorted({layout.node_pool[i] for i in ok})
        self.type_pools = {t: tuple(q for q in pools if layout.pool_type[q] == t) for t in self.types}
        self.type_max_node = {t: max(layout.node_num_gpus[i] for i in self.type_nodes[t]) for t in self.types}
        self.options: dict = {}  # sim/placement.py's memo: (GPUs, pace) -> placement options in preference order
        self.options_by_k: dict = {}  # GPUs -> (pace, options) last looked up (an identity check, no tuple hash)
        speeds = sorted({layout.pool_speed[q] for q in pools}, reverse=True)
        self.speed_groups = []
        for v in speeds:
            group = tuple(q for q in pools if layout.pool_speed[q] == v)
            self.speed_groups.append((max(layout.pool_max_gpus[q] for q in group), group))
        self._gpu_mask: np.ndarray | None = None
        self._layout = layout

    def accepts(self, nodes: tuple[int, ...]) -> bool:
        """Whether every node in `nodes` is eligible."""
        return all(n in self._node_set for n in nodes)

    @property
    def gpu_mask(self) -> np.ndarray:
        if self._gpu_mask is None:
            m = np.zeros(self._layout.num_gpus, dtype=bool)
            for i in self.nodes:
                a = self._layout.node_first_gpu[i]
                m[a : a + self._layout.node_num_gpus[i]] = True
            self._gpu_mask = m
        return self._gpu_mask

    def never_fits(self, num_gpus: int, milli: int) -> str | None:
        """Why a job of this shape can never run on this cluster, or None if an empty cluster fits it."""
        if not self.nodes:
            return "no node has an acceptable GPU type with enough memory per GPU"
        if milli < FULL:
            return None if num_gpus == 1 else "a fractional GPU share must be requested on exactly one GPU"
        if num_gpus <= self.max_node_gpus:
            return None
        if max(self.type_total.values()) >= num_gpus:
            return None
        return f"needs {num_gpus} GPUs but at most {max(self.type_total.values())} acceptable GPUs of one type exist"


# every empty count of a small pool in FreeState.pool_free: one immutable set (a copy need not copy it)
_EMPTY: frozenset[int] = frozenset()


def _move(by_c: list, n: int, old: int, new: int) -> None:
    """Move node n from count `old` to count `new` in a small pool's sets (FreeState.pool_free[q]): a count's
    last node leaves it the shared _EMPTY, a count's first node gets a new set; count 0 is not kept."""
    if old:
        s = by_c[old]
        if len(s) == 1:
            by_c[old] = _EMPTY
        else:
            s.discard(n)
    if new:
        s = by_c[new]
        if s:
            s.add(n)
        else:
            by_c[new] = {n}


class FreeState:
    """Free capacity per GPU plus counters that make placement fast; copy() gives a scratch version.

    `node_whole[n]` counts node n's completely free GPUs and `node_free_bits[n]` says which they are (bit j:
    the node's j-th GPU, `layout.gpu_bit`); `pool_free[q][c]` is the set of nodes of pool q with exactly c >= 1
    completely free GPUs (best fit looks up the smallest c >= k instead of scanning nodes; `pool_free[q][0]` stays
    empty: nothing asks for the nodes without a free GPU, and not keeping them halves the set updates of a job
    spread over one-GPU nodes, where every node it takes goes to 0 and back): a set (when empty, one shared
    frozenset: read them, never mutate them), or for a pool of more than BIG_POOL nodes a NodeBits (up to BITS_MAX
    nodes: one int, copied in O(1)) or a NodeSet (ascending; copied in O(buckets)), so a copy of the state costs
    little more than its per-node lists whatever the number of nodes.

    `free_milli` / `free_mem_mb` (numpy, per GPU) are built when read: until they are read for the first time by
    a state or any copy in its line (`_read`, shared between them), every GPU is either completely free or wholly
    taken (a fractional share is taken or given only through them), so the free-GPU bits say what the arrays
    must hold (a completely free GPU: its whole share and memory, else 0 and 0). Until then a take or give only
    marks the arrays out of date (`_arrays_ok`), a copy shares them, and the first read rebuilds them from the
    bits (new arrays: a state changes its arrays in place only while they are up to date, and then they are its
    own). Most runs have no fractional job and read neither array: they never pay a numpy store per GPU, nor a
    copy of the arrays per scratch copy. Once they are read (fractional jobs, CBF), takes and gives store at once
    and a copy copies them.
    """

    __slots__ = (
        "layout",
        "_free_milli",
        "_free_mem_mb",
        "_arrays_ok",
        "_read",
        "node_whole",
        "node_free_bits",
        "type_whole",
        "free_milli_total",
        "pool_free",
        "version",
        "gives",
        "pool_gives",
        "__weakref__",  # policies remember the state they last saw (schedulers/fcfs.py) without keeping it alive
    )

    def __init__(self, layout: ClusterLayout, _copy_from: FreeState | None = None):
        self.layout = layout
        # count take() and give() calls, and per pool the give() calls that released capacity there: a policy
        # that remembers what it saw can tell that exactly the changes it expects happened since, and where
        # capacity grew (schedulers/easy.py, sjf.py)
        self.version = 0 if _copy_from is None else _copy_from.version
        self.gives = 0 if _copy_from is None else _copy_from.gives
        self.pool_gives = [0] * len(layout.pool_type) if _copy_from is None else list(_copy_from.pool_gives)
        if _copy_from is None:
            self._free_milli = np.full(layout.num_gpus, FULL, dtype=np.int64)
            self._free_mem_mb = layout.gpu_mem_mb_np.copy()
            self._arrays_ok = True
            self._read = [False]
            self.node_whole = list(layout.node_num_gpus)
            self.node_free_bits = [(1 << k) - 1 for k in layout.node_num_gpus]
            self.type_whole = list(layout.type_num_gpus)
            self.free_milli_total = FULL * layout.num_gpus
            self.pool_free = [
                [(NodeBits() if bits else NodeSet()) if big else _EMPTY for _ in range(m + 1)]
                for m, big, bits in zip(layout.pool_max_gpus, layout.pool_big, layout.pool_bits, strict=True)
            ]
            for n in range(layout.num_nodes):  # (ascending: a NodeSet appends)
                by_c = self.pool_free[layout.node_pool[n]]
                c = layout.node_num_gpus[n]
                if by_c[c] is _EMPTY:
                    by_c[c] = set()
                by_c[c].add(n)
        else:
            self._read = _copy_from._read
            if self._read[0] and not _copy_from._arrays_ok:
                _copy_from._rebuild()  # once, not in every copy that shares the out-of-date arrays
            if _copy_from._arrays_ok:  # (up to date: copied, as each state then changes its own in place)
                self._free_milli = _copy_from._free_milli.copy()
                self._free_mem_mb = _copy_from._free_mem_mb.copy()
                self._arrays_ok = True
            else:  # shared, never changed in place: rebuilt (as new arrays) when first needed
                self._free_milli = _copy_from._free_milli
                self._free_mem_mb = _copy_from._free_mem_mb
                self._arrays_ok = False
            self.node_whole = list(_copy_from.node_whole)
            self.node_free_bits = list(_copy_from.node_free_bits)
            self.type_whole = list(_copy_from.type_whole)
            self.free_milli_total = _copy_from.free_milli_total
            # a small pool's empty counts share the immutable _EMPTY: only its non-empty sets are copied
            self.pool_free = [
                [s.copy() for s in by_c] if big else [s.copy() if s else s for s in by_c]
                for by_c, big in zip(_copy_from.pool_free, layout.pool_big, strict=True)
            ]

    def copy(self) -> FreeState:
        return FreeState(self.layout, self)

    @property
    def free_milli(self) -> np.ndarray:
        """Each GPU's free share (milli-GPU); callers may update it in place."""
        return self._up_to_date()._free_milli

    @property
    def free_mem_mb(self) -> np.ndarray:
        """Each GPU's free memory (MB); callers may update it in place."""
        return self._up_to_date()._free_mem_mb

    def _up_to_date(self) -> FreeState:
        """This state, its per-GPU arrays up to date and marked read (for its whole line of copies)."""
        self._read[0] = True
        if not self._arrays_ok:
            self._rebuild()
        return self

    def _write(self, n: int, mask: int, free: bool) -> None:
        """Store node n's GPUs of `mask` into the per-GPU arrays as completely free (`free`) or wholly taken."""
        if not self._arrays_ok:
            self._rebuild()  # (from the bits, which already say the same for these GPUs)
            return
        a = self.layout.node_first_gpu[n]
        fm, fmem, gpu_mem_mb = self._free_milli, self._free_mem_mb, self.layout.gpu_mem_mb
        while mask:
            low = mask & -mask
            g = a + low.bit_length() - 1
            fm[g] = FULL if free else 0
            fmem[g] = gpu_mem_mb[g] if free else 0
            mask ^= low

    def _rebuild(self) -> None:
        """New per-GPU arrays from the free-GPU bits (every GPU completely free or wholly taken: see the class)."""
        layout = self.layout
        free = [False] * layout.num_gpus
        for a, k, b in zip(layout.node_first_gpu, layout.node_num_gpus, self.node_free_bits, strict=True):
            if b:
                free[a : a + k] = [bool(b >> j & 1) for j in range(k)]
        free_np = np.asarray(free, dtype=bool)
        self._free_milli = np.where(free_np, FULL, 0).astype(np.int64)
        self._free_mem_mb = np.where(free_np, layout.gpu_mem_mb_np, 0).astype(np.int64)
        self._arrays_ok = True

    def _add_whole(self, n: int, delta: int) -> None:
        """Node n gains `delta` (< 0: loses) completely free GPUs."""
        old = self.node_whole[n]
        q = self.layout.node_pool[n]
        by_c = self.pool_free[q]
        if self.layout.pool_big[q]:
            if old:
                by_c[old].discard(n)
            if old + delta:
                by_c[old + delta].add(n)
        else:
            _move(by_c, n, old, old + delta)
        self.node_whole[n] = old + delta

    def min_node(self, q: int, c: int) -> int:
        """The lowest-indexed node of pool q with exactly c whole free GPUs (there is one)."""
        nodes = self.pool_free[q][c]
        return nodes.first() if self.layout.pool_big[q] else min(nodes)

    def nodes_ascending(self, q: int, c: int) -> Iterator[int]:
        """The nodes of pool q with exactly c whole free GPUs, ascending (lazily, in O(1) each, for a big pool).
        Do not change the state meanwhile."""
        nodes = self.pool_free[q][c]
        return iter(nodes) if self.layout.pool_big[q] else iter(sorted(nodes))

    def free_gpus_on(self, node: int, k: int) -> list[int]:
        """The k lowest-indexed completely free GPUs of `node` (it has them), ascending."""
        a = self.layout.node_first_gpu[node]
        ids = self.layout.gpu_ids
        if self.node_whole[node] == self.layout.node_num_gpus[node]:  # all free: the first k
            return list(ids[a : a + k])
        m = self.node_free_bits[node]
        gpus = []
        for _ in range(k):
            low = m & -m
            gpus.append(ids[a + low.bit_length() - 1])
            m ^= low
        return gpus

    # -- ownership changes -------------------------------------------------------------------------------
    # A whole-GPU placement's GPUs are range(first, first + len(gpus)) when `first` >= 0, else `gpus`: fits,
    # take and give all read them so. Per-GPU numpy stores are scalar ones for small placements (a numpy slice
    # store costs as much as about eight scalar ones); the free-GPU bits follow the numpy state GPU by GPU.

    def take(self, p: Placement, check: bool = False) -> bool:
        """Allocate `p` (caller has checked that it fits); with `check`, only if it `fits` (else nothing changes):
        whether it was taken. (The simulator's start checks and takes in one call: a one-node range's mask is
        computed once.)"""
        layout = self.layout
        bits = self.node_free_bits
        gpus, nodes, milli, _, t, f, counts = p  # (one unpacking: a NamedTuple's attributes cost more)
        k = len(gpus)
        if milli == FULL:
            if len(nodes) == 1:
                n = nodes[0]
                if f >= 0:
                    off = f - layout.node_first_gpu[n]
                    if check and (off < 0 or off + k > layout.node_num_gpus[n]):
                        return False  # (GPUs outside the node it names)
                    mask = ((1 << k) - 1) << off
                    if check and bits[n] & mask != mask:
                        return False
                elif check and not self.fits(p):
                    return False
                else:
                    mask = self._mask_on(p)
                self.version += 1
                bits[n] &= ~mask
                if self._read[0]:
                    self._write(n, mask, False)
                else:
                    self._arrays_ok = False
                old = self.node_whole[n]
                new = old - k
                q = layout.node_pool[n]
                by_c = self.pool_free[q]
                if layout.pool_big[q]:
                    by_c[old].discard(n)  # (old >= k >= 1)
                    if new:
                        by_c[new].add(n)
                else:
                    _move(by_c, n, old, new)
                self.node_whole[n] = new
            else:
                if check and not self.fits(p):
                    return False
                self.version += 1
                self._spread(gpus, nodes, counts, False)
            self.type_whole[t] -= k
            self.free_milli_total -= FULL * k
        else:
            if check and not self.fits(p):
                return False
            self.version += 1
            fm = self.free_milli
            g = gpus[0]
            before = int(fm[g])
            fm[g] = before - milli
            self.free_mem_mb[g] -= p.mem_mb
            if before == FULL:
                n = layout.gpu_node[g]
                bits[n] &= ~layout.gpu_bit[g]
                self._add_whole(n, -1)
                self.type_whole[t] -= 1
            self.free_milli_total -= milli
        return True

    def give(self, p: Placement) -> None:
        """Release `p`."""
        self.version += 1
        self.gives += 1
        layout = self.layout
        gpus, nodes, milli, _, t, f, counts = p  # (one unpacking: a NamedTuple's attributes cost more)
        pool_gives = self.pool_gives
        bits = self.node_free_bits
        k = len(gpus)
        if milli == FULL and len(nodes) == 1:
            n = nodes[0]
            q = layout.node_pool[n]
            pool_gives[q] += 1
            mask = ((1 << k) - 1) << (f - layout.node_first_gpu[n]) if f >= 0 else self._mask_on(p)
            bits[n] |= mask
            if self._read[0]:
                self._write(n, mask, True)
            else:
                self._arrays_ok = False
            old = self.node_whole[n]
            new = old + k
            by_c = self.pool_free[q]
            if layout.pool_big[q]:
                if old:
                    by_c[old].discard(n)
                by_c[new].add(n)  # (new >= k >= 1)
            else:
                _move(by_c, n, old, new)
            self.node_whole[n] = new
            self.type_whole[t] += k
            self.free_milli_total += FULL * k
            return
        node_pool = layout.node_pool
        for n in nodes:
            pool_gives[node_pool[n]] += 1
        if milli == FULL:
            self._spread(gpus, nodes, counts, True)
            self.type_whole[t] += k
            self.free_milli_total += FULL * k
        else:
            fm = self.free_milli
            g = gpus[0]
            after = int(fm[g]) + milli
            fm[g] = after
            self.free_mem_mb[g] += p.mem_mb
            if after == FULL:
                n = layout.gpu_node[g]
                bits[n] |= layout.gpu_bit[g]
                self._add_whole(n, 1)
                self.type_whole[t] += 1
            self.free_milli_total += milli

    def fits(self, p: Placement) -> bool:
        """Whether `p` can be taken now."""
        gpus, nodes, milli, mem_mb, _, f, _ = p  # (one unpacking: a NamedTuple's attributes cost more)
        if milli == FULL:  # every GPU completely free: its bit is set
            if f >= 0 and len(nodes) == 1:  # a range of GPUs on one node: its mask
                n = nodes[0]
                k = len(gpus)
                off = f - self.layout.node_first_gpu[n]
                if off < 0 or off + k > self.layout.node_num_gpus[n]:
                    return False  # (GPUs outside the node it names)
                mask = ((1 << k) - 1) << off
                return self.node_free_bits[n] & mask == mask
            bits, gpu_node, gpu_bit = self.node_free_bits, self.layout.gpu_node, self.layout.gpu_bit
            for g in range(f, f + len(gpus)) if f >= 0 else gpus:
                if not bits[gpu_node[g]] & gpu_bit[g]:
                    return False
            return True
        g = gpus[0]
        return self.free_milli[g] >= milli and self.free_mem_mb[g] >= mem_mb

    def _mask_on(self, p: Placement) -> int:
        """The bits (`layout.gpu_bit`) of one-node placement p's GPUs on its node (listed GPUs; for a range
        `first`..: ((1 << k) - 1) << (first - the node's first GPU))."""
        gpu_bit = self.layout.gpu_bit
        mask = 0
        for g in p.gpus:
            mask |= gpu_bit[g]
        return mask

    def _spread(
        self, gpus: tuple[int, ...], nodes: tuple[int, ...], counts: tuple[int, ...], free: bool
    ) -> None:
        """Give (`free`) or take a multi-node placement's GPUs node by node: its GPUs come grouped by node, in
        the order of `nodes` (every placement is built so), so a node's share of them is the next `counts` of
        them, and a node taken or given whole needs no look at its GPUs."""
        layout = self.layout
        num, gpu_bit = layout.node_num_gpus, layout.gpu_bit
        bits, add_whole = self.node_free_bits, self._add_whole
        write = self._read[0]
        if not write:
            self._arrays_ok = False
        i = 0
        for n, c in zip(nodes, counts, strict=True):
            if c == num[n]:
                mask = (1 << c) - 1
            else:
                mask = 0
                for g in gpus[i : i + c]:
                    mask |= gpu_bit[g]
            i += c
            if free:
                bits[n] |= mask
            else:
                bits[n] &= ~mask
            add_whole(n, c if free else -c)
            if write:
                self._write(n, mask, free)
