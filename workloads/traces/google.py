"""Google cluster-data 2011 (Borg cell): `task_events` (+ `job_events`) shards as GPU jobs.

Input: a directory holding `task_events/*.csv.gz` and, optionally, `job_events/*.csv.gz` (headerless v2.1 schema,
sharded by time; all shards present are read in name order). Timestamps are µs since the trace start plus a 600 s
offset; 0 means "before the trace started" and 2^63-1 "after it ended". Time origin = the trace start (so the
offset is removed and --trace_start/--trace_end mean the same on any window of shards).

Attempts: each SCHEDULE of a task ends at its next FAIL/FINISH/KILL/EVICT/LOST event (an evicted task is
resubmitted and may be scheduled again); an attempt still open at the last loaded timestamp is replayed up to it.
The time a task held resources is the sum of its attempts.

unit="task" (default, `--google_unit task`): one Job per task, cpu_job_gpus GPUs, runtime = its held time,
arrival = its first SUBMIT; Borg schedules a job's tasks independently, so this is how the trace ran.
unit="job" (`--google_unit job`): one Job per Google job, a rigid gang of its tasks. num_gpus = peak number of
the job's tasks running at once x cpu_job_gpus; runtime = the job's task-seconds / that peak (so GPU-seconds equal
the trace's task-seconds x cpu_job_gpus and the gang is never wider than the job ever was). In shards 0-11 the
601 gangs of >= 100 tasks carry 95.6 % of the work and the widest needs 10,500 GPUs, so this mode mostly
studies gang scheduling of huge jobs. Both: arrival = first SUBMIT (job_events
when present, else the tasks'); priority = the trace's priority (0-11, max over the job's tasks); trace_status =
the job's (task's) final event (FINISH; FAIL, KILL, EVICT, LOST = failed/killed) or Running. CPU/memory requests
are normalised fractions with no GPU meaning and are not mapped (gpu_mem_gb 0, any type).

Dropped (counted): submitted before the trace started (t = 0 rows are the initial state, not arrivals), no
SUBMIT in the loaded shards (a later window: submitted earlier), job events but no task events, never scheduled.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from workloads.traces.common import RUNNING, TraceTable, numeric, read_csv

OFFSET_US = 600_000_000
AFTER_END_US = 2**63 - 1
EVENT_NAMES = (
    "SUBMIT",
    "SCHEDULE",
    "EVICT",
    "FAIL",
    "FINISH",
    "KILL",
    "LOST",
    "UPDATE_PENDING",
    "UPDATE_RUNNING",
)
SUBMIT, SCHEDULE = 0, 1
END_EVENTS = (2, 3, 4, 5, 6)
FAILED_STATUSES = ("EVICT", "FAIL", "KILL", "LOST")
TASK_COLUMNS = {0: "ts", 2: "job", 3: "task", 5: "event", 8: "priority"}  # 0-based positions of 13 columns
JOB_COLUMNS = {0: "ts", 2: "job", 3: "event"}  # of 8 columns
UNITS = ("job", "task")


def trace_root(path: Path) -> Path:
    """The folder holding task_events/ (and job_events/): `path` itself, or its parent if `path` is task_events/."""
    return path.parent if path.name in ("task_events", "job_events") and path.is_dir() else path


def shard_files(path: Path, table: str, required: bool) -> list[Path]:
    if required and path.is_file():
        root = path.parent.parent if path.parent.name in ("task_events", "job_events") else path.parent
        raise ValueError(
            f"{path}: a single file; --workload_type google reads the clusterdata-2011-2 folder that holds "
            f"task_events/ (and job_events/) shards, all of them in name order: --workload_path {root}"
        )
    folder = path / table
    files = sorted(folder.glob("*.csv.gz")) + sorted(folder.glob("*.csv")) if folder.is_dir() else []
    if required and not files:
        raise ValueError(
            f"{path}: no {table}/*.csv.gz shards; --workload_type google reads the clusterdata-2011-2 folder that "
            f"holds task_events/ (and job_events/)"
        )
    return files


def _read_shards(files: list[Path], columns: dict[int, str], width: int) -> pd.DataFrame:
    frames = []
    for f in files:
        df = read_csv(f, header=None, usecols=list(columns), compression="infer")
        if df.shape[1] != len(columns):
            raise ValueError(f"{f}:1: expected {width} columns, found fewer")
        df.columns = [columns[c] for c in columns]
        for name in df.columns:
            if df[name].dtype != np.int64:
                df[name] = numeric(f, df, name, 1, integer=True).astype(np.int64)
        frames.append(df)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(columns.values()))


def read_google(path: Path, cpu_job_gpus: int, unit: str = "task") -> TraceTable:
    """Parse the task_events (+ job_events) shards under `path`; see the module docstring for the mapping."""
    if unit not in UNITS:
        raise ValueError(f"unknown google unit {unit!r}; choose one of {', '.join(UNITS)}")
    if cpu_job_gpus <= 0:
        raise ValueError(f"cpu_job_gpus must be > 0, got {cpu_job_gpus}")
    path = trace_root(path)
    te = _read_shards(shard_files(path, "task_events", True), TASK_COLUMNS, 13)
    job_files = shard_files(path, "job_events", False)
    je = _read_shards(job_files, JOB_COLUMNS, 8) if job_files else None
    ts, job, task = te["ts"].to_numpy(), te["job"].to_numpy(), te["task"].to_numpy()
    event = te["event"].to_numpy()
    bad = (event < 0) | (event >= len(EVENT_NAMES))
    if bad.any():
        raise ValueError(f"{path}/task_events: unknown event type {int(event[bad][0])} (expected 0-8)")
    real = ts[(ts != AFTER_END_US)]
    last_us = int(real.max()) if len(real) else OFFSET_US

    att = _attempts(ts, job, task, event, last_us)
    if unit == "job":
        table = _jobs(te, je, att, cpu_job_gpus, last_us)
    else:
        table = _tasks(te, att, cpu_job_gpus)
    ids, arrival_us, runtime_s, num_gpus, status, priority, dropped = table
    counts = np.bincount(event, minlength=len(EVENT_NAMES))
    status = np.asarray(status, dtype=object)
    return TraceTable(
        format_name="google",
        source=str(path),
        rows_read=len(te),
        job_id=np.asarray(ids, dtype=object),
        arrival_s=(np.asarray(arrival_us, dtype=float) - OFFSET_US) / 1e6,
        runtime_s=np.asarray(runtime_s, dtype=float),
        num_gpus=np.asarray(num_gpus, dtype=np.int64),
        gpu_milli=np.full(len(ids), 1000, dtype=np.int64),
        status=status,
        failed=np.isin(status, FAILED_STATUSES),
        priority=np.asarray(priority, dtype=np.int64),
        dropped=dropped,
        mapping={
            "job": "one Google job (gang of its tasks)" if unit == "job" else "one Google task",
            "arrival": "first SUBMIT (s since the trace start; the 600 s offset removed)",
            "runtime": (
                "task-seconds held (SCHEDULE to FINISH/FAIL/KILL/EVICT/LOST, all attempts) / peak running tasks"
                if unit == "job"
                else "seconds held over all the task's attempts"
            ),
            "gpus": (
                f"peak running tasks x cpu_job_gpus={cpu_job_gpus}"
                if unit == "job"
                else f"cpu_job_gpus={cpu_job_gpus} per task"
            ),
            "priority": "trace priority 0-11 (max over the job's tasks)",
            "status": "final event (EVICT, FAIL, KILL, LOST = failed/killed) or Running at the last timestamp",
            "cpu_memory": "normalised requests not mapped (gpu_mem_gb 0, any GPU type)",
        },
        extra={
            "unit": unit,
            "cpu_job_gpus": cpu_job_gpus,
            "task_event_rows": len(te),
            "task_event_rows_at_t0": int((ts == 0).sum()),
            "job_event_rows": 0 if je is None else len(je),
            "task_event_counts": {EVENT_NAMES[i]: int(c) for i, c in enumerate(counts)},
            "distinct_jobs_task_events": int(len(np.unique(job))),
            "distinct_jobs_job_events": 0 if je is None else int(je["job"].nunique()),
            "distinct_tasks": int(len(pd.MultiIndex.from_arrays([job, task]).unique())),
            "attempts": len(att),
            "attempts_open_at_end": int(att["open"].sum()),
            "evictions": int((att["end_event"] == 2).sum()),
            "last_timestamp_s": (last_us - OFFSET_US) / 1e6,
        },
    )


def _attempts(ts, job, task, event, last_us: int) -> pd.DataFrame:
    """One row per SCHEDULE: job, task, start_us, end_us, end_event (-1 = open), open."""
    m = (event >= SCHEDULE) & (event <= 6)
    seq = np.flatnonzero(m)
    j, t, e, s = job[m], task[m], event[m], ts[m]
    order = np.lexsort((seq, s, t, j))
    j, t, e, s = j[order], t[order], e[order], s[order]
    same_next = np.zeros(len(j), dtype=bool)
    same_next[:-1] = (j[:-1] == j[1:]) & (t[:-1] == t[1:])
    next_e = np.append(e[1:], -1)
    next_s = np.append(s[1:], last_us)
    sched = e == SCHEDULE
    # An end event closes the attempt; a second SCHEDULE without an end in between (a logging gap) closes it too.
    closed = sched & same_next & (next_s != AFTER_END_US)
    end_event = np.where(closed & np.isin(next_e, END_EVENTS), next_e, -1)[sched]
    end_us = np.where(closed, next_s, last_us)[sched]
    start_us = s[sched]
    is_open = ~closed[sched]
    return pd.DataFrame(
        {
            "job": j[sched],
            "task": t[sched],
            "start_us": start_us,
            "end_us": np.maximum(end_us, start_us),
            "end_event": end_event,
            "open": is_open,
        }
    )


def _status_names(end_event: np.ndarray, is_open: np.ndarray) -> np.ndarray:
    names = np.array([*EVENT_NAMES, RUNNING], dtype=object)
    return np.where(
        is_open | (end_event < 0), RUNNING, names[np.where(end_event < 0, len(EVENT_NAMES), end_event)]
    )


def _jobs(te: pd.DataFrame, je: pd.DataFrame | None, att: pd.DataFrame, cpu_job_gpus: int, last_us: int):
    task_jobs = te["job"].unique()
    if je is not None:
        submits = je[je["event"] == SUBMIT].groupby("job")["ts"].min()
        all_jobs = np.union1d(task_jobs, je["job"].unique())
    else:
        submits = te[te["event"] == SUBMIT].groupby("job")["ts"].min()
        all_jobs = np.unique(task_jobs)
    submit = submits.reindex(all_jobs).to_numpy(dtype=float)
    held = (att["end_us"] - att["start_us"]) / 1e6
    by_job = pd.DataFrame({"job": att["job"], "held_s": held, "open": att["open"]}).groupby("job")
    held_s = by_job["held_s"].sum().reindex(all_jobs).to_numpy()
    any_open = by_job["open"].any().reindex(all_jobs, fill_value=False).to_numpy(dtype=bool)
    peak = _peak_running(att).reindex(all_jobs, fill_value=0).to_numpy()
    in_tasks = np.isin(all_jobs, task_jobs)

    dropped, keep = {}, np.ones(len(all_jobs), dtype=bool)
    for reason, mask in (
        ("submitted before trace start", submit == 0),
        ("no SUBMIT in the loaded shards", np.isnan(submit)),
        ("no task events", ~in_tasks),
        ("never started", peak == 0),
    ):
        hit = keep & mask
        dropped[reason] = int(hit.sum())
        keep &= ~hit
    k = all_jobs[keep]

    last_att = att.sort_values(["job", "end_us"], kind="stable").groupby("job").tail(1).set_index("job")
    fallback = _status_names(last_att["end_event"].to_numpy(), last_att["open"].to_numpy())
    status = pd.Series(fallback, index=last_att.index).reindex(k).to_numpy(dtype=object)
    status = np.where(any_open[keep], RUNNING, status)
    if je is not None:
        ends = (
            je[je["event"].isin(END_EVENTS)].sort_values("ts", kind="stable").groupby("job")["event"].last()
        )
        job_end = ends.reindex(k)
        has = job_end.notna().to_numpy()
        status = np.where(
            has, np.array(EVENT_NAMES, dtype=object)[job_end.fillna(0).to_numpy(dtype=np.int64)], status
        )
    priority = te.groupby("job")["priority"].max().reindex(k).to_numpy()
    p = peak[keep]
    return (
        [str(x) for x in k],
        submit[keep],
        held_s[keep] / p,
        p * cpu_job_gpus,
        status,
        priority,
        dropped,
    )


def _peak_running(att: pd.DataFrame) -> pd.Series:
    """Most attempts of each job holding resources at the same instant (ends before starts at equal times)."""
    n = len(att)
    ev = pd.DataFrame(
        {
            "job": np.concatenate([att["job"].to_numpy(), att["job"].to_numpy()]),
            "t": np.concatenate([att["start_us"].to_numpy(), att["end_us"].to_numpy()]),
            "d": np.concatenate([np.ones(n, dtype=np.int64), -np.ones(n, dtype=np.int64)]),
        }
    )
    ev = ev.sort_values(["job", "t", "d"], kind="stable")
    ev["running"] = ev.groupby("job")["d"].cumsum()
    return ev.groupby("job")["running"].max()


def _tasks(te: pd.DataFrame, att: pd.DataFrame, cpu_job_gpus: int):
    keys = ["job", "task"]
    tasks = te[keys].drop_duplicates().set_index(keys).index
    submit = te[te["event"] == SUBMIT].groupby(keys)["ts"].min().reindex(tasks).to_numpy(dtype=float)
    held = pd.DataFrame(
        {"job": att["job"], "task": att["task"], "held_s": (att["end_us"] - att["start_us"]) / 1e6}
    )
    held_s = held.groupby(keys)["held_s"].sum().reindex(tasks).to_numpy()
    n_att = att.groupby(keys).size().reindex(tasks, fill_value=0).to_numpy()
    dropped, keep = {}, np.ones(len(tasks), dtype=bool)
    for reason, mask in (
        ("submitted before trace start", submit == 0),
        ("no SUBMIT in the loaded shards", np.isnan(submit)),
        ("never started", n_att == 0),
    ):
        hit = keep & mask
        dropped[reason] = int(hit.sum())
        keep &= ~hit
    k = tasks[keep]
    last = att.groupby(keys).tail(1).set_index(keys).reindex(k)  # attempts are in time order within a task
    status = _status_names(last["end_event"].to_numpy(), last["open"].to_numpy(dtype=bool))
    priority = te.groupby(keys)["priority"].max().reindex(k).to_numpy()
    ids = [f"{j}-{t}" for j, t in k]
    return ids, submit[keep], held_s[keep], np.full(len(k), cpu_job_gpus), status, priority, dropped
