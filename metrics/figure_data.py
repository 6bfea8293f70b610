"""The numbers behind a run's figures, computed from its CSV files alone (jobs.csv, runs.csv, cluster.csv, and
power_states.csv when the run had node power states).

Reading the written files rather than the in-memory result means a figure shows exactly what a reader of the CSVs
can recompute (tests do: the stacked per-type utilization integrates to the per-type busy GPU-seconds of
runs.csv). Step functions follow metrics/timeline.py's convention: one row per event time (sorted, unique), the
value after that instant's events, 0 before the first time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

NOT_STARTED = "not started"
"""queue_by_type's key for jobs that never started (the type they wait for is not known yet)"""


SHADED_STATES = ("off", "booting", "shutting_down", "idle")
"""power_states.csv's states the timeline shades behind the job blocks (a busy node shows its blocks instead)"""


@dataclass(frozen=True)
class PowerStates:
    """A run folder's power_states.csv (metrics/power_states.py) as aligned arrays: node index into cluster.csv's
    rows, state name, start and end in seconds."""

    node: np.ndarray  # int64
    state: np.ndarray  # str
    start_s: np.ndarray
    end_s: np.ndarray


JOB_FIGURE_COLUMNS = ("job_id", "submit_time", "num_gpus", "status", "priority", "jct_s")
"""the columns of jobs.csv that the figures read"""


@dataclass(frozen=True)
class RunTables:
    """A run folder's jobs.csv, runs.csv and cluster.csv as aligned arrays (job arrays in jobs.csv's order, run
    arrays in runs.csv's order; times in seconds, NaN for an empty cell)."""

    job_id: np.ndarray  # str
    submit_s: np.ndarray
    num_gpus: np.ndarray  # GPU demand, a fractional share as its fraction
    status: np.ndarray  # str: completed | unfinished | rejected
    priority: np.ndarray  # int
    jct_s: np.ndarray  # NaN unless completed
    run_job: np.ndarray  # int64 index into the job arrays
    run_start_s: np.ndarray
    run_end_s: np.ndarray  # NaN: still running when the run ended
    run_placement: np.ndarray  # str, `node_id/gpu_index` entries joined by `;`
    run_gpu_type: np.ndarray  # str
    node_id: np.ndarray  # str, cluster.csv's order
    node_gpu_type: np.ndarray  # str
    node_num_gpus: np.ndarray  # int
    power_states: PowerStates | None = None
    """power_states.csv, None when the folder has none (a run without node power states)"""

    @property
    def horizon_s(self) -> float:
        """The last instant the files know of: the latest submit, start or end, or power-state end (open runs end
        here)."""
        states = () if self.power_states is None else (self.power_states.end_s,)
        times = np.concatenate([self.submit_s, self.run_start_s, self.run_end_s, *states])
        times = times[np.isfinite(times)]
        return float(times.max()) if len(times) else 0.0

    @property
    def total_gpus(self) -> int:
        return int(self.node_num_gpus.sum())

    def gpus_by_type(self) -> dict[str, int]:
        """GPUs per type, types in cluster.csv's order of first appearance."""
        out: dict[str, int] = {}
        for t, n in zip(self.node_gpu_type.tolist(), self.node_num_gpus.tolist(), strict=True):
            out[t] = out.get(t, 0) + int(n)
        return out

    def gpu_types(self) -> tuple[str, ...]:
        """cluster.csv's types in order, then any other type runs.csv names (none in a simulated run)."""
        return tuple(dict.fromkeys([*self.gpus_by_type(), *self.run_gpu_type.tolist()]))


