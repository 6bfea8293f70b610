"""The GPUs a dispatcher runs jobs on, behind one interface: NVML (real NVIDIA GPUs, through nvidia-ml-py) or
simulated devices (N fake GPUs of catalog types whose memory is "used" by dispatch/fake_job.py). Both give the
devices' totals and, at each sample, per device the memory used, the utilization and the processes holding
memory; the dispatcher's code path is the same for both."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from config import UserError
from dispatch.fake_job import DEVICES_FILE, pid_alive, read_usage
from sim.catalog import CATALOG, resolve_gpu_type
from workloads.dispatch_log import Device

_SIM_ITEM = re.compile(r"^\s*(\d+)\s*[xX]\s*([A-Za-z0-9_\-]+)\s*$")
SIM_FORM = "COUNTxTYPE[,COUNTxTYPE...], e.g. 4xA100-80GB or 2xA100-80GB,1xT4"
_BYTES_PER_MIB = 1 << 20


@dataclass(frozen=True)
class ProcessUsage:
    """A process holding memory on one device: now and (simulated devices only) the most since its start."""

    pid: int
    used_mib: int
    peak_mib: int
    exited: bool = False
    """simulated devices: the process has just ended (reported once, with its peak, holding nothing)"""
    pgid: int | None = None
    """its process group when the backend knows it (simulated devices); else looked up while it runs"""


@dataclass(frozen=True)
class DeviceSample:
    index: int
    used_mib: int
    util_pct: float | None
    processes: tuple[ProcessUsage, ...]


class Backend(Protocol):
    name: str
    """recorded in the journal: `nvml` or `sim:<spec>`"""

    def devices(self) -> tuple[Device, ...]: ...

    def sample(self) -> tuple[DeviceSample, ...]: ...

    def job_env(self) -> dict[str, str]:
        """Environment variables every job gets from this backend."""
        ...

    def close(self) -> None: ...


def gpu_type_of(name: str, total_mib: int) -> tuple[str, bool]:
    """(the catalog type of a device named `name` with this much memory, whether the name was recognised). An
    unknown name is modelled as the catalog type of nearest memory (only FLOPS figures depend on it: dispatched
    run times do not scale with the type's speed)."""
    key = name.upper()
    gib = total_mib / 1024
    rules = (
        ("H100", "H100"),
        ("A100", "A100-80GB" if gib > 50 else "A100-40GB"),
        ("V100", "V100-32GB" if gib > 20 else "V100-16GB"),
        ("P100", "P100"),
        ("K80", "K80"),
        ("T4", "T4"),
    )
    for token, gpu_type in rules:
        if token in key:
            return gpu_type, True
    if re.search(r"\bA10\b", key):
        return "A10", True
    public = [t for t in CATALOG.values() if not t.source.startswith("Alibaba")]
    nearest = min(public, key=lambda t: (abs(t.mem_gb - gib), -t.speed))
    return nearest.name, False


def parse_sim_spec(spec: str) -> tuple[tuple[str, int], ...]:
    """`4xA100-80GB,1xT4` -> ((type, count), ...); UserError showing the form."""
    items = []
    for item in spec.split(","):
        m = _SIM_ITEM.match(item)
        if not m or int(m.group(1)) < 1:
            raise UserError(f"--sim {spec}: bad item {item.strip()!r}; expected {SIM_FORM}")
        try:
            items.append((resolve_gpu_type(m.group(2)), int(m.group(1))))
        except ValueError as e:
            raise UserError(f"--sim {spec}: {e}") from None
    return tuple(items)


class SimulatedBackend:
    """Fake GPUs of catalog types; their memory is what the fake jobs' usage files in `folder` say."""

    def __init__(self, spec: str, folder: Path):
        self.name = f"sim:{spec.replace(' ', '')}"
        self.folder = folder
        devices = []
        for gpu_type, count in parse_sim_spec(spec):
            for _ in range(count):
                total = int(CATALOG[gpu_type].mem_gb * 1024)
                devices.append(Device(len(devices), f"simulated {gpu_type}", gpu_type, total))
        self._devices = tuple(devices)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / DEVICES_FILE).write_text(json.dumps({d.index: d.total_mib for d in self._devices}))

    def devices(self) -> tuple[Device, ...]:
        return self._devices

    def sample(self) -> tuple[DeviceSample, ...]:
        per_device: dict[int, list[ProcessUsage]] = {d.index: [] for d in self._devices}
        util: dict[int, float] = {d.index: 0.0 for d in self._devices}
        for r in read_usage(self.folder):
            pid = int(r["pid"])
            alive = pid_alive(pid)
            if r["exited"] or not alive:
                Path(r["path"]).unlink(missing_ok=True)  # reported once (its peak), then gone
                if not r["exited"]:
                    continue  # killed without a word: its memory is simply free
            for g in r["devices"]:
                if g in per_device:
                    mib = 0 if r["exited"] else int(r["mib"])
                    per_device[g].append(
                        ProcessUsage(pid, mib, int(r["peak"]), bool(r["exited"]), int(r["pgid"]))
                    )
                    if not r["exited"]:
                        util[g] += float(r["util"])
        return tuple(
            DeviceSample(
                d.index,
                sum(p.used_mib for p in per_device[d.index]),
                min(100.0, util[d.index]),
                tuple(per_device[d.index]),
            )
            for d in self._devices
        )

    def job_env(self) -> dict[str, str]:
        return {"DISPATCH_SIM_DIR": str(self.folder)}

    def close(self) -> None:
        pass


