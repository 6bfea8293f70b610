"""The waiting job shapes a remembering policy (EASY, SJF) has registered, by what may let them fit again.

A policy that remembers that a shape did not fit at the end of its last call looks again only at the shapes
that capacity released since may concern: `always` (fractional shapes: they may fit wherever capacity was
released), `spreads` (whole-GPU shapes with a spread option), and per pool q, by GPUs k ascending, the
whole-GPU shapes of k GPUs that may use q: `one_node[q]` those placed on one node there (they fit again only
once some node of q has k whole GPUs free) and `spread[q]` those spread over q's type (once the type has k
whole GPUs free); a scan stops at the first k larger than the GPUs free. Each maps id(shape) -> shape.
"""

from __future__ import annotations

from sim.cluster import FULL
from sim.placement import _options


class ShapeRegistry:
    """The registered shapes (see the module's docstring). `add` registers a shape (again), `drop` removes
    it; a policy drops a shape once no job of it waits, when it starts its last job or when it next meets it.

    Each shape's places (`_places`: the dicts above it belongs in) are computed once per run, and those dicts
    are never replaced, so that adding and dropping a shape cost one store each."""

    __slots__ = ("live", "always", "spreads", "one_node", "spread", "_places")
    _bucket: type = dict  # what holds the shapes of one (pool, k) (a subclass may keep them otherwise)

    def __init__(self):
        self.live: set[int] = set()  # id(shape) of the shapes registered now
        self.always: dict[int, tuple] = {}
        self.spreads: dict[int, tuple] = {}
        self.one_node: dict[int, list[tuple[int, dict]]] = {}  # pool -> (k, shapes), k ascending
        self.spread: dict[int, list[tuple[int, dict]]] = {}  # likewise
        self._places: dict[int, list] = {}  # id(shape) -> the dicts (and buckets) it belongs in

    def clear(self) -> None:
        """Drop every shape."""
        self.live.clear()
        self.always.clear()
        self.spreads.clear()
        for by_pool in (self.one_node, self.spread):
            for by_k in by_pool.values():
                for _, registered in by_k:
                    registered.clear()

    def add(self, s: tuple) -> None:
        key = id(s)
        if key in self.live:
            return
        self.live.add(key)
        places = self._places.get(key)
        if places is None:
            places = self._places[key] = self._places_of(s)
        for registered in places:
            registered[key] = s

    def drop(self, s: tuple) -> None:
        key = id(s)
        live = self.live
        if key not in live:  # (not registered: nothing to drop)
            return
        live.remove(key)
        for registered in self._places[key]:
            registered.pop(key, None)

    def _places_of(self, s: tuple) -> list:
        elig, k, milli, _, pace = s
        if milli < FULL:
            return [self.always]
        spread_types = {o.multi_type for o in _options(elig, k, pace) if o.multi_type >= 0}
        places = [self.spreads] if spread_types else []
        for t in elig.types:
            by_pool = self.spread if t in spread_types else self.one_node
            for q in elig.type_pools[t]:
                by_k = by_pool.setdefault(q, [])
                at = 0
                while at < len(by_k) and by_k[at][0] < k:
                    at += 1
                if at == len(by_k) or by_k[at][0] != k:
                    by_k.insert(at, (k, self._bucket()))
                places.append(by_k[at][1])
        return places
