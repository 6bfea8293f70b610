"""The offered load factor of a workload: the one definition every report and calibration uses."""

from __future__ import annotations

from collections.abc import Sequence

from sim.job import Job, total_gpu_seconds


def offered_load_factor(jobs: Sequence[Job], num_gpus: int) -> float:
    """Offered reference-GPU-seconds per GPU-second of the arrival window.

    load = sum(job.gpu_demand * job.runtime_s) / (num_gpus * arrival_window_s), where arrival_window_s is the
    last arrival minus the first. When every job arrives at the same instant the window is 0; it is then taken
    as max(runtime_s) (the time the longest job would need on its own) so the factor stays finite. Returns 0.0
    for no jobs or no work at all.
    """
    if num_gpus <= 0:
        raise ValueError(f"num_gpus must be > 0, got {num_gpus}")
    if not jobs:
        return 0.0
    work_gpu_s = total_gpu_seconds(jobs)
    if work_gpu_s <= 0.0:
        return 0.0
    arrivals_s = [j.arrival_s for j in jobs]
    window_s = max(arrivals_s) - min(arrivals_s)
    if window_s <= 0.0:
        window_s = max(j.runtime_s for j in jobs)
    return work_gpu_s / (num_gpus * window_s)
