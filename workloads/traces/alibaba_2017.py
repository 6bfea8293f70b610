"""Alibaba cluster-trace-v2017 `batch_task` table (CPU batch tasks, headerless, 8 columns) as GPU jobs.

Columns: create_timestamp, modify_timestamp, job_id, task_id, instance_num, status, plan_cpu, plan_mem (s since
the trace start, the time origin; 0 or negative = before the trace period). One Job per task (jobs are DAGs of
tasks without dependency information, and their tasks start at different times). num_gpus = cfg.cpu_job_gpus per
task (the CPU->GPU mapping; instance_num and plan_cpu are reported, not mapped). arrival = create_timestamp.
The table has no start time: for Terminated/Failed/Cancelled tasks runtime = modify_timestamp (their end) -
create_timestamp, which includes any queueing (an upper bound on the run time); Running tasks (modify_timestamp is
their last state change, not an end) are replayed up to the latest timestamp in the file. trace_status = status
(Failed, Cancelled = failed/killed); priority 0. Dropped: Waiting/Ready tasks ('never started'); tasks created at
or before 0 or ending at or before 0 ('before trace start'),
ending before their creation ('end before create').
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workloads.traces.common import RUNNING, TraceTable, fail_at, numeric, read_csv

COLUMNS = (
    "create_timestamp",
    "modify_timestamp",
    "job_id",
    "task_id",
    "instance_num",
    "status",
    "plan_cpu",
    "plan_mem",
)
STATUSES = ("Terminated", "Failed", "Running", "Waiting", "Ready", "Cancelled")
NOT_STARTED = ("Waiting", "Ready")
FAILED_STATUSES = ("Failed", "Cancelled")


def looks_like_batch_task(first_line: str) -> bool:
    fields = first_line.split(",")
    return len(fields) == len(COLUMNS) and fields[5].strip() in STATUSES


def read_batch_task(path: Path, cpu_job_gpus: int) -> TraceTable:
    """Parse a v2017 batch_task table (.csv or .csv.gz) into a TraceTable; see the module docstring."""
    if cpu_job_gpus <= 0:
        raise ValueError(f"cpu_job_gpus must be > 0, got {cpu_job_gpus}")
    if path.is_dir():
        candidates = [path / "batch_task.csv.gz", path / "batch_task.csv"]
        path = next((p for p in candidates if p.is_file()), candidates[0])
    df = read_csv(
        path, header=None, dtype={5: str}, keep_default_na=False, na_values=[""], skip_blank_lines=False
    )
    if df.shape[1] != len(COLUMNS):
        raise ValueError(
            f"{path}:1: expected {len(COLUMNS)} columns ({','.join(COLUMNS)}), found {df.shape[1]}"
        )
    df.columns = list(COLUMNS)
    create = numeric(path, df, "create_timestamp", 1)
    modify = numeric(path, df, "modify_timestamp", 1)
    task_id = numeric(path, df, "task_id", 1, integer=True).astype(np.int64)
    numeric(path, df, "job_id", 1, integer=True)
    instances = numeric(path, df, "instance_num", 1, integer=True)
    numeric(path, df, "plan_cpu", 1, allow_missing=True)
    status = df["status"].to_numpy(dtype=object)
    fail_at(
        path, ~np.isin(status, STATUSES), 1, f"unknown status (expected one of {', '.join(STATUSES)})", status
    )
    running = status == RUNNING
    last_s = float(max(create.max(), modify.max())) if len(df) else 0.0
    end = np.where(running, last_s, modify)
    keep = np.ones(len(df), dtype=bool)
    dropped = {}
    for reason, mask in (
        ("never started", np.isin(status, NOT_STARTED)),
        ("before trace start", (create <= 0) | (~running & (modify <= 0))),
        ("end before create", ~running & (modify < create)),  # genuine rows (1 in the 2017 sample)
    ):
        hit = keep & mask
        dropped[reason] = int(hit.sum())
        keep &= ~hit
    k = np.flatnonzero(keep)
    st = np.where(running, RUNNING, status).astype(object)[k]
    return TraceTable(
        format_name="alibaba-2017",
        source=str(path),
        rows_read=len(df),
        job_id=np.array([str(t) for t in task_id[k]], dtype=object),
        arrival_s=create[k],
        runtime_s=(end - create)[k],
        num_gpus=np.full(len(k), cpu_job_gpus, dtype=np.int64),
        gpu_milli=np.full(len(k), 1000, dtype=np.int64),
        status=st,
        failed=np.isin(st, FAILED_STATUSES),
        dropped=dropped,
        mapping={
            "job": "one batch task (job_id is a DAG without dependencies)",
            "arrival": "create_timestamp (s since trace start)",
            "runtime": "modify_timestamp - create_timestamp (includes queueing; no start time in the table); "
            "Running: up to the latest timestamp",
            "gpus": f"cpu_job_gpus={cpu_job_gpus} per task (instance_num, plan_cpu not mapped)",
            "status": "status (Failed, Cancelled = failed/killed)",
            "priority": "0 (not in the table)",
        },
        extra={
            "cpu_job_gpus": cpu_job_gpus,
            "distinct_jobs": int(df["job_id"].nunique()),
            "instances_total": int(np.nansum(instances)),
            "censored_at_trace_end": int((running & keep).sum()),
            "status_counts_all_rows": {s: int((status == s).sum()) for s in STATUSES if (status == s).any()},
        },
    )
