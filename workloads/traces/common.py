"""What every trace format shares: the column table parsers fill, the common filters, the report, the default cluster.

A format module reads its files into a `TraceTable` (one entry per candidate job, numpy columns, times in seconds
since the trace's own time origin) and counts the rows it had to drop for format reasons. `finish` then applies,
in this order, the filters every format shares and counts each drop under exactly one reason:

    zero runtime -> outside window (--trace_start/--trace_end, on trace time) -> failed/killed excluded
    -> sort by arrival (stable) -> beyond max_jobs -> round fractions (opt-in) -> rebase to 0 -> / time_scale
"""

from __future__ import annotations

import gzip
import math
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path

import numpy as np
import pandas as pd

from config import WorkloadConfig
from sim.catalog import CATALOG, REFERENCE_TYPE
from sim.cluster_spec import ClusterSpec, NodeSpec
from sim.job import FULL_GPU_MILLI, Job, Workload, total_gpu_seconds
from sim.limits import MAX_ARRIVAL_S, MAX_ESTIMATE_S, MAX_RUNTIME_S, time_problem
from sim.load import offered_load_factor

DEFAULT_GPUS_PER_NODE = 8
DEFAULT_TARGET_LOAD = 0.8  # offered load of the default cluster (the medium difficulty preset's load factor)
LARGEST_JOB_SHARE_INV = 2  # the default cluster holds at least this many copies of the largest job
OUTLIER_FACTOR = (
    64  # a job asking more than this x the 99th-percentile GPU demand does not size a default cluster
)
RUNNING = "Running"  # trace_status of a job still running when its trace ends (replayed up to that end)


@dataclass(frozen=True)
class TraceTable:
    """Candidate jobs of one trace, one entry per job, before the common filters.

    `arrival_s` is in seconds since the format's time origin (the same axis --trace_start/--trace_end use).
    `runtime_s` is the recorded time the job held its GPUs. `gpu_milli` < 1000 only with num_gpus == 1.
    `failed` marks statuses that --exclude_failed drops. `estimate_s` uses NaN for "no estimate".
    `speed_scaled` marks jobs whose lifetime scales with GPU speed (None: all of them; False for services, whose
    lifetime is set by their traffic). Every trace job's runtime already includes its spreading over nodes, so
    `finish` sets Job.runtime_includes_spread (the multi-node factor never applies to a recorded duration).
    `dropped` counts rows or jobs the parser left out, by reason; `mapping` says in words how the trace's
    fields became Job fields; `extra` holds further plain report values (counts, spans).
    """

    format_name: str
    source: str
    rows_read: int
    job_id: np.ndarray
    arrival_s: np.ndarray
    runtime_s: np.ndarray
    num_gpus: np.ndarray
    gpu_milli: np.ndarray
    status: np.ndarray
    failed: np.ndarray
    gpu_mem_gb: np.ndarray | None = None
    gpu_types: np.ndarray | None = None
    priority: np.ndarray | None = None
    estimate_s: np.ndarray | None = None
    speed_scaled: np.ndarray | None = None
    dropped: dict[str, int] = field(default_factory=dict)
    mapping: dict[str, str] = field(default_factory=dict)
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        n = len(self.job_id)
        for name in ("arrival_s", "runtime_s", "num_gpus", "gpu_milli", "status", "failed"):
            if len(getattr(self, name)) != n:
                raise ValueError(
                    f"TraceTable column {name} has {len(getattr(self, name))} entries, expected {n}"
                )


