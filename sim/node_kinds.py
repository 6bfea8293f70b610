"""Node kinds: real server models (DGX A100, DGX H100, HGX V100, a PCIe T4 server) with their GPUs and power figures.

A node of a kind draws the kind's `base_w` for everything but its GPUs and `gpu_idle_w` per idle GPU, instead of the
power model's generic `node_base_w` and the GPU type's bare idle (sim/power.py); the GPUs' full-load watts stay the
GPU type's. Every figure cites its source; "assumption" says how a figure without a public source was chosen.
Sources, numbered as in docs/power.md's table:
[DGXA100] NVIDIA DGX A100 datasheet: 8x A100 SXM4 40 GB or 80 GB, system power usage 6.5 kW max.
[DGXH100] NVIDIA DGX H100 datasheet: 8x H100 SXM5 80 GB, system power usage ~10.2 kW max.
[DGX1]    NVIDIA DGX-1 with Tesla V100 datasheet (the HGX-1 V100 reference design): 8x V100 SXM2 16 GB or 32 GB,
          maximum power requirements 3,500 W.
[PARK]    Vadari, "The Model Parking Tax: Quantifying the Hidden Energy Cost of Always-On GPU Model Deployment",
          arXiv:2605.23918, 2026: an idle GPU holding a CUDA context draws 26-50 W more than bare idle on HBM parts
          (H100, A100) and 66 W more on a GDDR6 part (L40S, 350 W TDP); VRAM occupancy adds < 0.02 W/GB.
base_w = the datasheet's maximum system power minus its GPUs' TDP (sim/power.py's max_w): the non-GPU parts (CPUs,
memory, NVSwitches, NICs, fans, power-supply losses) at full load, modelled as constant idle or busy as the power
model does for `node_base_w` (an upper bound for an idle node; no vendor publishes an idle figure).
gpu_idle_w = the GPU type's bare idle (sim/power.py) + the context increment of [PARK]: a kind node's idle GPUs
are modelled as parked with a CUDA context (a production node keeps its containers and daemons resident), which is
the assumption that distinguishes a kind node's idle draw from a plain node's.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.catalog import CATALOG


@dataclass(frozen=True, slots=True)
class NodeKind:
    """One server model: the GPU types it may hold (catalog names), its GPU count and its power figures, W."""

    name: str
    gpu_types: tuple[str, ...]
    num_gpus: int
    base_w: float
    """the node without its GPUs (module docstring: datasheet maximum minus the GPUs' TDP)"""
    gpu_idle_w: float
    """one idle GPU holding a CUDA context"""
    source: str


# context increment over bare idle: the midpoint of [PARK]'s 26-50 W on HBM parts (assumption: the paper gives a
# range over H100 and A100; the V100's HBM2 was not measured and takes the same figure)
HBM_CONTEXT_W = 38.0
# T4 (GDDR6, 70 W TDP): [PARK]'s 66 W GDDR6 increment was measured on a 350 W L40S; scaled by TDP,
# 66 x 70 / 350 = 13.2 W (assumption: the increment scales with the board's power class)
T4_CONTEXT_W = 13.2

_KINDS = (
    NodeKind(
        "DGX-A100",
        ("A100-40GB", "A100-80GB"),
        8,
        6500.0 - 8 * 400.0,  # [DGXA100] 6.5 kW max - 8 x 400 W (A100 SXM4 TDP) = 3,300 W
        50.0 + HBM_CONTEXT_W,  # A100 bare idle 50 W + [PARK] context increment
        "NVIDIA DGX A100 datasheet (6.5 kW max); context increment arXiv:2605.23918",
    ),
    NodeKind(
        "DGX-H100",
        ("H100",),
        8,
        10200.0 - 8 * 700.0,  # [DGXH100] ~10.2 kW max - 8 x 700 W (H100 SXM5 TDP) = 4,600 W
        70.0 + HBM_CONTEXT_W,  # H100 bare idle 70 W + [PARK] context increment
        "NVIDIA DGX H100 datasheet (~10.2 kW max); context increment arXiv:2605.23918",
    ),
    NodeKind(
        "HGX-V100",
        ("V100-16GB", "V100-32GB"),
        8,
        3500.0 - 8 * 300.0,  # [DGX1] 3,500 W max - 8 x 300 W (V100 SXM2 TDP) = 1,100 W
        40.0 + HBM_CONTEXT_W,  # V100 bare idle 40 W + the HBM increment (assumption: V100 not measured)
        "NVIDIA DGX-1 (HGX-1 V100) datasheet (3,500 W max); context increment assumed as for HBM parts",
    ),
    NodeKind(
        "T4-SERVER",
        ("T4",),
        4,
        300.0,  # assumption: a 2-socket PCIe host as the power model's generic node_base_w (no datasheet figure)
        10.0 + T4_CONTEXT_W,  # T4 bare idle 10 W + the TDP-scaled GDDR6 increment (assumption)
        "assumption: generic 2-socket host (300 W) with 4 PCIe T4 (AWS g4dn.12xlarge layout)",
    ),
)
NODE_KINDS: dict[str, NodeKind] = {k.name: k for k in _KINDS}
assert all(set(k.gpu_types) <= set(CATALOG) for k in _KINDS), "node kinds name catalog GPU types"


def resolve_node_kind(name: str) -> str:
    """The canonical name of node kind `name` (case-insensitive, `_` or space for `-`); ValueError listing the
    known kinds otherwise."""
    key = name.strip().upper().replace("_", "-").replace(" ", "-")
    if key in NODE_KINDS:
        return key
    raise ValueError(f"unknown node kind {name.strip()!r}; known kinds: {', '.join(NODE_KINDS)}")


def check_node_kind(kind: str, gpu_type: str, num_gpus: int) -> None:
    """ValueError unless a node of `num_gpus` GPUs of (canonical) `gpu_type` can be a `kind` node."""
    k = NODE_KINDS[kind]
    if gpu_type not in k.gpu_types or num_gpus != k.num_gpus:
        raise ValueError(
            f"node kind {kind} has {k.num_gpus} GPUs of type {' or '.join(k.gpu_types)}, "
            f"not {num_gpus} of type {gpu_type}"
        )
