"""A policy's scratch plan: the decisions taken so far this instant and the free capacity they leave.

The live free state is copied only when a second decision needs the first one applied, so the common case of
one start per instant costs no copy.
"""

from __future__ import annotations

from sim.cluster import FULL, FreeState, Placement
from sim.placement import _options, alternative_slots, alternatives, fit_type, place
from sim.simulator import Decision, Preempt

_tuple_new = tuple.__new__  # Decision(...) without the NamedTuple constructor's extra call


class Plan:
    __slots__ = ("_free", "_pending", "_copied", "decisions", "_no_fit")

    def __init__(self, free: FreeState):
        self._free = free
        self._pending: Placement | None = None
        self._copied = False
        self.decisions: list[Decision | Preempt] = []
        self._no_fit: set = set()

    def place(self, shape: tuple) -> Placement | None:
        """`place(free, *shape)` on the capacity left, remembering shapes that did not fit: capacity only
        shrinks while a plan grows, so such a shape cannot fit later in the same plan."""
        if self._no_fit and shape in self._no_fit:  # (an empty set needs no hash of the shape)
            return None
        if self._pending is not None and self._too_few_whole(shape):
            self._no_fit.add(shape)
            return None
        p = place(self.free, *shape)
        if p is None:
            self._no_fit.add(shape)
        return p

    def refuses(
        self, shape: tuple, pools: tuple[int, ...], spread_types: tuple[int, ...], memo: dict
    ) -> bool:
        """Whether whole-GPU `shape` surely does not fit on the capacity left, told from counts: no node of
        `pools` (its one-node options' pools) has its k GPUs whole and free, and no type of `spread_types` (its
        spread options' types) has k whole GPUs free (`refusal_counts` gives both). False says nothing (`place`
        decides). Cheaper than a refused `place` where several shapes are refused in a row: each pool's most whole
        GPUs free on one node is found once per planned decision (kept in the caller's `memo`, a dict it passes
        to every such call), and a pending one-node decision is counted without applying it (no copy of the
        live state)."""
        k = shape[1]
        cut = memo.get(-1)
        if cut is None or cut[0] is not self or cut[1] is not self._pending:
            cut = self._new_memo(memo)
        if spread_types:
            type_whole, t_cut, k_cut = self._free.type_whole, cut[2], cut[3]
            for t in spread_types:
                if type_whole[t] - (k_cut if t == t_cut else 0) >= k:
                    return False
        for q in pools:
            m = memo.get(q)
            if m is None:
                m = self._most_on(q, memo)
            if m >= k:
                return False
        return True

    def _new_memo(self, memo: dict) -> tuple:
        """Empty `refuses`' memo for the capacity left now; its key -1 says for which plan and pending decision
        it holds and what that decision takes from its type: (plan, pending, type, GPUs). A pending decision
        other than one node's whole GPUs is applied first."""
        p = self._pending
        if p is not None and (p.milli < FULL or len(p.nodes) > 1):
            self.free  # noqa: B018 -- (rare) applied, on a copy
            p = None
        memo.clear()
        cut = memo[-1] = (self, p, -1, 0) if p is None else (self, p, p.type_idx, len(p.gpus))
        return cut

    def _most_on(self, q: int, memo: dict) -> int:
        """The most whole GPUs free on one node of pool q once the pending decision applies (into `memo`)."""
        free = self._free
        by_c = free.pool_free[q]
        m = len(by_c) - 1
        p = self._pending
        n = -1 if p is None else p.nodes[0]
        if n >= 0 and free.layout.node_pool[n] == q:  # the most over the other nodes, or n's own after p
            cn = free.node_whole[n]  # (n is one of by_c[cn])
            while m and (not by_c[m] or (m == cn and len(by_c[m]) == 1)):
                m -= 1
            after = cn - len(p.gpus)
            if after > m:
                m = after
        else:
            while m and not by_c[m]:
                m -= 1
        memo[q] = m
        return m

    def fit_type(self, shape: tuple) -> int:
        """`fit_type(free, *shape)` on the capacity left (-1: does not fit), sharing `place`'s no-fit memo."""
        if self._no_fit and shape in self._no_fit:  # (an empty set needs no hash of the shape)
            return -1
        if self._pending is not None:
            if self._too_few_whole(shape):
                self._no_fit.add(shape)
                return -1
            t = self._fit_type_pending(shape)
            if t is not None:
                if t < 0:
                    self._no_fit.add(shape)
                return t
        t = fit_type(self.free, *shape)
        if t < 0:
            self._no_fit.add(shape)
        return t

    def _too_few_whole(self, shape: tuple) -> bool:
        """A whole-GPU shape needs more whole GPUs of its types than are left once the pending decision
        applies (counted without applying it: a refusal needs no copy of the live state)."""
        if shape[2] < FULL:
            return False
        p = self._pending
        type_whole = self._free.type_whole
        types = shape[0].types
        left = sum(type_whole[t] for t in types)
        if p.milli == FULL and p.type_idx in types:  # (a fractional share takes at most one: not counted)
            left -= len(p.gpus)
        return left < shape[1]

    def _fit_type_pending(self, shape: tuple) -> int | None:
        """`fit_type` on the capacity left, for a whole-GPU shape and a pending whole-GPU decision, from the
        live state's counts less the pending decision's (no copy: a round that starts nothing more needs none);
        None where the counts do not say (a fractional shape or decision, or a one-node option over pools of
        several types, whose type depends on the node best fit picks)."""
        p = self._pending
        if shape[2] < FULL or p.milli < FULL:
            return None
        elig, k, _, _, pace = shape
        free = self._free
        pool_free, node_whole, node_pool = free.pool_free, free.node_whole, free.layout.node_pool
        pool_type = free.layout.pool_type
        taken = tuple(zip(p.nodes, p.node_counts or (len(p.gpus),), strict=True))
        hit = elig.options_by_k.get(k)
        for _, t, pools in hit[1] if hit is not None and hit[0] is pace else _options(elig, k, pace):
            if t < 0:
                if len(pools) > 1 and len({pool_type[q] for q in pools}) > 1:
                    return None
                for q in pools:
                    tq = pool_type[q]
                    if k == 1 and free.layout.type_num_pools[tq] == 1:  # the type's only pool: its count
                        if free.type_whole[tq] - (len(p.gpus) if p.type_idx == tq else 0) >= 1:
                            return tq
                        continue
                    # nodes of q with >= k whole GPUs free once p applies
                    room = sum(map(len, pool_free[q][k:]))
                    if room > len(taken):  # (p takes GPUs from fewer nodes than that)
                        return tq
                    if room:
                        for n, c in taken:
                            if node_pool[n] == q and node_whole[n] >= k > node_whole[n] - c:
                                room -= 1
                        if room:
                            return tq
            elif free.type_whole[t] - (len(p.gpus) if p.type_idx == t else 0) >= k:
                if len(pools) == free.layout.type_num_pools[t]:  # every pool of t: the type's count decides
                    return t
                left = sum(c * len(nodes) for q in pools for c, nodes in enumerate(pool_free[q]))
                left -= sum(c for n, c in taken if node_pool[n] in pools)
                if left >= k:
                    return t
        return -1

    def alternatives(self, shape: tuple):
        """`alternatives(free, *shape)` on the capacity left: the placements of each option free now."""
        return alternatives(self.free, *shape)

    def alternative_slots(self, shape: tuple):
        """`alternative_slots` of a whole-GPU shape on the capacity left."""
        elig, k, _, _, pace = shape
        return alternative_slots(self.free, elig, k, pace)

    @property
    def free(self) -> FreeState:
        """Capacity left after every planned decision (never the live state once something is planned)."""
        p = self._pending
        if p is not None:
            if not self._copied:
                self._free = self._free.copy()
                self._copied = True
            self._free.take(p)
            self._pending = None
        return self._free

    def snapshot(self) -> FreeState:
        """The capacity left now, as an object this plan will never change (later decisions copy it first)."""
        free = self.free
        self._copied = False
        return free

    def add(self, job: int, p: Placement) -> None:
        if self._pending is not None:
            self.free  # noqa: B018 -- apply the previous pending placement first
        self.decisions.append(_tuple_new(Decision, (job, p)))
        self._pending = p

    def preempt(self, job: int, p: Placement) -> None:
        """Plan to suspend running job `job`, which holds `p`: its capacity is free for the decisions after it."""
        free = self.free
        if not self._copied:
            self._free = free = free.copy()
            self._copied = True
        free.give(p)
        self._no_fit.clear()  # capacity grew: a shape that did not fit may fit now
        self.decisions.append(_tuple_new(Preempt, (job,)))

    def whole_left(self) -> int:
        """Whole GPUs left free (at most: a pending fractional decision may take one), without copying the
        live state."""
        left = sum(self._free.type_whole)
        p = self._pending
        if p is not None and p.milli == FULL:
            left -= len(p.gpus)
        return left

    def exhausted(self) -> bool:
        """No GPU share at all is left."""
        left = self._free.free_milli_total
        if self._pending is not None:
            left -= self._pending.milli * len(self._pending.gpus)
        return left <= 0


def refusal_counts(shape: tuple) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """`Plan.refuses`'s arguments for a shape: (the pools of its one-node options, the types of its spread
    options); None for a fractional shape."""
    elig, k, milli, _, pace = shape
    if milli < FULL:
        return None
    opts = _options(elig, k, pace)
    pools = tuple(sorted({q for o in opts if o.multi_type < 0 for q in o.pools}))
    return pools, tuple(o.multi_type for o in opts if o.multi_type >= 0)