class NvmlBackend:
    """Real NVIDIA GPUs through NVML (nvidia-ml-py's `pynvml`, imported only here: a simulated run and the
    rest of the program never need it)."""

    def __init__(self):
        import pynvml  # lazy: only a run on real GPUs needs NVML

        self.name = "nvml"
        self._nvml = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as e:
            raise UserError(
                f"cannot open NVML ({e}): no NVIDIA driver here? Use --sim 4xA100-80GB for simulated GPUs"
            ) from None
        devices = []
        self._handles = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            name = name.decode() if isinstance(name, bytes) else str(name)
            total = int(pynvml.nvmlDeviceGetMemoryInfo(h).total) // _BYTES_PER_MIB
            gpu_type, known = gpu_type_of(name, total)
            self._handles.append(h)
            devices.append(Device(i, name, gpu_type, total))
            if not known:
                print(
                    f"note: GPU {i} ({name}) is not in the GPU catalog; modelled as {gpu_type} (nearest memory)"
                )
        if not devices:
            raise UserError("NVML sees no GPU; use --sim 4xA100-80GB for simulated GPUs")
        self._devices = tuple(devices)

    def devices(self) -> tuple[Device, ...]:
        return self._devices

    def sample(self) -> tuple[DeviceSample, ...]:
        nvml = self._nvml
        samples = []
        for d, h in zip(self._devices, self._handles, strict=True):
            used = int(nvml.nvmlDeviceGetMemoryInfo(h).used) // _BYTES_PER_MIB
            try:
                util: float | None = float(nvml.nvmlDeviceGetUtilizationRates(h).gpu)
            except nvml.NVMLError:
                util = None
            try:
                listed = nvml.nvmlDeviceGetComputeRunningProcesses(h)
            except nvml.NVMLError:
                listed = []
            processes = []
            for p in listed:
                mib = int(p.usedGpuMemory or 0) // _BYTES_PER_MIB  # None where the driver cannot tell
                processes.append(ProcessUsage(int(p.pid), mib, mib))
            samples.append(DeviceSample(d.index, used, util, tuple(processes)))
        return tuple(samples)

    def job_env(self) -> dict[str, str]:
        # NVML numbers GPUs by PCI bus id; CUDA's default order is fastest first: make CUDA use NVML's order
        return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}

    def close(self) -> None:
        try:
            self._nvml.nvmlShutdown()
        except self._nvml.NVMLError:
            pass


def open_backend(sim_spec: str | None, sim_folder: Path) -> Backend:
    """Simulated devices for `--sim SPEC`, else NVML."""
    if sim_spec is not None:
        return SimulatedBackend(sim_spec, sim_folder)
    return NvmlBackend()


def pgid_of(pid: int) -> int | None:
    """The process group of `pid`, None if it is gone (or not visible from here, e.g. another container)."""
    try:
        return os.getpgid(pid)
    except (ProcessLookupError, PermissionError):
        return None
