"""The GPU catalog: memory, peak FLOPS and relative training speed of every GPU type the simulator knows."""

from __future__ import annotations

from dataclasses import dataclass

REFERENCE_TYPE = "A100-80GB"  # runtime_s of a job is its duration on this type (speed 1.0)


@dataclass(frozen=True, slots=True)
class GPUType:
    """One GPU model. `speed` is training throughput relative to an A100 (1.0)."""

    name: str
    mem_gb: float
    peak_tflops: float  # dense FP16/BF16 tensor peak (FP32 for K80, which has no tensor cores)
    speed: float
    source: str


# Speeds: K80/P100/V100 ratios are the medians over Gavel's 80 measured job types
# (simulation_throughputs.json: V100/K80 = 4.79, P100/K80 = 3.21), anchored at V100 = 0.5 x A100
# (NVIDIA A100 whitepaper: ~2x V100 on mixed-precision training). A10/T4/H100 from NVIDIA/Lambda
# published training benchmarks. Memory and peak FLOPS from NVIDIA datasheets.
_TYPES = (
    GPUType("K80", 12.0, 4.4, 0.10, "NVIDIA K80 datasheet (per die); Gavel K80/V100 = 1/4.79"),
    GPUType("P100", 16.0, 18.7, 0.34, "NVIDIA P100 PCIe datasheet; Gavel P100/K80 = 3.21"),
    GPUType("T4", 16.0, 65.0, 0.20, "NVIDIA T4 datasheet; Lambda/MLPerf training ~0.4 x V100"),
    GPUType("V100-16GB", 16.0, 125.0, 0.50, "NVIDIA V100 SXM2 datasheet; A100 whitepaper ~2x V100"),
    GPUType("V100-32GB", 32.0, 125.0, 0.50, "NVIDIA V100 SXM2 datasheet; A100 whitepaper ~2x V100"),
    GPUType("A10", 24.0, 125.0, 0.45, "NVIDIA A10 datasheet; Lambda benchmarks ~0.45 x A100"),
    GPUType("A100-40GB", 40.0, 312.0, 1.00, "NVIDIA A100 datasheet (reference type)"),
    GPUType("A100-80GB", 80.0, 312.0, 1.00, "NVIDIA A100 datasheet (reference type)"),
    GPUType("H100", 80.0, 989.0, 2.00, "NVIDIA H100 SXM datasheet; MLPerf/Lambda ~2x A100 training"),
    # Alibaba openb 2023 internal codes (undisclosed models): documented custom entries,
    # sized like the closest public part so that traces constrained to them can be replayed.
    GPUType("G1", 16.0, 65.0, 0.20, "Alibaba openb internal code G1 (undisclosed; modelled as T4-class)"),
    GPUType("G2", 24.0, 125.0, 0.45, "Alibaba openb internal code G2 (undisclosed; modelled as A10-class)"),
    GPUType(
        "G3", 32.0, 125.0, 0.50, "Alibaba openb internal code G3 (undisclosed; modelled as V100-32GB-class)"
    ),
    GPUType("MISC", 16.0, 65.0, 0.20, "Alibaba PAI 2020 'MISC' (older mixed GPUs; modelled as T4-class)"),
)

CATALOG: dict[str, GPUType] = {t.name: t for t in _TYPES}

_ALIASES = {
    "A100": "A100-80GB",
    "A100-80G": "A100-80GB",
    "A10080GB": "A100-80GB",
    "A100-40G": "A100-40GB",
    "V100": "V100-16GB",
    "V100-16G": "V100-16GB",
    "V100-32G": "V100-32GB",
    "V100M16": "V100-16GB",
    "V100M32": "V100-32GB",
    "H100-80GB": "H100",
    "H100-SXM": "H100",
    "TESLA-K80": "K80",
}


def resolve_gpu_type(name: str) -> str:
    """Return the canonical catalog name for `name` (case-insensitive, aliases allowed).

    Raises ValueError listing the known types when the name is unknown.
    """
    key = name.strip().upper().replace("_", "-").replace(" ", "-")
    for canonical in CATALOG:
        if canonical.upper() == key:
            return canonical
    if key in _ALIASES:
        return _ALIASES[key]
    known = ", ".join(CATALOG)
    raise ValueError(f"unknown GPU type {name!r}; known types: {known} (aliases: {', '.join(_ALIASES)})")
