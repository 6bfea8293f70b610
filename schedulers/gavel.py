"""Gavel (Narayanan et al., OSDI 2020): heterogeneity-aware max-min fairness, realised in fixed-length rounds.

At every round boundary (multiples of ROUND_S from t = 0; the policy asks for a WakeUp there) it computes the
allocation X (jobs x GPU types, schedulers/gavel_lp.py) over the active jobs (waiting and running), then picks
the jobs of the next round as Gavel's mechanism does (§5 and scheduler.py's `_schedule_jobs_on_workers_helper`):
- priority of job i on type j = X[i, j] / (the fraction of time job i has run so far), X[i, j] x 1e9 for a job
  that has not run yet (Gavel's convention, so new jobs go first in proportion to their allocation), 0 where
  X[i, j] = 0;
- types in the layout's order (fastest first; Gavel: V100, P100, K80), and on each type its entries by priority
  (ties -> larger X, then a job already running on that type, then arrival order): a job not yet chosen is
  chosen for that type if it can run there and the type still has as many GPUs as it needs (its scale). Jobs of
  priority 0 come last but still fill GPUs nobody else takes (Gavel does not skip them either).
Realisation: a running job chosen for the type it runs on keeps its GPUs; a running job not chosen, or chosen
for another type (a migration), is preempted (sim/simulator.py's Preempt: its progress is kept and it pays the
restore overhead when started again). The chosen jobs that are not running then start on the placement rule's
placement restricted to their type, in the order chosen; one that does not fit (fragmentation: Gavel counts
GPUs per type, our nodes are real) waits for the next round. Between boundaries nothing changes.
Throughput of job i on type j: its speed there (sim/placement.py's `effective_speed`: the job type's measured
speed with --job_types, else the catalog type speed), 0 on a type it cannot use.

Deviations (docs/schedulers.md): the fraction of time run is over the job's whole stay and all types (View's
attained service), where Gavel keeps it per type since the last reset; no space sharing (packing)
of jobs on a GPU. X is solved only for an active set not solved before in the run (memoised), and not looked
up in a round that provably keeps every job where it is (`_all_stay`). Gavel's simulator
recomputes less often (only at resets: an arrival or completion since the last one and 1,920 s passed), ends a
round when its last micro-task ends and shuffles the types every round for the agnostic policy;
schedulers/gavel_original.py replays all of that.
"""

from __future__ import annotations

import math
from operator import itemgetter
from typing import NamedTuple

import numpy as np

from schedulers.gather import gather
from schedulers.gavel_lp import agnostic_allocation, aware_allocation
from schedulers.plan import Plan
from sim.cluster import Placement, gb_to_mb
from sim.placement import effective_speed, place, spans_nodes_on
from sim.simulator import View, WakeUp

ROUND_S = 360.0
"""round length (s): Gavel's default `time_per_iteration` (scheduler/scheduler.py) and its simulation sweeps'
`--interval` default (scheduler/scripts/sweeps/run_sweep_continuous.py)"""

_tuple_new = tuple.__new__
_JOB = itemgetter(1)
_TYPE_IDX = itemgetter(Placement._fields.index("type_idx"))  # a Placement's type (C-level, for map)
_NEW_JOB_PRIORITY = 1e9  # Gavel: allocation x 1e9 for a job with no time run yet
_VECTOR_MIN = 24
"""from this many active jobs on, a round orders them in numpy (below it a Python loop is cheaper; a module
attribute, so that tests can force either path)"""


def gavel(view: View) -> list:
    """Heterogeneity-aware max-min fairness (Gavel's `max_min_fairness_perf`)."""
    return _round(view, True)


def gavel_agnostic(view: View) -> list:
    """The heterogeneity-agnostic baseline (Gavel's `max_min_fairness`): equal GPU time, any type."""
    return _round(view, False)