def finish(table: TraceTable, cfg: WorkloadConfig) -> Workload:
    """Apply the common filters of the module docstring to `table` and build the Workload with its report."""
    dropped = dict(table.dropped)
    n = len(table.job_id)
    arrival = np.asarray(table.arrival_s, dtype=float)
    runtime = np.asarray(table.runtime_s, dtype=float)
    if n and not (np.isfinite(arrival).all() and np.isfinite(runtime).all()):
        raise ValueError(f"{table.source}: internal error: non-finite arrival or runtime after parsing")
    keep = np.ones(n, dtype=bool)

    def drop(mask: np.ndarray, reason: str) -> None:
        hit = keep & mask
        dropped[reason] = dropped.get(reason, 0) + int(hit.sum())
        keep[hit] = False

    drop(runtime <= 0.0, "zero runtime")
    outside = np.zeros(n, dtype=bool)
    if cfg.trace_start_s is not None:
        outside |= arrival < cfg.trace_start_s
    if cfg.trace_end_s is not None:
        outside |= arrival >= cfg.trace_end_s
    drop(outside, "outside window")
    drop(
        np.asarray(table.failed, dtype=bool) if cfg.exclude_failed else np.zeros(n, dtype=bool),
        "failed/killed excluded",
    )
    idx = np.flatnonzero(keep)
    idx = idx[np.argsort(arrival[idx], kind="stable")]
    limit = len(idx) if cfg.max_jobs is None else max(cfg.max_jobs, 0)
    dropped["beyond max_jobs"] = max(len(idx) - limit, 0)
    idx = idx[:limit]

    milli = np.asarray(table.gpu_milli, dtype=np.int64)[idx]
    rounded = int((milli < FULL_GPU_MILLI).sum()) if cfg.round_fractional else 0
    if cfg.round_fractional:
        milli = np.full_like(milli, FULL_GPU_MILLI)
    origin_s = float(arrival[idx[0]]) if len(idx) else 0.0
    with np.errstate(over="ignore"):  # reported just below
        arrival_out = (arrival[idx] - origin_s) / cfg.time_scale
    if not np.isfinite(arrival_out).all():
        raise ValueError(f"--time_scale {cfg.time_scale:g} makes arrival times overflow; use a larger one")
    _check_times(table, idx, arrival_out, runtime[idx], cfg.time_scale)
    kept_ids = pd.Index(np.asarray(table.job_id)[idx])
    if kept_ids.has_duplicates:
        raise ValueError(f"{table.source}: duplicate job id {kept_ids[kept_ids.duplicated()][0]!r}")
    jobs = _build_jobs(table, idx, arrival_out, runtime[idx], milli)

    report = {
        "format": table.format_name,
        "source": table.source,
        "rows_read": int(table.rows_read),
        "jobs_loaded": len(jobs),
        "filtered": dropped,
        "time_span_s": float(arrival_out[-1] - arrival_out[0]) if len(jobs) else 0.0,
        "arrival_offset_s": origin_s,
        "time_scale": cfg.time_scale,
        "window_s": [cfg.trace_start_s, cfg.trace_end_s],
        "gpu_count_histogram": _histogram(list(map(attrgetter("num_gpus"), jobs))),
        "fractional_jobs": int(sum(1 for j in jobs if j.gpu_milli < FULL_GPU_MILLI)),
        "fractional_rounded_up": rounded,
        "type_constrained_jobs": int(sum(1 for j in jobs if j.gpu_types)),
        "status_counts": _histogram(list(map(attrgetter("trace_status"), jobs))),
        "gpu_seconds": float(total_gpu_seconds(jobs)),
        "not_speed_scaled_jobs": int(sum(1 for j in jobs if not j.speed_scaled)),
        "mapping": dict(table.mapping),
        **table.extra,
    }
    return Workload(f"{table.format_name}:{Path(table.source).name}", jobs, report)


def _check_times(
    table: TraceTable, idx: np.ndarray, arrival: np.ndarray, runtime: np.ndarray, time_scale: float
) -> None:
    """Kept jobs' times within sim/limits.py's ranges, else a ValueError naming the trace and the first such job."""
    estimate = (
        np.full(len(idx), np.nan) if table.estimate_s is None else np.asarray(table.estimate_s, float)[idx]
    )
    scaled = "" if time_scale == 1.0 else f" (after --time_scale {time_scale:g})"
    for values, limit, what in (
        (arrival, MAX_ARRIVAL_S, f"arrival{scaled}, after the first kept job's,"),
        (runtime, MAX_RUNTIME_S, "runtime"),
        (estimate, MAX_ESTIMATE_S, "requested time"),
    ):
        beyond = np.flatnonzero(values > limit)
        if len(beyond):
            i = int(beyond[0])
            job = np.asarray(table.job_id)[idx[i]]
            raise ValueError(f"{table.source}: job {job}: {time_problem(what, float(values[i]), limit)}")


def _build_jobs(
    table: TraceTable, idx: np.ndarray, arrival: np.ndarray, runtime: np.ndarray, milli: np.ndarray
) -> tuple[Job, ...]:
    k = len(idx)

    def column(values: np.ndarray | None, default) -> list:
        return [default] * k if values is None else np.asarray(values)[idx].tolist()

    ids = [str(x) for x in np.asarray(table.job_id)[idx].tolist()]
    mem = column(table.gpu_mem_gb, 0.0)
    types = column(table.gpu_types, ())
    prio = [int(p) for p in column(table.priority, 0)]
    est = [None if e is None or math.isnan(e) else float(e) for e in column(table.estimate_s, None)]
    status = [str(s) for s in np.asarray(table.status)[idx].tolist()]
    gpus = np.asarray(table.num_gpus, dtype=np.int64)[idx].tolist()
    scaled = [bool(x) for x in column(table.speed_scaled, True)]
    return tuple(
        Job(*row[:-1], runtime_includes_spread=True, speed_scaled=row[-1])
        for row in zip(
            ids,
            arrival.tolist(),
            runtime.tolist(),
            gpus,
            [float(m) for m in mem],
            milli.tolist(),
            [tuple(t) for t in types],
            prio,
            est,
            status,
            scaled,
            strict=True,
        )
    )


