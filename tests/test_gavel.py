"""Gavel: the max-min fairness LPs on hand-computed 2-job / 2-type cases, and the round-based policy."""

from __future__ import annotations

import dataclasses
import importlib
from collections import defaultdict
from unittest.mock import patch

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schedulers import POLICIES
from schedulers.gavel_lp import (
    _groups,
    _solver,
    agnostic_allocation,
    aware_allocation,
    equal_share,
    lp_matrix,
    max_min_fair,
)
from sim.cluster import FULL, ClusterLayout
from sim.cluster_spec import parse_cluster_spec
from sim.job import Workload
from sim.placement import effective_speed
from sim.simulator import Simulator
from tests.gavel_reference import gavel_reference
from tests.helpers import job
from tests.test_invariants import clusters, workloads
from tests.test_preemptive_policies import _same
from tests.test_throughput import _gavel, needs_gavel, typed_clusters, typed_workloads

ONES = np.ones(2)


def test_max_min_fair_equalises_throughput_over_two_types():
    # 1 V100 + 1 K80; job A runs 4/1 (V100/K80), B 2/1. With a = A's V100 share, b its K80 share, c and d B's:
    # full use needs a + b = 1, c = 1 - a, d = a, so A = 4a + 1 - a = 1 + 3a and B = 2(1 - a) + a = 2 - a;
    # equal at a = 1/4: both get 1.75. (B >= 1.75 with c + d <= 1 forces c >= 3/4, so a <= 1/4; A >= 1.75
    # forces a >= 1/4: the optimum is unique.)
    x = max_min_fair(np.array([[4.0, 1.0], [2.0, 1.0]]), ONES, ONES, np.ones((2, 2), dtype=bool))
    assert np.allclose(x, [[0.25, 0.75], [0.75, 0.25]], atol=1e-6)


def test_agnostic_gives_equal_time_and_respects_types_a_job_cannot_use():
    # B cannot run on the V100: max-min of total time gives B the whole K80 and A the whole V100 (t = 1).
    runnable = np.array([[True, True], [False, True]])
    x = agnostic_allocation(runnable, ONES, ONES)
    assert np.allclose(x, [[1.0, 0.0], [0.0, 1.0]], atol=1e-6)


def test_equal_share_splits_each_type_over_the_jobs_that_can_use_it():
    # 2 V100s shared by A (scale 1) and B (scale 2): 2 / 3 of the time each; 1 K80 only A can use: 1, capped
    # so that A's row sums to 1: A = (2/3, 1) / (5/3) = (0.4, 0.6), B = (2/3, 0).
    x = equal_share(np.array([[True, True], [True, False]]), np.array([1.0, 2.0]), np.array([2.0, 1.0]))
    assert np.allclose(x, [[0.4, 0.6], [2 / 3, 0.0]])


def test_aware_gives_the_fast_type_to_the_job_that_gains_from_it():
    # A runs 4/1 on V100/K80, B 1/1. Equal shares (1/2 of each type): A's throughput 2.5, B's 1. Normalised
    # coefficients A (1.6, 0.4), B (1, 1). Full use: A = 1.6a + 0.4(1 - a) = 0.4 + 1.2a, B = (1 - a) + a = 1,
    # so the minimum is 1 for every a >= 1/2; the second stage maximises the sum 1.4 + 1.2a -> a = 1:
    # A gets the V100 (normalised 1.6), B the K80 (1.0), where the agnostic split leaves both at 1.
    x = aware_allocation(np.array([[4.0, 1.0], [1.0, 1.0]]), ONES, ONES)
    assert np.allclose(x, [[1.0, 0.0], [0.0, 1.0]], atol=1e-5)


def test_scale_counts_gpus_held():
    # One type with 4 GPUs; A needs 4 GPUs (scale 4), B 1; coefficients = scale. t <= 4 x_A and t <= x_B <= 1,
    # so t = 1 with x_B = 1 and x_A >= 1/4; capacity 4 x_A + x_B <= 4 -> x_A <= 3/4, and the second stage
    # (maximise 4 x_A + x_B) takes x_A = 3/4.
    x = max_min_fair(
        np.array([[4.0], [1.0]]), np.array([4.0, 1.0]), np.array([4.0]), np.ones((2, 1), dtype=bool)
    )
    assert np.allclose(x, [[0.75], [1.0]], atol=1e-5)


