"""The plain jobs CSV loader: one job per row, every bad value reported with file and line.

Columns: required `arrival_time,runtime,gpus` (seconds, reference-GPU seconds, GPUs); optional `job_id`,
`priority` (integer, default 0), `gpu_mem_gb` (per GPU, default 0), `gpu_types` (`|`-separated catalog names or
aliases, default any), `estimate` (user runtime estimate in seconds, default none), and the duration rule's two
flags (sim/placement.py's duration formula, via each job's Pace; 1/0 or true/false): `runtime_includes_spread` (default 0: the multi-node factor applies;
1 for durations recorded on the real placement, as in a trace) and `speed_scaled` (default 1; 0 for a service
whose lifetime does not depend on GPU speed), and `job_type` (a model of the --job_types throughput matrix, e.g.
`ResNet-50 (batch size 64)`; needs --job_types; rows without one get one drawn, workloads/job_types.py).
`gpus` below 1 asks for
that fraction of one GPU (0.5 -> num_gpus=1, gpu_milli=500); above 1 it must be a whole number. Jobs are sorted
by arrival (stable) and arrival times are rebased so the first is 0; the shift is in report["arrival_offset_s"].
Times must lie in sim/limits.py's ranges: runtime up to MAX_RUNTIME_S, estimate up to MAX_ESTIMATE_S, arrival up to
MAX_ARRIVAL_S after the first job's. A gzip-compressed file (any name) is read as the CSV it holds.
A missing job_id becomes the row's 0-based index among the data rows (file order); job_ids must be unique.
Any other column, or a column named twice, is an error (a misspelled optional column would be ignored).
"""

from __future__ import annotations

import contextlib
import csv
import difflib
import functools
import gzip
import io
import math
import zlib
from collections.abc import Iterator
from pathlib import Path

from sim.catalog import resolve_gpu_type
from sim.job import FULL_GPU_MILLI, Job, Workload
from sim.limits import MAX_ARRIVAL_S, MAX_ESTIMATE_S, MAX_RUNTIME_S, time_problem

REQUIRED_COLUMNS = ("arrival_time", "runtime", "gpus")
OPTIONAL_COLUMNS = (
    "job_id",
    "priority",
    "gpu_mem_gb",
    "gpu_types",
    "estimate",
    "runtime_includes_spread",
    "speed_scaled",
    "job_type",
)
_FORM = f"{','.join(REQUIRED_COLUMNS)}[,{','.join(OPTIONAL_COLUMNS)}]"


def load_jobs_csv(path: str | Path) -> Workload:
    """Read a jobs CSV (see the module docstring); raises ValueError naming the file, line and problem."""
    path = Path(path)
    rows: list[dict] = []
    lines: list[int] = []
    with _open_csv(path) as f:
        reader = csv.DictReader(f)
        if not reader.fieldnames:
            raise ValueError(f"{path}:1: empty file; expected a header {_FORM}")
        columns = reader.fieldnames = [c.strip() for c in reader.fieldnames]
        _check_header(path, columns)
        missing = [c for c in REQUIRED_COLUMNS if c not in columns]
        if missing:
            raise ValueError(f"{path}:1: missing required column(s) {', '.join(missing)}; expected {_FORM}")
        seen_ids: dict[str, int] = {}
        for index, row in enumerate(reader):
            line_no = reader.line_num
            try:
                fields = _parse_row(row, index)
            except ValueError as e:
                raise ValueError(f"{path}:{line_no}: {e}") from None
            job_id = fields["job_id"]
            if job_id in seen_ids:
                raise ValueError(
                    f"{path}:{line_no}: duplicate job_id {job_id!r} (first on line {seen_ids[job_id]})"
                )
            seen_ids[job_id] = line_no
            rows.append(fields)
            lines.append(line_no)
    if not rows:
        raise ValueError(f"{path}:2: empty file: no job rows after the header")
    first = min(range(len(rows)), key=lambda i: rows[i]["arrival_s"])
    offset_s = rows[first]["arrival_s"]
    for r, line_no in zip(rows, lines, strict=True):
        what = f"arrival_time (after the first job's, line {lines[first]})"
        problem = time_problem(what, r["arrival_s"] - offset_s, MAX_ARRIVAL_S)
        if problem:
            raise ValueError(f"{path}:{line_no}: {problem}")
    rows.sort(key=lambda r: r["arrival_s"])
    for r in rows:
        r["arrival_s"] -= offset_s
    jobs = tuple(Job(**r) for r in rows)
    report = {"source": str(path), "rows_read": len(jobs), "arrival_offset_s": offset_s}
    return Workload(path.name, jobs, report)


@contextlib.contextmanager
def _open_csv(path: Path) -> Iterator[io.TextIOBase]:
    """The file as text (UTF-8, a BOM is fine), gunzipped when it is gzip-compressed; a damaged .gz names the file."""
    with path.open("rb") as probe:
        compressed = probe.read(2) == b"\x1f\x8b"
    if not compressed:
        with path.open(newline="", encoding="utf-8-sig") as f:
            yield f
        return
    try:
        with gzip.open(path, "rt", newline="", encoding="utf-8-sig") as f:
            yield f
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise ValueError(f"{path}: truncated or corrupt gzip file ({e})") from None
    except UnicodeDecodeError:
        raise ValueError(
            f"{path}: gzip-compressed, but what it holds is not UTF-8 text; save it as UTF-8"
        ) from None


