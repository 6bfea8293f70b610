"""Gavel's max-min fairness allocation as a linear program: pure functions from throughputs to time fractions.

Narayanan et al., "Heterogeneity-Aware Cluster Scheduling Policies for Deep Learning Workloads", OSDI 2020, §4.1
(and the authors' scheduler/policies/max_min_fairness.py): the allocation X (jobs x GPU types) gives each job the
fraction of time it should spend on each type, with sum_j X[i, j] <= 1 per job and sum_i scale[i] X[i, j] <= the
number of GPUs of type j (a job of scale k holds k GPUs while it runs).
- heterogeneity-AWARE ("max_min_fairness_perf"): maximise min_i sum_j T[i, j] / iso[i] * scale[i] * X[i, j],
  where T is the job's throughput on each type and iso[i] = sum_j T[i, j] X_eq[i, j] its throughput with an
  equal time share of every type (the paper's X^equal, §4.1: each type's time split evenly over the jobs that
  can use it, weighted by scale, a job's row capped at 1), so jobs are compared by normalised effective
  throughput. (The authors' code normalises by each type's share of the cluster instead, ProportionalPolicy:
  GPUs of the type / all GPUs for every job; schedulers/gavel_original.py does that.)
- heterogeneity-AGNOSTIC ("max_min_fairness"): the same with every throughput 1, i.e. equal GPU-time shares.
Deviation: a max-min LP only pins the minimum, so a solver may leave capacity unallocated to jobs above it; a
second LP keeps the minimum (to a 1e-6 relative tolerance) and maximises the sum of the same objective terms,
so spare GPU time goes to whoever can use it (Gavel's water-filling variant refines this further; not done).
Solved with HiGHS as scipy.optimize.linprog(method="highs", options={"presolve": False}) solves it, calling
scipy's HiGHS core directly (`_solver`: same answers, without linprog's per-call overhead); presolve is off
because on these small LPs it cost more than it saved (about 25 % of HiGHS' time on the 10,000-job benchmark's
LPs).
"""

from __future__ import annotations

import numpy as np


def max_min_fair(
    coef_JT: np.ndarray, scale_J: np.ndarray, gpus_T: np.ndarray, runnable_JT: np.ndarray
) -> np.ndarray:
    """X (jobs x types) maximising min_i sum_j coef[i, j] X[i, j] (then their sum, keeping that minimum), with
    sum_j X[i, j] <= 1, sum_i scale[i] X[i, j] <= gpus[j], 0 <= X <= 1 and X = 0 where not runnable.

    Solved over classes of interchangeable jobs (same coefficient row, scale and runnable row; in Gavel a job's
    row is fixed by its job type, scale and priority weight): one variable per class and type, the class's
    multiplicity n_c in the capacity rows (sum_c n_c scale_c Y[c, j] <= gpus[j]), and every job gets its class's
    row. Exact: both stages are LPs, so averaging any per-job optimum over each class gives a feasible point
    (the constraints are linear) with the same objective sum and a minimum no lower (each job's term is linear,
    so the class average of the terms is >= their minimum); hence a class-symmetric optimum exists and the class
    LP's optimal values equal the per-job LP's (tests/test_gavel.py checks this on random instances). Which of
    several optimal vertices is returned may differ from the per-job LP's."""
    num_jobs, num_types = coef_JT.shape
    if num_jobs == 0:
        return np.zeros((0, num_types))
    key = np.column_stack([coef_JT, np.asarray(scale_J, dtype=float), runnable_JT.astype(float)])
    _, first, inverse, count = np.unique(
        key, axis=0, return_index=True, return_inverse=True, return_counts=True
    )
    order = np.argsort(first)  # classes in order of their first job (not np.unique's lexicographic order)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    cls = rank[inverse.ravel()]
    y = _max_min_fair_classes(
        coef_JT[first[order]],
        np.asarray(scale_J, dtype=float)[first[order]],
        count[order].astype(float),
        gpus_T,
        runnable_JT[first[order]],
    )
    return y[cls]