def _sim(cluster: str, jobs, overhead_s: float = 0.0) -> Simulator:
    layout = ClusterLayout(parse_cluster_spec(cluster))
    return Simulator(Workload("t", tuple(jobs)), layout, None, 1.2, overhead_s)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_direct_highs_call_gives_linprogs_exact_answer(seed, presolve):
    # the allocation calls scipy's HiGHS core directly (no per-call input cleaning); it must return exactly
    # what scipy.optimize.linprog(method="highs") returns, bit for bit, and None where linprog's status != 0
    from scipy.optimize import linprog
    from scipy.sparse import random as sparse_random

    rng = np.random.default_rng(seed)
    m, n = (int(v) for v in rng.integers(1, 30, size=2))
    a = sparse_random(m, n, density=0.4, random_state=rng, format="csc")
    b = rng.uniform(-1, 5, m)  # negative right-hand sides make some LPs infeasible
    c = rng.normal(size=n)
    bounds = np.column_stack([np.zeros(n), np.where(rng.random(n) < 0.5, 1.0, np.inf)])
    want = linprog(c, A_ub=a, b_ub=b, bounds=bounds, method="highs", options={"presolve": presolve})
    got = _solver(a, b, presolve)(c, bounds.copy())
    assert (got is not None) == (want.status == 0)
    if got is not None:
        assert np.array_equal(got, want.x)


def test_gavel_rounds_time_share_one_gpu():
    # 1 V100 (speed 0.5), restore overhead 60 s. A (360 s reference = 720 s on the V100) starts at the round at
    # 0. B (90 s -> 180 s) arrives at 10 and waits for the round at 360. Then X = (1/2, 1/2) (one type: equal
    # time); A has run all of its 360 s in the system (fraction 1 -> priority 1/2), B none (1/2 x 1e9): B runs
    # and A is preempted with 360 x 0.5 = 180 s of its work done. B ends at 540; A waits for the round at 720 and
    # restarts: 60 s restore + 180 / 0.5 = 360 s -> ends at 1,140.
    jobs = [job("A", 0, 360), job("B", 10, 90)]
    for policy in ("gavel", "gavel_agnostic"):
        sim = _sim("1xV100-32GB:1", jobs, overhead_s=60.0)
        sim.run(POLICIES[policy])
        r = sim.result(policy, 0, preemptive=True)
        assert r.start_s.tolist() == [0.0, 360.0] and r.end_s.tolist() == [1140.0, 540.0]
        assert r.preemptions.tolist() == [1, 0]
        assert r.runs.start_s.tolist() == [0.0, 360.0, 720.0] and r.runs.end_s.tolist() == [
            360.0,
            540.0,
            1140.0,
        ]


def test_a_round_that_keeps_every_job_in_place_computes_no_allocation():
    # 1 V100 (8 GPUs, speed 0.5) + 1 K80 (8). A and B (1 GPU, 500 s reference = 1,000 s on the V100) arrive at 0:
    # the round at 0 solves X and starts both on the V100 (fastest first; both fit). At 360 and 720 nobody waits
    # and both run on the first type they can use, holding 2 of the smallest type's 8 GPUs: whatever X is, each is
    # chosen for the V100 again, so those rounds keep them without looking up X or ordering anyone.
    gavel_module = importlib.import_module("schedulers.gavel")
    built = []
    real = gavel_module._active_set

    def spy(view, active, aware):
        built.append(view.now_s)
        return real(view, active, aware)

    jobs = [job("A", 0, 500), job("B", 0, 500)]
    with patch.object(gavel_module, "_active_set", spy):
        sim = _sim("1xV100-32GB:8,1xK80:8", jobs)
        sim.run(POLICIES["gavel"])
    r = sim.result("gavel", 0, preemptive=True)
    assert built == [0.0]
    assert r.gpu_type == ("V100-32GB", "V100-32GB") and r.end_s.tolist() == [1000.0, 1000.0]
    assert r.preemptions.tolist() == [0, 0]


@given(st.lists(st.sampled_from([-3, -1, 0, 1, 2, 5, 6, 10**9]), min_size=1, max_size=20), st.booleans())
def test_groups_are_numbered_by_first_job(labels, as_float):
    # the LP's job groups: each label's first job, in order of first job, and each job's group in that order
    # (negative, huge and non-integer labels are renumbered first)
    reps, group_of = _groups(np.array(labels, dtype=float if as_float else int))
    firsts = list(dict.fromkeys(labels))
    assert reps.tolist() == [labels.index(v) for v in firsts]
    assert group_of.tolist() == [firsts.index(v) for v in labels]


