"""The job record every workload source produces and the simulator consumes."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

FULL_GPU_MILLI = 1000  # a whole GPU in 1/1000-GPU units (openb's gpu_milli)


@dataclass(frozen=True, slots=True)
class Job:
    """One job as submitted.

    `runtime_s` is the duration on one reference GPU type (A100, speed 1.0); on a type of speed v it runs
    runtime_s / v. `gpu_milli` < 1000 means the job asks for that fraction of a single GPU (then num_gpus == 1).
    `gpu_types` holds canonical catalog names; empty means any type is acceptable.
    The duration rule (`duration_s` in sim/placement.py, through each job's Pace) has two exceptions:
    `runtime_includes_spread` (True for every trace job: its recorded duration already includes whatever
    spreading over nodes cost) means the multi-node factor is never applied; `speed_scaled=False` (an inference service, e.g. an openb LS pod, lives as long as its
    traffic, not its compute) means the job runs `runtime_s` on every GPU type.
    """

    job_id: str
    arrival_s: float
    runtime_s: float
    num_gpus: int
    gpu_mem_gb: float = 0.0
    gpu_milli: int = FULL_GPU_MILLI
    gpu_types: tuple[str, ...] = ()
    priority: int = 0
    estimate_s: float | None = None
    trace_status: str = ""  # status recorded by a trace (e.g. Failed, Killed); "" for synthetic jobs
    runtime_includes_spread: bool = False
    speed_scaled: bool = True
    job_type: str = ""
    """model of a throughput matrix (sim/throughput.py, e.g. "ResNet-50 (batch size 64)"): with --job_types the
    job's speed on each GPU type is its own; "" = the catalog's type speeds"""

    @property
    def gpu_demand(self) -> float:
        """GPUs requested, counting a fractional request as its fraction."""
        return self.num_gpus * self.gpu_milli / FULL_GPU_MILLI


def total_gpu_seconds(jobs: Iterable[Job]) -> float:
    """sum(job.gpu_demand * job.runtime_s) over `jobs` in their order, the property inlined (a property call per
    job was most of the time of this sum over a large trace)."""
    return sum([j.num_gpus * j.gpu_milli / FULL_GPU_MILLI * j.runtime_s for j in jobs])


@dataclass(frozen=True)
class Workload:
    """An ordered (by arrival) tuple of jobs plus where it came from.

    `report` carries loader statistics (rows read, filtered counts per reason, ...) as plain values; it is
    written verbatim to workload_report.json.
    """

    name: str
    jobs: tuple[Job, ...]
    report: dict = field(default_factory=dict)