def _round(view: View, aware: bool) -> list:
    now = view.now_s
    k = math.floor(now / ROUND_S)
    next_round = _tuple_new(WakeUp, ((k + 1) * ROUND_S,))  # WakeUp(...) without its constructor's extra call
    if k * ROUND_S != now:
        return [next_round]  # mid-round: the round's jobs keep running until the boundary
    if not view.queue:
        if not view.running:
            return []
        if _all_stay(view):
            return [next_round]
    placements = view.placements
    # each running job's type, in the view's order ((end estimate, job) pairs)
    run_ids = list(map(_JOB, view.running))
    running = dict(zip(run_ids, map(_TYPE_IDX, map(placements.__getitem__, run_ids)), strict=True))
    active = sorted([*view.queue, *run_ids])
    layout = view.layout
    act = _active_set(view, active, aware)
    if len(active) < _VECTOR_MIN:
        order = _order_loop(view, act, running)
    else:
        order = _order_numpy(view, act, running)
    # per type in the layout's order, the jobs not yet chosen that fit in what is left of it, by priority
    left = list(layout.type_num_gpus)
    num_gpus = view.jobs.num_gpus
    chosen: dict[int, int] = {}  # job -> type, in the order chosen
    for t, jobs in enumerate(order):
        lt = left[t]
        for i in jobs:
            if lt == 0:
                break
            if i in chosen or num_gpus[i] > lt:
                continue
            chosen[i] = t
            lt -= num_gpus[i]
        left[t] = lt
    plan = Plan(view.free)
    for i, t in running.items():
        if chosen.get(i) == t:
            del chosen[i]  # it stays where it is
        else:
            plan.preempt(i, placements[i])
    # place()'s arguments that did not fit, by identity (they are shared per shape: `place_args`): capacity only
    # shrinks once preemptions are planned
    no_fit: set[int] = set()
    place_args = act.tables.place_args
    for i, t in chosen.items():
        args = place_args(view, i)[t]
        if no_fit and id(args) in no_fit:
            continue
        p = place(plan.free, *args)
        if p is not None:
            plan.add(i, p)
        else:
            no_fit.add(id(args))
    return [*plan.decisions, next_round]


def _all_stay(view: View) -> bool:
    """Whether, with no job waiting, the round keeps every running job where it is without computing X: true
    where each runs on the first type (in the layout's order) it can run on and all of them together hold fewer
    GPUs than the smallest type has. Then the round's choice does not depend on the order: on each type, in the
    layout's order, every job not yet chosen that can run there fits in what is left (the type's GPUs exceed
    the GPUs of all active jobs), so each job is chosen for the first type it can run on, whatever the
    priorities, and nothing is preempted or started."""
    tables = _tables(view)
    first, num_gpus, placements = tables.first_type, view.jobs.num_gpus, view.placements
    held = 0
    for _, i in view.running:
        if first[i] != placements[i].type_idx:
            return False
        held += num_gpus[i]
    return held < tables.min_type_gpus


def _order_numpy(view: View, act: _ActiveSet, running: dict[int, int]) -> list[list[int]]:
    """Per type, the active jobs that can run there by priority (ties -> larger X, then a job already running
    on that type, then arrival order), in numpy (many active jobs): one sort per type of its (job, type) entries."""
    now = view.now_s
    f = act.flat()
    # the fraction of its stay each job has run (View.attained_now's service, in numpy: the same floats) and the
    # type each running job is on (-1: waiting)
    run_ids = list(running)
    # rows of the running jobs (searchsorted converts a list argument far more slowly than fromiter)
    at = np.searchsorted(act.ids, np.fromiter(run_ids, np.intp, len(run_ids)))
    got = gather(view.attained_gpu_s, act.active)
    got[at] += (now - gather(view.run_start_s, run_ids)) * act.demand[at]
    stay = now - act.arrival
    stayed = stay > 0
    fraction = np.where(stayed, got / np.where(stayed, act.demand * stay, 1.0), 0.0)
    on_type = np.full(len(act.active), -1)
    on_type[at] = np.fromiter(running.values(), np.intp, len(run_ids))
    # per entry: x / fraction where the job has run (the denominator is 1 elsewhere only to avoid dividing by
    # 0: those entries take x x 1e9), and 0 where x is 0; negated for the sort
    fraction = fraction[f.rows]
    ran = fraction > 0
    # per type (a block of entries), by the complex key (-priority) + (-X)i, which numpy orders by its real part,
    # then its imaginary part (as two keys: -0.0 equals 0.0), then by not running on that type; lexsort is
    # stable and `active` is sorted, so ties keep row order, which is arrival (index) order
    key = f.key.copy()
    key.real = np.where(f.x_pos, np.where(ran, f.x / np.where(ran, fraction, 1.0), f.x_new), 0.0)
    np.negative(key.real, out=key.real)
    other = on_type[f.rows] != f.types
    jobs = f.jobs
    return [jobs[a:b][np.lexsort((other[a:b], key[a:b]))].tolist() for a, b in f.blocks]


