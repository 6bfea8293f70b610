"""The dispatcher's NVML backend against a fake `pynvml` module: device names to catalog types, samples, an NVML
that cannot start, and a whole dispatch through it (the same code path as the simulated GPUs) around a GPU that
an outside process holds."""

from __future__ import annotations

import json
import sys
import types
from dataclasses import dataclass

import pytest

import main
from config import UserError
from dispatch.devices import NvmlBackend, gpu_type_of

MIB = 1 << 20


@dataclass
class _Memory:
    total: int
    used: int


@dataclass
class _Util:
    gpu: int


@dataclass
class _Process:
    pid: int
    usedGpuMemory: int | None  # noqa: N815 (NVML's name)


def fake_nvml(gpus: list[tuple[str, int, int, list[_Process]]], fail_init: bool = False) -> types.ModuleType:
    """A pynvml stand-in: each GPU is (name, total MiB, used MiB, processes); utilization 40 % on GPU 0 and
    unavailable (NVMLError) on the others."""
    m = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    def init():
        if fail_init:
            raise NVMLError("Driver Not Loaded")

    m.NVMLError = NVMLError
    m.nvmlInit = init
    m.nvmlShutdown = lambda: None
    m.nvmlDeviceGetCount = lambda: len(gpus)
    m.nvmlDeviceGetHandleByIndex = lambda i: i
    m.nvmlDeviceGetName = lambda h: (
        gpus[h][0].encode() if h % 2 else gpus[h][0]
    )  # bytes or str, as versions differ
    m.nvmlDeviceGetMemoryInfo = lambda h: _Memory(gpus[h][1] * MIB, gpus[h][2] * MIB)

    def util(h):
        if h:
            raise NVMLError("Not Supported")
        return _Util(40)

    m.nvmlDeviceGetUtilizationRates = util
    m.nvmlDeviceGetComputeRunningProcesses = lambda h: list(gpus[h][3])
    return m


@pytest.mark.parametrize(
    ("name", "mib", "gpu_type", "known"),
    [
        ("NVIDIA A100-SXM4-80GB", 81920, "A100-80GB", True),
        ("NVIDIA A100-PCIE-40GB", 40960, "A100-40GB", True),
        ("NVIDIA H100 80GB HBM3", 81559, "H100", True),
        ("Tesla V100-SXM2-16GB", 16160, "V100-16GB", True),
        ("Tesla V100-SXM2-32GB", 32510, "V100-32GB", True),
        ("Tesla T4", 15360, "T4", True),
        ("NVIDIA A10", 23028, "A10", True),
        ("NVIDIA GeForce RTX 4090", 24564, "A10", False),  # nearest memory: 24 GB
    ],
)
def test_device_names_map_to_catalog_types(name, mib, gpu_type, known):
    assert gpu_type_of(name, mib) == (gpu_type, known)


def test_devices_and_samples(monkeypatch, capsys):
    procs = [_Process(11, 2048 * MIB), _Process(12, None)]
    monkeypatch.setitem(
        sys.modules,
        "pynvml",
        fake_nvml([("NVIDIA A100-SXM4-80GB", 81920, 3000, procs), ("NVIDIA GeForce RTX 4090", 24564, 0, [])]),
    )
    backend = NvmlBackend()
    (a, b) = backend.devices()
    assert (a.index, a.gpu_type, a.total_mib, b.gpu_type) == (0, "A100-80GB", 81920, "A10")
    assert (
        "GPU 1 (NVIDIA GeForce RTX 4090) is not in the GPU catalog; modelled as A10"
        in capsys.readouterr().out
    )
    s0, s1 = backend.sample()
    assert (s0.used_mib, s0.util_pct, s1.util_pct) == (3000, 40.0, None)
    assert [(p.pid, p.used_mib, p.peak_mib) for p in s0.processes] == [(11, 2048, 2048), (12, 0, 0)]
    assert backend.job_env() == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    backend.close()


def test_nvml_that_cannot_start_is_one_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", fake_nvml([], fail_init=True))
    with pytest.raises(UserError, match=r"cannot open NVML \(Driver Not Loaded\).*--sim 4xA100-80GB"):
        NvmlBackend()


def test_a_dispatch_on_nvml_keeps_off_a_gpu_an_outside_process_holds(monkeypatch, tmp_path):
    outsider = _Process(2_000_000_000, 70 * 1024 * MIB)  # no such pid here: not a job of ours
    monkeypatch.setitem(
        sys.modules,
        "pynvml",
        fake_nvml(
            [("NVIDIA A100-SXM4-80GB", 81920, 70 * 1024, [outsider]), ("NVIDIA A100-SXM4-80GB", 81920, 0, [])]
        ),
    )
    jobs = tmp_path / "jobs.txt"
    jobs.write_text("sleep 0.2\nsleep 0.3\n[vram=20G] sleep 0.1\n")
    folder = tmp_path / "run"
    args = [
        "--mode",
        "dispatch",
        "--jobs",
        str(jobs),
        "--log_dir",
        str(folder),
        "--poll_s",
        "0.05",
        "--plots",
        "none",
    ]
    assert main.main(args) == 0
    records = [json.loads(line) for line in (folder / "journal.jsonl").read_text().splitlines()]
    assert records[0]["backend"] == "nvml"
    # GPU 0 holds 70 GiB of someone else's (held at 77 GiB): the idle-GPU jobs and the 20 GiB one all use GPU 1
    assert [r["devices"] for r in records if r["event"] == "start"] == [[1], [1], [1]]
    assert [r["outcome"] for r in records if r["event"] == "end"] == ["ok"] * 3
