"""The (job, GPU type) feature rows a score-round scorer sees (schedulers/score_rounds.py): what a real scheduler
knows of each active job on each GPU type it can use, as one float64 matrix built with numpy.

Rows: one per active job (waiting or running) and GPU type of the cluster the job can run on (an acceptable
type with enough memory per GPU where its speed is > 0), ordered by job index, then type index (the layout's
order, fastest first). `FEATURES` lists the columns (docs/schedulers.md, Score rounds, has the same table).
Runtime figures are the job's KNOWN runtime (`--runtime_info`: true or estimated), never its true one; work done
and attained service are what the simulator has measured (time run x speed), which a real scheduler knows.
Times enter as ln(1 + minutes). Every value depends only on the job's own state, the type and the cluster's
fixed shape, never on which other rows are present, so a row scores the same whoever else is active.
"""

from __future__ import annotations

import math
import weakref
from typing import NamedTuple

import numpy as np

from sim.cluster import gb_to_mb
from sim.placement import effective_speed, spans_nodes_on
from sim.simulator import JobTable, View

FEATURES: tuple[tuple[str, str], ...] = (
    ("log_est_runtime", "ln(1 + known runtime / 60 s): the whole job's known reference runtime"),
    ("log_est_remaining", "ln(1 + known remaining / 60 s): known runtime - work done (reference s), >= 0"),
    ("log_est_remaining_here", "ln(1 + known remaining / speed on t / 60 s): estimated time left on type t"),
    ("log_attained_gpu", "ln(1 + attained GPU-seconds / 60): service so far (GPUs x time held, all runs)"),
    ("log_attained_time", "ln(1 + attained GPU-seconds / GPU demand / 60): time held so far"),
    ("log_gpu_demand", "ln(1 + GPUs x share): the job's GPU demand (0.5 for half a GPU)"),
    ("log_time_in_system", "ln(1 + (now - arrival) / 60 s)"),
    ("log_waiting", "ln(1 + time waiting since arrival or last preemption / 60 s); 0 while running"),
    ("log_rel_speed", "ln(speed on t / the job's best speed in this cluster), <= 0"),
    ("rel_speed", "speed on t / the job's best speed in this cluster, in (0, 1]"),
    ("log_speed", "ln(speed on t): reference seconds of work per second (job types: the throughput matrix)"),
    ("running", "1 if the job runs now (on any type)"),
    ("runs_here", "1 if the job runs on type t now"),
    (
        "pays_restore",
        "1 if starting the job on t now pays the restore overhead (preempted before, or a move)",
    ),
    ("restore_share", "restore overhead / (overhead + estimated time left on t) where pays_restore, else 0"),
    ("log_preemptions", "ln(1 + times preempted so far)"),
    ("type_share", "type t's GPUs / the cluster's GPUs"),
    ("demand_share", "GPU demand / type t's GPUs"),
)
FEATURE_NAMES: tuple[str, ...] = tuple(name for name, _ in FEATURES)
NUM_FEATURES = len(FEATURES)
COL = {name: c for c, name in enumerate(FEATURE_NAMES)}
"""column index of each feature"""


def feature_names() -> tuple[str, ...]:
    """The feature columns, in order (a scorer's weights follow this order)."""
    return FEATURE_NAMES


class Rows(NamedTuple):
    """The rows to score at one decision instant: row r is job `job[r]` on type `type_idx[r]`."""

    job: np.ndarray
    """int64 per row: the job's index in the workload"""
    type_idx: np.ndarray
    """int64 per row: the GPU type's index in the layout"""
    features: np.ndarray
    """float64 (rows, NUM_FEATURES): the `FEATURES` of each row"""
    runs_here: np.ndarray
    """bool per row: the job runs on this type now (the tie-break after the score)"""
    demand_milli: np.ndarray
    """int64 per row: GPUs x share in thousandths of a GPU (the room it takes on its type)"""

    def __len__(self) -> int:
        return len(self.job)


class Static:
    """Per-run facts the rows need, as arrays over every job (built once per JobTable)."""

    def __init__(self, jt: JobTable, layout):
        num_types = len(layout.type_names)
        shape_index: dict[int, int] = {}
        shapes: list[tuple] = []
        idx = np.empty(len(jt), dtype=np.int64)
        for i, s in enumerate(jt.shape):
            k = shape_index.get(id(s))
            if k is None:
                k = shape_index[id(s)] = len(shapes)
                shapes.append(s)
            idx[i] = k
        speed = np.zeros((len(shapes), num_types))
        restricted: list[list[tuple | None]] = []
        for k, (elig, num_gpus, milli, _, pace) in enumerate(shapes):
            per_type: list[tuple | None] = [None] * num_types
            for t in elig.types:
                v = effective_speed(layout.type_speed[t], spans_nodes_on(elig, num_gpus, milli, t), pace)
                if v > 0:
                    speed[k, t] = v
            restricted.append(per_type)
        self.shape_idx = idx
        self.shapes = shapes
        self.shape_speed = speed
        self._restricted = restricted
        self._mem_mb = [gb_to_mb(j.gpu_mem_gb) for j in jt.jobs]
        self._layout = layout
        self.known_s = np.asarray(jt.known_runtime_s, dtype=float)
        self.demand = np.asarray(jt.gpu_demand, dtype=float)
        self.demand_milli = np.asarray([k * m for k, m in zip(jt.num_gpus, jt.milli, strict=True)], np.int64)
        self.arrival_s = np.asarray(jt.arrival_s, dtype=float)
        gpus = np.asarray(layout.type_num_gpus, dtype=float)
        self.type_share = gpus / layout.num_gpus
        self.type_gpus = gpus
        with np.errstate(divide="ignore"):
            best = speed.max(axis=1)
            self.shape_rel = np.where(speed > 0, speed / np.where(best > 0, best, 1.0)[:, None], 0.0)
            self.shape_log_speed = np.where(speed > 0, np.log(np.where(speed > 0, speed, 1.0)), 0.0)
            self.shape_log_rel = np.where(
                speed > 0, np.log(np.where(self.shape_rel > 0, self.shape_rel, 1.0)), 0.0
            )
        self.shape_allowed = speed > 0

    def restricted_shape(self, job: int, t: int) -> tuple:
        """The job's shape (place()'s arguments) restricted to the nodes of type t: how it is placed on t."""
        k = int(self.shape_idx[job])
        hit = self._restricted[k][t]
        if hit is None:
            _, num_gpus, milli, mem_mb, pace = self.shapes[k]
            layout = self._layout
            elig_t = layout.eligible((layout.type_names[t],), self._mem_mb[job])
            hit = self._restricted[k][t] = (elig_t, num_gpus, milli, mem_mb, pace)
        return hit


