"""The (job, GPU type) feature rows a score-round scorer sees (schedulers/score_rounds.py): what a real scheduler
knows of each active job on each GPU type it can use, as one float64 matrix built with numpy.

Rows: one per job and GPU type of the cluster the job can run on (an acceptable type with enough memory per GPU
where its speed is > 0), ordered by job index, then type index (the layout's order, fastest first). `FEATURES`
lists the columns (docs/schedulers.md, Score rounds, has the same table): first the ones fixed for a (job, type)
pair, computed once per run for every job, then the ones that change as the job runs and waits. Runtime figures
are the job's KNOWN runtime (`--runtime_info`: true or estimated), never its true one; work done and attained
service are what the simulator measured (time run x speed), which a real scheduler knows. Times enter as
ln(1 + minutes). A row depends only on its own job's state, the type and the cluster's fixed shape, never on
which other rows are present, so a row scores the same whoever else is active.
"""

from __future__ import annotations

import weakref
from typing import NamedTuple

import numpy as np

from sim.cluster import gb_to_mb
from sim.placement import effective_speed, spans_nodes_on
from sim.simulator import JobTable, View

FEATURES: tuple[tuple[str, str], ...] = (
    # fixed per (job, type) for the whole run
    ("log_est_runtime", "ln(1 + known runtime / 60 s): the whole job's known reference runtime"),
    ("log_gpu_demand", "ln(1 + GPUs x share): the job's GPU demand (0.5 for half a GPU)"),
    ("log_rel_speed", "ln(speed on t / the job's best speed in this cluster), <= 0"),
    ("rel_speed", "speed on t / the job's best speed in this cluster, in (0, 1]"),
    ("log_speed", "ln(speed on t): reference seconds of work per second (job types: the throughput matrix)"),
    ("type_share", "type t's GPUs / the cluster's GPUs"),
    ("demand_share", "GPU demand / type t's GPUs"),
    # per job, changing
    ("log_est_remaining", "ln(1 + known remaining / 60 s): known runtime - work done (reference s), >= 0"),
    ("log_attained_gpu", "ln(1 + attained GPU-seconds / 60): service so far (GPUs x time held, all runs)"),
    ("log_attained_time", "ln(1 + attained GPU-seconds / GPU demand / 60): time held so far"),
    ("log_time_in_system", "ln(1 + (now - arrival) / 60 s)"),
    ("log_waiting", "ln(1 + time waiting since arrival or last preemption / 60 s); 0 while running"),
    ("running", "1 if the job runs now (on any type)"),
    ("log_preemptions", "ln(1 + times preempted so far)"),
    # per (job, type), changing
    ("log_est_remaining_here", "ln(1 + known remaining / speed on t / 60 s): estimated time left on type t"),
    ("runs_here", "1 if the job runs on type t now"),
    (
        "pays_restore",
        "1 if starting the job on t now pays the restore overhead (preempted before, or a move)",
    ),
    ("restore_share", "restore overhead / (overhead + estimated time left on t) where pays_restore, else 0"),
)
FEATURE_NAMES: tuple[str, ...] = tuple(name for name, _ in FEATURES)
NUM_FEATURES = len(FEATURES)
COL = {name: c for c, name in enumerate(FEATURE_NAMES)}
"""column index of each feature"""
_NUM_FIXED = 7  # columns 0..6 are fixed per (job, type); 7..13 per job; 14..17 per row


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
    restoring: np.ndarray
    """bool per row: the job runs on this type now and its restore is not over (it keeps its GPUs at a round)"""

    def __len__(self) -> int:
        return len(self.job)


