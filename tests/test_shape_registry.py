"""schedulers/shape_registry.py against a plain model: after any sequence of adds, drops and clears, each of its
dicts holds exactly the registered shapes that belong there, recomputed from the shapes' eligibility alone."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedulers.shape_registry import ShapeRegistry
from sim.cluster import FULL, ClusterLayout
from sim.placement import DEFAULT_PACE
from tests.test_invariants import TYPES, clusters


def _model(layout: ClusterLayout, shapes: list[tuple]) -> dict:
    """Where each shape belongs, from the placement rule's options: a whole-GPU shape of k GPUs spreads over
    type t when t's nodes are all smaller than k but t has k GPUs in all, and may use a pool of t on one node
    when some node of t has k."""
    always, spreads, one_node, spread = {}, {}, {}, {}
    for s in shapes:
        elig, k, milli = s[0], s[1], s[2]
        key = id(s)
        if milli < FULL:
            always[key] = s
            continue
        spread_types = [t for t in elig.types if elig.type_max_node[t] < k <= elig.type_total[t]]
        if spread_types:
            spreads[key] = s
        for t in elig.types:
            into = spread if t in spread_types else one_node
            for q in elig.type_pools[t]:
                into.setdefault(q, {}).setdefault(k, {})[key] = s
    return {"always": always, "spreads": spreads, "one_node": one_node, "spread": spread}


def _seen(reg: ShapeRegistry) -> dict:
    """The registry's dicts in the model's form (empty ones left out), checking that k ascends per pool."""
    out = {"always": dict(reg.always), "spreads": dict(reg.spreads), "one_node": {}, "spread": {}}
    for name in ("one_node", "spread"):
        for q, by_k in getattr(reg, name).items():
            ks = [k for k, _ in by_k]
            assert ks == sorted(set(ks))
            for k, registered in by_k:
                if registered:
                    out[name].setdefault(q, {})[k] = dict(registered)
    return out


def draw_shapes(layout: ClusterLayout, data) -> list[tuple]:
    """Up to 8 distinct shapes that fit the cluster (one object per shape, as the job table has)."""
    shapes = []
    for _ in range(data.draw(st.integers(1, 8))):
        types = tuple(sorted(data.draw(st.sets(st.sampled_from(TYPES), max_size=2))))
        fractional = data.draw(st.booleans()) and data.draw(st.booleans())
        k = 1 if fractional else data.draw(st.sampled_from([1, 2, 3, 4, 8, 16]))
        elig = layout.eligible(types, 0)
        if not elig.nodes or elig.never_fits(k, 500 if fractional else FULL):
            continue
        s = (elig, k, 500 if fractional else FULL, 0, DEFAULT_PACE)
        if s not in shapes:
            shapes.append(s)
    return shapes


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.data())
def test_the_registry_holds_exactly_the_registered_shapes_where_they_belong(spec, data):
    layout = ClusterLayout(spec)
    shapes = draw_shapes(layout, data)
    reg = ShapeRegistry()
    registered: list[tuple] = []
    ops = data.draw(
        st.lists(st.tuples(st.sampled_from(["add", "drop", "clear"]), st.integers(0, 7)), max_size=30)
    )
    for op, n in ops:
        if not shapes:
            break
        s = shapes[n % len(shapes)]
        if op == "add":
            reg.add(s)
            if s not in registered:
                registered.append(s)
        elif op == "drop":
            if s in registered:  # (a policy drops only a registered shape)
                reg.drop(s)
                registered.remove(s)
        else:
            reg.clear()
            registered.clear()
        assert reg.live == {id(s) for s in registered}
        assert _seen(reg) == _model(layout, registered)