def read_run_tables(folder: str | Path) -> RunTables:
    """Read a run folder's jobs.csv, runs.csv, cluster.csv and power_states.csv if it has one (with pandas: 0.2 s
    of CPU to import, but 0.1 s to read 100,000 jobs where the standard library's csv reader takes 1 s; this module
    is imported only to draw)."""
    folder = Path(folder)
    text = {"job_id": str, "placement": str, "gpu_type": str, "status": str, "node_id": str}
    jobs = pd.read_csv(
        folder / "jobs.csv",
        dtype=text,
        keep_default_na=False,
        na_values={"jct_s": [""]},
        usecols=JOB_FIGURE_COLUMNS,  # (the others, placements above all, would only cost their conversion)
    )
    runs = pd.read_csv(folder / "runs.csv", dtype=text, keep_default_na=False, na_values={"end_time": [""]})
    nodes = pd.read_csv(folder / "cluster.csv", dtype=text, keep_default_na=False)
    job_ids = pd.Index(jobs["job_id"])
    if job_ids.is_unique:  # each run's job as one hashed lookup of the whole column
        run_job = job_ids.get_indexer(runs["job_id"])
        if (run_job < 0).any():
            raise KeyError(runs["job_id"][int(np.flatnonzero(run_job < 0)[0])])
    else:
        index = {job_id: i for i, job_id in enumerate(jobs["job_id"].tolist())}
        run_job = np.array([index[j] for j in runs["job_id"].tolist()], dtype=np.int64)
    power_states = None
    if (folder / "power_states.csv").is_file():
        states = pd.read_csv(folder / "power_states.csv", dtype=text, keep_default_na=False)
        node_index = {node_id: k for k, node_id in enumerate(nodes["node_id"].tolist())}
        power_states = PowerStates(
            node=np.array([node_index[n] for n in states["node_id"].tolist()], dtype=np.int64),
            state=states["state"].to_numpy(dtype=object),
            start_s=states["start_s"].to_numpy(dtype=float),
            end_s=states["end_s"].to_numpy(dtype=float),
        )
    return RunTables(
        job_id=jobs["job_id"].to_numpy(dtype=object),
        submit_s=jobs["submit_time"].to_numpy(dtype=float),
        num_gpus=jobs["num_gpus"].to_numpy(dtype=float),
        status=jobs["status"].to_numpy(dtype=object),
        priority=jobs["priority"].to_numpy(dtype=np.int64),
        jct_s=pd.to_numeric(jobs["jct_s"]).to_numpy(dtype=float),
        run_job=run_job.astype(np.int64),
        run_start_s=runs["start_time"].to_numpy(dtype=float),
        run_end_s=pd.to_numeric(runs["end_time"]).to_numpy(dtype=float),
        run_placement=runs["placement"].to_numpy(dtype=object),
        run_gpu_type=runs["gpu_type"].to_numpy(dtype=object),
        node_id=nodes["node_id"].to_numpy(dtype=object),
        node_gpu_type=nodes["gpu_type"].to_numpy(dtype=object),
        node_num_gpus=nodes["num_gpus"].to_numpy(dtype=np.int64),
        power_states=power_states,
    )


@dataclass(frozen=True)
class StackedSteps:
    """Several step functions on one time grid: value_TK[k, i] holds for keys[i] on [t_s[k], t_s[k + 1])."""

    t_s: np.ndarray
    keys: tuple[str, ...]
    value_TK: np.ndarray

    def integral(self, end_s: float) -> np.ndarray:
        """Per key, the integral from the first time to `end_s` (value x seconds)."""
        if not len(self.t_s):
            return np.zeros(len(self.keys))
        edges = np.append(self.t_s, max(end_s, self.t_s[-1]))
        return np.diff(edges) @ self.value_TK


def _stacked(
    start_s: np.ndarray, end_s: np.ndarray, weight: np.ndarray, key: np.ndarray, keys: tuple[str, ...]
) -> StackedSteps:
    """Sum per key of `weight` over the intervals [start_s, end_s) (end NaN: open to the end)."""
    col = {k: i for i, k in enumerate(keys)}
    key_idx = np.array([col[k] for k in key.tolist()], dtype=np.int64)
    closed = np.isfinite(end_s)
    times = np.concatenate([start_s, end_s[closed]])
    t_s = np.unique(times)
    delta = np.zeros((len(t_s), len(keys)))
    np.add.at(delta, (np.searchsorted(t_s, start_s), key_idx), weight)
    np.add.at(delta, (np.searchsorted(t_s, end_s[closed]), key_idx[closed]), -weight[closed])
    # rounded so that a sum that returns to zero is exactly zero (0.1 + 0.2 - 0.1 - 0.2 is not)
    return StackedSteps(t_s, keys, np.round(np.cumsum(delta, axis=0), 9))