def test_gavel_places_jobs_on_the_types_of_their_allocation():
    # 1 V100 + 1 K80. A may only use the K80, B any type: X = (A: K80 1; B: V100 1), unique. Types are filled
    # fastest first: the V100 goes to B (A cannot use it), the K80 to A. B (100 s) runs 100 / 0.5 = 200 s,
    # A (36 s) 36 / 0.1 = 360 s; both start at the round at 0.
    jobs = [job("A", 0, 36, gpu_types=("K80",)), job("B", 0, 100)]
    for policy in ("gavel", "gavel_agnostic"):
        sim = _sim("1xV100-32GB:1,1xK80:1", jobs)
        sim.run(POLICIES[policy])
        r = sim.result(policy, 0, preemptive=True)
        assert r.gpu_type == ("K80", "V100-32GB")
        assert r.start_s.tolist() == [0.0, 0.0] and np.allclose(r.end_s, [360.0, 200.0])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads(), st.sampled_from(["gavel", "gavel_agnostic"]), st.sampled_from([0.0, 30.0]))
def test_gavel_conserves_work_and_never_over_commits(spec, workload, policy, overhead_s):
    """Every accepted job completes; over its runs it does exactly its work (each run: (length - restore
    overhead if a restart) x its speed there); no GPU is ever shared beyond its capacity."""
    layout = ClusterLayout(spec)
    sim = Simulator(workload, layout, None, 1.2, overhead_s)
    sim.run(POLICIES[policy])
    r = sim.result(policy, 0, preemptive=True)
    node_index = {n.node_id: i for i, n in enumerate(layout.nodes)}
    type_index = {t: i for i, t in enumerate(layout.type_names)}
    work = np.zeros(len(workload.jobs))
    seen: set[int] = set()
    use = defaultdict(list)
    for i, s, e, plc, gt in zip(
        r.runs.job, r.runs.start_s, r.runs.end_s, r.runs.placement, r.runs.gpu_type, strict=True
    ):
        labels = plc.split(";")
        nodes = {node_index[x.split("/")[0]] for x in labels}
        speed = effective_speed(layout.type_speed[type_index[gt]], len(nodes) > 1, sim.jobs.pace[i])
        work[i] += (e - s - (overhead_s if i in seen else 0.0)) * speed
        seen.add(int(i))
        for x in labels:
            use[x] += [(s, 1, sim.jobs.milli[i]), (e, 0, -sim.jobs.milli[i])]
    for i, j in enumerate(workload.jobs):
        if r.status[i] != "rejected":
            assert r.status[i] == "completed"
            assert np.isclose(work[i], j.runtime_s, rtol=1e-9, atol=1e-6), (i, work[i], j.runtime_s)
    for events in use.values():
        level = 0
        for _, _, m in sorted(events):
            level += m
            assert level <= FULL


