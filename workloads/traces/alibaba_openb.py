"""Alibaba cluster-trace-gpu-v2023 ("openb"): the pod lists as jobs and the node lists as the trace's cluster.

One Job per pod. arrival = creation_time (s since the trace start, the time origin); runtime = deletion_time -
scheduled_time (the time the pod held its GPUs). `pod_phase` is the phase last recorded, not the state at the
cut-off: of the 4,149 `Running` GPU pods of the default list, 4,117 have a deletion_time before the cut-off
(12,902,960 s) and only 32 end exactly at it; every pod is replayed for its recorded deletion - scheduled time.
Lifetimes: `qos` LS (latency-sensitive, the inference services: 4,647 of the 8,152 pods) live as long as their
traffic, so their recorded duration is kept on every GPU type (Job.speed_scaled False); BE, Burstable and
Guaranteed pods scale with GPU speed like batch work. GPUs: num_gpu > 1 -> that many whole GPUs;
num_gpu == 1 -> gpu_milli/1000 of one GPU (fractional, shared). gpu_spec (`|`-separated models) -> gpu_types;
qos -> priority (BE 0, Burstable 1, LS 2, Guaranteed 3); pod_phase -> trace_status (Failed counts as failed).
Pods with num_gpu == 0 are dropped as 'zero GPUs', Pending pods (no scheduled_time) as 'never started'. The pod
lists carry no GPU memory request, so gpu_mem_gb is 0 (only the share limits co-location).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from sim.catalog import CATALOG, resolve_gpu_type
from sim.cluster_spec import ClusterSpec, NodeSpec
from sim.job import FULL_GPU_MILLI
from workloads.traces.common import TraceTable, fail_at, numeric, read_csv, require_columns

POD_COLUMNS = (
    "name",
    "num_gpu",
    "gpu_milli",
    "gpu_spec",
    "qos",
    "pod_phase",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)
POD_FORM = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
    "scheduled_time"
)
NODE_HEADER = "sn,cpu_milli,memory_mib,gpu,model"
QOS_PRIORITY = {"BE": 0, "Burstable": 1, "LS": 2, "Guaranteed": 3}
SERVICE_QOS = "LS"  # latency-sensitive inference services: lifetime does not scale with GPU speed
PHASES = ("Running", "Succeeded", "Failed", "Pending")
DEFAULT_POD_LIST = "openb_pod_list_default.csv"
NODE_LISTS = ("openb_node_list_gpu_node.csv", "openb_node_list_all_node.csv")


def is_pod_list(header: str) -> bool:
    return header.replace(" ", "").startswith("name,cpu_milli,memory_mib,num_gpu,gpu_milli")


def is_node_list(header: str) -> bool:
    return header.replace(" ", "") == NODE_HEADER


def resolve_pod_list(path: Path) -> Path:
    """The pod list a path names: the file itself, or the default pod list inside a directory."""
    if path.is_dir():
        if not (path / DEFAULT_POD_LIST).is_file():
            raise ValueError(f"{path}: directory without {DEFAULT_POD_LIST}; pass a pod list file")
        return path / DEFAULT_POD_LIST
    return path


def sibling_node_list(pod_list: Path) -> Path | None:
    for name in NODE_LISTS:
        if (pod_list.parent / name).is_file():
            return pod_list.parent / name
    return None


def read_pods(path: Path) -> TraceTable:
    """Parse one pod list (full form) into a TraceTable; see the module docstring for the mapping."""
    path = resolve_pod_list(path)
    df = read_csv(
        path,
        dtype={"name": str, "gpu_spec": str, "qos": str, "pod_phase": str},
        keep_default_na=False,
        na_values=[""],
        skip_blank_lines=False,
    )
    df.columns = [c.strip() for c in df.columns]
    if "num_gpu" in df.columns and "creation_time" not in df.columns:
        raise ValueError(
            f"{path}:1: a reduced pod list (no creation/deletion/scheduled_time columns, like the multigpu* "
            f"files): a static pod set that cannot be replayed by arrival time; expected {POD_FORM}"
        )
    require_columns(path, df.columns, POD_COLUMNS, POD_FORM)
    first = 2
    num_gpu = numeric(path, df, "num_gpu", first, integer=True).astype(np.int64)
    gpu_milli = numeric(path, df, "gpu_milli", first, integer=True).astype(np.int64)
    created = numeric(path, df, "creation_time", first)
    deleted = numeric(path, df, "deletion_time", first)
    scheduled = numeric(path, df, "scheduled_time", first, allow_missing=True)
    names = df["name"].to_numpy(dtype=object)
    fail_at(path, pd.isna(df["name"]).to_numpy(), first, "column 'name': missing pod name")
    fail_at(path, num_gpu < 0, first, "num_gpu must be >= 0", num_gpu)
    one = num_gpu == 1
    fail_at(
        path,
        one & ((gpu_milli <= 0) | (gpu_milli > FULL_GPU_MILLI)),
        first,
        "gpu_milli must be in 1..1000 for a single-GPU pod",
        gpu_milli,
    )
    phase = df["pod_phase"].to_numpy(dtype=object)
    fail_at(
        path,
        ~np.isin(phase, PHASES),
        first,
        f"unknown pod_phase (expected one of {', '.join(PHASES)})",
        phase,
    )
    qos = df["qos"].to_numpy(dtype=object)
    fail_at(
        path,
        ~np.isin(qos, list(QOS_PRIORITY)),
        first,
        f"unknown qos (expected one of {', '.join(QOS_PRIORITY)})",
        qos,
    )
    never = (phase == "Pending") | np.isnan(scheduled)
    started = ~never
    fail_at(path, started & (deleted < scheduled), first, "deletion_time before scheduled_time", deleted)
    dup = pd.Index(names).duplicated()
    fail_at(path, dup, first, "duplicate pod name", names)

    gpu_types = _gpu_types(path, df["gpu_spec"].to_numpy(dtype=object), first)
    keep = (num_gpu > 0) & started
    dropped = {"zero GPUs": int((num_gpu == 0).sum()), "never started": int(((num_gpu > 0) & never).sum())}
    multi_not_full = int(((num_gpu > 1) & (gpu_milli != FULL_GPU_MILLI)).sum())
    milli = np.where(one, gpu_milli, FULL_GPU_MILLI)
    k = np.flatnonzero(keep)
    return TraceTable(
        format_name="alibaba-openb",
        source=str(path),
        rows_read=len(df),
        job_id=names[k],
        arrival_s=created[k],
        runtime_s=(deleted - np.nan_to_num(scheduled))[k],
        num_gpus=num_gpu[k],
        gpu_milli=milli[k],
        status=phase[k],
        failed=(phase == "Failed")[k],
        gpu_types=gpu_types[k],
        priority=np.array([QOS_PRIORITY[q] for q in qos], dtype=np.int64)[k],
        speed_scaled=(qos != SERVICE_QOS)[k],
        dropped=dropped,
        mapping={
            "job": "one pod",
            "arrival": "creation_time (s since trace start)",
            "runtime": "deletion_time - scheduled_time (time the pod held its GPUs)",
            "gpus": "num_gpu > 1: whole GPUs; num_gpu == 1: gpu_milli/1000 of one shared GPU",
            "gpu_types": "gpu_spec alternatives (empty = any)",
            "gpu_mem_gb": "0 (not in the trace)",
            "priority": "qos: BE 0, Burstable 1, LS 2, Guaranteed 3",
            "status": "pod_phase (Failed = failed/killed)",
            "lifetime": f"qos {SERVICE_QOS} (services): recorded duration on every GPU type; others scale by speed",
        },
        extra={
            "num_gpu_histogram_all_rows": {
                int(g): int(c) for g, c in zip(*np.unique(num_gpu, return_counts=True), strict=True)
            },
            "sharing_pods_all_rows": int((one & (gpu_milli < FULL_GPU_MILLI)).sum()),
            "multi_gpu_pods_with_gpu_milli_not_1000": multi_not_full,
        },
    )


def _gpu_types(path: Path, spec: np.ndarray, first: int) -> np.ndarray:
    """gpu_spec strings -> tuples of canonical names (each distinct string resolved once)."""
    resolved: dict[object, tuple[str, ...]] = {}
    out = np.empty(len(spec), dtype=object)
    for i, s in enumerate(spec):
        if s not in resolved:
            if s is None or (isinstance(s, float) and np.isnan(s)) or not str(s).strip():
                resolved[s] = ()
            else:
                try:
                    resolved[s] = tuple(
                        dict.fromkeys(resolve_gpu_type(t) for t in str(s).split("|") if t.strip())
                    )
                except ValueError as e:
                    raise ValueError(f"{path}:{first + i}: column 'gpu_spec': {e}") from None
        out[i] = resolved[s]
    return out


def read_node_list(path: Path) -> ClusterSpec:
    """openb node list `sn,cpu_milli,memory_mib,gpu,model` -> ClusterSpec (CPU-only nodes skipped)."""
    df = read_csv(
        path, dtype={"sn": str, "model": str}, keep_default_na=False, na_values=[""], skip_blank_lines=False
    )
    df.columns = [c.strip() for c in df.columns]
    require_columns(path, df.columns, ("sn", "gpu", "model"), NODE_HEADER)
    gpus = numeric(path, df, "gpu", 2, integer=True).astype(np.int64)
    fail_at(path, gpus < 0, 2, "gpu must be >= 0", gpus)
    models = df["model"].to_numpy(dtype=object)
    nodes = []
    for i in np.flatnonzero(gpus > 0):
        if pd.isna(models[i]):
            raise ValueError(f"{path}:{2 + i}: node with {gpus[i]} GPUs has no model")
        try:
            gpu_type = resolve_gpu_type(str(models[i]))
        except ValueError as e:
            raise ValueError(f"{path}:{2 + i}: column 'model': {e}") from None
        nodes.append(NodeSpec(str(df["sn"].iat[i]), gpu_type, int(gpus[i]), CATALOG[gpu_type].mem_gb))
    if not nodes:
        raise ValueError(f"{path}: no node with GPUs")
    return ClusterSpec(path.name, tuple(nodes))
