"""The waiting job shapes a remembering policy (EASY, SJF) has registered, by what may let them fit again.

A policy that remembers that a shape did not fit at the end of its last call looks again only at the shapes
that capacity released since may concern: `always` (fractional shapes: they may fit wherever capacity was
released), `spreads` (whole-GPU shapes with a spread option) and `by_pool` (pool -> k -> id(shape) -> (spread,
shape)): a whole-GPU shape of k GPUs may use the pool on one node (it fits there again once one node of the
pool has k whole GPUs free), or spread over the pool's type (once the type has k whole GPUs free);
`pool_ks` lists each pool's k ascending, so a scan stops at the first k larger than the GPUs free.
"""

from __future__ import annotations

from bisect import insort

from sim.cluster import FULL
from sim.placement import _options


class ShapeRegistry:
    """The registered shapes (see the module's docstring). `add` registers a shape (again), `drop` removes
    it; a policy drops a shape once no job of it waits, when it starts its last job or when it next meets it.

    Each shape's places (`_places`: the dicts above it belongs in, with its value there) are computed once per
    run, and those dicts are never replaced, so that adding and dropping a shape cost one store each."""

    __slots__ = ("live", "always", "spreads", "by_pool", "pool_ks", "_places")

    def __init__(self):
        self.live: set[int] = set()  # id(shape) of the shapes registered now
        self.always: dict[int, tuple] = {}
        self.spreads: dict[int, tuple] = {}
        self.by_pool: dict[int, dict[int, dict[int, tuple[bool, tuple]]]] = {}
        self.pool_ks: dict[int, list[int]] = {}
        self._places: dict[int, list[tuple[dict, object]]] = {}  # id(shape) -> (dict, value) per place

    def clear(self) -> None:
        """Drop every shape."""
        self.live.clear()
        self.always.clear()
        self.spreads.clear()
        for by_k in self.by_pool.values():
            for registered in by_k.values():
                registered.clear()

    def add(self, s: tuple) -> None:
        key = id(s)
        if key in self.live:
            return
        self.live.add(key)
        places = self._places.get(key)
        if places is None:
            places = self._places[key] = self._places_of(s)
        for registered, value in places:
            registered[key] = value

    def drop(self, s: tuple) -> None:
        key = id(s)
        self.live.discard(key)
        for registered, _ in self._places[key]:
            registered.pop(key, None)

    def _places_of(self, s: tuple) -> list[tuple[dict, object]]:
        elig, k, milli, _, pace = s
        if milli < FULL:
            return [(self.always, s)]
        spread_types = {o.multi_type for o in _options(elig, k, pace) if o.multi_type >= 0}
        places: list[tuple[dict, object]] = [(self.spreads, s)] if spread_types else []
        for t in elig.types:
            for q in elig.type_pools[t]:
                by_k = self.by_pool.get(q)
                if by_k is None:
                    by_k = self.by_pool[q] = {}
                    self.pool_ks[q] = []
                registered = by_k.get(k)
                if registered is None:
                    registered = by_k[k] = {}
                    insort(self.pool_ks[q], k)
                places.append((registered, (t in spread_types, s)))
        return places