class Static:
    """Per-run facts the rows need, over every job (built once per JobTable, vectorised over shapes)."""

    def __init__(self, jt: JobTable, layout):
        num_types = len(layout.type_names)
        shape_index: dict[int, int] = {}
        shapes: list[tuple] = []
        shape_idx = np.empty(len(jt), dtype=np.int64)
        for i, s in enumerate(jt.shape):
            k = shape_index.get(id(s))
            if k is None:
                k = shape_index[id(s)] = len(shapes)
                shapes.append(s)
            shape_idx[i] = k
        speed = np.zeros((len(shapes), num_types))
        for k, (elig, num_gpus, milli, _, pace) in enumerate(shapes):
            for t in elig.types:
                speed[k, t] = max(
                    effective_speed(layout.type_speed[t], spans_nodes_on(elig, num_gpus, milli, t), pace), 0.0
                )
        self._shape_idx = shape_idx
        self._shapes = shapes
        self._restricted: list[list[tuple | None]] = [[None] * num_types for _ in shapes]
        self._mem_mb = [gb_to_mb(j.gpu_mem_gb) for j in jt.jobs]
        self._layout = layout
        self.known_s = np.asarray(jt.known_runtime_s, dtype=float)
        self.demand = np.asarray(jt.gpu_demand, dtype=float)
        self.arrival_s = np.asarray(jt.arrival_s, dtype=float)
        # every job's rows, by job then type: row_start[i]:row_start[i + 1] are job i's
        job, t = np.nonzero(speed[shape_idx] > 0)
        self.row_count = np.bincount(job, minlength=len(jt)).astype(np.int64)
        self.row_start = np.concatenate(([0], np.cumsum(self.row_count)))
        self.row_type = t.astype(np.int64)
        v = speed[shape_idx[job], t]
        self.row_speed = v
        best = speed.max(axis=1)[shape_idx[job]]
        gpus = np.asarray(layout.type_num_gpus, dtype=float)
        demand = self.demand[job]
        self.row_demand_milli = np.asarray(
            [k * m for k, m in zip(jt.num_gpus, jt.milli, strict=True)], dtype=np.int64
        )[job]
        fixed = np.empty((len(job), _NUM_FIXED))
        fixed[:, 0] = np.log1p(self.known_s[job] / 60.0)
        fixed[:, 1] = np.log1p(demand)
        fixed[:, 2] = np.log(v / best)
        fixed[:, 3] = v / best
        fixed[:, 4] = np.log(v)
        fixed[:, 5] = (gpus / layout.num_gpus)[t]
        fixed[:, 6] = demand / gpus[t]
        self.row_fixed = fixed
        # per job, its current run as last seen (`_running_state`): keyed by the run's start time
        n = len(jt)
        self.run_key = np.full(n, np.nan)
        self.run_attained = np.zeros(n)
        self.run_progress = np.zeros(n)
        self.run_work_start = np.zeros(n)
        self.run_speed = np.zeros(n)
        self.run_preemptions = np.zeros(n)
        self.run_type = np.zeros(n, dtype=np.int64)

    def refresh_runs(self, view: View, jobs: list[int]) -> None:
        """Note the current runs of these running jobs (their state at the run's start)."""
        for j in jobs:
            self.run_key[j] = view.run_start_s[j]
            self.run_attained[j] = view.attained_gpu_s[j]
            self.run_progress[j] = view.progress_s[j]
            self.run_work_start[j] = view.run_work_start_s[j]
            self.run_speed[j] = view.run_speed[j]
            self.run_preemptions[j] = view.preemptions[j]
            self.run_type[j] = view.placements[j].type_idx

    def restricted_shape(self, job: int, t: int) -> tuple:
        """The job's shape (place()'s arguments) restricted to the nodes of type t: how it is placed on t."""
        k = int(self._shape_idx[job])
        hit = self._restricted[k][t]
        if hit is None:
            _, num_gpus, milli, mem_mb, pace = self._shapes[k]
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


def active_rows(view: View) -> Rows:
    """The rows of every active job: the waiting ones (by job index), then the running ones (`view.running`'s
    order: by estimated end)."""
    st = static_of(view)
    waiting = list(view.queue)
    w = _waiting_state(view, st, waiting)
    running = [j for _, j in view.running]
    if not running:
        return _rows(view, st, *w)
    r = _running_state(view, st, running)
    if not waiting:
        return _rows(view, st, *r)
    return _rows(view, st, *(np.concatenate(pair) for pair in zip(w, r, strict=True)))


def waiting_rows(view: View, jobs: list[int]) -> Rows:
    """The rows of the waiting jobs `jobs` (ascending job indices)."""
    st = static_of(view)
    return _rows(view, st, *_waiting_state(view, st, jobs))