def _histogram(values: list) -> dict:
    return dict(sorted(Counter(values).items()))


def split_fraction(total_gpus: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """(num_gpus, gpu_milli, how many were rounded up) for GPU demands given as (possibly fractional) GPUs.

    Up to one GPU: that fraction of one GPU (milli >= 1). Above one: ceil(demand) whole GPUs, since a Job cannot
    hold a fraction beyond its first GPU; the count of such non-integer demands is returned for the report.
    """
    total = np.asarray(total_gpus, dtype=float)
    small = total <= 1.0
    milli = np.where(small, np.maximum(np.rint(total * FULL_GPU_MILLI), 1), FULL_GPU_MILLI).astype(np.int64)
    num = np.where(small, 1, np.ceil(total - 1e-9)).astype(np.int64)
    rounded = int((~small & (np.abs(total - np.rint(total)) > 1e-9)).sum())
    return num, milli, rounded


# ---------------------------------------------------------------------------------------------------------------
# default cluster


def default_cluster(jobs: tuple[Job, ...], time_scale: float = 1.0, why: str = "") -> tuple[ClusterSpec, str]:
    """A cluster of 8-GPU nodes of the reference type, sized to the jobs, and a note saying how.

    GPUs = max(LARGEST_JOB_SHARE_INV x GPUs of the largest job, offered GPU-seconds / (arrival window x
    DEFAULT_TARGET_LOAD)), rounded up to whole nodes (so a lone gang never needs the whole machine) (the window and
    load follow sim.load.offered_load_factor). The window is taken before --time_scale (undoing it), so
    time_scale > 1 raises the load above the target instead of growing the cluster. The reference type (speed 1.0)
    makes recorded trace durations replay unchanged. Outliers (see `sizing_outliers`) do not size the cluster: one
    row asking 100,000 GPUs must not turn every metric into 0; those that do not fit are rejected when the run
    starts, with a reason, and counted in the report.
    """
    limit = sizing_outliers(jobs)
    sized = tuple(j for j in jobs if j.num_gpus <= limit) if limit is not None else jobs
    largest = max((j.num_gpus for j in sized), default=1)
    per_gpu_load = offered_load_factor(sized, 1) / time_scale if sized else 0.0
    by_load = math.ceil(per_gpu_load / DEFAULT_TARGET_LOAD - 1e-9)
    gpus = max(LARGEST_JOB_SHARE_INV * largest, by_load, 1)
    nodes = math.ceil(gpus / DEFAULT_GPUS_PER_NODE)
    spec = reference_nodes(
        nodes, DEFAULT_GPUS_PER_NODE, f"default:{nodes}x{REFERENCE_TYPE}:{DEFAULT_GPUS_PER_NODE}"
    )
    note = (
        f"default cluster {nodes}x{REFERENCE_TYPE}:{DEFAULT_GPUS_PER_NODE} ({nodes * DEFAULT_GPUS_PER_NODE} GPUs, "
        f"the reference type so recorded durations replay unchanged): sized to hold {LARGEST_JOB_SHARE_INV}x the "
        f"largest job ({largest} GPUs) and to an offered load of {DEFAULT_TARGET_LOAD} over the unscaled arrival window "
        f"(needs {by_load} GPUs){'; ' + why if why else ''}"
    )
    if len(sized) < len(jobs):
        note += (
            f"; {len(jobs) - len(sized)} outlier job(s) asking more than {limit} GPUs ({OUTLIER_FACTOR}x the "
            f"99th-percentile demand) did not size it (those larger than the cluster are rejected)"
        )
    return spec, note


def sizing_outliers(jobs: tuple[Job, ...]) -> int | None:
    """The GPU demand above which a job is an outlier that must not size a default cluster, or None if none is.

    Outliers ask more than OUTLIER_FACTOR x the 99th percentile (lower empirical quantile) of the GPU demands of
    the other jobs: the largest job is left out of the quantile, so one huge row cannot vouch for itself in a small
    log (51 one-processor jobs and one of 100,000: the limit is 64). The real logs stay inside it: RICC's largest
    job is 32x its 99th percentile, ITP cluster08's 8x.
    """
    if len(jobs) < 2:
        return None
    demands = np.sort(np.fromiter((j.num_gpus for j in jobs), dtype=np.int64, count=len(jobs)))
    limit = int(OUTLIER_FACTOR * np.quantile(demands[:-1], 0.99, method="inverted_cdf"))
    return limit if int(demands.max()) > limit else None


def reference_nodes(num_nodes: int, gpus_per_node: int, name: str) -> ClusterSpec:
    mem_gb = CATALOG[REFERENCE_TYPE].mem_gb
    return ClusterSpec(
        name, tuple(NodeSpec(f"n{i}", REFERENCE_TYPE, gpus_per_node, mem_gb) for i in range(num_nodes))
    )


def describe_cluster(spec: ClusterSpec) -> str:
    types: dict[str, int] = {}
    for n in spec.nodes:
        types[n.gpu_type] = types.get(n.gpu_type, 0) + n.num_gpus
    mix = ", ".join(f"{t} {g}" for t, g in sorted(types.items(), key=lambda kv: -kv[1]))
    return f"{len(spec.nodes)} nodes, {spec.num_gpus} GPUs ({mix})"


# ---------------------------------------------------------------------------------------------------------------
# reading files: every failure becomes a ValueError naming the file (and the line where there is one)

_PANDAS_LINE = re.compile(r"line (\d+)")


def read_csv(path: Path, **kwargs) -> pd.DataFrame:
    """pandas.read_csv with gzip inferred from the name and every parse or decompression error located."""
    try:
        return pd.read_csv(path, **kwargs)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}:1: empty file") from None
    except pd.errors.ParserError as e:
        m = _PANDAS_LINE.search(str(e))
        where = f"{path}:{m.group(1)}" if m else str(path)
        raise ValueError(f"{where}: malformed row: {str(e).strip()}") from None
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise ValueError(f"{path}: truncated or corrupt gzip file ({e})") from None
    except UnicodeDecodeError:
        raise not_utf8(path) from None


