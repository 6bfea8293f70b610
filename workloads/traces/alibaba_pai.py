"""Alibaba cluster-trace-gpu-v2020 (PAI): job + task tables as jobs, `pai_machine_spec` as the trace's cluster.

Files (headerless CSV, columns from the published `.header` files; a header row, if present, is skipped):
  pai_task_table.csv  job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type
  pai_job_table.csv   job_name,inst_id,user,status,start_time,end_time          (optional)
  pai_group_tag_table.csv inst_id,user,gpu_type_spec,group,workload             (optional)
  pai_machine_spec.csv machine,gpu_type,cap_cpu,cap_mem,cap_gpu                 (optional: the cluster)
A path is the directory holding them or any one of the tables (its siblings are used).

One Job per PAI job (job_name). Its GPU tasks (plan_gpu > 0) run together: GPU demand = sum of inst_num x
plan_gpu/100 (plan_gpu is in percent of a GPU); up to 1 GPU -> that fraction of one shared GPU, above 1 ->
ceil(demand) whole GPUs (non-integer demands counted as 'fractional total rounded up'). runtime = last GPU task
end_time - first GPU task start_time (task start = launch, so queueing is excluded; an unfinished task runs to
the latest timestamp in the tables). arrival = the job table's start_time (submission; else the first task
start), in s since the earliest arrival (timestamps are shifted by an undisclosed constant). trace_status = the
job table's status (else the tasks': Failed > Running > Terminated; Failed = failed/killed); gpu_types = the
group tag table's gpu_type_spec when given (a user constraint; the task table's gpu_type is only what the task
got, reported but not mapped); priority 0. start_time 0 means "not started" (official analysis code).
Dropped: no task with plan_gpu > 0 ('zero GPUs'), no started GPU task or a Waiting job ('never started').
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sim.catalog import CATALOG, resolve_gpu_type
from sim.cluster_spec import ClusterSpec, NodeSpec
from workloads.traces.common import RUNNING, TraceTable, fail_at, numeric, read_csv, split_fraction

TASK_COLUMNS = (
    "job_name",
    "task_name",
    "inst_num",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
    "plan_gpu",
    "gpu_type",
)
JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
GROUP_COLUMNS = ("inst_id", "user", "gpu_type_spec", "group", "workload")
MACHINE_COLUMNS = ("machine", "gpu_type", "cap_cpu", "cap_mem", "cap_gpu")
STATUSES = ("Terminated", "Failed", "Running", "Waiting")
FAILED_STATUSES = ("Failed",)
TABLES = ("pai_task_table", "pai_job_table", "pai_group_tag_table", "pai_machine_spec")


def table_path(path: Path, table: str) -> Path | None:
    """The file of `table` in the directory of `path` (or `path` itself if a directory): .csv or .csv.gz."""
    folder = path if path.is_dir() else path.parent
    for suffix in (".csv", ".csv.gz"):
        if (folder / f"{table}{suffix}").is_file():
            return folder / f"{table}{suffix}"
    return None


def read_table(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """A headerless PAI table with its documented column names (a first row equal to them is skipped)."""
    df = read_csv(path, header=None, dtype=str, keep_default_na=False, na_values=[""], skip_blank_lines=False)
    if df.shape[1] != len(columns):
        raise ValueError(
            f"{path}:1: expected {len(columns)} columns ({','.join(columns)}), found {df.shape[1]}"
        )
    df.columns = list(columns)
    first = 1
    if len(df) and [str(v).strip() for v in df.iloc[0]] == list(columns):
        df = df.iloc[1:].reset_index(drop=True)
        first = 2
    df.attrs["first_line"] = first
    return df


def read_pai(path: Path) -> TraceTable:
    """Parse the PAI task (+ job, group tag) tables; see the module docstring for the mapping."""
    task_file = table_path(path, "pai_task_table")
    if task_file is None:
        raise ValueError(f"{path}: no pai_task_table.csv(.gz) here; the PAI loader needs the task table")
    tasks = read_table(task_file, TASK_COLUMNS)
    first = tasks.attrs["first_line"]
    inst = numeric(task_file, tasks, "inst_num", first, allow_missing=True)
    plan_gpu = numeric(task_file, tasks, "plan_gpu", first, allow_missing=True)
    t_start = numeric(task_file, tasks, "start_time", first, allow_missing=True)
    t_end = numeric(task_file, tasks, "end_time", first, allow_missing=True)
    t_status = tasks["status"].to_numpy(dtype=object)
    fail_at(task_file, tasks["job_name"].isna().to_numpy(), first, "column 'job_name': missing value")
    fail_at(
        task_file,
        ~np.isin(t_status, STATUSES),
        first,
        f"unknown status (expected one of {', '.join(STATUSES)})",
        t_status,
    )
    fail_at(task_file, (plan_gpu > 0) & ~(inst > 0), first, "a GPU task needs inst_num > 0", inst)
    fail_at(task_file, plan_gpu < 0, first, "plan_gpu must be >= 0", plan_gpu)
    for i, g in enumerate(tasks["gpu_type"].to_numpy(dtype=object)):
        if isinstance(g, str) and g.strip() and g.strip() not in _KNOWN_TYPES:
            _resolve(task_file, first + i, "gpu_type", g)

    stamps = [t_start, t_end]
    job_file = table_path(task_file, "pai_job_table")
    jobs = None
    if job_file is not None:
        jobs = read_table(job_file, JOB_COLUMNS)
        jf = jobs.attrs["first_line"]
        j_start = numeric(job_file, jobs, "start_time", jf, allow_missing=True)
        stamps.append(j_start)
        stamps.append(numeric(job_file, jobs, "end_time", jf, allow_missing=True))
        j_status = jobs["status"].to_numpy(dtype=object)
        fail_at(
            job_file,
            ~np.isin(j_status, STATUSES),
            jf,
            f"unknown status (expected one of {', '.join(STATUSES)})",
            j_status,
        )
        fail_at(
            job_file,
            pd.Index(jobs["job_name"]).duplicated(),
            jf,
            "duplicate job_name",
            jobs["job_name"].to_numpy(),
        )
        jobs = pd.DataFrame(
            {
                "submit": np.where(j_start > 0, j_start, np.nan),
                "status": j_status,
                "inst_id": jobs["inst_id"].to_numpy(dtype=object),
            },
            index=jobs["job_name"].to_numpy(),
        )
    latest = max(float(np.nanmax(s)) if np.isfinite(s).any() else 0.0 for s in stamps)

    gpu = plan_gpu > 0
    started = gpu & (t_start > 0)
    frame = pd.DataFrame(
        {
            "job": tasks["job_name"].to_numpy(dtype=object),
            "demand": np.where(gpu, np.nan_to_num(inst) * np.nan_to_num(plan_gpu) / 100.0, 0.0),
            "gpu": gpu,
            "started": started,
            "start": np.where(started, t_start, np.nan),
            "end": np.where(started, np.where(t_end > 0, t_end, latest), np.nan),
            "unfinished": started & ~(t_end > 0),
            "failed": t_status == "Failed",
            "running": t_status == "Running",
            "task_start": np.where(t_start > 0, t_start, np.nan),
        }
    )
    g = frame.groupby("job", sort=False)
    per = pd.DataFrame(
        {
            "demand": g["demand"].sum(),
            "any_gpu": g["gpu"].any(),
            "any_started": g["started"].any(),
            "start": g["start"].min(),
            "end": g["end"].max(),
            "unfinished": g["unfinished"].any(),
            "failed": g["failed"].any(),
            "running": g["running"].any(),
            "first_task": g["task_start"].min(),
        }
    )
    status = np.where(
        per["failed"], "Failed", np.where(per["running"] | per["unfinished"], RUNNING, "Terminated")
    )
    submit = per["first_task"].to_numpy(dtype=float)
    gpu_types = np.empty(len(per), dtype=object)
    gpu_types[:] = [()] * len(per)
    missing_job_rows = 0
    if jobs is not None:
        joined = jobs.reindex(per.index)
        has = joined["status"].notna().to_numpy()
        missing_job_rows = int((~has).sum())
        status = np.where(has, joined["status"].to_numpy(dtype=object), status)
        submit = np.where(
            has & np.isfinite(joined["submit"].to_numpy(dtype=float)),
            joined["submit"].to_numpy(dtype=float),
            submit,
        )
        gpu_types = _group_types(task_file, joined["inst_id"].to_numpy(dtype=object), gpu_types)
    status = np.where(per["unfinished"].to_numpy() & (status != "Failed"), RUNNING, status).astype(object)

    keep = np.ones(len(per), dtype=bool)
    dropped = {}
    for reason, mask in (
        ("zero GPUs", ~per["any_gpu"].to_numpy()),
        ("never started", ~per["any_started"].to_numpy() | (status == "Waiting")),
    ):
        hit = keep & mask
        dropped[reason] = int(hit.sum())
        keep &= ~hit
    submit = np.where(np.isfinite(submit), submit, per["start"].to_numpy(dtype=float))
    num, milli, rounded = split_fraction(per["demand"].to_numpy(dtype=float)[keep])
    origin = float(np.nanmin(submit)) if np.isfinite(submit).any() else 0.0
    recorded = tasks["gpu_type"][gpu & tasks["gpu_type"].notna().to_numpy()]
    return TraceTable(
        format_name="alibaba-pai",
        source=str(task_file),
        rows_read=len(tasks),
        job_id=per.index.to_numpy(dtype=object)[keep],
        arrival_s=submit[keep] - origin,
        runtime_s=(per["end"] - per["start"]).to_numpy(dtype=float)[keep],
        num_gpus=num,
        gpu_milli=milli,
        status=status[keep],
        failed=np.isin(status[keep], FAILED_STATUSES),
        gpu_types=gpu_types[keep],
        dropped=dropped,
        mapping={
            "job": "one job_name (its GPU tasks run together)",
            "arrival": "job table start_time (submission), else first task start; s since the earliest",
            "runtime": "last GPU task end_time - first GPU task start_time",
            "gpus": "sum of inst_num x plan_gpu/100; <= 1: fraction of one GPU; > 1: ceil whole GPUs",
            "gpu_types": "group tag gpu_type_spec (task gpu_type = assigned type, not mapped)",
            "status": "job status (Failed = failed/killed)",
            "priority": "0 (not in the trace)",
        },
        extra={
            "tables": [
                str(p) for p in (task_file, job_file, table_path(task_file, "pai_group_tag_table")) if p
            ],
            "jobs_without_job_table_row": missing_job_rows,
            "fractional_total_rounded_up": rounded,
            "recorded_gpu_type_counts": {str(k): int(v) for k, v in recorded.value_counts().items()},
        },
    )


_KNOWN_TYPES = ("P100", "T4", "V100", "V100M32", "MISC")


def _resolve(path: Path, line: int, column: str, name: str) -> str:
    try:
        return resolve_gpu_type(name.strip())
    except ValueError as e:
        raise ValueError(f"{path}:{line}: column {column!r}: {e}") from None


def _group_types(task_file: Path, inst_ids: np.ndarray, default: np.ndarray) -> np.ndarray:
    group_file = table_path(task_file, "pai_group_tag_table")
    if group_file is None:
        return default
    groups = read_table(group_file, GROUP_COLUMNS)
    first = groups.attrs["first_line"]
    spec: dict[str, tuple[str, ...]] = {}
    for i, (inst_id, text) in enumerate(zip(groups["inst_id"], groups["gpu_type_spec"], strict=True)):
        if isinstance(text, str) and text.strip():
            spec[inst_id] = tuple(
                dict.fromkeys(
                    _resolve(group_file, first + i, "gpu_type_spec", t) for t in text.split("|") if t.strip()
                )
            )
    out = default.copy()
    for i, inst_id in enumerate(inst_ids):
        if inst_id in spec:
            out[i] = spec[inst_id]
    return out


def is_machine_spec(first_line: str) -> bool:
    fields = [f.strip() for f in first_line.split(",")]
    return len(fields) == len(MACHINE_COLUMNS) and (
        fields[1] in (*_KNOWN_TYPES, "CPU") or fields == list(MACHINE_COLUMNS)
    )


def read_machine_spec(path: Path) -> ClusterSpec:
    """pai_machine_spec (machine,gpu_type,cap_cpu,cap_mem,cap_gpu) -> ClusterSpec; CPU machines skipped."""
    df = read_table(path, MACHINE_COLUMNS)
    first = df.attrs["first_line"]
    gpus = numeric(path, df, "cap_gpu", first, integer=True).astype(np.int64)
    fail_at(path, gpus < 0, first, "cap_gpu must be >= 0", gpus)
    nodes = []
    for i in np.flatnonzero(gpus > 0):
        name = str(df["gpu_type"].iat[i]).strip()
        if name == "CPU":
            raise ValueError(f"{path}:{first + i}: a CPU machine with {gpus[i]} GPUs")
        gpu_type = _resolve(path, first + i, "gpu_type", name)
        nodes.append(NodeSpec(str(df["machine"].iat[i]), gpu_type, int(gpus[i]), CATALOG[gpu_type].mem_gb))
    if not nodes:
        raise ValueError(f"{path}: no machine with GPUs")
    return ClusterSpec(path.name, tuple(nodes))