def _waiting_state(view: View, st: Static, jobs: list[int]) -> tuple[np.ndarray, ...]:
    """(ids, running, current type, attained GPU-s, work done, preemptions, waiting since) of waiting jobs."""
    ids = np.asarray(jobs, dtype=np.int64)
    n = len(jobs)
    preemptions = _gather(view.preemptions, jobs)
    if preemptions.any():  # waiting since the last preemption (NaN if never preempted: since arrival)
        last = _gather(view.preempted_at_s, jobs)
        since = np.where(np.isnan(last), st.arrival_s[ids], last)
        attained = _gather(view.attained_gpu_s, jobs)
        progress = _gather(view.progress_s, jobs)
    else:  # never ran: nothing attained or done
        since = st.arrival_s[ids]
        attained = progress = np.zeros(n)
    return ids, np.zeros(n, dtype=bool), np.full(n, -1, np.int64), attained, progress, preemptions, since


def _running_state(view: View, st: Static, jobs: list[int]) -> tuple[np.ndarray, ...]:
    """The same for running jobs, up to now. What stays fixed during a run (service, work and preemptions at its
    start, its speed and type) is memoised per job, keyed by the run's start time (`view.run_start_s`)."""
    ids = np.asarray(jobs, dtype=np.int64)
    start = _gather(view.run_start_s, jobs)
    stale = np.flatnonzero(st.run_key[ids] != start)  # NaN (never seen) is never equal
    if len(stale):
        st.refresh_runs(view, ids[stale].tolist())
    now = view.now_s
    attained = st.run_attained[ids] + (now - start) * st.demand[ids]
    progress = st.run_progress[ids] + np.maximum(now - st.run_work_start[ids], 0.0) * st.run_speed[ids]
    n = len(jobs)
    return ids, np.ones(n, dtype=bool), st.run_type[ids], attained, progress, st.run_preemptions[ids], start


_TO_MIN = 1.0 / 60.0


def _rows(
    view: View,
    st: Static,
    ids: np.ndarray,
    is_run: np.ndarray,
    cur_type: np.ndarray,
    attained: np.ndarray,
    progress: np.ndarray,
    preemptions: np.ndarray,
    since: np.ndarray,
) -> Rows:
    """The rows of jobs `ids` from their state (`_waiting_state`, `_running_state`; `since` only counts for a
    waiting job)."""
    now = view.now_s
    n = len(ids)
    demand = st.demand[ids]
    remaining = np.maximum(st.known_s[ids] - progress, 0.0)
    per_job = np.empty((n, 7))
    per_job[:, 0] = remaining
    per_job[:, 1] = attained
    per_job[:, 2] = attained / demand
    per_job[:, 3] = now - st.arrival_s[ids]
    per_job[:, 4] = np.where(is_run, 0.0, now - since)
    timed = per_job[:, :5]
    timed /= 60.0
    np.log1p(timed, out=timed)
    per_job[:, 5] = is_run
    per_job[:, 6] = np.log1p(preemptions)
    # the jobs' rows: job p's rows are row_start[ids[p]] + 0 .. count - 1
    counts = st.row_count[ids]
    total = int(counts.sum())
    pos = np.repeat(np.arange(n), counts)
    idx = np.arange(total) + np.repeat(st.row_start[ids] - (np.cumsum(counts) - counts), counts)
    f = np.empty((total, NUM_FEATURES))
    f[:, :_NUM_FIXED] = st.row_fixed[idx]
    f[:, _NUM_FIXED:14] = per_job[pos]
    t = st.row_type[idx]
    left_here_s = remaining[pos] / st.row_speed[idx]
    f[:, 14] = np.log1p(left_here_s / 60.0)
    here = cur_type[pos] == t
    pays = np.where(is_run[pos], ~here, preemptions[pos] > 0)
    f[:, 15] = here
    f[:, 16] = pays
    overhead = view.restore_overhead_s
    f[:, 17] = np.where(pays, overhead / (overhead + left_here_s), 0.0) if overhead > 0 else 0.0
    restoring = here & (st.run_work_start[ids] >= now)[pos] if overhead > 0 else np.zeros(total, dtype=bool)
    return Rows(ids[pos], t, f, here, st.row_demand_milli[idx], restoring)
