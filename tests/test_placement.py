"""The placement rule (sim/placement.py) against a brute-force reading of docs/model.md's rule, on random clusters
and random occupancy (Hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from sim.cluster import FULL, ClusterLayout, FreeState, Placement
from sim.placement import Pace, alternatives, duration_s, fit_type, place
from tests.test_invariants import TYPES, clusters


def _occupied(layout: ClusterLayout, busy: list[bool]) -> FreeState:
    free = FreeState(layout)
    for g, b in enumerate(busy[: layout.num_gpus]):
        if b:
            n = layout.gpu_node[g]
            free.take(Placement((g,), (n,), FULL, 0, layout.node_type[n], g))
    return free


def _brute_force(layout: ClusterLayout, free: FreeState, gpu_types, mem_mb: int, k: int, pace: Pace):
    """Every placement option free now, as (preference key, what it is); the rule takes the smallest key."""
    ok = [
        n
        for n in range(layout.num_nodes)
        if (not gpu_types or layout.nodes[n].gpu_type in gpu_types) and layout.node_mem_mb[n] >= mem_mb
    ]
    out = []
    for t in sorted({layout.node_type[n] for n in ok}):
        nodes = [n for n in ok if layout.node_type[n] == t]
        v = layout.type_speed[t]
        if max(layout.node_num_gpus[n] for n in nodes) >= k:  # one node, best fit
            d = duration_s(1.0, v, False, pace)
            out += [
                ((d, 0, -v, free.node_whole[n], n), ("node", n)) for n in nodes if free.node_whole[n] >= k
            ]
        elif sum(free.node_whole[n] for n in nodes) >= k:  # spread over this type
            out.append(((duration_s(1.0, v, True, pace), 1, -v, t), ("spread", t)))
    return sorted(out)


@settings(max_examples=150, deadline=None)
@given(
    clusters(),
    st.lists(st.booleans(), min_size=64, max_size=64),
    st.sampled_from([1, 2, 3, 4, 8, 12, 16]),
    st.sets(st.sampled_from(TYPES), max_size=2),
    st.sampled_from([0, 20_000, 40_000]),
    st.sampled_from([1.0, 1.2, 2.0, 3.0]),
    st.booleans(),
)
def test_place_takes_the_earliest_completing_free_option(spec, busy, k, types, mem_mb, factor, scaled):
    layout = ClusterLayout(spec)
    free = _occupied(layout, busy)
    gpu_types = tuple(sorted(types))
    elig = layout.eligible(gpu_types, mem_mb)
    pace = Pace(factor, scaled)
    options = _brute_force(layout, free, gpu_types, mem_mb, k, pace)
    p = place(free, elig, k, FULL, 0, pace)
    assert fit_type(free, elig, k, FULL, 0, pace) == (-1 if p is None else p.type_idx)
    if not options:
        assert p is None
        return
    assert p is not None and len(p.gpus) == k and free.fits(p)
    what, where = options[0][1]
    if what == "node":
        assert p.nodes == (where,)
    else:
        assert p.type_idx == where and len(p.nodes) > 1
        # fewest nodes: the most-free nodes of the type first (ties -> lower index)
        nodes = [n for n in elig.nodes if layout.node_type[n] == where and free.node_whole[n] > 0]
        nodes.sort(key=lambda n: (-free.node_whole[n], n))
        taken, want = 0, []
        for n in nodes:
            if taken >= k:
                break
            want.append(n)
            taken += free.node_whole[n]
        assert sorted(p.nodes) == sorted(want)
    # alternatives: one per free one-node slot and per free spread, in the same order, the first being place's
    alts = list(alternatives(free, elig, k, FULL, 0, pace))
    assert [
        (
            ("node", a.nodes[0])
            if len(a.nodes) == 1 and k <= elig.type_max_node[a.type_idx]
            else ("spread", a.type_idx)
        )
        for a in alts
    ] == [w for _, w in options]
    assert alts[0] == p
