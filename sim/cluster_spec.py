"""Static description of a cluster: its nodes, parsed from a spec string, a CSV file or a preset."""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path

from sim.catalog import CATALOG, resolve_gpu_type
from sim.limits import MAX_GPUS, MAX_GPUS_PER_NODE

SPEC_FORM = "COUNTxTYPE:GPUS_PER_NODE[,COUNTxTYPE:GPUS_PER_NODE...], e.g. 2xA100-80GB:8,4xV100:4"
_SPEC_ITEM = re.compile(r"^\s*(-?\d+)\s*[xX]\s*([A-Za-z0-9_\-]+)\s*:\s*(-?\d+)\s*$")


@dataclass(frozen=True, slots=True)
class NodeSpec:
    node_id: str
    gpu_type: str  # canonical catalog name
    num_gpus: int
    gpu_mem_gb: float


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    nodes: tuple[NodeSpec, ...]

    @property
    def num_gpus(self) -> int:
        return sum(n.num_gpus for n in self.nodes)


def parse_cluster_spec(spec: str) -> ClusterSpec:
    """Parse `2xA100-80GB:8,4xV100:4` into nodes n0, n1, ...; raises ValueError showing the expected form."""
    nodes: list[NodeSpec] = []
    if not spec or not spec.strip():
        raise ValueError(f"empty --cluster spec; expected {SPEC_FORM}")
    for item in spec.split(","):
        m = _SPEC_ITEM.match(item)
        if not m:
            raise ValueError(f"bad cluster spec item {item.strip()!r}; expected {SPEC_FORM}")
        count, type_name, per_node = int(m.group(1)), m.group(2), int(m.group(3))
        if count <= 0 or per_node <= 0:
            raise ValueError(
                f"bad cluster spec item {item.strip()!r}: counts must be positive; expected {SPEC_FORM}"
            )
        if per_node > MAX_GPUS_PER_NODE:
            raise ValueError(
                f"bad cluster spec item {item.strip()!r}: {per_node:,} GPUs per node; at most {MAX_GPUS_PER_NODE:,}"
            )
        total = sum(n.num_gpus for n in nodes) + count * per_node
        if total > MAX_GPUS:
            raise ValueError(
                f"cluster spec {spec.strip()!r} has at least {total:,} GPUs; a cluster has at most {MAX_GPUS:,}"
            )
        gpu_type = resolve_gpu_type(type_name)
        for _ in range(count):
            nodes.append(NodeSpec(f"n{len(nodes)}", gpu_type, per_node, CATALOG[gpu_type].mem_gb))
    return ClusterSpec(spec.replace(" ", ""), tuple(nodes))


def load_cluster_csv(path: str | Path) -> ClusterSpec:
    """Read `node_id,gpu_type,num_gpus[,gpu_mem_gb]` (header required, a UTF-8 BOM is fine); nodes with 0 GPUs are
    skipped; node ids must be unique and gpu_mem_gb, when given, a finite number > 0."""
    path = Path(path)
    nodes: list[NodeSpec] = []
    first_line_of: dict[str, int] = {}
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        reader.fieldnames = [c.strip() for c in reader.fieldnames or ()]
        required = {"node_id", "gpu_type", "num_gpus"}
        missing = required - set(reader.fieldnames)
        if missing:
            raise ValueError(
                f"{path}:1: missing column(s) {sorted(missing)}; need node_id,gpu_type,num_gpus[,gpu_mem_gb]"
            )
        for row in reader:
            line_no = reader.line_num
            try:
                node_id = (row["node_id"] or "").strip()
                if not node_id:
                    raise ValueError("empty node_id")
                if node_id in first_line_of:
                    raise ValueError(
                        f"duplicate node_id {node_id!r} (first on line {first_line_of[node_id]})"
                    )
                first_line_of[node_id] = line_no
                num = _whole_gpus(row["num_gpus"])
                if num == 0:
                    continue
                gpu_type = resolve_gpu_type(row["gpu_type"])
                mem = row.get("gpu_mem_gb") or ""
                mem_gb = float(mem) if mem.strip() else CATALOG[gpu_type].mem_gb
                if not (math.isfinite(mem_gb) and mem_gb > 0):
                    raise ValueError(f"gpu_mem_gb must be a finite number > 0, got {mem.strip()!r}")
            except (TypeError, ValueError) as e:
                raise ValueError(f"{path}:{line_no}: {e}") from None
            nodes.append(NodeSpec(node_id, gpu_type, num, mem_gb))
    if not nodes:
        raise ValueError(f"{path}: no node with GPUs")
    total = sum(n.num_gpus for n in nodes)
    if total > MAX_GPUS:
        raise ValueError(f"{path}: {total:,} GPUs in all; at most {MAX_GPUS:,}")
    return ClusterSpec(path.name, tuple(nodes))


def _whole_gpus(text: str | None) -> int:
    """A node's num_gpus cell: a whole number from 0 to MAX_GPUS_PER_NODE (ValueError naming the column)."""
    shown = (text or "").strip()
    try:
        value = float(shown)
    except ValueError:
        value = math.nan
    if not (value.is_integer() and 0 <= value <= MAX_GPUS_PER_NODE):
        raise ValueError(
            f"column num_gpus: expected a whole number of GPUs from 0 to {MAX_GPUS_PER_NODE:,}, got {shown!r}"
        )
    return int(value)
