"""Microsoft Philly (msr-fiddle/philly-traces): the `cluster_job_log` JSON as jobs, `cluster_machine_list` as nodes.

Job log (README of the release): a JSON list of {status: Pass|Killed|Failed, vc, jobid, attempts: [{start_time,
end_time, detail: [{ip, gpus: [...]}]}], submitted_time, user}, times `YYYY-MM-DD HH:MM:SS` (naive local time,
read as logged). One Job per jobid. arrival = submitted_time (s since the earliest submitted_time, the time
origin); runtime = sum over attempts of end_time - start_time (the time the job held GPUs; the gaps between
retries are queueing, not run time); num_gpus = the most GPUs any attempt held (GPU names over its `detail`
entries); trace_status = status (Killed and Failed count as failed/killed); priority 0. Dropped: no attempts
('never started'), attempts without any start time ('no attempt times'), no GPUs ('zero GPUs'). An attempt
missing only one time is skipped and counted; a last attempt with end_time None ran to the snapshot and is replayed
up to the latest time in the log ('Running').

Machine list: `machineId, number of GPUs, single GPU mem` (memory like " 12GB"). The file names no GPU model;
12 GB GPUs are taken as K80 and 24 GB ones as P100-class (Pascal, the closest catalog entry to the P40 that has
24 GB), keeping each node's recorded GPU memory. `revised_machine_list.csv` (`,machineId,number of GPUs`, GPU
counts re-inferred from utilisation by the Helios authors) is read with the memory of the same machine in a
`cluster_machine_list` beside it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np

from sim.cluster_spec import ClusterSpec, NodeSpec
from workloads.traces.common import RUNNING, TraceTable, open_text, read_csv, require_columns

TIME_FORMAT = "%Y-%m-%d %H:%M:%S"
FAILED_STATUSES = ("Killed", "Failed")
REQUIRED_KEYS = ("jobid", "status", "attempts", "submitted_time")
MEMORY_TYPE = {12.0: "K80", 24.0: "P100"}  # GPU memory (GB) -> catalog type; Philly lists memory, not models
MACHINE_HEADER = "machineId, number of GPUs, single GPU mem"
REVISED_HEADER = ",machineId,number of GPUs"
JOB_LOG = "cluster_job_log"
MACHINE_LIST = "cluster_machine_list"
REVISED_LIST = "revised_machine_list.csv"


def is_machine_list(header: str) -> bool:
    return header.replace(" ", "").lower() == MACHINE_HEADER.replace(" ", "").lower()


def is_revised_list(header: str) -> bool:
    return header.replace(" ", "").lower() == REVISED_HEADER.replace(" ", "").lower()


def read_job_log(path: Path) -> TraceTable:
    """Parse a Philly cluster_job_log into a TraceTable; see the module docstring for the mapping."""
    if path.is_dir():
        path = path / JOB_LOG
    with open_text(path) as f:
        text = f.read()
    try:
        log = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{e.lineno}: invalid JSON: {e.msg}") from None
    if not isinstance(log, list):
        raise ValueError(f"{path}:1: expected a JSON list of jobs, got {type(log).__name__}")
    jobs = [_parse_job(path, text, job, i) for i, job in enumerate(log)]
    times = [
        t
        for j in jobs
        for t in (j.submitted_s, *(a[0] for a in j.attempts), *(a[1] for a in j.attempts))
        if t is not None
    ]
    latest_s = max(times, default=0.0)
    origin_s = min((j.submitted_s for j in jobs), default=0.0)
    ids, arrival, runtime, gpus, status = [], [], [], [], []
    dropped = {"never started": 0, "no attempt times": 0, "zero GPUs": 0}
    skipped = censored = 0
    for j in jobs:
        timed = []
        for k, (start, end, num) in enumerate(j.attempts):
            last = k == len(j.attempts) - 1
            if start is None or (end is None and not last):
                skipped += 1  # "an attempt may have no recorded start_time and/or end_time" (logging error)
                continue
            timed.append((start, latest_s if end is None else end, num, end is None))
        if not j.attempts:
            dropped["never started"] += 1
        elif not timed:
            dropped["no attempt times"] += 1
        elif max(t[2] for t in timed) == 0:
            dropped["zero GPUs"] += 1
        else:
            running = timed[-1][3]
            censored += running
            ids.append(j.jobid)
            arrival.append(j.submitted_s - origin_s)
            runtime.append(sum(end - start for start, end, _, _ in timed))
            gpus.append(max(t[2] for t in timed))
            status.append(RUNNING if running else j.status)
    status_arr = np.asarray(status, dtype=object)
    return TraceTable(
        format_name="philly",
        source=str(path),
        rows_read=len(log),
        job_id=np.asarray(ids, dtype=object),
        arrival_s=np.asarray(arrival, dtype=float),
        runtime_s=np.asarray(runtime, dtype=float),
        num_gpus=np.asarray(gpus, dtype=np.int64),
        gpu_milli=np.full(len(ids), 1000, dtype=np.int64),
        status=status_arr,
        failed=np.isin(status_arr, FAILED_STATUSES),
        dropped=dropped,
        mapping={
            "job": "one jobid (all its attempts)",
            "arrival": "submitted_time (s since the earliest submitted_time)",
            "runtime": "sum of attempts' end_time - start_time (retries' gaps are queueing)",
            "gpus": "most GPUs held by one attempt (GPU names over its detail entries)",
            "status": "status (Killed, Failed = failed/killed); Running if the last attempt has no end_time",
            "priority": "0 (not in the trace)",
        },
        extra={"attempts_skipped_missing_time": skipped, "censored_at_trace_end": censored},
    )


@dataclass(frozen=True, slots=True)
class _PhillyJob:
    jobid: str
    status: str
    submitted_s: float
    attempts: tuple[tuple[float | None, float | None, int], ...]  # (start_s, end_s, GPUs)


def _parse_job(path: Path, text: str, job, index: int) -> _PhillyJob:
    """Validate one job object; errors name the line of its jobid in the file."""

    def fail(problem: str) -> None:
        jobid = job.get("jobid") if isinstance(job, dict) else None
        pos = text.find(json.dumps(jobid)) if jobid is not None else -1
        line = text.count("\n", 0, pos) + 1 if pos >= 0 else "?"
        raise ValueError(f"{path}:{line}: job #{index}{f' ({jobid})' if jobid else ''}: {problem}")

    if not isinstance(job, dict):
        fail("not a JSON object")
    missing = [k for k in REQUIRED_KEYS if k not in job]
    if missing:
        fail(f"missing key(s) {', '.join(missing)}; a job needs {', '.join(REQUIRED_KEYS)}")
    attempts = job["attempts"] or []
    if not isinstance(attempts, list):
        fail("'attempts' is not a list")
    parsed = []
    for k, attempt in enumerate(attempts):
        if not isinstance(attempt, dict):
            fail(f"attempt {k} is not a JSON object")
        start = _time(attempt.get("start_time"), f"attempt {k} start_time", fail)
        end = _time(attempt.get("end_time"), f"attempt {k} end_time", fail)
        if start is not None and end is not None and end < start:
            fail(f"attempt {k}: end_time before start_time")
        detail = attempt.get("detail") or []
        if not isinstance(detail, list) or not all(
            isinstance(d, dict) and isinstance(d.get("gpus", []), list) for d in detail
        ):
            fail(f"attempt {k}: 'detail' must be a list of {{ip, gpus: [...]}}")
        parsed.append((start, end, sum(len(d.get("gpus", [])) for d in detail)))
    submitted = _time(job["submitted_time"], "submitted_time", fail)
    if submitted is None:
        fail("missing submitted_time")
    return _PhillyJob(str(job["jobid"]), str(job["status"]), submitted, tuple(parsed))


def _time(value, what: str, fail) -> float | None:
    if value is None or value == "" or value == "None":
        return None
    try:
        return (datetime.strptime(str(value), TIME_FORMAT) - _EPOCH).total_seconds()
    except ValueError:
        fail(f"bad {what} {value!r} (expected YYYY-MM-DD HH:MM:SS)")


_EPOCH = datetime(1970, 1, 1)


def read_machine_list(path: Path) -> ClusterSpec:
    """Philly cluster_machine_list (or revised_machine_list.csv with the original beside it) -> ClusterSpec."""
    df = read_csv(
        path, dtype=str, skipinitialspace=True, keep_default_na=False, na_values=[""], skip_blank_lines=False
    )
    df.columns = [c.strip() for c in df.columns]
    revised = "single GPU mem" not in df.columns
    require_columns(path, df.columns, ("machineId", "number of GPUs"), MACHINE_HEADER)
    memory: dict[str, float] = {}
    if revised:
        original = path.parent / MACHINE_LIST
        if not original.is_file():
            raise ValueError(
                f"{path}: a revised machine list gives no GPU memory; put the original {MACHINE_LIST} beside it"
            )
        memory = _all_memory(original)
    nodes = []
    for i, (machine, count) in enumerate(zip(df["machineId"], df["number of GPUs"], strict=True)):
        line = i + 2
        try:
            num = int(str(count).strip())
        except ValueError:
            raise ValueError(f"{path}:{line}: column 'number of GPUs': non-integer value {count!r}") from None
        if num < 0:
            raise ValueError(f"{path}:{line}: number of GPUs must be >= 0 (got {num})")
        if num == 0:
            continue
        machine = str(machine).strip()
        if revised:
            if machine not in memory:
                raise ValueError(
                    f"{path}:{line}: machine {machine!r} is not in {MACHINE_LIST} (no GPU memory)"
                )
            mem_gb = memory[machine]
        else:
            mem_gb = _memory_gb(path, line, df["single GPU mem"].iat[i])
        if mem_gb not in MEMORY_TYPE:
            raise ValueError(f"{path}:{line}: unknown Philly GPU memory {mem_gb:g} GB (known: 12, 24)")
        nodes.append(NodeSpec(machine, MEMORY_TYPE[mem_gb], num, mem_gb))
    if not nodes:
        raise ValueError(f"{path}: no machine with GPUs")
    return ClusterSpec(path.name, tuple(nodes))


def _all_memory(original: Path) -> dict[str, float]:
    df = read_csv(original, dtype=str, skipinitialspace=True, keep_default_na=False, na_values=[""])
    df.columns = [c.strip() for c in df.columns]
    return {
        str(m).strip(): _memory_gb(original, i + 2, v)
        for i, (m, v) in enumerate(zip(df["machineId"], df["single GPU mem"], strict=True))
    }


def _memory_gb(path: Path, line: int, text) -> float:
    value = str(text).strip().upper()
    try:
        return float(value.removesuffix("GB"))
    except ValueError:
        raise ValueError(
            f"{path}:{line}: column 'single GPU mem': bad value {text!r} (expected like 12GB)"
        ) from None
