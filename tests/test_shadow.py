"""schedulers/shadow.py's verdict from counts for GPUs taken on one node, against the shadow's verdict on the
built placement and against the placement rule on a full copy of the shadow state (Hypothesis)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedulers.shadow import CountShadow
from sim.cluster import FULL, ClusterLayout, FreeState
from sim.placement import DEFAULT_PACE, _gpus_on_node, can_place, place
from tests.test_invariants import TYPES, clusters


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.data())
def test_the_verdict_for_gpus_taken_on_one_node_equals_the_built_placements(spec, data):
    layout = ClusterLayout(spec)
    base = FreeState(layout)
    running = []  # a busy cluster: jobs of random shapes placed until one does not fit
    for _ in range(data.draw(st.integers(0, 12))):
        elig = layout.eligible(tuple(sorted(data.draw(st.sets(st.sampled_from(TYPES), max_size=2)))), 0)
        p = place(base, elig, data.draw(st.sampled_from([1, 2, 4, 8])), FULL, 0) if elig.nodes else None
        if p is None:
            break
        base.take(p)
        running.append(p)
    head_elig = layout.eligible(tuple(sorted(data.draw(st.sets(st.sampled_from(TYPES), max_size=2)))), 0)
    head_k = data.draw(st.sampled_from([1, 2, 3, 4, 8, 16]))
    if not head_elig.nodes or head_elig.never_fits(head_k, FULL):
        return
    head = (head_elig, head_k, FULL, 0, DEFAULT_PACE)
    shadow = CountShadow(base, head)
    full = base.copy()  # the shadow state, per GPU
    # some running jobs released (ending by the shadow time), some GPUs taken (backfills)
    for p in running:
        if data.draw(st.booleans()):
            shadow.give(p)
            full.give(p)
    for _ in range(data.draw(st.integers(0, 4))):
        n = data.draw(st.integers(0, layout.num_nodes - 1))
        c = full.node_whole[n]
        if c and data.draw(st.booleans()):
            p = _gpus_on_node(full, n, data.draw(st.integers(1, c)), c)
            full.take(p)
            shadow.take(p)
    assert shadow.full is None
    for n in range(layout.num_nodes):
        c_free = full.node_whole[n]
        for c in range(1, c_free + 1):
            p = _gpus_on_node(full, n, c, c_free)
            counts = shadow.head_fits_without_gpus_on(n, c)
            assert counts == shadow.head_fits_without(p), (n, c)
            full.take(p)
            assert counts == can_place(full, *head), (n, c)
            full.give(p)
