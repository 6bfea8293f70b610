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


@settings(max_examples=150, deadline=None)
@given(
    clusters(),
    st.lists(st.tuples(st.integers(0, 10**6), st.sampled_from([FULL, FULL, 250, 500])), max_size=40),
)
def test_free_state_per_gpu_arrays_match_a_plain_per_gpu_model_through_takes_gives_and_copies(spec, steps):
    # FreeState brings its per-GPU arrays up to date only when read (whole-GPU takes and gives note the GPUs
    # they changed); a plain model writes each GPU at once. Steps: take a placement (whole GPUs on one node,
    # listed or as a range, or a spread over nodes; or a share of one GPU), give back a held one, or read the
    # arrays of a copy; the arrays, whenever read, equal the model's, and so do the per-node counts and sets.
    layout = ClusterLayout(spec)
    mem = layout.gpu_mem_mb
    free = FreeState(layout)
    milli_left, mem_left = [FULL] * layout.num_gpus, list(mem)
    held: list[Placement] = []

    def check(state: FreeState) -> None:
        assert state.free_milli.tolist() == milli_left and state.free_mem_mb.tolist() == mem_left

    for r, share in steps:
        if r % 5 == 4 and held:  # give one back
            p = held.pop(r // 5 % len(held))
            free.give(p)
            for g in p.gpus:
                milli_left[g] += p.milli
                mem_left[g] = mem[g] if milli_left[g] == FULL else mem_left[g] + p.mem_mb
        elif r % 5 == 3:
            check(free.copy() if r % 2 else free)
            continue
        elif share < FULL:
            ok = [g for g in range(layout.num_gpus) if milli_left[g] >= share and mem_left[g] >= 1000]
            if not ok:
                continue
            g = ok[r % len(ok)]
            n = layout.gpu_node[g]
            p = Placement((g,), (n,), share, 1000, layout.node_type[n])
            free.take(p)
            held.append(p)
            milli_left[g] -= share
            mem_left[g] -= 1000
        else:
            whole = [g for g in range(layout.num_gpus) if milli_left[g] == FULL]
            if not whole:
                continue
            n = layout.gpu_node[whole[r % len(whole)]]
            own = [g for g in whole if layout.gpu_node[g] == n]
            other = [
                g
                for g in whole
                if layout.gpu_node[g] != n and layout.node_type[layout.gpu_node[g]] == layout.node_type[n]
            ]
            if r % 3 == 2 and other:  # a spread: all of n's free GPUs and one of another node of its type
                m = layout.gpu_node[other[0]]
                gpus = tuple(own) + (other[0],)
                p = Placement(gpus, (n, m), FULL, 0, layout.node_type[n], -1, (len(own), 1))
            else:
                gpus = tuple(own[: 1 + r % len(own)])
                run_ = gpus == tuple(range(gpus[0], gpus[0] + len(gpus)))
                p = Placement(gpus, (n,), FULL, 0, layout.node_type[n], gpus[0] if run_ and r % 2 else -1)
            assert free.fits(p)
            free.take(p)
            held.append(p)
            for g in gpus:
                milli_left[g] = mem_left[g] = 0
        whole = [
            sum(milli_left[g] == FULL for g in range(layout.num_gpus) if layout.gpu_node[g] == n)
            for n in range(layout.num_nodes)
        ]
        assert free.node_whole == whole
        assert [[set(s) for s in by_c] for by_c in free.pool_free] == [
            [
                {n for n in range(layout.num_nodes) if layout.node_pool[n] == q and whole[n] == c and c}
                for c in range(m + 1)  # (count 0 is not kept: FreeState)
            ]
            for q, m in enumerate(layout.pool_max_gpus)
        ]
        assert free.node_free_bits == [
            sum(
                layout.gpu_bit[g]
                for g in range(layout.num_gpus)
                if layout.gpu_node[g] == n and milli_left[g] == FULL
            )
            for n in range(layout.num_nodes)
        ]
    check(free)
