"""Real-trace replay: `load_trace(cfg)` picks the format's parser and returns the jobs, the trace's own cluster
(when its files bring one), a default cluster sized to the trace, and a note saying which applies and why;
`load_trace_cluster(path)` reads any supported machine file. One module per format; the shared filters live in
common.py. Mappings and filtered counts are in `Workload.report` (see docs/traces.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from config import WorkloadConfig
from sim.cluster_spec import ClusterSpec, load_cluster_csv
from sim.job import Workload
from workloads.trace_formats import TRACE_FORMATS
from workloads.traces import alibaba_2017, alibaba_openb, alibaba_pai, google, helios, itp, philly, swf
from workloads.traces.common import TraceTable, default_cluster, describe_cluster, finish, first_line

SPEED_NOTE = "other GPU types run faster or slower than the recorded one by catalog speed (--recorded_gpu_type, --uniform_speed)"


@dataclass(frozen=True)
class TraceLoad:
    """A loaded trace. `cluster` is the trace's own machines (None when its files bring none); `default_cluster`
    is sized to the loaded jobs for when neither the trace nor the user gives one; `cluster_note` says which of
    the two a run without --cluster/--cluster_path uses, and why."""

    workload: Workload
    cluster: ClusterSpec | None
    default_cluster: ClusterSpec
    cluster_note: str


def load_trace(cfg: WorkloadConfig) -> TraceLoad:
    """Load `cfg.workload_path` as `cfg.workload_type`; malformed input raises ValueError naming file and line."""
    if cfg.workload_type not in TRACE_FORMATS:
        raise ValueError(
            f"unknown trace type {cfg.workload_type!r}; choose one of {', '.join(TRACE_FORMATS)}"
        )
    if not cfg.workload_path:
        raise ValueError(f"--workload_type {cfg.workload_type} needs --workload_path")
    if cfg.time_scale <= 0:
        raise ValueError(f"time_scale must be > 0, got {cfg.time_scale}")
    path = Path(cfg.workload_path)
    if not path.exists():
        raise ValueError(f"{path}: no such file or directory")
    kind = detect_alibaba(path) if cfg.workload_type == "alibaba" else cfg.workload_type
    table, cluster_file, cluster_reader = _parse(kind, path, cfg)
    workload = finish(table, cfg)
    fallback, fallback_note = _default_cluster(kind, path, cfg, workload)
    if cluster_file is None:
        return TraceLoad(workload, None, fallback, fallback_note)
    cluster = cluster_reader(cluster_file)
    note = (
        f"the trace's own cluster {cluster_file.name} beside the trace ({describe_cluster(cluster)}); "
        f"{SPEED_NOTE}; without it: {fallback_note}"
    )
    if cluster_file.name == philly.REVISED_LIST:
        note += "; the revised list was preferred to cluster_machine_list, whose GPU counts contradict the job log"
    return TraceLoad(workload, cluster, fallback, note)


def _parse(kind: str, path: Path, cfg: WorkloadConfig) -> tuple[TraceTable, Path | None, object]:
    """(table, the trace's machine file or None, the reader for that file)."""
    if kind == "alibaba-openb":
        pods = alibaba_openb.resolve_pod_list(path)
        return (
            alibaba_openb.read_pods(pods),
            alibaba_openb.sibling_node_list(pods),
            alibaba_openb.read_node_list,
        )
    if kind == "alibaba-pai":
        return (
            alibaba_pai.read_pai(path),
            alibaba_pai.table_path(path, "pai_machine_spec"),
            alibaba_pai.read_machine_spec,
        )
    if kind == "alibaba-2017":
        return alibaba_2017.read_batch_task(path, cfg.cpu_job_gpus), None, None
    if kind == "google":
        return google.read_google(path, cfg.cpu_job_gpus, cfg.google_unit), None, None
    if kind == "itp":
        return itp.read_itp(path), None, None
    if kind == "helios":
        return helios.read_helios(path), None, None
    if kind == "philly":
        folder = path if path.is_dir() else path.parent
        original, revised = folder / philly.MACHINE_LIST, folder / philly.REVISED_LIST
        machines = (revised if revised.is_file() else original) if original.is_file() else None
        return philly.read_job_log(path), machines, philly.read_machine_list
    if kind == "swf":
        return swf.read_swf(path, cfg.cpu_job_gpus), None, None
    raise ValueError(f"unknown trace type {kind!r}")


def _default_cluster(
    kind: str, path: Path, cfg: WorkloadConfig, workload: Workload
) -> tuple[ClusterSpec, str]:
    if kind == "swf":
        own = swf.header_cluster(path, cfg.cpu_job_gpus)
        if own is None:
            return default_cluster(workload.jobs, cfg.time_scale, "the SWF header gives no MaxNodes/MaxProcs")
        spec, note = own
        machine_gpus = spec.num_gpus  # (a property summing every node: once, not per job)
        larger = sum(1 for j in workload.jobs if j.num_gpus > machine_gpus)
        if larger:  # the log's own machine stays the default: a bad row must not resize it
            note += f"; {larger} job(s) larger than that machine are rejected (counted in the report)"
        return spec, note
    return default_cluster(workload.jobs, cfg.time_scale)


def detect_alibaba(path: Path) -> str:
    """Which Alibaba trace a path holds: alibaba-openb, alibaba-pai or alibaba-2017 (by names, then content)."""
    if path.is_dir():
        if (path / alibaba_openb.DEFAULT_POD_LIST).is_file():
            return "alibaba-openb"
        if alibaba_pai.table_path(path, "pai_task_table") is not None:
            return "alibaba-pai"
        if (path / "batch_task.csv.gz").is_file() or (path / "batch_task.csv").is_file():
            return "alibaba-2017"
        raise ValueError(
            f"{path}: no Alibaba trace found (expected {alibaba_openb.DEFAULT_POD_LIST}, pai_task_table.csv or "
            f"batch_task.csv[.gz])"
        )
    head = first_line(path)
    if path.name.startswith("pai_machine_spec") or alibaba_openb.is_node_list(head):
        raise ValueError(f"{path}: a machine list, not a job trace; pass it with --cluster_path")
    if path.name.startswith("pai_"):
        return "alibaba-pai"
    if alibaba_openb.is_pod_list(head):
        return "alibaba-openb"
    if alibaba_2017.looks_like_batch_task(head):
        return "alibaba-2017"
    fields = [f.strip() for f in head.split(",")]
    if (
        len(fields) in (len(alibaba_pai.TASK_COLUMNS), len(alibaba_pai.JOB_COLUMNS))
        and fields[3] in alibaba_pai.STATUSES
    ):
        return "alibaba-pai"
    raise ValueError(
        f"{path}:1: not a recognised Alibaba trace: expected an openb pod list header "
        f"({alibaba_openb.POD_FORM}), a headerless v2017 batch_task row or a PAI table; got {head[:80]!r}"
    )


def load_trace_cluster(path: str | Path) -> ClusterSpec:
    """Read a machine file, recognised by its header or content: an openb node list, a PAI pai_machine_spec, a
    Philly cluster_machine_list (or revised_machine_list.csv) or a plain node_id,gpu_type,num_gpus[,gpu_mem_gb]
    CSV."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such file")
    head = first_line(path)
    columns = {c.strip() for c in head.split(",")}
    if alibaba_openb.is_node_list(head):
        return alibaba_openb.read_node_list(path)
    if philly.is_machine_list(head) or philly.is_revised_list(head):
        return philly.read_machine_list(path)
    if {"node_id", "gpu_type", "num_gpus"} <= columns:
        return load_cluster_csv(path)
    if alibaba_pai.is_machine_spec(head):
        return alibaba_pai.read_machine_spec(path)
    raise ValueError(
        f"{path}:1: not a recognised machine file: expected a node_id,gpu_type,num_gpus[,gpu_mem_gb] CSV, an openb "
        f"node list ({alibaba_openb.NODE_HEADER}), a PAI pai_machine_spec (machine,gpu_type,cap_cpu,cap_mem,cap_gpu, "
        f"headerless) or a Philly cluster_machine_list ({philly.MACHINE_HEADER}); got {head[:80]!r}"
    )