_STATIC: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def static_of(view: View) -> Static:
    """The run's Static (memoised per JobTable: a run's jobs never change)."""
    jt = view.jobs
    s = _STATIC.get(jt)
    if s is None:
        s = _STATIC[jt] = Static(jt, view.layout)
    return s


def _gather(values, ids: list[int]) -> np.ndarray:
    return np.fromiter(map(values.__getitem__, ids), dtype=float, count=len(ids))


def round_rows(view: View) -> Rows:
    """The rows of every active job (waiting and running), by job index then type."""
    waiting = list(view.queue)
    running = [j for _, j in view.running]
    ids = np.asarray(waiting + running, dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    ids = ids[order]
    is_run = order >= len(waiting)
    cur_type = np.full(len(ids), -1, dtype=np.int64)
    if running:
        placements = view.placements
        types = np.fromiter((placements[j].type_idx for j in running), dtype=np.int64, count=len(running))
        cur_type[np.flatnonzero(is_run)] = types[order[is_run] - len(waiting)]
    return _rows(view, ids, is_run, cur_type)


def waiting_rows(view: View) -> Rows:
    """The rows of the waiting jobs only (a fill between rounds), by job index then type."""
    ids = np.fromiter(view.queue, dtype=np.int64, count=len(view.queue))  # arrival order = index order
    n = len(ids)
    return _rows(view, ids, np.zeros(n, dtype=bool), np.full(n, -1, dtype=np.int64))


_LN_OVER_60 = 1.0 / 60.0


def _rows(view: View, ids: np.ndarray, is_run: np.ndarray, cur_type: np.ndarray) -> Rows:
    st = static_of(view)
    now = view.now_s
    idl = ids.tolist()
    attained = _gather(view.attained_gpu_s, idl)
    progress = _gather(view.progress_s, idl)
    preemptions = _gather(view.preemptions, idl)
    demand = st.demand[ids]
    if is_run.any():
        run_start = _gather(view.run_start_s, idl)
        work_start = _gather(view.run_work_start_s, idl)
        speed_now = _gather(view.run_speed, idl)
        attained = np.where(is_run, attained + (now - run_start) * demand, attained)
        progress = np.where(is_run, progress + np.maximum(now - work_start, 0.0) * speed_now, progress)
    # since the last preemption (NaN if never preempted: since arrival); 0 while running
    last = _gather(view.preempted_at_s, idl)
    arrival = st.arrival_s[ids]
    since = np.where(np.isnan(last), arrival, last)
    waited = np.where(is_run, 0.0, np.maximum(now - since, 0.0))
    known = st.known_s[ids]
    remaining = np.maximum(known - progress, 0.0)
    shape = st.shape_idx[ids]
    pos, t = np.nonzero(st.shape_allowed[shape])
    sh = shape[pos]
    speed = st.shape_speed[sh, t]
    here = cur_type[pos] == t
    run_r = is_run[pos]
    pays = (preemptions[pos] > 0) & ~run_r | run_r & ~here
    left_here_s = remaining[pos] / speed
    overhead = view.restore_overhead_s
    f = np.empty((len(pos), NUM_FEATURES))
    f[:, 0] = np.log1p(known * _LN_OVER_60)[pos]
    f[:, 1] = np.log1p(remaining * _LN_OVER_60)[pos]
    f[:, 2] = np.log1p(left_here_s * _LN_OVER_60)
    f[:, 3] = np.log1p(attained * _LN_OVER_60)[pos]
    f[:, 4] = np.log1p(attained / demand * _LN_OVER_60)[pos]
    f[:, 5] = np.log1p(demand)[pos]
    f[:, 6] = np.log1p(np.maximum(now - arrival, 0.0) * _LN_OVER_60)[pos]
    f[:, 7] = np.log1p(waited * _LN_OVER_60)[pos]
    f[:, 8] = st.shape_log_rel[sh, t]
    f[:, 9] = st.shape_rel[sh, t]
    f[:, 10] = st.shape_log_speed[sh, t]
    f[:, 11] = run_r
    f[:, 12] = here
    f[:, 13] = pays
    with np.errstate(invalid="ignore", divide="ignore"):
        share = overhead / (overhead + left_here_s)
    f[:, 14] = np.where(pays & (overhead > 0), share, 0.0)
    f[:, 15] = np.log1p(preemptions)[pos]
    f[:, 16] = st.type_share[t]
    f[:, 17] = demand[pos] / st.type_gpus[t]
    return Rows(ids[pos], t.astype(np.int64), f, here, st.demand_milli[ids][pos])


def log_minutes(seconds: float) -> float:
    """ln(1 + seconds / 60): the time scale of the features (for documents and tests)."""
    return math.log1p(seconds / 60.0)
