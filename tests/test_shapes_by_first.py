"""schedulers/shapes_by_first.py against plain computations: after any sequence of files, drops, syncs and clears,
each place holds exactly the registered shapes that belong there (tests/test_shape_registry.py's model) and each
bucket lists them ascending by the key each was last filed under; and in EASY runs, at every call that keeps
its memo, the registry holds exactly the waiting shapes, each under its first waiting job."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import schedulers.easy as easy_module
from schedulers import POLICIES
from schedulers.shapes_by_first import ShapesByFirst
from sim.cluster import ClusterLayout
from sim.cluster_spec import ClusterSpec, NodeSpec
from sim.job import Job, Workload
from sim.simulator import Simulator
from tests.easy_reference import easy_reference
from tests.test_invariants import TYPES, _same_schedule, clusters
from tests.test_shape_registry import _model, draw_shapes


def _seen(reg: ShapesByFirst) -> dict:
    """The registry's places in the model's form (empty ones left out), checking that k ascends per pool and
    that each bucket is sorted by the keys its shapes are filed under."""
    out = {"always": dict(reg.always), "spreads": dict(reg.spreads), "one_node": {}, "spread": {}}
    for name in ("one_node", "spread"):
        for q, by_k in getattr(reg, name).items():
            ks = [k for k, _ in by_k]
            assert ks == sorted(set(ks))
            for k, bucket in by_k:
                assert [key for key, _ in bucket] == sorted(reg.first[id(s)] for _, s in bucket)
                assert all(key == reg.first[id(s)] for key, s in bucket)
                if bucket:
                    out[name].setdefault(q, {})[k] = {id(s): s for _, s in bucket}
    return out


def _check(reg: ShapesByFirst, layout: ClusterLayout, filed: dict) -> None:
    """`filed`: id(shape) -> (shape, key, members), what the registry must hold."""
    assert reg.first == {sid: key for sid, (_, key, _) in filed.items()}
    assert reg.members.keys() == filed.keys()
    assert all(reg.members[sid] is m for sid, (_, _, m) in filed.items())
    assert reg.shape == {sid: s for sid, (s, _, _) in filed.items()}
    assert _seen(reg) == _model(layout, [s for s, _, _ in filed.values()])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.data())
def test_the_registry_files_each_shape_under_its_key_where_it_belongs(spec, data):
    layout = ClusterLayout(spec)
    shapes = draw_shapes(layout, data)
    if not shapes:
        return
    reg = ShapesByFirst()
    filed: dict[int, tuple] = {}
    ops = data.draw(
        st.lists(
            st.tuples(st.sampled_from(["file", "drop", "sync", "clear"]), st.integers(0, 7)), max_size=30
        )
    )
    fresh = iter(range(10**6))  # keys as a queue gives them: each a job index of one shape only
    for op, n in ops:
        s = shapes[n % len(shapes)]
        if op == "file":
            members = [next(fresh)]
            reg.file(s, members[0], members)
            filed[id(s)] = (s, members[0], members)
        elif op == "drop":
            reg.drop(s)  # (a shape not registered: nothing to drop)
            filed.pop(id(s), None)
        elif op == "sync":  # a queue holding some of the shapes
            by_shape = {t: [next(fresh)] for t in shapes if data.draw(st.booleans())}
            reg.sync(by_shape)
            filed = {id(t): (t, m[0], m) for t, m in by_shape.items()}
        else:
            reg.clear()
            filed.clear()
        _check(reg, layout, filed)


@st.composite
def whole_gpu_workloads(draw):
    """Whole-GPU jobs with exact estimates (EASY keeps its memo only then), many of a few shapes."""
    jobs, t = [], 0.0
    for i in range(draw(st.integers(1, 40))):
        t += draw(st.sampled_from([0.0, 0.0, 1.0, 5.0, 30.0]))
        jobs.append(
            Job(
                job_id=str(i),
                arrival_s=t,
                runtime_s=float(draw(st.integers(1, 200))),
                num_gpus=draw(st.sampled_from([1, 1, 2, 4, 8, 16])),
                gpu_types=tuple(sorted(draw(st.sets(st.sampled_from(TYPES), max_size=2)))),
            )
        )
    return Workload("w", tuple(jobs))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), whole_gpu_workloads())
def test_easy_keeps_every_waiting_shape_filed_under_its_first_waiting_job(spec, workload):
    """At every EASY call that keeps its memo (once `refresh` brought the registry up to date) and after every
    call that registered the whole queue, the registry equals the plain computation from the queue; the run's
    schedule is the plain scan's."""
    layout = ClusterLayout(spec)
    refresh, remember = easy_module._Memo.refresh, easy_module._Memo.remember

    def plain(view) -> dict:
        return {id(s): (s, m[0], m) for s, m in view.queue_by_shape.items()}

    def checked_refresh(self, view, last_job):
        arrived = refresh(self, view, last_job)
        _check(self.shapes, layout, plain(view))
        known = self.last_job
        want: dict[int, tuple] = {}
        for i in view.queue:
            if i > known:
                want.setdefault(id(view.jobs.shape[i]), (view.jobs.shape[i], i))
        assert arrived == want
        return arrived

    def checked_remember(self, view, *args):
        remember(self, view, *args)
        if self.armed and args[-2]:  # (scanned_all: the whole queue was registered)
            _check(self.shapes, layout, plain(view))

    easy_module._Memo.refresh, easy_module._Memo.remember = checked_refresh, checked_remember
    try:
        fast = Simulator(workload, layout, None, 1.2)
        fast.run(POLICIES["easy"])
    finally:
        easy_module._Memo.refresh, easy_module._Memo.remember = refresh, remember
    plain_run = Simulator(workload, layout, None, 1.2)
    plain_run.run(easy_reference)
    assert _same_schedule(fast, plain_run)


def test_easy_checks_the_registry_on_a_long_queue():
    """A deterministic case the Hypothesis test above may not reach: two nodes under a long queue of mixed
    shapes, so that the registry is checked at hundreds of calls that keep the memo."""
    spec = ClusterSpec("c", (NodeSpec("n0", "A100-80GB", 8, 80.0), NodeSpec("n1", "T4", 4, 16.0)))
    layout = ClusterLayout(spec)
    rng = np.random.default_rng(3)
    accepts = ((), ("T4",), ("A100-80GB",))
    jobs = tuple(
        Job(
            str(i), float(i), float(rng.integers(5, 60)), int(rng.choice([1, 2, 4])), gpu_types=accepts[i % 3]
        )
        for i in range(300)
    )
    calls = []
    refresh = easy_module._Memo.refresh

    def checked_refresh(self, view, last_job):
        arrived = refresh(self, view, last_job)
        _check(self.shapes, layout, {id(s): (s, m[0], m) for s, m in view.queue_by_shape.items()})
        calls.append(view.now_s)
        return arrived

    easy_module._Memo.refresh = checked_refresh
    try:
        fast = Simulator(Workload("w", jobs), layout, None, 1.2)
        fast.run(POLICIES["easy"])
    finally:
        easy_module._Memo.refresh = refresh
    plain_run = Simulator(Workload("w", jobs), layout, None, 1.2)
    plain_run.run(easy_reference)
    assert len(calls) > 100
    assert _same_schedule(fast, plain_run)