def _order_loop(view: View, act: _ActiveSet, running: dict[int, int]) -> list[list[int]]:
    """`_order_numpy`'s order by a Python loop (few active jobs, where numpy's per-call cost dominates): the same
    floats, compared the same way (the job last in each key: ties keep arrival order, as the stable sort does)."""
    now = view.now_s
    attained, run_start = view.attained_gpu_s, view.run_start_s
    entries, demand, arrival = act.loop_rows()
    # per type: (-priority, -X, not running on that type, job) of each job that can run there
    keys: list[list[tuple]] = [[] for _ in view.layout.type_names]
    for r, i in enumerate(act.active):
        d = demand[r]
        got = attained[i]
        on = -1
        if i in running:
            got += (now - run_start[i]) * d
            on = running[i]
        stay = now - arrival[r]
        f = got / (d * stay) if stay > 0 else 0.0
        for t, xv in entries[r]:  # the types job r can run on, with its X there
            if xv > 1e-9:
                prio = xv / f if f > 0 else xv * _NEW_JOB_PRIORITY
            else:
                prio = 0.0
            keys[t].append((-prio, -xv, on != t, i))
    return [[e[3] for e in sorted(k)] for k in keys]


class _Tables:
    """Per-run facts of every job (the JobTable's jobs), computed once: throughput rows, profiles, and (lazily)
    the arguments of `place` restricted to each type."""

    def __init__(self, view: View):
        jt = view.jobs
        layout = view.layout
        self.jobs = jt
        rows: dict[tuple, list[float]] = {}  # per shape: jobs of one shape have one row
        table = np.empty((len(jt.shape), len(layout.type_names)))
        for i, s in enumerate(jt.shape):
            row = rows.get(s)
            if row is None:
                elig, k, milli, _, pace = s
                row = rows[s] = [
                    effective_speed(v, spans_nodes_on(elig, k, milli, t), pace) if t in elig.types else 0.0
                    for t, v in enumerate(layout.type_speed)
                ]
            table[i] = row
        self.throughput = table
        """job x type: reference seconds of work per second on one node of the type (spread where the job needs
        more GPUs than a node of the type has), 0 where the job cannot run"""
        _, profile = np.unique(np.column_stack([table, jt.num_gpus]), axis=0, return_inverse=True)
        self.profile = profile.ravel()
        """equal for jobs of equal throughput row and GPU count, whose LP rows are then equal (gavel_lp's
        `groups_J`)"""
        can = table > 0
        self.first_type: list[int] = np.where(can.any(axis=1), can.argmax(axis=1), -1).tolist()
        """per job, the first type in the layout's order it can run on (-1: none)"""
        self.min_type_gpus = min(layout.type_num_gpus, default=0)
        # the JobTable's per-job lists as float arrays (an active set takes its rows by fancy indexing)
        self.scale = np.asarray(jt.num_gpus, dtype=float)
        self.demand = np.asarray(jt.gpu_demand, dtype=float)
        self.arrival = np.asarray(jt.arrival_s, dtype=float)
        self._args: list[tuple | None] = [None] * len(jt.shape)
        self._shape_args: dict[tuple, tuple] = {}

    def place_args(self, view: View, i: int) -> tuple:
        """Per type: the arguments of `place` for job i on that type only (None on a type it cannot use).

        Equal for the jobs of one shape: the nodes of the job's type t with enough GPU memory are its eligible
        nodes of type t (`Eligible.type_nodes[t]`, which the shape holds), and the layout gives one Eligible
        object per node set, so `layout.eligible` returns the same object for every job of the shape."""
        got = self._args[i]
        if got is None:
            s = self.jobs.shape[i]
            got = self._shape_args.get(s)
            if got is None:
                layout = view.layout
                elig, k_gpus, milli, mem_mb, pace = s
                mem = gb_to_mb(self.jobs.jobs[i].gpu_mem_gb)
                got = self._shape_args[s] = tuple(
                    (layout.eligible((name,), mem), k_gpus, milli, mem_mb, pace) if t in elig.types else None
                    for t, name in enumerate(layout.type_names)
                )
            self._args[i] = got
        return got


