"""A sorted list whose inserts and removals cost O(log n + LOAD) instead of O(n): the queue indexes' container.

Values are kept in buckets of at most 2 x LOAD sorted values (`_lists`), each bucket's largest value in
`_maxes`, so an insert or a removal moves at most one bucket's values (a plain sorted list moves half the queue
on each, which dominates once hundreds of thousands of jobs wait). Iteration, `len`, indexing and the bisect
functions behave as on the equivalent sorted Python list (tests/test_sorted_list.py checks each against one).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterator
from itertools import chain, islice

LOAD = 512  # a bucket is split when it exceeds 2 x LOAD values


class SortedList:
    """Values in ascending order; duplicates allowed. Never mutate it while iterating over it."""

    __slots__ = ("_lists", "_maxes", "_len")

    def __init__(self, values=()):
        self._lists: list[list] = []
        self._maxes: list = []
        self._len = 0
        for v in sorted(values):
            self._append_sorted(v)

    @classmethod
    def of_one(cls, v) -> SortedList:
        """A list holding only v (the simulator makes one per shape that starts waiting: the fast way)."""
        sl = cls.__new__(cls)
        sl._lists = [[v]]
        sl._maxes = [v]
        sl._len = 1
        return sl

    def _append_sorted(self, v) -> None:
        lists = self._lists
        if lists and len(lists[-1]) < 2 * LOAD:
            lists[-1].append(v)
            self._maxes[-1] = v
        else:
            lists.append([v])
            self._maxes.append(v)
        self._len += 1

    def append_max(self, v) -> None:
        """Insert v, which is >= every value held (an arrival's job index): `add` without its search."""
        lists = self._lists
        if not lists:
            lists.append([v])
            self._maxes.append(v)
            self._len = 1
            return
        bucket = lists[-1]
        bucket.append(v)
        self._maxes[-1] = v
        self._len += 1
        if len(bucket) > 2 * LOAD:
            lists[-1:] = [bucket[:LOAD], bucket[LOAD:]]
            self._maxes[-1:] = [bucket[LOAD - 1], bucket[-1]]

    def add(self, v) -> None:
        """Insert v after any equal values."""
        maxes = self._maxes
        if not maxes:
            self._lists.append([v])
            maxes.append(v)
            self._len = 1
            return
        k = bisect_right(maxes, v)
        if k == len(maxes):
            k -= 1
            bucket = self._lists[k]
            bucket.append(v)
            maxes[k] = v
        else:
            bucket = self._lists[k]
            insort(bucket, v)
        self._len += 1
        if len(bucket) > 2 * LOAD:
            self._lists[k : k + 1] = [bucket[:LOAD], bucket[LOAD:]]
            maxes[k : k + 1] = [bucket[LOAD - 1], bucket[-1]]

    def remove(self, v) -> None:
        """Remove one value equal to v; ValueError if there is none."""
        lists = self._lists
        if (
            lists and lists[0][0] == v
        ):  # the smallest (the simulator starting the longest-waiting job of a shape)
            bucket = lists[0]
            del bucket[0]
            self._len -= 1
            if not bucket:
                del lists[0]
                del self._maxes[0]
            return
        maxes = self._maxes
        k = bisect_left(maxes, v)
        if k < len(maxes):
            bucket = self._lists[k]
            j = bisect_left(bucket, v)
            if bucket[j] == v:
                del bucket[j]
                self._len -= 1
                if not bucket:
                    del self._lists[k]
                    del maxes[k]
                elif j == len(bucket):
                    maxes[k] = bucket[-1]
                return
        raise ValueError(f"{v!r} not in SortedList")

    def clear(self) -> None:
        self._lists.clear()
        self._maxes.clear()
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def __iter__(self) -> Iterator:
        return chain.from_iterable(self._lists)

    def __reversed__(self) -> Iterator:
        return chain.from_iterable(reversed(b) for b in reversed(self._lists))

    def __contains__(self, v) -> bool:
        maxes = self._maxes
        k = bisect_left(maxes, v)
        if k == len(maxes):
            return False
        bucket = self._lists[k]
        return bucket[bisect_left(bucket, v)] == v

    def _locate(self, index: int) -> tuple[int, int]:
        """(bucket, offset) of position `index` (0 <= index < len)."""
        for k, bucket in enumerate(self._lists):
            if index < len(bucket):
                return k, index
            index -= len(bucket)
        raise IndexError("SortedList index out of range")

    def __getitem__(self, index):
        if isinstance(index, slice):
            return list(self)[index]
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("SortedList index out of range")
        lists = self._lists
        if index < len(lists[0]):
            return lists[0][index]
        k, j = self._locate(index)
        return lists[k][j]

    def _position(self, k: int, j: int) -> int:
        return sum(len(b) for b in islice(self._lists, k)) + j

    def bisect_left(self, v, key: Callable | None = None) -> int:
        """As `bisect.bisect_left(list(self), v, key=key)`."""
        return self._bisect(bisect_left, v, key)

    def bisect_right(self, v, key: Callable | None = None) -> int:
        """As `bisect.bisect_right(list(self), v, key=key)`."""
        return self._bisect(bisect_right, v, key)

    def _bisect(self, search: Callable, v, key: Callable | None) -> int:
        """`search` (bisect_left or bisect_right) over the buckets' largest values, then within one bucket."""
        maxes = self._maxes
        k = search(maxes, v, key=key)
        if k == len(maxes):
            return self._len
        return self._position(k, search(self._lists[k], v, key=key))

    def iter_from(self, index: int) -> Iterator:
        """The values from position `index` on (as `iter(list(self)[index:])`)."""
        lists = self._lists
        if lists and index < len(lists[0]):
            return chain(islice(lists[0], index, None), *islice(lists, 1, None))
        for k, bucket in enumerate(lists):
            if index < len(bucket):
                return chain(islice(bucket, index, None), chain.from_iterable(islice(lists, k + 1, None)))
            index -= len(bucket)
        return iter(())

    def iter_after(self, v) -> Iterator:
        """The values greater than v, ascending."""
        maxes = self._maxes
        k = bisect_right(maxes, v)
        if k == len(maxes):
            return iter(())
        bucket = self._lists[k]
        return chain(
            islice(bucket, bisect_right(bucket, v), None),
            chain.from_iterable(islice(self._lists, k + 1, None)),
        )

    def first_after(self, v, default=None):
        """The smallest value greater than v, or `default`."""
        maxes = self._maxes
        k = bisect_right(maxes, v)
        if k == len(maxes):
            return default
        bucket = self._lists[k]
        return bucket[bisect_right(bucket, v)]

    def first(self, default=None):
        """The smallest value, or `default` when empty."""
        return self._lists[0][0] if self._lists else default

    def last(self, default=None):
        """The largest value, or `default` when empty."""
        return self._maxes[-1] if self._maxes else default

    def __eq__(self, other) -> bool:
        return list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"SortedList({list(self)!r})"


class OnDemandSortedList(SortedList):
    """A SortedList that its owner fills from `source()` (an iterable of values, in any order) only when it is
    first read; until then the owner need not maintain it (`active` is False). Once read it stays active and
    the owner keeps it up to date."""

    __slots__ = ("active", "_source")

    def __init__(self, source: Callable[[], object]):
        super().__init__()
        self.active = False
        self._source = source

    def _activate(self) -> None:
        self.active = True
        for v in sorted(self._source()):
            self._append_sorted(v)


def _reading(name: str):
    base = getattr(SortedList, name)

    def method(self, *args, **kwargs):
        if not self.active:
            self._activate()
        return base(self, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = base.__doc__
    return method


for _name in ("__len__", "__bool__", "__iter__", "__reversed__", "__contains__", "__getitem__", "bisect_left",
              "bisect_right", "iter_from", "iter_after", "first_after", "last", "__eq__", "__repr__"):  # fmt: skip
    setattr(OnDemandSortedList, _name, _reading(_name))


class _IndexDict(dict):
    __slots__ = ("_build",)


class LiveDict(_IndexDict):
    """An OnDemandDict once read: a plain dict (no overridden method, so reads run at C speed)."""

    __slots__ = ()


class OnDemandDict(_IndexDict):
    """A dict that its owner fills from `build()` (its items, in the order the dict would hold them) only when
    something first reads it; it then turns into a `LiveDict` (the same object), which the owner keeps up to
    date from then on. Until then the owner need not maintain it (the owner's `build` notes the switch)."""

    __slots__ = ()

    def __init__(self, build: Callable[[], object]):
        super().__init__()
        self._build = build

    def _activate(self) -> None:
        dict.update(self, self._build())
        self.__class__ = LiveDict


def _reading_dict(name: str):
    base = getattr(dict, name)

    def method(self, *args, **kwargs):
        self._activate()
        return base(self, *args, **kwargs)

    method.__name__ = name
    method.__doc__ = base.__doc__
    return method


for _name in ("__getitem__", "__iter__", "__reversed__", "__len__", "__contains__", "__eq__", "__ne__", "__repr__",
              "__or__", "__ror__", "keys", "values", "items", "get", "copy"):  # fmt: skip
    setattr(OnDemandDict, _name, _reading_dict(_name))


NODE_LOAD = 128  # a NodeSet bucket is split when it exceeds 2 x NODE_LOAD values


class NodeSet:
    """A set of distinct ints (node indices) kept ascending in buckets, whose copy costs O(buckets): FreeState's
    index of the nodes of a big pool with c free GPUs (the lowest one, and the ascending walk, in O(1) per
    node; a scratch copy per planned decision without copying every node).

    A copy shares its buckets with the original; whichever side then changes a shared bucket copies that bucket
    first (`_own[k]` says that bucket k is this object's alone). Supports what FreeState and its readers use of a
    set: add, discard, `in`, len, truth, ascending iteration, copy, and `first()` (the smallest)."""

    __slots__ = ("_lists", "_maxes", "_own", "_len")

    def __init__(self, values=()):
        v = sorted(values)
        self._lists = [v[a : a + NODE_LOAD] for a in range(0, len(v), NODE_LOAD)]
        self._maxes = [b[-1] for b in self._lists]
        self._own = [True] * len(self._lists)
        self._len = len(v)

    def copy(self) -> NodeSet:
        out = NodeSet.__new__(NodeSet)
        out._lists = list(self._lists)
        out._maxes = list(self._maxes)
        out._own = [False] * len(self._lists)
        self._own = [False] * len(self._lists)
        out._len = self._len
        return out

    def _bucket(self, k: int) -> list[int]:
        """Bucket k, made this object's own (copied if it is shared)."""
        b = self._lists[k]
        if not self._own[k]:
            b = self._lists[k] = b.copy()
            self._own[k] = True
        return b

    def add(self, n: int) -> None:
        """Insert n (not present)."""
        maxes = self._maxes
        self._len += 1
        if not maxes:
            self._lists.append([n])
            maxes.append(n)
            self._own.append(True)
            return
        k = bisect_right(maxes, n)
        if k == len(maxes):
            k -= 1
            maxes[k] = n
        b = self._lists[k] if self._own[k] else self._bucket(k)  # (_bucket inlined where owned: hot path)
        insort(b, n)
        if len(b) > 2 * NODE_LOAD:
            self._lists[k : k + 1] = [b[:NODE_LOAD], b[NODE_LOAD:]]
            maxes[k : k + 1] = [b[NODE_LOAD - 1], b[-1]]
            self._own[k : k + 1] = [True, True]

    def discard(self, n: int) -> None:
        """Remove n if present."""
        maxes = self._maxes
        k = bisect_left(maxes, n)
        if k == len(maxes):
            return
        b = self._lists[k]
        j = bisect_left(b, n)
        if b[j] != n:
            return
        self._len -= 1
        if len(b) == 1:
            del self._lists[k]
            del maxes[k]
            del self._own[k]
            return
        if not self._own[k]:
            b = self._bucket(k)
        del b[j]
        if j == len(b):
            maxes[k] = b[j - 1]

    def first(self) -> int:
        """The smallest value (the set is not empty)."""
        return self._lists[0][0]

    __contains__ = SortedList.__contains__  # the same buckets (_lists, _maxes), the same search

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def __iter__(self) -> Iterator[int]:
        return chain.from_iterable(self._lists)

    def __eq__(self, other) -> bool:
        return set(self) == set(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"NodeSet({list(self)!r})"


class NodeBits:
    """The same set as a NodeSet (same operations, same results), kept as one int with bit n set for node n: an
    add or a discard is one int operation and a copy shares the (immutable) int, but each costs time in the
    highest node index, so FreeState uses it for big pools of up to BITS_MAX nodes and NodeSets above."""

    __slots__ = ("bits",)

    def __init__(self, values=()):
        bits = 0
        for n in values:
            bits |= 1 << n
        self.bits = bits

    def copy(self) -> NodeBits:
        out = NodeBits.__new__(NodeBits)
        out.bits = self.bits
        return out

    def add(self, n: int) -> None:
        """Insert n (not present)."""
        self.bits |= 1 << n

    def discard(self, n: int) -> None:
        """Remove n if present."""
        if self.bits >> n & 1:
            self.bits ^= 1 << n

    def first(self) -> int:
        """The smallest value (the set is not empty)."""
        b = self.bits
        return (b & -b).bit_length() - 1

    def __contains__(self, n) -> bool:
        return n >= 0 and bool(self.bits >> n & 1)

    def __len__(self) -> int:
        return self.bits.bit_count()

    def __bool__(self) -> bool:
        return self.bits != 0

    def __iter__(self) -> Iterator[int]:
        b = self.bits  # (a snapshot: the walk reads the set as it was when it began)
        while b:
            low = b & -b
            yield low.bit_length() - 1
            b ^= low

    def __eq__(self, other) -> bool:
        return set(self) == set(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"NodeBits({list(self)!r})"
