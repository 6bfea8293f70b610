"""Standard Workload Format (Parallel Workloads Archive, .swf or .swf.gz): HPC jobs mapped to GPU jobs.

One Job per data line (18 whitespace-separated fields, -1 = unknown). arrival = field 2 submit time (s since the
header's UnixStartTime, the time origin); runtime = field 4 run time; processors = max(field 5 allocated, field 8
requested) where known (1.6 % of RICC-2010 lines, 6,974 of 447,794, record fewer allocated than requested
processors, mostly by a factor 8, 4 or 2 (1 vs 8, 1 vs 4, 16 vs 128): the allocated field holds a node
count there); num_gpus = processors x cfg.cpu_job_gpus (the CPU->GPU mapping: one GPU per processor by default,
so a trace's own machine of MaxProcs processors becomes MaxProcs GPUs); estimate_s = field 9 requested
time (the user estimate EASY backfilling uses) when known; status = field 11 (1 Completed, 0 Failed,
5 Cancelled -> failed/killed; -1 unknown -> ""); priority 0. Counted skips (the format documents these values):
run time -1 ('unknown run time'), processors unknown ('unknown processors') or 0 ('zero GPUs'), submit -1
('unknown submit time'), partial-execution records of checkpointed jobs, status 2-4 ('partial-execution
record', the job's summary line is kept). The default cluster is the header's machine: MaxNodes nodes of
MaxProcs/MaxNodes processors (x cpu_job_gpus GPUs) of the reference type.
"""

from __future__ import annotations

import re
import zlib
from pathlib import Path

import numpy as np
import pandas as pd

from sim.cluster_spec import ClusterSpec
from workloads.traces.common import TraceTable, open_text, reference_nodes

NUM_FIELDS = 18
STATUS_NAMES = {1: "Completed", 0: "Failed", 5: "Cancelled", -1: ""}
PARTIAL_STATUSES = (2, 3, 4)
_HEADER_ITEM = re.compile(r"^\s*;\s*([A-Za-z][A-Za-z0-9_ ]*?)\s*:\s*(.*?)\s*$")


def read_header(path: Path) -> dict[str, str]:
    """The `; Key: value` lines before the first job line (first occurrence of each key; Note/Queue lines kept once)."""
    header: dict[str, str] = {}
    with open_text(path) as f:
        for line in f:
            stripped = line.strip()
            if not stripped:
                continue
            if not stripped.startswith(";"):
                break
            m = _HEADER_ITEM.match(stripped)
            if m and m.group(1) not in header:
                header[m.group(1)] = m.group(2)
    return header


def header_int(header: dict[str, str], key: str) -> int | None:
    text = header.get(key, "").split()
    try:
        value = int(text[0]) if text else None
    except ValueError:
        return None
    return value if value is not None and value > 0 else None


