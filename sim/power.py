"""Node power: GPU and node watts, the node power states and their transitions, and the PowerOn/PowerOff decisions.

Model (docs/power.md):
- a GPU draws `idle_w` when idle and `max_w` at full load, linear in its busy share in between (a fractional job
  of 250 milli-GPU adds a quarter of `max_w - idle_w`); a node that is ON draws `node_base_w` (CPUs, memory,
  fans, NICs) plus its GPUs; facility power is IT power x `pue`. A node of a kind (sim/node_kinds.py: DGX A100, ...)
  draws the kind's base watts and idle-GPU watts instead (`PowerModel.node_watts`).
- a node is ON, OFF, BOOTING or SHUTTING_DOWN. `PowerOff(node)` (ON and empty) -> SHUTTING_DOWN for
  `shutdown_s`, then OFF; `PowerOn(node)` (OFF) -> BOOTING for `boot_s`, then ON. A node that is not ON offers no
  capacity: the simulator takes all its GPUs out of the free state, so placement never picks it. While booting
  or shutting down a node draws its idle power (base + idle GPUs); OFF it draws `off_w`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from sim.catalog import CATALOG
from sim.node_kinds import NODE_KINDS

ON, OFF, BOOTING, SHUTTING_DOWN = 0, 1, 2, 3
STATE_NAMES = ("on", "off", "booting", "shutting_down")


class PowerOn(NamedTuple):
    """Boot node `node` (an index into the layout's nodes); it must be OFF."""

    node: int


class PowerOff(NamedTuple):
    """Shut node `node` down; it must be ON and hold no job (anything else is a ValueError)."""

    node: int


@dataclass(frozen=True, slots=True)
class GPUPower:
    """Board power of one GPU model: idle and full-load watts."""

    name: str
    idle_w: float
    max_w: float
    source: str


# max_w: the board's TDP from NVIDIA's datasheets (SXM parts where both exist). idle_w: the
# draw of an idle board with no context in P0/P8 as reported by nvidia-smi/NVML; datasheets give no idle
# figure, so these are typical measured values (roughly 10-15 % of TDP; Yang et al., "Part-time Power
# Measurements: nvidia-smi's Lack of Attention", arXiv:2312.02741, 2023, measure 70+ GPUs and show that
# NVML idle readings are reliable while load readings are sampled). Replace them with a site's own figures.
_GPU_POWER = (
    GPUPower("K80", 25.0, 150.0, "K80 datasheet: 300 W per board of 2 dies (catalog is per die)"),
    GPUPower("P100", 30.0, 250.0, "P100 PCIe datasheet: 250 W"),
    GPUPower("T4", 10.0, 70.0, "T4 datasheet: 70 W"),
    GPUPower("V100-16GB", 40.0, 300.0, "V100 SXM2 datasheet: 300 W"),
    GPUPower("V100-32GB", 40.0, 300.0, "V100 SXM2 datasheet: 300 W"),
    GPUPower("A10", 20.0, 150.0, "A10 datasheet: 150 W"),
    GPUPower("A100-40GB", 50.0, 400.0, "A100 SXM datasheet: 400 W"),
    GPUPower("A100-80GB", 50.0, 400.0, "A100 SXM datasheet: 400 W"),
    GPUPower("H100", 70.0, 700.0, "H100 SXM datasheet: up to 700 W"),
    GPUPower("G1", 10.0, 70.0, "modelled as T4-class (catalog)"),
    GPUPower("G2", 20.0, 150.0, "modelled as A10-class (catalog)"),
    GPUPower("G3", 40.0, 300.0, "modelled as V100-32GB-class (catalog)"),
    GPUPower("MISC", 10.0, 70.0, "modelled as T4-class (catalog)"),
)
GPU_POWER: dict[str, GPUPower] = {p.name: p for p in _GPU_POWER}
assert set(GPU_POWER) == set(CATALOG), "every catalog GPU type needs a power entry"


class NodeWatts(NamedTuple):
    """One node's power figures, W: without its GPUs, per idle GPU, per GPU at full load."""

    base_w: float
    gpu_idle_w: float
    gpu_max_w: float


@dataclass(frozen=True)
class PowerModel:
    """Every power knob, with units. Defaults and their sources are in the field docstrings."""

    node_base_w: float = 300.0
    """a node's power without its GPUs (CPUs, memory, fans, NICs), the same idle or busy: a dual-socket host
    draws about 100-300 W (SPECpower_ssj2008 published 2-socket results: ~50-100 W idle, ~250-400 W at full
    CPU load); 300 W because a GPU host's fans and NICs work harder than a CPU server's (assumption)"""
    pue: float = 1.58
    """facility power / IT power: the 2023 average over surveyed data centers (Uptime Institute Global Data
    Center Survey 2023: 1.58); hyperscalers report ~1.1 (Google fleet-wide trailing-twelve-month PUE 1.10)"""
    boot_s: float = 260.0
    """OFF -> ON: 260 s, the setup time measured for a server by Gandhi et al., "AutoScale: Dynamic, Robust
    Capacity Management for Multi-Tier Data Centers", ACM TOCS 30(4), 2012 (Sec. 2)"""
    shutdown_s: float = 60.0
    """ON -> OFF: an orderly OS shutdown (assumption: about a minute; AutoScale treats it as short)"""
    off_w: float = 0.0
    """draw of an OFF node (its baseboard controller's few watts are neglected, as in AutoScale)"""

    def gpu(self, gpu_type: str) -> GPUPower:
        return GPU_POWER[gpu_type]

    def node_watts(self, gpu_type: str, kind: str = "") -> NodeWatts:
        """A node of `gpu_type` GPUs: its kind's base and idle-GPU watts (sim/node_kinds.py), or without a kind
        `node_base_w` and the GPU type's bare idle; full load is the GPU type's `max_w` either way."""
        g = GPU_POWER[gpu_type]
        if not kind:
            return NodeWatts(self.node_base_w, g.idle_w, g.max_w)
        k = NODE_KINDS[kind]
        return NodeWatts(k.base_w, k.gpu_idle_w, g.max_w)


class NodePower:
    """The live power state of every node, kept by the simulator; policies read it through `View.node_power`.

    `state[n]` is ON/OFF/BOOTING/SHUTTING_DOWN; `idle_since_s[n]` is when node n last became ON with no job on
    it (meaningful while it is ON and empty); `until_s[n]` is when a running transition ends (nan otherwise).
    `log` records every state change as (time, node, new state), in time order; every node starts in
    `initial[n]` at time 0.
    """

    __slots__ = ("state", "idle_since_s", "until_s", "log", "initial", "model")

    def __init__(self, num_nodes: int, model: PowerModel, initial: tuple[int, ...] | None = None):
        self.model = model
        self.initial = tuple(initial) if initial is not None else (ON,) * num_nodes
        if len(self.initial) != num_nodes or any(s not in (ON, OFF) for s in self.initial):
            raise ValueError(f"initial node power states must be {num_nodes} values of ON/OFF")
        self.state = list(self.initial)
        self.idle_since_s = [0.0] * num_nodes
        self.until_s = [float("nan")] * num_nodes
        self.log: list[tuple[float, int, int]] = []

    def count(self, state: int) -> int:
        return self.state.count(state)
