"""sim/sorted_list.py against plain Python containers (a sorted list, a set, a dict), and FreeState's ordered node
index against plain sets."""

from __future__ import annotations

import bisect

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import sim.sorted_list as sorted_list
from sim.cluster import ClusterLayout, FreeState, Placement
from sim.cluster_spec import parse_cluster_spec
from sim.sorted_list import LiveDict, NodeBits, NodeSet, OnDemandDict, OnDemandSortedList, SortedList

ops = st.lists(st.tuples(st.sampled_from(["add", "remove"]), st.integers(0, 60)), max_size=300)


def _check(sl: SortedList, ref: list) -> None:
    assert list(sl) == ref and len(sl) == len(ref) and bool(sl) == bool(ref)
    assert list(reversed(sl)) == ref[::-1]
    assert sl.first("none") == (ref[0] if ref else "none") and sl.last("none") == (ref[-1] if ref else "none")
    for v in range(-1, 62, 7):
        assert sl.bisect_left(v) == bisect.bisect_left(ref, v)
        assert sl.bisect_right(v) == bisect.bisect_right(ref, v)
        assert (v in sl) == (v in ref)
        assert list(sl.iter_after(v)) == [x for x in ref if x > v]
        assert sl.first_after(v, "none") == next((x for x in ref if x > v), "none")
        key = lambda x, v=v: x > v  # noqa: E731 -- a monotone predicate, as EASY bisects
        assert sl.bisect_left(True, key=key) == bisect.bisect_left(ref, True, key=key)
    for i in range(len(ref)):
        assert sl[i] == ref[i] and sl[i - len(ref)] == ref[i]
    for i in (0, 1, len(ref) // 2, len(ref)):
        assert list(sl.iter_from(i)) == ref[i:]


@settings(max_examples=150, deadline=None)
@given(ops=ops, load=st.sampled_from([1, 2, 3, 512]))
def test_sorted_list_behaves_as_a_sorted_python_list(ops, load):
    old = sorted_list.LOAD
    sorted_list.LOAD = load  # tiny buckets: splits and empty buckets happen in short sequences
    try:
        sl, ref = SortedList(), []
        for op, v in ops:
            if op == "add":
                sl.add(v)
                bisect.insort(ref, v)
            elif v in ref:
                sl.remove(v)
                ref.remove(v)
            else:
                try:
                    sl.remove(v)
                    raise AssertionError("remove of a missing value must raise")
                except ValueError:
                    pass
        _check(sl, ref)
        assert SortedList(reversed(ref)) == ref
    finally:
        sorted_list.LOAD = old


def test_on_demand_sorted_list_fills_itself_when_first_read():
    source = [5, 1, 3]
    sl = OnDemandSortedList(lambda: source)
    assert not sl.active
    # the owner did not maintain it while inactive: it is read from the source when first read
    source.append(2)
    assert list(sl) == [1, 2, 3, 5] and sl.active
    sl.add(4)
    assert len(sl) == 5 and sl.bisect_left(4) == 3 and 4 in sl


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), steps=st.integers(1, 300), bits=st.booleans())
def test_free_state_node_order_matches_its_sets(seed, steps, bits):
    """A pool of more than BIG_POOL nodes keeps its nodes in NodeBits (up to BITS_MAX nodes) or NodeSets: the
    lowest node with c free GPUs and the ascending walk agree with min() and sorted() of the nodes that have c
    free GPUs after any sequence of takes and gives (one-node and spread), and in copies (which share their
    content with the state they were copied from)."""
    layout = ClusterLayout(parse_cluster_spec("70xA100-80GB:2,80xA100-80GB:1,3xH100:4"))
    assert layout.pool_big == [True, False]  # pools: A100 nodes of both sizes (big), H100 nodes
    assert layout.pool_bits == [True, False]
    layout.pool_bits = [bits, False]
    free = FreeState(layout)
    assert isinstance(free.pool_free[0][0], NodeBits if bits else NodeSet)
    rng = np.random.default_rng(seed)
    held: list[Placement] = []
    for _ in range(steps):
        if held and rng.random() < 0.45:
            free.give(held.pop(int(rng.integers(len(held)))))
        else:
            n = int(rng.integers(layout.num_nodes))
            k = int(rng.integers(1, free.node_whole[n] + 1)) if free.node_whole[n] else 0
            m = next((m for m in range(n + 1, layout.num_nodes) if free.node_whole[m]), None)
            if k and m is not None and layout.node_type[m] == layout.node_type[n] and rng.random() < 0.3:
                c = int(rng.integers(1, free.node_whole[m] + 1))  # a spread over n and m
                gpus = tuple(free.free_gpus_on(n, k)) + tuple(free.free_gpus_on(m, c))
                p = Placement(gpus, (n, m), 1000, 0, layout.node_type[n], -1, (k, c))
                free.take(p)
                held.append(p)
            elif k:
                gpus = tuple(free.free_gpus_on(n, k))
                p = Placement(gpus, (n,), 1000, 0, layout.node_type[n])
                free.take(p)
                held.append(p)
        if rng.random() < 0.05:  # a copy shares buckets with the original, which then changes on its own
            old, free = free, free.copy()
            n = next((n for n in range(layout.num_nodes) if old.node_whole[n]), None)
            if n is not None:
                old.take(Placement(tuple(old.free_gpus_on(n, 1)), (n,), 1000, 0, layout.node_type[n]))
    for q, by_c in enumerate(free.pool_free):
        for c, nodes in enumerate(by_c):
            expected = (
                [n for n in range(layout.num_nodes) if layout.node_pool[n] == q and free.node_whole[n] == c]
                if c
                else []
            )  # (count 0 is not kept: FreeState)
            assert sorted(nodes) == expected and len(nodes) == len(expected)
            assert list(free.nodes_ascending(q, c)) == expected
            if expected:
                assert free.min_node(q, c) == expected[0]
    for n in range(layout.num_nodes):  # the free-GPU bits and counts agree, and the arrays built from them
        a, k = layout.node_first_gpu[n], layout.node_num_gpus[n]
        held_here = [g for p in held for g in p.gpus if layout.gpu_node[g] == n]
        assert free.node_free_bits[n] == sum(1 << (g - a) for g in range(a, a + k) if g not in held_here)
        assert free.node_whole[n] == k - len(held_here)
    for _ in range(2):  # the arrays, once read, then kept up to date by each take and give (and in a copy)
        taken = {g for p in held for g in p.gpus}
        assert free.free_milli.tolist() == [0 if g in taken else 1000 for g in range(layout.num_gpus)]
        assert free.free_mem_mb.tolist() == [
            0 if g in taken else layout.gpu_mem_mb[g] for g in range(layout.num_gpus)
        ]
        free = free.copy()
        for p in held[::2]:
            free.give(p)
        held = held[1::2]