def busy_by_type(tables: RunTables) -> StackedSteps:
    """Busy GPUs per GPU type over time (a fractional job counts its fraction), from runs.csv and the demands in
    jobs.csv; keys are the run's GPU types (RunTables.gpu_types)."""
    keys = tables.gpu_types()
    return _stacked(
        tables.run_start_s,
        tables.run_end_s,
        tables.num_gpus[tables.run_job],
        tables.run_gpu_type,
        keys,
    )


def queue_by_type(tables: RunTables) -> StackedSteps:
    """Queued jobs over time by the GPU type each waits for: the type of the run that ends its wait (in hindsight;
    a preempted job waits again for its next run's type), NOT_STARTED for a job that never started. Rejected jobs
    never queue; a job preempted and never resumed waits until the horizon under NOT_STARTED."""
    n_jobs = len(tables.job_id)
    order = np.lexsort((tables.run_start_s, tables.run_job))  # each job's runs in time order
    job = tables.run_job[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = job[1:] != job[:-1]
    prev_end = np.where(first, tables.submit_s[job], np.roll(tables.run_end_s[order], 1))
    starts = [prev_end]
    ends = [tables.run_start_s[order]]
    types = [tables.run_gpu_type[order]]
    # jobs waiting at the horizon: never started (not rejected), or preempted after their last run
    last = np.ones(len(order), dtype=bool)
    last[:-1] = job[:-1] != job[1:]
    ran = np.zeros(n_jobs, dtype=bool)
    ran[job] = True
    tail_end = tables.run_end_s[order][last]
    waiting_again = last.copy()
    waiting_again[last] = np.isfinite(tail_end) & (tables.status[job[last]] == "unfinished")
    never = ~ran & (tables.status != "rejected")
    starts += [tables.run_end_s[order][waiting_again], tables.submit_s[never]]
    ends += [np.full(int(waiting_again.sum() + never.sum()), np.nan)]
    types += [np.full(int(waiting_again.sum() + never.sum()), NOT_STARTED, dtype=object)]
    start_s, end_s = np.concatenate(starts), np.concatenate(ends)
    key = np.concatenate(types)
    keep = ~(end_s <= start_s)  # a wait of zero length (started on arrival) never shows in the queue
    keys = tuple(t for t in tables.gpu_types() if t in set(key[keep].tolist()))
    keys += (NOT_STARTED,) if NOT_STARTED in set(key[keep].tolist()) else ()
    return _stacked(start_s[keep], end_s[keep], np.ones(int(keep.sum())), key[keep], keys)


def arrival_window(tables: RunTables) -> tuple[float, float]:
    """(first, last) submit time over every job, rejected ones included (the arrival window of summary.csv)."""
    if not len(tables.submit_s):
        return 0.0, 0.0
    return float(tables.submit_s.min()), float(tables.submit_s.max())


def jct_by_priority(tables: RunTables) -> dict[int, np.ndarray]:
    """Completed jobs' JCTs (s) per priority class, classes ascending."""
    done = tables.status == "completed"
    return {int(p): tables.jct_s[done & (tables.priority == p)] for p in np.unique(tables.priority[done])}


@dataclass(frozen=True)
class Gantt:
    """Blocks of a node/GPU timeline: one per (run, GPU it held), lanes numbered from the top, plus the instants
    where a job was preempted (a run that another run of the same job follows) and where it was migrated (a run
    placed on other GPUs than the job's previous run), and the shaded power states (SHADED_STATES): one span per
    interval of power_states.csv, over all lanes of its node (lanes shade_lane0 to shade_lane1, inclusive)."""

    lane_labels: tuple[str, ...]
    block_lane: np.ndarray  # int
    block_start_s: np.ndarray
    block_end_s: np.ndarray  # open runs end at the horizon
    block_job: np.ndarray  # int index into the job arrays
    preempt_lane: np.ndarray
    preempt_s: np.ndarray
    migrate_lane: np.ndarray
    migrate_s: np.ndarray
    shade_state: np.ndarray  # str, one of SHADED_STATES
    shade_lane0: np.ndarray  # int, the node's first lane
    shade_lane1: np.ndarray  # int, its last lane
    shade_start_s: np.ndarray
    shade_end_s: np.ndarray


def gantt_window(g: Gantt, start_s: float, end_s: float) -> Gantt:
    """The part of `g` inside [start_s, end_s]: the blocks of the runs overlapping it (a block that ends at
    start_s or starts at end_s does not), cut to it, the marks inside it, and the shaded power-state spans
    overlapping it, cut to it."""
    keep = (g.block_start_s < end_s) & (g.block_end_s > start_s)
    shade = (g.shade_start_s < end_s) & (g.shade_end_s > start_s)
    pre = (g.preempt_s >= start_s) & (g.preempt_s <= end_s)
    mig = (g.migrate_s >= start_s) & (g.migrate_s <= end_s)
    return Gantt(
        lane_labels=g.lane_labels,
        block_lane=g.block_lane[keep],
        block_start_s=np.maximum(g.block_start_s[keep], start_s),
        block_end_s=np.minimum(g.block_end_s[keep], end_s),
        block_job=g.block_job[keep],
        preempt_lane=g.preempt_lane[pre],
        preempt_s=g.preempt_s[pre],
        migrate_lane=g.migrate_lane[mig],
        migrate_s=g.migrate_s[mig],
        shade_state=g.shade_state[shade],
        shade_lane0=g.shade_lane0[shade],
        shade_lane1=g.shade_lane1[shade],
        shade_start_s=np.maximum(g.shade_start_s[shade], start_s),
        shade_end_s=np.minimum(g.shade_end_s[shade], end_s),
    )


def gantt(tables: RunTables, per_node: bool) -> Gantt:
    """One lane per GPU (`node_id/gpu_index`, cluster.csv's node order), or per node with `per_node`; a lane's
    label names the GPU type on a node's first lane."""
    nodes = zip(
        tables.node_id.tolist(), tables.node_num_gpus.tolist(), tables.node_gpu_type.tolist(), strict=True
    )
    if per_node:
        lanes = [(str(n), f"{n} {t}") for n, _, t in nodes]
    else:  # the type named on each node's first GPU
        lanes = [
            (f"{n}/{g}", f"{n}/{g} {t}" if g == 0 else f"{n}/{g}") for n, k, t in nodes for g in range(int(k))
        ]
    lane_of = {key: i for i, (key, _) in enumerate(lanes)}
    horizon = tables.horizon_s
    lane, start, end, job = [], [], [], []
    first_lane = np.zeros(len(tables.run_job), dtype=np.int64)
    for r, placement in enumerate(tables.run_placement.tolist()):
        gpus = placement.split(";") if placement else []
        held = dict.fromkeys(g.rsplit("/", 1)[0] if per_node else g for g in gpus)
        for g in held:
            lane.append(lane_of[g])
            start.append(tables.run_start_s[r])
            end_s = tables.run_end_s[r]
            end.append(end_s if np.isfinite(end_s) else horizon)
            job.append(tables.run_job[r])
        first_lane[r] = lane_of[next(iter(held))] if held else 0
    order = np.lexsort((tables.run_start_s, tables.run_job))
    same_job = tables.run_job[order][1:] == tables.run_job[order][:-1]
    before, after = order[:-1][same_job], order[1:][same_job]  # consecutive runs of one job
    moved = tables.run_placement[before] != tables.run_placement[after]
    if per_node:
        first = np.arange(len(tables.node_id), dtype=np.int64)
        last = first
    else:
        last = np.cumsum(tables.node_num_gpus) - 1
        first = last - tables.node_num_gpus + 1
    ps = tables.power_states
    if ps is None:
        ps = PowerStates(np.zeros(0, np.int64), np.zeros(0, object), np.zeros(0), np.zeros(0))
    shaded = np.isin(ps.state, SHADED_STATES) & (ps.end_s > ps.start_s)
    return Gantt(
        lane_labels=tuple(label for _, label in lanes),
        block_lane=np.asarray(lane, dtype=np.int64),
        block_start_s=np.asarray(start, dtype=float),
        block_end_s=np.asarray(end, dtype=float),
        block_job=np.asarray(job, dtype=np.int64),
        preempt_lane=first_lane[before],
        preempt_s=tables.run_end_s[before],
        migrate_lane=first_lane[after[moved]],
        migrate_s=tables.run_start_s[after[moved]],
        shade_state=ps.state[shaded],
        shade_lane0=first[ps.node[shaded]],
        shade_lane1=last[ps.node[shaded]],
        shade_start_s=ps.start_s[shaded],
        shade_end_s=ps.end_s[shaded],
    )
