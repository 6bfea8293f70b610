"""Static description of a cluster: its nodes, parsed from a spec string, a CSV file or a preset."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from env.catalog import CATALOG, resolve_gpu_type

SPEC_FORM = "COUNTxTYPE:GPUS_PER_NODE[,COUNTxTYPE:GPUS_PER_NODE...], e.g. 2xA100-80GB:8,4xV100:4"
_SPEC_ITEM = re.compile(r"^\s*(\d+)\s*[xX]\s*([A-Za-z0-9_\-]+)\s*:\s*(\d+)\s*$")


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
        gpu_type = resolve_gpu_type(type_name)
        for _ in range(count):
            nodes.append(NodeSpec(f"n{len(nodes)}", gpu_type, per_node, CATALOG[gpu_type].mem_gb))
    return ClusterSpec(spec.replace(" ", ""), tuple(nodes))


def load_cluster_csv(path: str | Path) -> ClusterSpec:
    """Read `node_id,gpu_type,num_gpus[,gpu_mem_gb]` (header required); nodes with 0 GPUs are skipped."""
    path = Path(path)
    nodes: list[NodeSpec] = []
    with path.open(newline="") as f:
        reader = csv.DictReader(f)
        required = {"node_id", "gpu_type", "num_gpus"}
        missing = required - set(reader.fieldnames or ())
        if missing:
            raise ValueError(
                f"{path}:1: missing column(s) {sorted(missing)}; need node_id,gpu_type,num_gpus[,gpu_mem_gb]"
            )
        for line_no, row in enumerate(reader, start=2):
            try:
                num = int(row["num_gpus"])
                if num < 0:
                    raise ValueError("num_gpus must be >= 0")
                if num == 0:
                    continue
                gpu_type = resolve_gpu_type(row["gpu_type"])
                mem = row.get("gpu_mem_gb") or ""
                mem_gb = float(mem) if mem.strip() else CATALOG[gpu_type].mem_gb
                if mem_gb <= 0:
                    raise ValueError("gpu_mem_gb must be > 0")
            except (TypeError, ValueError) as e:
                raise ValueError(f"{path}:{line_no}: {e}") from None
            nodes.append(NodeSpec(row["node_id"], gpu_type, num, mem_gb))
    if not nodes:
        raise ValueError(f"{path}: no node with GPUs")
    return ClusterSpec(path.name, tuple(nodes))
