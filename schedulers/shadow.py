"""EASY's shadow state: the free capacity the reserved head job will find, kept as whole-GPU counts.

Releasing and taking whole-GPU placements only moves whole-GPU counts per node and per pool, and whether a
whole-GPU head fits depends on those counts alone (sim/placement.py: it fits if some option is free, i.e. one
node with k free GPUs of a type that has nodes that big, or k free GPUs on the eligible pools of a type whose
nodes are all smaller). So the shadow keeps count deltas on top of the live free state instead of copying
per-GPU arrays. The base must not change while the shadow is in use (Plan.snapshot). A fractional head or a
fractional placement turns it into a full FreeState copy (`materialize`), which is always exact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from sim.cluster import FULL, FreeState, Placement
from sim.placement import can_place


class CountShadow:
    __slots__ = ("base", "shape", "k", "track", "spreads", "eligible_pools", "fit_pools", "delta", "pool_sum",
                 "fit_nodes", "full", "log", "one_type", "whole_type", "avail", "lazy_log")  # fmt: skip

    def __init__(self, base: FreeState, head_shape: tuple):
        elig, k, milli = head_shape[:3]
        self.base, self.shape, self.k = base, head_shape, k
        # the head's options (sim/placement.py): one node of a type with nodes of >= k GPUs (`fit_pools`,
        # tracked as the number of their nodes with >= k free), or a spread over one type whose nodes are all
        # smaller (`spreads`: k free GPUs over that type's eligible pools)
        self.fit_pools = frozenset(
            q for t in elig.types if elig.type_max_node[t] >= k for q in elig.type_pools[t]
        )
        self.spreads = [
            (t, elig.type_pools[t]) for t in elig.types if elig.type_max_node[t] < k <= elig.type_total[t]
        ]
        self.track = bool(self.fit_pools)
        self.eligible_pools = frozenset(q for t in elig.types for q in elig.type_pools[t])
        self.delta: dict[int, int] = {}
        self.pool_sum = [sum(c * len(by_c[c]) for c in range(1, len(by_c))) for by_c in base.pool_free]
        self.fit_nodes = 0
        if self.track:
            pool_free = base.pool_free
            self.fit_nodes = sum(
                len(pool_free[q][c]) for q in self.fit_pools for c in range(k, len(pool_free[q]))
            )
        # a head whose only option is a spread over one type needs only that type's free GPUs on its eligible
        # pools: one integer
        self.one_type, self.whole_type, self.avail = -1, False, 0
        if not self.track and len(self.spreads) == 1:
            t, pools = self.spreads[0]
            self.one_type, self.avail = t, sum(self.pool_sum[q] for q in pools)
            self.whole_type = len(pools) == sum(1 for pt in base.layout.pool_type if pt == t)
        self.log: list[tuple[int, Placement]] = []
        self.lazy_log: Callable[[], list[Placement]] | None = None  # releases before `log` (release_in_bulk)
        self.full: FreeState | None = None
        if milli < FULL:
            self.materialize()

    def materialize(self) -> FreeState:
        """Switch to a full per-GPU copy of the base with every logged change applied."""
        if self.full is None:
            full = self.base.copy()
            for p in self.lazy_log() if self.lazy_log is not None else ():
                full.give(p)
            for sign, p in self.log:
                (full.give if sign > 0 else full.take)(p)
            self.full = full
        return self.full

    def _apply(self, p: Placement, sign: int) -> None:
        if self.one_type >= 0:
            if p.type_idx == self.one_type:
                if self.whole_type:
                    self.avail += sign * len(p.gpus)
                else:
                    node_pool, eligible = self.base.layout.node_pool, self.eligible_pools
                    counts = p.node_counts or (len(p.gpus),)
                    self.avail += sign * sum(
                        c for n, c in zip(p.nodes, counts, strict=True) if node_pool[n] in eligible
                    )
            return
        base_whole, delta, pool_sum = self.base.node_whole, self.delta, self.pool_sum
        node_pool = self.base.layout.node_pool
        k, track = self.k, self.track
        for n, c in zip(p.nodes, p.node_counts or (len(p.gpus),), strict=True):
            before = base_whole[n] + delta.get(n, 0)
            after = before + sign * c
            delta[n] = after - base_whole[n]
            q = node_pool[n]
            pool_sum[q] += sign * c
            if track and q in self.fit_pools:
                self.fit_nodes += (after >= k) - (before >= k)

    def _change(self, p: Placement, sign: int) -> None:
        if self.full is None and p.milli < FULL:
            self.materialize()
        if self.full is not None:
            (self.full.give if sign > 0 else self.full.take)(p)
            return
        self._apply(p, sign)
        self.log.append((sign, p))

    def give(self, p: Placement) -> None:
        self._change(p, 1)

    def take(self, p: Placement) -> None:
        self._change(p, -1)

    @property
    def counts_one_type(self) -> bool:
        """True while the head needs only a count of free GPUs of its one type (all its pools eligible)."""
        return self.one_type >= 0 and self.whole_type and self.full is None and not self.log

    def release_in_bulk(self, whole_gpus_released: int, placements: Callable[[], list[Placement]]) -> None:
        """Record the placements `placements()` lists (whole-GPU, of the head's type) as released, together
        `whole_gpus_released` GPUs. Only while `counts_one_type`; the list is built, and applied per GPU, only
        if the shadow is materialized."""
        self.avail += whole_gpus_released
        self.lazy_log = placements

    def release_until_head_fits(
        self, releases: Iterable[tuple[float, Placement]], now_s: float
    ) -> float | None:
        """Give back `releases` ((estimated end, placement), in time order; an end before `now_s` counts as
        `now_s`) until the head fits, and then every other release of that same instant; that instant, or None
        if the head never fits."""
        it = iter(releases)
        for end, p in it:
            self.give(p)
            if self.head_fits():
                shadow_s = max(end, now_s)
                for end_next, p_next in it:
                    if end_next > shadow_s:
                        break
                    self.give(p_next)
                return shadow_s
        return None

    def head_fits(self) -> bool:
        if self.full is not None:
            return can_place(self.full, *self.shape)
        if self.one_type >= 0:
            return self.avail >= self.k
        if self.fit_nodes > 0:
            return True
        k, pool_sum = self.k, self.pool_sum
        return any(sum(pool_sum[q] for q in pools) >= k for _, pools in self.spreads)

    def node_key(self, n: int) -> tuple[int, int] | None:
        """What decides `head_fits_without` for a whole-GPU placement on node n alone, while the shadow is
        kept as counts: (n's pool, n's free GPUs in the shadow); None once materialized."""
        if self.full is not None:
            return None
        return self.base.layout.node_pool[n], self.base.node_whole[n] + self.delta.get(n, 0)

    def whole_free(self, n: int) -> int:
        """Node n's free whole GPUs in the shadow state (not while it keeps a single count: `one_type`)."""
        if self.full is not None:
            return self.full.node_whole[n]
        return self.base.node_whole[n] + self.delta.get(n, 0)

    def spread_spare(self, pools: tuple[int, ...], nodes: list[int]) -> int:
        """Free whole GPUs in the shadow state over `nodes` (the head's nodes of one type it may spread on, the
        nodes of `pools`) beyond the head's k: how many of them a backfill may take while that spread stays
        free."""
        if self.full is not None:
            return sum(self.full.node_whole[n] for n in nodes) - self.k
        if self.one_type >= 0:
            return self.avail - self.k  # `avail` counts exactly the nodes of the head's one spread
        return sum(self.pool_sum[q] for q in pools) - self.k

    def head_fits_without_shape(self, shape: tuple, type_idx: int) -> bool | None:
        """Like `head_fits_without` for any placement of `shape` on type `type_idx`, when the counts alone
        decide it (a one-type multi-node head on all pools of its type); None when a placement is needed."""
        if self.full is not None or not self.whole_type or shape[2] < FULL:
            return None
        taken = shape[1] if type_idx == self.one_type else 0
        return self.avail - taken >= self.k

    def head_fits_without_gpus_on(self, n: int, c: int) -> bool:
        """`head_fits_without` for a whole-GPU placement of c GPUs on node n alone, told from the counts
        without building it or changing the shadow; only while the shadow is kept as counts (`full` is None)."""
        layout = self.base.layout
        if self.one_type >= 0:
            if layout.node_type[n] == self.one_type and (
                self.whole_type or layout.node_pool[n] in self.eligible_pools
            ):
                return self.avail - c >= self.k
            return self.avail >= self.k
        k, q = self.k, layout.node_pool[n]
        fit_nodes = self.fit_nodes
        if self.track and q in self.fit_pools:
            before = self.base.node_whole[n] + self.delta.get(n, 0)
            fit_nodes -= (before >= k) - (before - c >= k)
        if fit_nodes > 0:
            return True
        pool_sum = self.pool_sum
        return any(
            sum(pool_sum[p] for p in pools) - (c if q in pools else 0) >= k for _, pools in self.spreads
        )

    def head_fits_without(self, p: Placement) -> bool:
        """Whether the head would still fit after `p` is taken (the shadow is left unchanged)."""
        if self.full is None and p.milli == FULL:
            self._apply(p, -1)
            fits = self.head_fits()
            self._apply(p, 1)
            return fits
        full = self.materialize()
        full.take(p)
        fits = can_place(full, *self.shape)
        full.give(p)
        return fits
