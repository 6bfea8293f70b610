"""Microsoft ITP GPU-cluster traces as released with ElasticFlow (`job_id,submission_time,duration,num_gpu`).

One Job per row. arrival = submission_time (s since the start of collection, the time origin); runtime = duration
(the run time only: the trace has no queueing delay); num_gpus = num_gpu whole GPUs; no status, user, GPU type or
memory in the trace (trace_status "", any type, priority 0). A path may be one cluster file or a directory, whose
`cluster*.csv` files are concatenated (all clusters share the collection origin). Rows with num_gpu 0 are
dropped as 'zero GPUs'. No cluster size is given, so the default cluster rule applies.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from workloads.traces.common import TraceTable, fail_at, numeric, read_csv, require_columns

COLUMNS = ("job_id", "submission_time", "duration", "num_gpu")
FORM = ",".join(COLUMNS)


def trace_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.name.startswith("cluster") and ".csv" in p.name)
        if not files:
            raise ValueError(f"{path}: directory without cluster*.csv files")
        return files
    return [path]


def read_itp(path: Path) -> TraceTable:
    """Parse one ITP cluster CSV or a directory of them into a TraceTable."""
    ids, arrival, runtime, gpus = [], [], [], []
    rows = 0
    per_file_jobs: dict[str, int] = {}
    for file in trace_files(path):
        df = read_csv(
            file, dtype={"job_id": str}, keep_default_na=False, na_values=[""], skip_blank_lines=False
        )
        df.columns = [c.strip() for c in df.columns]
        require_columns(file, df.columns, COLUMNS, FORM)
        sub = numeric(file, df, "submission_time", 2)
        dur = numeric(file, df, "duration", 2)
        num = numeric(file, df, "num_gpu", 2, integer=True)
        fail_at(file, num < 0, 2, "num_gpu must be >= 0", num)
        fail_at(file, dur < 0, 2, "duration must be >= 0", dur)
        fail_at(file, df["job_id"].isna().to_numpy(), 2, "column 'job_id': missing value")
        ids.append(df["job_id"].to_numpy(dtype=object))
        arrival.append(sub)
        runtime.append(dur)
        gpus.append(num.astype(np.int64))
        rows += len(df)
        per_file_jobs[file.name] = len(df)
    num_gpus = np.concatenate(gpus)
    keep = num_gpus > 0
    return TraceTable(
        format_name="itp",
        source=str(path),
        rows_read=rows,
        job_id=np.concatenate(ids)[keep],
        arrival_s=np.concatenate(arrival)[keep],
        runtime_s=np.concatenate(runtime)[keep],
        num_gpus=num_gpus[keep],
        gpu_milli=np.full(int(keep.sum()), 1000, dtype=np.int64),
        status=np.full(int(keep.sum()), "", dtype=object),
        failed=np.zeros(int(keep.sum()), dtype=bool),
        dropped={"zero GPUs": int((~keep).sum())},
        mapping={
            "job": "one row",
            "arrival": "submission_time (s since the start of collection)",
            "runtime": "duration (run time only)",
            "gpus": "num_gpu whole GPUs",
            "status": '"" (not in the trace)',
            "priority": "0 (not in the trace)",
        },
        extra={"files": per_file_jobs},
    )