def test_append_max_appends_as_add_does():
    old = sorted_list.LOAD
    sorted_list.LOAD = 2
    try:
        a, b = SortedList(), SortedList()
        for v in range(11):
            a.append_max(v)
            b.add(v)
            assert a._lists == b._lists and a._maxes == b._maxes and len(a) == len(b) == v + 1
    finally:
        sorted_list.LOAD = old


@settings(max_examples=150, deadline=None)
@given(
    start=st.sets(st.integers(0, 40), max_size=25),
    ops=st.lists(
        st.tuples(st.sampled_from(["add", "discard", "copy"]), st.integers(0, 40), st.integers(0, 3)),
        max_size=200,
    ),
    load=st.sampled_from([1, 2, 128]),
    cls=st.sampled_from([NodeSet, NodeBits]),
)
def test_node_set_behaves_as_a_set_and_its_copies_are_independent(start, ops, load, cls):
    """Each of several NodeSets or NodeBits (copies of copies, changed in any order) holds what a plain set would."""
    old = sorted_list.NODE_LOAD
    sorted_list.NODE_LOAD = load
    try:
        pairs = [(cls(start), set(start))]
        for op, v, which in ops:
            ns, ref = pairs[which % len(pairs)]
            if op == "copy":
                pairs.append((ns.copy(), set(ref)))
            elif op == "discard":
                ns.discard(v)
                ref.discard(v)
            elif v not in ref:
                ns.add(v)
                ref.add(v)
            for ns, ref in pairs:
                assert list(ns) == sorted(ref) and len(ns) == len(ref) and bool(ns) == bool(ref)
                assert all((x in ns) == (x in ref) for x in range(-1, 42))
                if ref:
                    assert ns.first() == min(ref)
    finally:
        sorted_list.NODE_LOAD = old


def test_on_demand_dict_builds_itself_when_first_read_and_then_reads_as_a_dict():
    built = []

    def build():
        built.append(1)
        return [("b", 2), ("a", 1)]

    for read in (
        len,
        list,
        bool,
        lambda d: d["a"],
        lambda d: "a" in d,
        lambda d: d.get("a"),
        lambda d: list(d.items()),
    ):
        d = OnDemandDict(build)
        read(d)
        assert type(d) is LiveDict and dict(d) == {"b": 2, "a": 1} and list(d) == ["b", "a"]
        d["c"] = 3  # its owner keeps it up to date from then on
        assert list(d.items()) == [("b", 2), ("a", 1), ("c", 3)]
    assert len(built) == 7  # once per dict