def _max_min_fair_classes(
    coef_CT: np.ndarray, scale_C: np.ndarray, count_C: np.ndarray, gpus_T: np.ndarray, runnable_CT: np.ndarray
) -> np.ndarray:
    """Y (classes x types) for max_min_fair: class c stands for count[c] identical jobs."""
    from scipy.sparse import coo_matrix  # imported here: the other policies never need scipy

    num_cls, num_types = coef_CT.shape
    n = num_cls * num_types
    cls_of = np.repeat(np.arange(num_cls), num_types)
    type_of = np.tile(np.arange(num_types), num_cls)
    var = np.arange(n)
    # rows: t - sum_j coef[c, j] y[c, j] <= 0 (class c); sum_j y[c, j] <= 1 (class c); sum_c count[c] scale[c]
    # y[c, j] <= gpus[j] (type j); the last column is t. Built once, shared by both stages.
    row = np.concatenate([cls_of, np.arange(num_cls), num_cls + cls_of, 2 * num_cls + type_of])
    col = np.concatenate([var, np.full(num_cls, n), var, var])
    val = np.concatenate(
        [-coef_CT.ravel(), np.ones(num_cls), np.ones(n), np.repeat(count_C * scale_C, num_types)]
    )
    a_ub = coo_matrix((val, (row, col)), shape=(2 * num_cls + num_types, n + 1)).tocsc()
    b_ub = np.concatenate([np.zeros(num_cls), np.ones(num_cls), np.asarray(gpus_T, dtype=float)])
    upper = np.where(runnable_CT, 1.0, 0.0).ravel()
    bounds = np.column_stack([np.zeros(n + 1), np.append(upper, np.inf)])
    c = np.zeros(n + 1)
    c[-1] = -1.0
    solve = _solver(a_ub, b_ub, presolve=False)  # presolve off: ~25 % less HiGHS time on these small LPs
    first = solve(c, bounds)
    if first is None:
        from scipy.optimize import linprog  # the failure, with scipy's message

        failed = linprog(c, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs", options={"presolve": False})
        raise RuntimeError(f"Gavel's max-min LP failed: {failed.message}")
    t_star = first[-1]
    # second stage: keep every job at >= the optimal minimum, maximise the sum of the objective terms (each class
    # counted once per job)
    bounds[-1] = (t_star * (1 - 1e-6), np.inf)
    c2 = np.append(-(coef_CT * count_C[:, None]).ravel(), 0.0)
    second = solve(c2, bounds)
    y = (second if second is not None else first)[:-1]
    return np.clip(y.reshape(num_cls, num_types), 0.0, 1.0)


def agnostic_allocation(runnable_JT: np.ndarray, scale_J: np.ndarray, gpus_T: np.ndarray) -> np.ndarray:
    """Heterogeneity-agnostic max-min fairness: every runnable type counts as throughput 1 (equal GPU time)."""
    coef = np.where(runnable_JT, 1.0, 0.0) * scale_J[:, None]
    return max_min_fair(coef, scale_J, gpus_T, runnable_JT)


def equal_share(runnable_JT: np.ndarray, scale_J: np.ndarray, gpus_T: np.ndarray) -> np.ndarray:
    """X_eq: every job gets the same time fraction of each type it can use, gpus[j] / (sum of the scales of
    those jobs) (at most 1), and a job's row is scaled down to sum to at most 1."""
    demand_T = (runnable_JT * scale_J[:, None]).sum(axis=0)
    frac_T = np.minimum(1.0, np.asarray(gpus_T, dtype=float) / np.maximum(demand_T, 1e-300))
    x = runnable_JT * frac_T[None, :]
    row = x.sum(axis=1)
    return x / np.maximum(row, 1.0)[:, None]


def aware_allocation(throughput_JT: np.ndarray, scale_J: np.ndarray, gpus_T: np.ndarray) -> np.ndarray:
    """Heterogeneity-aware max-min fairness over throughputs normalised by each job's throughput with an equal
    share of the cluster (throughput 0 = the job cannot run on that type)."""
    runnable = throughput_JT > 0
    iso = (throughput_JT * equal_share(runnable, scale_J, gpus_T)).sum(axis=1)
    iso = np.where(iso > 0, iso, 1.0)  # a job that can run nowhere gets nothing anyway
    coef = throughput_JT / iso[:, None] * scale_J[:, None]
    return max_min_fair(coef, scale_J, gpus_T, runnable)


def _solver(a_ub, b_ub, presolve: bool = True):
    """`solve(c, bounds) -> x or None` for min c.x s.t. a_ub x <= b_ub: scipy's HiGHS core called as
    `linprog(method="highs", options={"presolve": presolve})` calls it (same model, same options, same result
    check), without linprog's per-call input cleaning and option validation (most of an allocation's time on
    small LPs); None where linprog would report a status other than 0. Falls back to `linprog` itself if scipy's internals moved."""
    try:
        import scipy.optimize._highspy._core as hc
        from scipy.optimize._linprog_util import _check_result
    except ImportError:  # pragma: no cover - scipy is pinned; kept for a future layout change
        hc = None
    if hc is None or not hasattr(hc, "_Highs") or not hasattr(hc, "simplex_constants"):  # pragma: no cover
        from scipy.optimize import linprog

        def plain(c, bounds):
            r = linprog(
                c, A_ub=a_ub, b_ub=b_ub, bounds=bounds, method="highs", options={"presolve": presolve}
            )
            return r.x if r.status == 0 else None

        return plain
    num_rows, num_cols = a_ub.shape
    lhs = np.full(num_rows, -hc.kHighsInf)
    rhs = np.asarray(b_ub, dtype=float)
    no_eq = np.empty(0)
    options = _options(hc, presolve)

    def solve(c, bounds):
        lp = hc.HighsLp()
        lp.num_col_ = num_cols
        lp.num_row_ = num_rows
        lp.a_matrix_.num_col_ = num_cols
        lp.a_matrix_.num_row_ = num_rows
        lp.a_matrix_.format_ = hc.MatrixFormat.kColwise
        lp.col_cost_ = c
        lb, ub = bounds.T.copy()
        for v in (lb, ub):  # as linprog: an infinite bound becomes HiGHS' infinity
            infs = np.isinf(v)
            v[infs] = np.sign(v[infs]) * hc.kHighsInf
        lp.col_lower_ = lb
        lp.col_upper_ = ub
        lp.row_lower_ = lhs
        lp.row_upper_ = rhs
        lp.a_matrix_.start_ = a_ub.indptr
        lp.a_matrix_.index_ = a_ub.indices
        lp.a_matrix_.value_ = a_ub.data
        highs = hc._Highs()
        if highs.passOptions(options) == hc.HighsStatus.kError:
            return None
        if highs.passModel(lp) == hc.HighsStatus.kError or highs.run() == hc.HighsStatus.kError:
            return None
        if highs.getModelStatus() != hc.HighsModelStatus.kOptimal:
            return None
        solution = highs.getSolution()
        x = np.array(solution.col_value)
        slack = rhs - np.asarray(solution.row_value)
        info = highs.getInfo()
        status, _ = _check_result(x, info.objective_function_value, 0, slack, no_eq, bounds, 1e-9, "", None)
        return x if status == 0 else None

    return solve


_OPTIONS: dict[bool, object] = {}


def _options(hc, presolve: bool):
    """linprog(method="highs")'s HiGHS options, built once per presolve setting (building them took about 0.4 ms
    per allocation)."""
    if presolve not in _OPTIONS:
        options = hc.HighsOptions()
        options.presolve = "on" if presolve else "off"
        options.highs_debug_level = int(hc.HighsDebugLevel.kHighsDebugLevelNone)
        options.log_to_console = False
        options.output_flag = False
        options.simplex_strategy = int(hc.simplex_constants.SimplexStrategy.kSimplexStrategyDual)
        _OPTIONS[presolve] = options
    return _OPTIONS[presolve]