def _check_header(path: Path, columns: list[str]) -> None:
    """Refuse duplicate and unknown columns: a misspelled optional column would otherwise be silently ignored."""
    duplicates = sorted({c for c in columns if columns.count(c) > 1})
    if duplicates:
        raise ValueError(
            f"{path}:1: duplicate column(s) {', '.join(duplicates)}; each column may appear once"
        )
    accepted = REQUIRED_COLUMNS + OPTIONAL_COLUMNS
    unknown = [c for c in columns if c not in accepted]
    if unknown:
        named = []
        for c in unknown:
            close = difflib.get_close_matches(c.lower(), accepted, n=1)
            named.append(f"{c!r} (did you mean {close[0]}?)" if close else repr(c))
        raise ValueError(
            f"{path}:1: unknown column(s) {', '.join(named)}; accepted columns: {', '.join(accepted)}"
        )


def _parse_row(row: dict, index: int) -> dict:
    """The Job fields of one row (keyword arguments of Job), or ValueError naming the problem."""
    if None in row:
        raise ValueError(f"more fields than the {len(row) - 1} header columns")
    arrival_s = _number(row, "arrival_time")
    runtime_s = _number(row, "runtime")
    if runtime_s <= 0.0:
        raise ValueError(f"runtime must be > 0 seconds, got {row['runtime']!r}")
    problem = time_problem("runtime", runtime_s, MAX_RUNTIME_S)
    if problem:
        raise ValueError(problem)
    gpus = _number(row, "gpus")
    if gpus <= 0.0:
        raise ValueError(f"gpus must be > 0, got {row['gpus']!r}")
    if gpus < 1.0:
        num_gpus, gpu_milli = 1, round(gpus * FULL_GPU_MILLI)
        if gpu_milli < 1:
            raise ValueError(f"gpus {row['gpus']!r} is below 1/{FULL_GPU_MILLI} of a GPU")
    elif gpus.is_integer():
        num_gpus, gpu_milli = int(gpus), FULL_GPU_MILLI
    else:
        raise ValueError(f"gpus above 1 must be a whole number, got {row['gpus']!r}")
    job_id = (row.get("job_id") or "").strip() or str(index)
    priority = _optional(row, "priority", 0, integer=True)
    gpu_mem_gb = _optional(row, "gpu_mem_gb", 0.0)
    if gpu_mem_gb < 0.0:
        raise ValueError(f"gpu_mem_gb must be >= 0, got {row['gpu_mem_gb']!r}")
    estimate_s = _optional(row, "estimate", None)
    if estimate_s is not None and estimate_s <= 0.0:
        raise ValueError(f"estimate must be > 0 seconds, got {row['estimate']!r}")
    problem = None if estimate_s is None else time_problem("estimate", estimate_s, MAX_ESTIMATE_S)
    if problem:
        raise ValueError(problem)
    gpu_types = _gpu_types((row.get("gpu_types") or "").strip())
    return {
        "job_id": job_id,
        "arrival_s": arrival_s,
        "runtime_s": runtime_s,
        "num_gpus": num_gpus,
        "gpu_mem_gb": gpu_mem_gb,
        "gpu_milli": gpu_milli,
        "gpu_types": gpu_types,
        "priority": priority,
        "estimate_s": estimate_s,
        "runtime_includes_spread": _flag(row, "runtime_includes_spread", False),
        "speed_scaled": _flag(row, "speed_scaled", True),
        "job_type": (row.get("job_type") or "").strip(),
    }


_FLAGS = {"1": True, "true": True, "0": False, "false": False}


def _flag(row: dict, column: str, default: bool) -> bool:
    text = (row.get(column) or "").strip().lower()
    if not text:
        return default
    if text not in _FLAGS:
        raise ValueError(f"{column} must be 1/0 or true/false, got {row[column]!r}")
    return _FLAGS[text]


@functools.cache
def _gpu_types(text: str) -> tuple[str, ...]:
    """Canonical names of a `|`-separated list, duplicates dropped (cached: files repeat a few lists)."""
    return tuple(dict.fromkeys(resolve_gpu_type(t) for t in text.split("|"))) if text else ()


def _number(row: dict, column: str) -> float:
    text = row.get(column)
    if text is None or not text.strip():
        raise ValueError(f"missing value in column {column!r}")
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"non-numeric {column} {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"non-finite {column} {text!r}")
    return value


def _optional(row: dict, column: str, default: float | None, integer: bool = False) -> float | int | None:
    text = (row.get(column) or "").strip()
    if not text:
        return default
    value = _number(row, column)
    if integer:
        if not value.is_integer():
            raise ValueError(f"{column} must be an integer, got {text!r}")
        return int(value)
    return value