def read_swf(path: Path, cpu_job_gpus: int) -> TraceTable:
    """Parse an SWF log into a TraceTable; see the module docstring for the mapping."""
    if cpu_job_gpus <= 0:
        raise ValueError(f"cpu_job_gpus must be > 0, got {cpu_job_gpus}")
    header = read_header(path)
    try:
        df = pd.read_csv(path, sep=r"\s+", comment=";", header=None, compression="infer", dtype=float)
    except (EOFError, OSError, zlib.error) as e:
        raise ValueError(f"{path}: truncated or corrupt gzip file ({e})") from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: no job lines") from None
    except (pd.errors.ParserError, ValueError):
        _raise_first_bad_line(path)
    if df.shape[1] != NUM_FIELDS or not np.isfinite(df.to_numpy(dtype=float)).all():
        _raise_first_bad_line(path)
    f = df.to_numpy(dtype=float)
    job_no, submit, run, alloc, req_procs = f[:, 0], f[:, 1], f[:, 3], f[:, 4], f[:, 7]
    req_time, status = f[:, 8], f[:, 10].astype(np.int64)
    bad_status = ~np.isin(status, [*STATUS_NAMES, *PARTIAL_STATUSES])
    if bad_status.any():
        _raise_first_bad_line(path, "status field 11 must be one of -1, 0, 1, 2, 3, 4, 5")
    unknown = np.where((alloc == 0) | (req_procs == 0), 0.0, -1.0)  # 0 = known to be zero, -1 = unknown
    procs = np.where((alloc > 0) | (req_procs > 0), np.maximum(alloc, req_procs), unknown)
    keep = np.ones(len(f), dtype=bool)
    dropped: dict[str, int] = {}
    for reason, mask in (
        ("partial-execution record", np.isin(status, PARTIAL_STATUSES)),
        ("unknown submit time", submit < 0),
        ("unknown run time", run < 0),
        ("unknown processors", procs < 0),
        ("zero GPUs", procs == 0),
    ):
        hit = keep & mask
        dropped[reason] = int(hit.sum())
        keep &= ~hit
    k = np.flatnonzero(keep)
    names = np.array([STATUS_NAMES.get(s, "") for s in status[k].tolist()], dtype=object)
    numbers = job_no[k]
    # the job numbers' int() as one array where exact (below 2**53: every log), and the count of each number's
    # earlier lines (pandas' groupby: a third of the parse) only when some number is reused
    if (np.abs(numbers) < 2**53).all():
        whole = numbers.astype(np.int64)
        ids = pd.Series(list(map(str, whole.tolist())), dtype=object)
        ordered = np.sort(whole)  # (np.unique takes ten times as long)
        reused = bool((ordered[1:] == ordered[:-1]).any())
    else:
        ids = pd.Series([str(int(x)) for x in numbers], dtype=object)
        reused = True
    repeat = ids.groupby(ids).cumcount().to_numpy() if reused else np.zeros(len(k), dtype=np.int64)
    if repeat.any():  # a reused job number stays one job per line: later lines get a #n suffix (counted)
        ids = ids.where(repeat == 0, ids + "#" + pd.Series(repeat).astype(str))
    return TraceTable(
        format_name="swf",
        source=str(path),
        rows_read=len(f),
        job_id=ids.to_numpy(dtype=object),
        arrival_s=submit[k],
        runtime_s=run[k],
        num_gpus=(procs[k] * cpu_job_gpus).astype(np.int64),
        gpu_milli=np.full(len(k), 1000, dtype=np.int64),
        status=names,
        failed=np.isin(status[k], (0, 5)),
        estimate_s=np.where(req_time[k] > 0, req_time[k], np.nan),
        dropped=dropped,
        mapping={
            "job": "one SWF job line",
            "arrival": "field 2 submit time (s since the header's UnixStartTime)",
            "runtime": "field 4 run time",
            "gpus": f"processors = max(field 5 allocated, field 8 requested) x cpu_job_gpus={cpu_job_gpus}",
            "estimate": "field 9 requested time (none when -1)",
            "status": "field 11: 1 Completed, 0 Failed, 5 Cancelled (failed/killed), -1 unknown",
            "priority": "0 (SWF has none)",
        },
        extra={
            "swf_header": {
                k_: header[k_]
                for k_ in ("MaxJobs", "MaxRecords", "MaxNodes", "MaxProcs", "UnixStartTime", "TimeZoneString")
                if k_ in header
            },
            "cpu_job_gpus": cpu_job_gpus,
            "reused_job_numbers": int((repeat > 0).sum()),
        },
    )


def header_cluster(path: Path, cpu_job_gpus: int) -> tuple[ClusterSpec, str] | None:
    """The log's own machine as reference-type nodes, from MaxNodes/MaxProcs, or None when the header lacks them."""
    header = read_header(path)
    nodes, procs = header_int(header, "MaxNodes"), header_int(header, "MaxProcs")
    if procs is None and nodes is None:
        return None
    if procs is None:
        procs = nodes
    if nodes is None or procs % nodes:
        nodes, per_node = procs, 1
    else:
        per_node = procs // nodes
    gpus_per_node = per_node * cpu_job_gpus
    name = f"swf:{nodes}xA100-80GB:{gpus_per_node}"
    note = (
        f"default cluster from the SWF header: MaxNodes={header.get('MaxNodes', '-')}, "
        f"MaxProcs={header.get('MaxProcs', '-')} -> {nodes} nodes x {gpus_per_node} GPUs of the reference type "
        f"(cpu_job_gpus={cpu_job_gpus} per processor), i.e. the log's own machine"
    )
    return reference_nodes(nodes, gpus_per_node, name), note


def _raise_first_bad_line(path: Path, problem: str | None = None) -> None:
    """Scan the file line by line for the first data line that is not 18 numbers (slow path, errors only)."""
    with open_text(path) as f:
        for line_no, line in enumerate(f, start=1):
            text = line.split(";", 1)[0].strip()
            if not text:
                continue
            tokens = text.split()
            if len(tokens) != NUM_FIELDS:
                raise ValueError(f"{path}:{line_no}: expected {NUM_FIELDS} fields, found {len(tokens)}")
            for i, tok in enumerate(tokens, start=1):
                try:
                    value = float(tok)
                except ValueError:
                    raise ValueError(f"{path}:{line_no}: field {i}: non-numeric value {tok!r}") from None
                if not np.isfinite(value):
                    raise ValueError(f"{path}:{line_no}: field {i}: non-finite value {tok!r}")
            if problem and int(float(tokens[10])) not in (*STATUS_NAMES, *PARTIAL_STATUSES):
                raise ValueError(f"{path}:{line_no}: {problem} (got {tokens[10]!r})")
    raise ValueError(f"{path}: malformed SWF data ({problem or 'unparseable'})")
