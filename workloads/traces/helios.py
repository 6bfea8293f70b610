"""SenseTime Helios (and Acme, same layout) Slurm job logs: `cluster_log.csv` rows as jobs.

Documented columns (HeliosData README): job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,
end_time,duration,queue, times as `YYYY-MM-DD HH:MM:SS` local time. Required here: job_id, gpu_num, state,
submit_time, start_time, end_time (others, e.g. a jobname column, are ignored). One Job per row.
arrival = submit_time (s since the earliest submit_time in the file, the time origin); runtime = end_time -
start_time (the documented `duration`); num_gpus = gpu_num whole GPUs; trace_status = state (CANCELLED, FAILED,
TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, PREEMPTED, BOOT_FAIL, DEADLINE count as failed/killed); priority 0.
CPU jobs (gpu_num 0) are dropped as 'zero GPUs', rows without start_time as 'never started'; a started job
without end_time ran to the end of the log and is replayed up to the latest time in the file ('Running').
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from workloads.traces.common import RUNNING, TraceTable, fail_at, numeric, read_csv, require_columns

COLUMNS = ("job_id", "gpu_num", "state", "submit_time", "start_time", "end_time")
FORM = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue"
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
FAILED_STATES = (
    "CANCELLED",
    "FAILED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "BOOT_FAIL",
    "DEADLINE",
)


def read_helios(path: Path) -> TraceTable:
    """Parse a Helios/Acme cluster_log.csv into a TraceTable; see the module docstring for the mapping."""
    if path.is_dir():
        path = path / "cluster_log.csv"
    df = read_csv(path, dtype=str, keep_default_na=False, na_values=[""], skip_blank_lines=False)
    df.columns = [c.strip() for c in df.columns]
    require_columns(path, df.columns, COLUMNS, FORM)
    if len(df) == 0:
        raise ValueError(f"{path}:2: no job rows")
    gpus = numeric(path, df, "gpu_num", 2, integer=True).astype(np.int64)
    fail_at(path, gpus < 0, 2, "gpu_num must be >= 0", gpus)
    submit = _times(path, df, "submit_time", required=True)
    start = _times(path, df, "start_time", required=False)
    end = _times(path, df, "end_time", required=False)
    state = df["state"].to_numpy(dtype=object)
    fail_at(path, pd.isna(df["state"]).to_numpy(), 2, "column 'state': missing value")
    fail_at(path, pd.isna(df["job_id"]).to_numpy(), 2, "column 'job_id': missing value")
    started = ~np.isnan(start)
    fail_at(
        path,
        started & ~np.isnan(end) & (end < start),
        2,
        "end_time before start_time",
        df["end_time"].to_numpy(),
    )
    fail_at(path, started & (start < submit), 2, "start_time before submit_time", df["start_time"].to_numpy())
    last_s = np.nanmax(np.concatenate([submit, start, end]))
    open_end = started & np.isnan(end)
    end = np.where(open_end, last_s, end)
    origin = np.nanmin(submit)
    keep = (gpus > 0) & started
    k = np.flatnonzero(keep)
    status = np.where(open_end, RUNNING, state).astype(object)
    return TraceTable(
        format_name="helios",
        source=str(path),
        rows_read=len(df),
        job_id=df["job_id"].to_numpy(dtype=object)[k],
        arrival_s=(submit - origin)[k],
        runtime_s=(end - start)[k],
        num_gpus=gpus[k],
        gpu_milli=np.full(len(k), 1000, dtype=np.int64),
        status=status[k],
        failed=np.isin(state, FAILED_STATES)[k],
        dropped={"zero GPUs": int((gpus == 0).sum()), "never started": int(((gpus > 0) & ~started).sum())},
        mapping={
            "job": "one row",
            "arrival": "submit_time (s since the earliest submit_time in the file)",
            "runtime": "end_time - start_time",
            "gpus": "gpu_num whole GPUs",
            "status": f"state ({', '.join(FAILED_STATES)} = failed/killed)",
            "priority": "0 (not in the trace)",
        },
        extra={
            "censored_at_trace_end": int((open_end & keep).sum()),
            "time_origin": str(pd.Timestamp(origin, unit="s")),
        },
    )


def _times(path: Path, df: pd.DataFrame, column: str, required: bool) -> np.ndarray:
    """Seconds since the Unix epoch (naive local time, as logged); NaN for an empty cell."""
    raw = df[column]
    parsed = pd.to_datetime(raw, format=TIME_FORMAT, errors="coerce")
    bad = parsed.isna().to_numpy() & (
        raw.notna().to_numpy() if not required else np.ones(len(raw), dtype=bool)
    )
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        what = (
            "missing value"
            if pd.isna(raw.iat[i])
            else f"bad time {raw.iat[i]!r} (expected YYYY-MM-DD HH:MM:SS)"
        )
        raise ValueError(f"{path}:{2 + i}: column {column!r}: {what}")
    seconds = (parsed - pd.Timestamp("1970-01-01")).dt.total_seconds()
    return seconds.to_numpy(dtype=float, na_value=np.nan)
