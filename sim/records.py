"""The result of one simulated run: per-job outcomes and the cluster timeline, handed to metrics/."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.job import Job
from sim.power import PowerModel

COMPLETED, UNFINISHED, REJECTED = "completed", "unfinished", "rejected"


@dataclass(frozen=True, slots=True)
class NodeInfo:
    node_id: str
    gpu_type: str
    num_gpus: int
    gpu_mem_gb: float
    speed: float  # relative to A100 (1.0 everywhere with --uniform_speed)
    peak_tflops: float
    kind: str = ""  # node kind (sim/node_kinds.py) or "" for the power model's generic node


@dataclass(frozen=True)
class Runs:
    """Execution intervals of a run, one per (job, run): a job preempted k times has k + 1 (the last one open,
    end NaN, while it still runs). Arrays are aligned; ordered by (start, job index)."""

    job: np.ndarray  # int64 index into RunResult.jobs
    start_s: np.ndarray
    end_s: np.ndarray  # NaN: still running when the result was taken
    placement: tuple[str, ...]  # `node_id/gpu_index` entries joined by `;`
    gpu_type: tuple[str, ...]


@dataclass(frozen=True)
class RunResult:
    """Everything metrics/ needs about one (scheduler, workload, seed) run.

    Per-job arrays are aligned with `jobs` (index i describes jobs[i]). Times are seconds of simulated time.
    `start_s`/`end_s` are NaN for jobs that never started/finished. `placement[i]` is `node_id/gpu_index`
    entries joined by `;` ("" if never placed). The timeline has one sample per simulated event time, holding
    the state right after that instant's decisions: `busy_gpus` counts fractional shares as their fraction.
    """

    scheduler: str
    workload: str
    seed: int
    jobs: tuple[Job, ...]
    nodes: tuple[NodeInfo, ...]
    start_s: np.ndarray
    end_s: np.ndarray
    runtime_actual_s: np.ndarray  # on the GPU type it got (NaN if never started)
    gpu_type: tuple[str, ...]
    placement: tuple[str, ...]
    status: tuple[str, ...]  # COMPLETED / UNFINISHED / REJECTED
    reject_reason: tuple[str, ...]
    timeline_t_s: np.ndarray
    timeline_busy_gpus: np.ndarray
    timeline_busy_tflops: np.ndarray
    timeline_queue_len: np.ndarray
    load_factor: float  # offered reference-GPU-seconds / (cluster GPUs x arrival window)
    runs: Runs | None = None
    """every execution interval (None: not recorded, e.g. a result built by hand)"""
    preemptions: np.ndarray | None = None
    """int64 per job: times it was preempted (None: not recorded)"""
    overhead_s: np.ndarray | None = None
    """float per job: seconds it spent restoring after preemptions, holding its GPUs without doing work (x its
    GPU demand: the GPU-seconds lost; None: not recorded)"""
    preemptive: bool = False
    """the run used a policy that may preempt: its jobs.csv and summary.csv carry the preemption columns"""
    # node power (only when the run had a power model, sim/power.py): the model, each node's state at time 0
    # and every state change (time, node index, new state) in time order; end_of_run_s is the simulated time
    # the run stopped at (its last event)
    power_model: PowerModel | None = None
    power_initial: tuple[int, ...] | None = None
    power_log_t_s: np.ndarray | None = None
    power_log_node: np.ndarray | None = None
    power_log_state: np.ndarray | None = None
    end_of_run_s: float | None = None

    @property
    def total_gpus(self) -> int:
        return sum(n.num_gpus for n in self.nodes)

    @property
    def total_peak_tflops(self) -> float:
        return sum(n.num_gpus * n.peak_tflops for n in self.nodes)