def _per_job_max_min(coef, scale, gpus, runnable):
    """A plain second implementation of the two-stage max-min LP, one variable per job and type (no classes),
    with dense matrices and scipy.optimize.linprog: (optimal minimum t*, optimal sum of the terms)."""
    from scipy.optimize import linprog

    num_jobs, num_types = coef.shape
    n = num_jobs * num_types
    a = np.zeros((2 * num_jobs + num_types, n + 1))
    for i in range(num_jobs):
        for j in range(num_types):
            v = i * num_types + j
            a[i, v] = -coef[i, j]  # t - sum_j coef x <= 0
            a[num_jobs + i, v] = 1.0  # sum_j x <= 1
            a[2 * num_jobs + j, v] = scale[i]  # sum_i scale x <= gpus
        a[i, n] = 1.0
    b = np.concatenate([np.zeros(num_jobs), np.ones(num_jobs), gpus])
    bounds = [(0.0, 1.0 if runnable.ravel()[v] else 0.0) for v in range(n)] + [(0.0, None)]
    c = np.zeros(n + 1)
    c[-1] = -1.0
    t_star = linprog(c, A_ub=a, b_ub=b, bounds=bounds, method="highs").x[-1]
    bounds[-1] = (t_star * (1 - 1e-6), None)
    second = linprog(np.append(-coef.ravel(), 0.0), A_ub=a, b_ub=b, bounds=bounds, method="highs")
    return t_star, -second.fun


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_class_lp_has_the_per_job_lps_optimum(seed):
    """max_min_fair solves one LP over classes of identical jobs; its allocation must reach the per-job LP's
    optimal minimum and, keeping it, the per-job LP's optimal sum (random instances with repeated rows), be
    feasible for the per-job constraints, and give identical jobs identical rows."""
    rng = np.random.default_rng(seed)
    num_types = int(rng.integers(1, 4))
    num_cls = int(rng.integers(1, 5))
    cls_coef = rng.choice([0.5, 1.0, 2.0, 3.0], size=(num_cls, num_types))
    cls_run = rng.random((num_cls, num_types)) < 0.8
    cls_run[np.arange(num_cls), rng.integers(0, num_types, num_cls)] = True  # each class runs somewhere
    cls_scale = rng.choice([1.0, 2.0, 4.0], size=num_cls)
    of = rng.integers(0, num_cls, size=int(rng.integers(1, 13)))  # each job's class, with repeats
    coef = np.where(cls_run, cls_coef, 0.0)[of] * cls_scale[of, None]
    scale, runnable = cls_scale[of], cls_run[of]
    gpus = rng.choice([1.0, 2.0, 4.0, 8.0], size=num_types)
    x = max_min_fair(coef, scale, gpus, runnable)
    t_star, sum_star = _per_job_max_min(coef, scale, gpus, runnable)
    terms = (coef * x).sum(axis=1)
    assert terms.min() >= t_star * (1 - 2e-6) - 1e-9
    assert np.isclose(terms.sum(), sum_star, rtol=1e-5, atol=1e-7)
    assert (x.sum(axis=1) <= 1 + 1e-7).all() and ((scale[:, None] * x).sum(axis=0) <= gpus + 1e-7).all()
    assert (x[~runnable] == 0).all()
    for c in range(num_cls):
        assert np.array_equal(x[of == c], np.repeat(x[of == c][:1], (of == c).sum(), axis=0))


def _class_lp_by_linprog(coef, scale, gpus, runnable):
    """The class LP built the plain way: classes by np.unique(axis=0) (reordered by first job), the matrix by
    scipy.sparse.coo_matrix(...).tocsc(), both stages by scipy.optimize.linprog (HiGHS, presolve off): the
    allocation max_min_fair must return bit for bit (it groups by a dict pass, builds the compressed columns
    itself and calls HiGHS directly, one instance reused)."""
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    key = np.column_stack([coef, scale, runnable.astype(float)])
    _, first, inverse, count = np.unique(
        key, axis=0, return_index=True, return_inverse=True, return_counts=True
    )
    order = np.argsort(first)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    cls = rank[inverse.ravel()]
    coef_c, scale_c, count_c = coef[first[order]], scale[first[order]], count[order].astype(float)
    run_c = runnable[first[order]]
    num_cls, num_types = coef_c.shape
    n = num_cls * num_types
    cls_of, type_of, var = (
        np.repeat(np.arange(num_cls), num_types),
        np.tile(np.arange(num_types), num_cls),
        np.arange(n),
    )
    row = np.concatenate([cls_of, np.arange(num_cls), num_cls + cls_of, 2 * num_cls + type_of])
    col = np.concatenate([var, np.full(num_cls, n), var, var])
    val = np.concatenate(
        [-coef_c.ravel(), np.ones(num_cls), np.ones(n), np.repeat(count_c * scale_c, num_types)]
    )
    a = coo_matrix((val, (row, col)), shape=(2 * num_cls + num_types, n + 1)).tocsc()
    mine = lp_matrix(coef_c, count_c * scale_c)
    assert mine.shape == a.shape
    for got, want in ((mine.indptr, a.indptr), (mine.indices, a.indices), (mine.data, a.data)):
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    b = np.concatenate([np.zeros(num_cls), np.ones(num_cls), gpus])
    bounds = np.column_stack([np.zeros(n + 1), np.append(np.where(run_c, 1.0, 0.0).ravel(), np.inf)])
    c = np.zeros(n + 1)
    c[-1] = -1.0
    options = {"presolve": False}
    first_x = linprog(c, A_ub=a, b_ub=b, bounds=bounds, method="highs", options=options).x
    bounds[-1] = (first_x[-1] * (1 - 1e-6), np.inf)
    second = linprog(
        np.append(-(coef_c * count_c[:, None]).ravel(), 0.0),
        A_ub=a,
        b_ub=b,
        bounds=bounds,
        method="highs",
        options=options,
    )
    y = second.x if second.status == 0 else first_x
    return np.clip(y[:-1].reshape(num_cls, num_types), 0.0, 1.0)[cls]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_class_lp_is_the_plainly_built_lp_bit_for_bit(seed, hinted):
    # random instances with repeated job rows; `hinted` passes each job's generating row as its group (jobs of
    # one group have equal rows; groups of equal rows, e.g. a row and its copy, must still be one class)
    rng = np.random.default_rng(seed)
    num_types = int(rng.integers(1, 4))
    num_rows = int(rng.integers(1, 6))
    row_coef = rng.choice([0.0, 0.5, 1.0, 2.0, 3.0], size=(num_rows, num_types))
    row_coef[-1] = row_coef[0]  # two generating rows alike
    row_scale = rng.choice([1.0, 2.0, 4.0], size=num_rows)
    row_scale[-1] = row_scale[0]
    of = rng.integers(0, num_rows, size=int(rng.integers(1, 15)))
    coef, scale, runnable = row_coef[of], row_scale[of], row_coef[of] > 0
    gpus = rng.choice([1.0, 2.0, 4.0, 8.0], size=num_types)
    got = max_min_fair(coef, scale, gpus, runnable, of if hinted else None)
    assert got.tobytes() == _class_lp_by_linprog(coef, scale, gpus, runnable).tobytes()