def _tables(view: View) -> _Tables:
    """The run's `_Tables` (one run's at a time, found by its JobTable)."""
    hit = _TABLES.get(id(view.jobs))
    if hit is None or hit.jobs is not view.jobs:
        _TABLES.clear()
        hit = _TABLES[id(view.jobs)] = _Tables(view)
    return hit


_TABLES: dict[int, _Tables] = {}


class _Flat(NamedTuple):
    """An active set's (job, type) entries where the job can run on the type, in (type, row) order, for
    `_order_numpy`: the row, the type, X and the constants derived from it."""

    rows: np.ndarray
    types: np.ndarray
    jobs: np.ndarray
    """the entry's job"""
    x: np.ndarray
    key: np.ndarray
    """complex, 0 + (-x)i: the sort key's imaginary part"""
    x_pos: np.ndarray
    """x > 1e-9"""
    x_new: np.ndarray
    """x x _NEW_JOB_PRIORITY: the priority of a job that has not run yet"""
    blocks: list[tuple[int, int]]
    """per type, the slice of its entries"""


class _ActiveSet:
    """What a round needs of one active set (sorted job indices) that does not change while the set does not:
    the allocation X, the row of each job, and per type the rows of the jobs that can run there (with the
    constants each order needs, built for the first round that takes that path)."""

    __slots__ = ("tables", "active", "x", "ids", "runnable", "demand", "arrival", "_loop", "_flat")

    def __init__(self, view: View, active: list[int], aware: bool):
        self.tables = tables = _tables(view)
        self.active = active
        self.ids = ids = np.fromiter(active, np.intp, len(active))
        thr = tables.throughput[ids]
        scale = tables.scale[ids]
        gpus = np.asarray(view.layout.type_num_gpus, dtype=float)
        profile = tables.profile[ids]
        self.runnable = runnable = thr > 0
        if aware:
            self.x = aware_allocation(thr, scale, gpus, profile)
        else:
            self.x = agnostic_allocation(runnable, scale, gpus, profile)
        self.demand = tables.demand[ids]
        self.arrival = tables.arrival[ids]
        self._loop: tuple | None = None
        self._flat: _Flat | None = None

    def flat(self) -> _Flat:
        """The entries `_order_numpy` sorts (built once per active set)."""
        if self._flat is None:
            types, rows = np.nonzero(self.runnable.T)  # (type, row) order
            x = self.x[rows, types]
            ends = np.searchsorted(types, np.arange(1, self.x.shape[1] + 1)).tolist()
            key = np.zeros(len(x), dtype=complex)
            key.imag = -x
            self._flat = _Flat(
                rows,
                types,
                self.ids[rows],
                x,
                key,
                x > 1e-9,
                x * _NEW_JOB_PRIORITY,
                list(zip([0, *ends[:-1]], ends, strict=True)),
            )
        return self._flat

    def loop_rows(self) -> tuple[list[list[tuple[int, float]]], list[float], list[float]]:
        """Per row, (type, X) for each type the job can run on; the jobs' GPU demands and arrival times; as Python
        values (for `_order_loop`; built once per active set)."""
        if self._loop is None:
            ok = self.runnable.tolist()
            self._loop = (
                [
                    [(t, v) for t, v in enumerate(xs) if can[t]]
                    for xs, can in zip(self.x.tolist(), ok, strict=True)
                ],
                self.demand.tolist(),
                self.arrival.tolist(),
            )
        return self._loop


_MEMO: dict[tuple, tuple[object, _ActiveSet]] = {}


def _active_set(view: View, active: list[int], aware: bool) -> _ActiveSet:
    """The active set's `_ActiveSet`, memoised per run (the JobTable): X is solved only for a set not seen
    before (Gavel recomputes the allocation on arrivals and completions)."""
    key = (id(view.jobs), aware, tuple(active))
    hit = _MEMO.get(key)
    if hit is not None and hit[0] is view.jobs:
        return hit[1]
    got = _ActiveSet(view, active, aware)
    if len(_MEMO) > 64:
        _MEMO.clear()
    _MEMO[key] = (view.jobs, got)
    return got
