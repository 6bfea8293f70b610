"""The waiting job shapes EASY has registered, each filed under its first waiting job, so that the shapes of
several (pool, GPUs) buckets can be walked merged in that order and the walk stopped early.

The places are ShapeRegistry's (schedulers/shape_registry.py): `always` and `spreads` map id(shape) -> shape;
each `one_node[q]` / `spread[q]` bucket of k GPUs is here a list of (first waiting job, shape), ascending.
The policy keeps every waiting shape registered under its first waiting job and no other shape: `file` when a
shape starts waiting or its first job changes, `drop` when none waits any more, `sync` to all of a queue.
A job index belongs to one shape, so no two entries of a bucket share a key (no shape is ever compared).
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Mapping, Sequence

from schedulers.shape_registry import ShapeRegistry


class ShapesByFirst(ShapeRegistry):
    """See the module's docstring. `first` maps id(shape) -> its first waiting job (the key it is filed
    under), `members` id(shape) -> its waiting jobs (the queue's own ascending sequence of them)."""

    __slots__ = ("first", "members", "shape", "_lists")
    _bucket = list

    def __init__(self):
        super().__init__()
        self.first: dict[int, int] = {}
        self.members: dict[int, Sequence[int]] = {}
        self.shape: dict[int, tuple] = {}  # id(shape) -> shape
        self._lists: dict[int, list[list]] = {}  # id(shape) -> its buckets (once filed again)

    def clear(self) -> None:
        super().clear()
        self.first.clear()
        self.members.clear()
        self.shape.clear()

    def add(self, s: tuple) -> None:
        raise TypeError("ShapesByFirst files a shape under its first waiting job: use file()")

    def file(self, s: tuple, key: int, members: Sequence[int]) -> None:
        """Register shape s (again) under `key`, its first waiting job; `members` are its waiting jobs."""
        sid = id(s)
        self.members[sid] = members
        old = self.first.get(sid)
        if old == key:
            return
        self.first[sid] = key
        if old is None:
            self.shape[sid] = s
            places = self._places.get(sid)
            if places is None:
                places = self._places[sid] = self._places_of(s)
            for place in places:
                if place.__class__ is dict:
                    place[sid] = s
                else:
                    insort(place, (key, s))
            return
        for place in self._buckets(sid):  # (filed again: it stays in its dicts)
            del place[bisect_left(place, (old,))]
            insort(place, (key, s))

    def drop(self, s: tuple) -> None:
        sid = id(s)
        old = self.first.pop(sid, None)
        if old is None:  # (not registered: nothing to drop)
            return
        del self.members[sid]
        del self.shape[sid]
        for place in self._places[sid]:
            if place.__class__ is dict:
                del place[sid]
            else:
                del place[bisect_left(place, (old,))]

    def _buckets(self, sid: int) -> list[list]:
        """The buckets (not the dicts) a registered shape is in."""
        b = self._lists.get(sid)
        if b is None:
            b = self._lists[sid] = [place for place in self._places[sid] if place.__class__ is list]
        return b

    def sync(self, by_shape: Mapping[tuple, Sequence[int]]) -> None:
        """Register exactly the shapes of `by_shape` (shape -> its waiting jobs, ascending), each under its
        first waiting job."""
        first = self.first
        for s, members in by_shape.items():
            self.file(s, members[0], members)
        if len(first) > len(by_shape):
            waiting = {id(s) for s in by_shape}
            for sid in [sid for sid in first if sid not in waiting]:
                self.drop(self.shape[sid])
