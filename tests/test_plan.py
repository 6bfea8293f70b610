"""schedulers/plan.py: a plan's answers before its pending decision is applied (counts only) equal those of the
free state with the decision applied (Hypothesis, against sim/placement.py on a copy)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedulers.plan import Plan, refusal_counts
from sim.catalog import CATALOG
from sim.cluster import FULL, ClusterLayout, FreeState
from sim.cluster_spec import ClusterSpec, NodeSpec
from sim.placement import DEFAULT_PACE, Pace, alternatives, fit_type, place

TYPES = ("A100-80GB", "V100-16GB", "H100")
PACES = (DEFAULT_PACE, Pace(multi_node_factor=1.0))


@st.composite
def clusters(draw):
    """One to three node groups, some with half their type's memory (two pools of one type); a group of 70
    nodes makes a big pool (its nodes kept in NodeSets)."""
    groups = draw(
        st.lists(
            st.tuples(
                st.sampled_from(TYPES),
                st.sampled_from([1, 2, 3, 70]),
                st.sampled_from([1, 2, 4, 8]),
                st.sampled_from([1.0, 0.5]),
            ),
            min_size=1,
            max_size=3,
        )
    )
    nodes = []
    for gpu_type, count, per_node, mem in groups:
        for _ in range(count):
            nodes.append(NodeSpec(f"n{len(nodes)}", gpu_type, per_node, CATALOG[gpu_type].mem_gb * mem))
    return ClusterLayout(ClusterSpec("random", tuple(nodes)))


def shapes(layout: ClusterLayout):
    """A job shape of 1-16 whole GPUs (sometimes fractional) accepting one or two types (or any), needing no
    memory or 60 GB (only the full-memory A100 and H100 nodes)."""
    return st.builds(
        lambda types, mem, k, milli, pace: (layout.eligible(tuple(sorted(types)), mem), k, milli, mem, pace),
        st.sets(st.sampled_from(TYPES), max_size=2),
        st.sampled_from([0, 0, 60_000]),
        st.sampled_from([1, 1, 2, 3, 4, 8, 9, 16]),
        st.sampled_from([FULL, FULL, FULL, 500]),
        st.sampled_from(PACES),
    )


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.data())
def test_a_pending_decision_counts_as_applied(layout, data):
    free = FreeState(layout)
    for shape in data.draw(st.lists(shapes(layout), max_size=12), label="running"):
        p = place(free, *shape)  # fragment the cluster
        if p is not None:
            free.take(p)
    first = data.draw(shapes(layout), label="planned")
    p = place(free, *first)
    if p is None:
        return
    applied = free.copy()
    applied.take(p)
    for shape in data.draw(st.lists(shapes(layout), min_size=1, max_size=8), label="asked"):
        plan = Plan(free)
        plan.add(0, p)  # pending: not applied until the plan's free state is read
        assert plan.fit_type(shape) == fit_type(applied, *shape)
        plan = Plan(free)
        plan.add(0, p)
        assert plan.place(shape) == place(applied, *shape)
        counts = refusal_counts(shape)
        if counts is not None:
            plan = Plan(free)
            plan.add(0, p)
            if plan.refuses(shape, *counts, {}):
                assert place(applied, *shape) is None, "a refusal from counts is never wrong"
    assert free.version == applied.version - 1, "the live state is left unchanged"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.data())
def test_a_refusal_from_counts_is_a_refused_placement(layout, data):
    """After one or two planned decisions (pending, then applied), `refuses` says True only for shapes that
    `place` refuses on the capacity left, and says it for every one-node-only shape that `place` refuses."""
    free = FreeState(layout)
    for shape in data.draw(st.lists(shapes(layout), max_size=12), label="running"):
        p = place(free, *shape)
        if p is not None:
            free.take(p)
    plan = Plan(free)
    applied = free.copy()
    for shape in data.draw(st.lists(shapes(layout), min_size=1, max_size=2), label="planned"):
        p = place(applied, *shape)
        if p is not None:
            plan.add(0, p)
            applied.take(p)
    memo: dict = {}  # one memo for the plan's calls (it says itself when it is out of date)
    for shape in data.draw(st.lists(shapes(layout), min_size=1, max_size=8), label="asked"):
        counts = refusal_counts(shape)
        if counts is None:
            assert shape[2] < FULL
            continue
        refused = place(applied, *shape) is None
        if plan.refuses(shape, *counts, memo):
            assert refused
        elif not counts[1]:  # one-node options only: the counts decide exactly
            assert not refused
        if data.draw(st.booleans(), label="place it too"):  # (applies a pending decision)
            assert (plan.place(shape) is None) == refused


def test_a_refusal_counts_a_pending_decision_on_the_node_that_had_room():
    # two A100 nodes of 8: node 0 has 8 GPUs free, node 1 has 2
    layout = ClusterLayout(ClusterSpec("c", tuple(NodeSpec(f"n{i}", "A100-80GB", 8, 80) for i in range(2))))
    elig = layout.eligible((), 0)
    four, two = (elig, 4, FULL, 0, DEFAULT_PACE), (elig, 2, FULL, 0, DEFAULT_PACE)
    free = FreeState(layout)
    free.take(next(p for p in alternatives(free, elig, 6, FULL, 0) if p.nodes == (1,)))
    assert free.node_whole == [8, 2]
    plan, memo = Plan(free), {}
    plan.add(0, place(free, *four))  # best fit for 4: node 0 (8 free) -> 4 left there
    assert not plan.refuses(four, *refusal_counts(four), memo)  # node 0 keeps 4
    plan.add(1, place(plan.free, *four))  # node 0 -> 0 left
    assert plan.refuses(four, *refusal_counts(four), memo)  # the most on a node is 2
    assert not plan.refuses(two, *refusal_counts(two), memo)
    assert free.node_whole == [8, 2], "the live state is left unchanged"


def test_a_pending_decision_that_takes_the_only_big_enough_node_leaves_no_room():
    layout = ClusterLayout(ClusterSpec("c", tuple(NodeSpec(f"n{i}", "A100-80GB", 4, 80) for i in range(3))))
    two, four = (
        (layout.eligible((), 0), 2, FULL, 0, DEFAULT_PACE),
        (layout.eligible((), 0), 4, FULL, 0, DEFAULT_PACE),
    )
    free = FreeState(layout)
    on = {p.nodes[0]: p for p in alternatives(free, *two)}  # two GPUs on each node
    free.take(on[1])
    free.take(on[2])  # nodes 1 and 2 have 2 GPUs free, node 0 has 4
    plan = Plan(free)
    plan.add(0, on[0])  # 6 GPUs stay free, none on a node with 4
    assert plan.fit_type(four) == -1
    assert plan.fit_type(two) == layout.node_type[0]
    assert free.node_whole == [4, 2, 2], "the live state is left unchanged"


def test_a_pending_decision_on_the_only_acceptable_pool_counts_against_a_spread():
    # A100s: two nodes of 8 with 80 GB (the pool a 60 GB job accepts) and two of 8 with 40 GB
    nodes = [NodeSpec(f"n{i}", "A100-80GB", 8, 80 if i < 2 else 40) for i in range(4)]
    layout = ClusterLayout(ClusterSpec("c", tuple(nodes)))
    spread = (layout.eligible((), 60_000), 16, FULL, 60_000, DEFAULT_PACE)
    free = FreeState(layout)
    p = place(free, layout.eligible((), 60_000), 1, FULL, 60_000)  # one GPU of an 80 GB node
    plan = Plan(free)
    plan.add(0, p)  # 31 A100s stay free, only 15 of them with 80 GB
    assert plan.fit_type(spread) == -1
    assert fit_type(free, *spread) == layout.node_type[0]


def test_a_refusal_after_the_pending_decision_was_applied_counts_it_once():
    # three H100 nodes of 4: a job of 8 spreads; a planned 4-GPU job leaves exactly 8
    layout = ClusterLayout(ClusterSpec("c", tuple(NodeSpec(f"n{i}", "H100", 4, 80) for i in range(3))))
    elig = layout.eligible((), 0)
    eight, one = (elig, 8, FULL, 0, DEFAULT_PACE), (elig, 1, FULL, 0, DEFAULT_PACE)
    free = FreeState(layout)
    plan, memo = Plan(free), {}
    plan.add(0, place(free, elig, 4, FULL, 0))
    assert not plan.refuses(eight, *refusal_counts(eight), memo)  # pending: counted from the live state
    assert plan.place(one) is not None  # applies the pending decision (on a copy)
    assert not plan.refuses(eight, *refusal_counts(eight), memo)  # applied: not counted a second time
    assert plan.place(eight) is not None
