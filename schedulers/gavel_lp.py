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

from typing import NamedTuple

import numpy as np


def max_min_fair(
    coef_JT: np.ndarray,
    scale_J: np.ndarray,
    gpus_T: np.ndarray,
    runnable_JT: np.ndarray,
    groups_J: np.ndarray | None = None,
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
    several optimal vertices is returned may differ from the per-job LP's.

    `groups_J` (optional, a speed-up only): an integer per job such that jobs of equal value have equal rows; the
    classes and the result are the same with it as without it."""
    num_jobs, num_types = coef_JT.shape
    if num_jobs == 0:
        return np.zeros((0, num_types))
    scale = np.asarray(scale_J, dtype=float)
    cls, first = _classes(coef_JT, scale, runnable_JT, groups_J)
    count = np.bincount(cls, minlength=len(first)).astype(float)
    y = _max_min_fair_classes(coef_JT[first], scale[first], count, gpus_T, runnable_JT[first])
    return y[cls]


def _classes(
    coef_JT: np.ndarray, scale_J: np.ndarray, runnable_JT: np.ndarray, groups_J: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """(class of each job, first job of each class): classes of value-equal rows of (coef, scale, runnable),
    numbered in order of their first job (np.unique(axis=0)'s classes and counts, reordered by first job), over
    the rows of the first job of each group (every job its own group without `groups_J`)."""
    num_jobs = len(scale_J)
    if groups_J is None:
        reps = np.arange(num_jobs)
        group_of = reps
    else:
        reps, group_of = _groups(np.asarray(groups_J))
    rows = np.column_stack([coef_JT[reps], scale_J[reps], runnable_JT[reps]])
    # groups whose rows are all distinct (the usual case: a group is a job profile) are the classes; two equal
    # rows sort next to each other (== on floats: -0.0 equals 0.0, a NaN equals nothing, as in the dict pass)
    by_row = rows[np.lexsort(rows.T[::-1])]
    if not (by_row[1:] == by_row[:-1]).all(axis=1).any():
        return group_of, reps
    number: dict[tuple, int] = {}
    cls_of_group: list[int] = []
    first: list[int] = []
    for j, row in zip(reps.tolist(), rows.tolist(), strict=True):
        row = tuple(row)
        c = number.get(row)
        if c is None:
            c = number[row] = len(first)
            first.append(j)
        cls_of_group.append(c)
    return np.asarray(cls_of_group)[group_of], np.asarray(first)


def _groups(groups_J: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first job of each group, in order of first job; each job's group number in that order) for integer
    labels, by each label's smallest job index (np.minimum.at over a table of labels: no sort of the jobs)."""
    if groups_J.dtype.kind not in "iu" or groups_J.min() < 0 or groups_J.max() > 4 * len(groups_J) + 1024:
        groups_J = np.unique(groups_J, return_inverse=True)[1].ravel()  # labels 0, 1, ... (same groups)
    num_jobs = len(groups_J)
    first = np.full(int(groups_J.max()) + 1, num_jobs)
    np.minimum.at(first, groups_J, np.arange(num_jobs))
    labels = np.flatnonzero(first < num_jobs)
    order = np.argsort(first[labels])
    rank = np.empty(len(first), dtype=np.intp)
    rank[labels[order]] = np.arange(len(order))
    return first[labels[order]], rank[groups_J]


def _max_min_fair_classes(
    coef_CT: np.ndarray, scale_C: np.ndarray, count_C: np.ndarray, gpus_T: np.ndarray, runnable_CT: np.ndarray
) -> np.ndarray:
    """Y (classes x types) for max_min_fair: class c stands for count[c] identical jobs."""
    num_cls, num_types = coef_CT.shape
    a_ub = lp_matrix(coef_CT, count_C * scale_C)
    b_ub = np.concatenate([np.zeros(num_cls), np.ones(num_cls), np.asarray(gpus_T, dtype=float)])
    n = num_cls * num_types
    lb = np.zeros(n + 1)
    ub = np.empty(n + 1)
    ub[:n] = runnable_CT.ravel()  # 1.0 where runnable, else 0.0
    ub[n] = np.inf
    c = np.zeros(n + 1)
    c[-1] = -1.0
    # presolve off: ~25 % less HiGHS time on these small LPs
    solve = _bounds_solver(a_ub, b_ub, presolve=False)
    first = solve(c, lb, ub)
    if first is None:
        from scipy.optimize import linprog  # the failure, with scipy's message
        from scipy.sparse import csc_matrix

        a = csc_matrix((a_ub.data, a_ub.indices, a_ub.indptr), shape=a_ub.shape)
        bounds = np.column_stack([lb, ub])
        failed = linprog(c, A_ub=a, b_ub=b_ub, bounds=bounds, method="highs", options={"presolve": False})
        raise RuntimeError(f"Gavel's max-min LP failed: {failed.message}")
    t_star = first[-1]
    # second stage: keep every job at >= the optimal minimum, maximise the sum of the objective terms (each class
    # counted once per job)
    lb[n] = t_star * (1 - 1e-6)
    c2 = np.empty(n + 1)
    np.multiply(coef_CT, count_C[:, None], out=c2[:n].reshape(num_cls, num_types))
    np.negative(c2[:n], out=c2[:n])
    c2[n] = 0.0
    second = solve(c2, lb, ub)
    y = (second if second is not None else first)[:-1]
    return np.clip(y.reshape(num_cls, num_types), 0.0, 1.0)


class Csc(NamedTuple):
    """A sparse matrix in compressed-column form, as scipy.sparse.csc_matrix holds it (indptr and indices int32)."""

    shape: tuple[int, int]
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray


def lp_matrix(coef_CT: np.ndarray, weight_C: np.ndarray) -> Csc:
    """The max-min LP's constraint matrix over variables y[c, j] (class-major) and t (last column), rows:
    t - sum_j coef[c, j] y[c, j] <= 0 (class c); sum_j y[c, j] <= 1 (class c); sum_c weight[c] y[c, j] <= gpus[j]
    (type j), where weight = count x scale. Built column by column: exactly the arrays (explicit zeros kept) that
    scipy.sparse.coo_matrix(...).tocsc() builds from these entries (tests/test_gavel.py checks it), without
    scipy.sparse's per-call checks. Shared by both stages."""
    num_cls, num_types = coef_CT.shape
    n = num_cls * num_types
    shape = (2 * num_cls + num_types, n + 1)
    hit = _PATTERNS.get((num_cls, num_types))
    if hit is None:
        if len(_PATTERNS) >= 256:
            _PATTERNS.clear()
        hit = _PATTERNS[num_cls, num_types] = _pattern(num_cls, num_types)
    indptr, indices, ones = hit
    data = ones.copy()
    data[0 : 3 * n : 3] = coef_CT.ravel()
    np.negative(data[0 : 3 * n : 3], out=data[0 : 3 * n : 3])
    data[2 : 3 * n : 3] = np.repeat(weight_C, num_types)
    return Csc(shape, indptr, indices, data)


def _pattern(num_cls: int, num_types: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """`lp_matrix`'s column pointers and row indices (read-only: every LP of this size shares them), and its
    values with 1.0 wherever they do not depend on the coefficients."""
    n = num_cls * num_types
    cls_of = np.repeat(np.arange(num_cls, dtype=np.int32), num_types)
    type_of = np.tile(np.arange(num_types, dtype=np.int32), num_cls)
    # each y column holds 3 entries, in row order: its class's max-min row, its class's time row, its type's row
    indices = np.empty(3 * n + num_cls, dtype=np.int32)
    indices[0 : 3 * n : 3] = cls_of
    indices[1 : 3 * n : 3] = num_cls + cls_of
    indices[2 : 3 * n : 3] = 2 * num_cls + type_of
    indices[3 * n :] = np.arange(num_cls, dtype=np.int32)
    indptr = np.append(np.arange(0, 3 * n + 1, 3, dtype=np.int32), np.int32(3 * n + num_cls))
    indptr.flags.writeable = indices.flags.writeable = False
    return indptr, indices, np.ones(3 * n + num_cls)


_PATTERNS: dict[tuple[int, int], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def agnostic_allocation(
    runnable_JT: np.ndarray, scale_J: np.ndarray, gpus_T: np.ndarray, groups_J: np.ndarray | None = None
) -> np.ndarray:
    """Heterogeneity-agnostic max-min fairness: every runnable type counts as throughput 1 (equal GPU time)."""
    coef = np.where(runnable_JT, 1.0, 0.0) * scale_J[:, None]
    return max_min_fair(coef, scale_J, gpus_T, runnable_JT, groups_J)


def equal_share(runnable_JT: np.ndarray, scale_J: np.ndarray, gpus_T: np.ndarray) -> np.ndarray:
    """X_eq: every job gets the same time fraction of each type it can use, gpus[j] / (sum of the scales of
    those jobs) (at most 1), and a job's row is scaled down to sum to at most 1."""
    demand_T = (runnable_JT * scale_J[:, None]).sum(axis=0)
    frac_T = np.minimum(1.0, np.asarray(gpus_T, dtype=float) / np.maximum(demand_T, 1e-300))
    x = runnable_JT * frac_T[None, :]
    row = x.sum(axis=1)
    return x / np.maximum(row, 1.0)[:, None]


def aware_allocation(
    throughput_JT: np.ndarray, scale_J: np.ndarray, gpus_T: np.ndarray, groups_J: np.ndarray | None = None
) -> np.ndarray:
    """Heterogeneity-aware max-min fairness over throughputs normalised by each job's throughput with an equal
    share of the cluster (throughput 0 = the job cannot run on that type)."""
    runnable = throughput_JT > 0
    iso = (throughput_JT * equal_share(runnable, scale_J, gpus_T)).sum(axis=1)
    iso = np.where(iso > 0, iso, 1.0)  # a job that can run nowhere gets nothing anyway
    coef = throughput_JT / iso[:, None] * scale_J[:, None]
    return max_min_fair(coef, scale_J, gpus_T, runnable, groups_J)


def _solver(a_ub, b_ub, presolve: bool = True):
    """`solve(c, bounds) -> x or None` for min c.x s.t. a_ub x <= b_ub, bounds[:, 0] <= x <= bounds[:, 1] (a_ub
    in compressed-column form: a scipy.sparse.csc_matrix or a `Csc`): `_bounds_solver`'s solve with the bounds
    as one (n, 2) array, as linprog takes them."""
    solve = _bounds_solver(a_ub, b_ub, presolve)
    return lambda c, bounds: solve(c, bounds[:, 0].copy(), bounds[:, 1].copy())


def _bounds_solver(a_ub, b_ub, presolve: bool = True):
    """`solve(c, lb, ub) -> x or None` for min c.x s.t. a_ub x <= b_ub, lb <= x <= ub: scipy's HiGHS core called
    as `linprog(method="highs", options={"presolve": presolve})` calls it (same model, same options, same result
    check), without linprog's per-call input cleaning and option validation (most of an allocation's time on
    small LPs); None where linprog would report a status other than 0. Falls back to `linprog` itself if scipy's
    internals moved.

    One HiGHS instance per presolve setting serves every solve: passing a model clears the previous one's
    solution, basis and simplex state (HiGHS starts a new LP from scratch), and the options are passed again
    before each solve, so every answer is the one a fresh instance gives (bit for bit; tests/test_gavel.py
    compares each with linprog's); building an instance took about a fifth of a solve."""
    core = _core(presolve)
    if core is None:  # pragma: no cover - scipy is pinned; kept for a future layout change
        from scipy.optimize import linprog
        from scipy.sparse import csc_matrix

        a = csc_matrix((a_ub.data, a_ub.indices, a_ub.indptr), shape=a_ub.shape)

        def plain(c, lb, ub):
            bounds = np.column_stack([lb, ub])
            r = linprog(c, A_ub=a, b_ub=b_ub, bounds=bounds, method="highs", options={"presolve": presolve})
            return r.x if r.status == 0 else None

        return plain
    highs, options, error, optimal, colwise, minimize, highs_inf = core
    num_rows, num_cols = a_ub.shape
    lhs = np.full(num_rows, -highs_inf)
    rhs = np.asarray(b_ub, dtype=float)
    start, index, value = a_ub.indptr, a_ub.indices, a_ub.data
    if start.dtype != np.int32 or index.dtype != np.int32:  # HiGHS' index type, as linprog passes it
        start, index = start.astype(np.int32), index.astype(np.int32)
    num_nz = len(value)
    continuous = np.zeros(num_cols, dtype=np.int32)  # HighsVarType.kContinuous for every column
    tol = np.sqrt(1e-9) * 10  # linprog's _check_result: tol = sqrt(1e-9) x 10
    isnan = np.isnan

    def solve(c, lb, ub):
        hlb, hub = lb, ub
        if highs_inf != np.inf:  # pragma: no cover - as linprog: an infinite bound becomes HiGHS' infinity
            hlb, hub = lb.copy(), ub.copy()
            for v in (hlb, hub):
                infs = np.isinf(v)
                v[infs] = np.sign(v[infs]) * highs_inf
        if highs.passOptions(options) == error:
            return None
        status = highs.passModel(
            num_cols, num_rows, num_nz, colwise, minimize, 0.0,
            np.asarray(c, dtype=float), hlb, hub, lhs, rhs, start, index, value, continuous,
        )  # fmt: skip
        if status == error or highs.run() == error:
            return None
        if highs.getModelStatus() != optimal:
            return None
        solution = highs.getSolution()
        # (from a list: fromiter converts faster than np.array)
        x = np.fromiter(solution.col_value, float, num_cols)
        slack = rhs - np.fromiter(solution.row_value, float, num_rows)
        # linprog's _check_result for an optimal status without equality rows or integrality: a solution with a
        # NaN, off its bounds or violating a row by more than tol is reported as status 4 (None here); a NaN
        # anywhere makes the sum NaN, so the element-wise test runs only where the sum is one
        if isnan(x.sum() + slack.sum()) and (isnan(x).any() or isnan(slack).any()):
            return None
        if not ((x >= lb - tol) & (x <= ub + tol)).all() or (slack < -tol).any():
            return None
        return x

    return solve


_CORES: dict[bool, tuple | None] = {}


def _core(presolve: bool) -> tuple | None:
    """(HiGHS instance, options, kError, kOptimal, kColwise, kMinimize, HiGHS' infinity) for this presolve
    setting, looked up once (pybind11 enum and attribute lookups cost microseconds per LP); None where scipy's
    internals moved."""
    got = _CORES.get(presolve)
    if got is None and presolve not in _CORES:
        hc = _highs_core()
        if hc is not None:
            got = (
                _highs(hc, presolve),
                _options(hc, presolve),
                hc.HighsStatus.kError,
                hc.HighsModelStatus.kOptimal,
                int(hc.MatrixFormat.kColwise),
                int(hc.ObjSense.kMinimize),
                hc.kHighsInf,
            )
        _CORES[presolve] = got
    return got


_HIGHS: dict[bool, object] = {}
_CORE: list = []


def _highs_core():
    """scipy's HiGHS core module, or None where scipy's internals moved (looked up once: an import statement
    costs a lookup per LP)."""
    if not _CORE:
        try:
            import scipy.optimize._highspy._core as hc
        except ImportError:  # pragma: no cover - scipy is pinned; kept for a future layout change
            hc = None
        if hc is not None and not (hasattr(hc, "_Highs") and hasattr(hc, "simplex_constants")):
            hc = None  # pragma: no cover
        _CORE.append(hc)
    return _CORE[0]


def _highs(hc, presolve: bool):
    """The HiGHS instance that solves every LP of this presolve setting (see `_solver`)."""
    if presolve not in _HIGHS:
        _HIGHS[presolve] = hc._Highs()
    return _HIGHS[presolve]


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