def _stretch(workload: Workload) -> Workload:
    """The workload with every runtime x 20 (20-4,000 s): jobs then outlive Gavel's 360 s rounds, so rounds
    preempt, migrate and time-share (with the invariant tests' 1-200 s, almost no job sees a second round)."""
    return Workload(
        workload.name, tuple(dataclasses.replace(j, runtime_s=j.runtime_s * 20) for j in workload.jobs)
    )


def _same_as_reference(workload, layout, aware, overhead_s, matrix=None) -> int:
    """Run the policy and the plain round on the same scenario; assert identical runs; return the preemptions."""
    fast = Simulator(workload, layout, None, 1.2, overhead_s, throughput=matrix)
    plain = Simulator(workload, layout, None, 1.2, overhead_s, throughput=matrix)
    fast.run(POLICIES["gavel" if aware else "gavel_agnostic"])
    plain.run(gavel_reference(aware))
    assert _same(fast, plain)
    return int(fast.result("x", 0, preemptive=True).preemptions.sum())


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads().map(_stretch), st.booleans(), st.sampled_from([0.0, 30.0]))
def test_gavel_equals_the_plain_reference(spec, workload, aware, overhead_s):
    """The policy (memoised LP, numpy priority sort, lazily copied plan) must make every decision the plain
    round of tests/gavel_reference.py makes: same runs, same starts and ends, same placements."""
    _same_as_reference(workload, ClusterLayout(spec), aware, overhead_s)


@needs_gavel
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_gavel_with_gavel_job_types_equals_the_plain_reference(data):
    """The same with Gavel-typed jobs (each job its own speed per type, so the aware LP differs from the
    agnostic one) on clusters of measured and unmeasured types."""
    m = _gavel()[1]
    spec = data.draw(typed_clusters())
    wl = _stretch(data.draw(typed_workloads(m.models)))
    aware = data.draw(st.booleans())
    _same_as_reference(wl, ClusterLayout(spec), aware, data.draw(st.sampled_from([0.0, 60.0])), m)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads().map(_stretch), st.booleans(), st.sampled_from([0, 10**9]))
def test_gavel_in_numpy_or_in_a_loop_equals_the_plain_reference(spec, workload, aware, vector_min):
    """The same with every round's priority order computed in numpy (vector_min 0), as it is from
    gavel._VECTOR_MIN active jobs on, or by the Python loop whatever the number of jobs: the same floats."""
    with patch.object(importlib.import_module("schedulers.gavel"), "_VECTOR_MIN", vector_min):
        _same_as_reference(workload, ClusterLayout(spec), aware, 30.0)