@contextmanager
def open_text(path: Path) -> Iterator:
    """Open a text file, transparently gunzipping *.gz; decompression errors name the file."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8", newline="") as f:
                yield f
        else:
            with path.open(encoding="utf-8", newline="") as f:
                yield f
    except (EOFError, gzip.BadGzipFile, zlib.error) as e:
        raise ValueError(f"{path}: truncated or corrupt gzip file ({e})") from None
    except UnicodeDecodeError:
        raise not_utf8(path) from None


def not_utf8(path: Path) -> ValueError:
    """The error for a file that is not UTF-8 text, naming the first line (and column) that does not decode."""
    path = Path(path)
    where = first_undecodable(path) if path.is_file() else None
    if where is None:
        return ValueError(f"{path}: not UTF-8 text; save it as UTF-8")
    line_no, column, byte = where
    return ValueError(
        f"{path}:{line_no}: not UTF-8 text (byte 0x{byte:02x}, byte {column} of the line); save the file as UTF-8"
    )


def first_undecodable(path: Path) -> tuple[int, int, int] | None:
    """(line, 1-based column, byte) of the first byte that is not UTF-8 in a (possibly gzipped) file, or None."""
    try:
        with gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb") as f:
            for line_no, raw in enumerate(f, start=1):
                try:
                    raw.decode("utf-8")
                except UnicodeDecodeError as e:
                    return line_no, e.start + 1, raw[e.start]
    except (OSError, EOFError, zlib.error):
        return None
    return None


def first_line(path: Path) -> str:
    with open_text(path) as f:
        return f.readline().strip().lstrip("\ufeff")


def require_columns(path: Path, columns, required: tuple[str, ...], form: str) -> None:
    missing = [c for c in required if c not in set(columns)]
    if missing:
        raise ValueError(f"{path}:1: missing column(s) {', '.join(missing)}; expected {form}")


def numeric(
    path: Path,
    df: pd.DataFrame,
    column: str,
    first_line_no: int,
    *,
    allow_missing: bool = False,
    integer: bool = False,
) -> np.ndarray:
    """Column `column` as float64; a non-numeric (or, unless allowed, empty) cell raises with its line.

    `first_line_no` is the file line of the frame's first row (2 below a header, 1 in a headerless file).
    """
    raw = df[column]
    values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    bad = np.isnan(values) & raw.notna().to_numpy()
    if not allow_missing:
        bad |= np.isnan(values)
    bad |= np.isinf(values)
    if integer:
        bad |= ~np.isnan(values) & (values != np.floor(values))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        cell = raw.iloc[i]
        what = (
            "missing value"
            if pd.isna(cell)
            else ("non-integer" if integer else "non-numeric") + f" value {cell!r}"
        )
        raise ValueError(f"{path}:{first_line_no + i}: column {column!r}: {what}")
    return values


def fail_at(path: Path, mask: np.ndarray, first_line_no: int, problem: str, values=None) -> None:
    """Raise for the first row where `mask` is true: `path:line: problem (value)`."""
    if mask.any():
        i = int(np.flatnonzero(mask)[0])
        shown = ""
        if values is not None:
            value = values[i].item() if hasattr(values[i], "item") else values[i]
            shown = f" (got {value!r})"
        raise ValueError(f"{path}:{first_line_no + i}: {problem}{shown}")
