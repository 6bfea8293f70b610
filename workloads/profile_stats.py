"""The statistics of the synthetic profiles' table (docs/workloads.md) measured on a workload, and their comparison with a profile's published values.

One definition serves bench/synthetic_stats.py and tests/test_synthetic_profiles.py. Arrival statistics use
whole days counted from t = 0 (midnight) and 10-minute bins, as the Venus counts they are compared with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from sim.job import Job
from workloads.estimates import MAX_REQUEST_S
from workloads.profiles import PublishedStats, SyntheticProfile, Target

DAY_S = 86_400.0
BIN_S = 600.0  # 10 minutes
TOLERANCE = 0.15  # relative error allowed on each fitted row
SMALL_SHARE = 0.05  # below this a share is compared by absolute error <= TOLERANCE * SMALL_SHARE
PEAK_HOUR_TOLERANCE_H = 1.0


@dataclass(frozen=True)
class WorkloadStats:
    """Measured values, named like the fields of PublishedStats."""

    median_runtime_s: float
    mean_over_median_runtime: float
    share_runtime_le_10min: float
    mean_gpus_per_job: float
    share_jobs_ge_8_gpus: float
    gpu_time_share_ge_8_gpus: float
    peak_to_trough: float
    peak_hour_h: float
    burstiness: float
    failed_share: float
    cancelled_share: float
    median_estimate_accuracy: float
    """median of runtime / requested time over jobs with a request"""
    share_requesting_max: float
    """share of jobs with a request that ask for the 72 h maximum"""


@dataclass(frozen=True)
class Row:
    statistic: str
    generated: float
    published: float | None
    source: str
    error: float | None
    error_kind: str
    """rel (relative), abs (absolute difference of shares) or h (hours apart)"""
    within: bool | None
    """None when there is no published value to fit"""


def measure(jobs: Sequence[Job]) -> WorkloadStats:
    """The statistics of `jobs` (runtimes in reference seconds, the time each job held its GPUs)."""
    runtime_s = np.array([j.runtime_s for j in jobs], dtype=float)
    gpus = np.array([j.gpu_demand for j in jobs], dtype=float)
    arrival_s = np.array([j.arrival_s for j in jobs], dtype=float)
    status = np.array([j.trace_status for j in jobs], dtype=object)
    median_s = float(np.median(runtime_s))
    big = gpus >= 8
    gpu_time = gpus * runtime_s
    peak_to_trough, peak_hour, burstiness = _arrival_stats(arrival_s)
    estimate_s = np.array([np.nan if j.estimate_s is None else j.estimate_s for j in jobs], dtype=float)
    has = ~np.isnan(estimate_s) & (estimate_s > 0)
    accuracy = float(np.median(runtime_s[has] / estimate_s[has])) if has.any() else float("nan")
    at_max = float(np.mean(estimate_s[has] == MAX_REQUEST_S)) if has.any() else float("nan")
    return WorkloadStats(
        median_runtime_s=median_s,
        mean_over_median_runtime=float(runtime_s.mean() / median_s),
        share_runtime_le_10min=float(np.mean(runtime_s <= BIN_S)),
        mean_gpus_per_job=float(gpus.mean()),
        share_jobs_ge_8_gpus=float(np.mean(big)),
        gpu_time_share_ge_8_gpus=float(gpu_time[big].sum() / gpu_time.sum()),
        peak_to_trough=peak_to_trough,
        peak_hour_h=peak_hour,
        burstiness=burstiness,
        failed_share=float(np.mean(status == "Failed")),
        cancelled_share=float(np.mean(status == "Cancelled")),
        median_estimate_accuracy=accuracy,
        share_requesting_max=at_max,
    )


def _arrival_stats(arrival_s: np.ndarray) -> tuple[float, float, float]:
    """(peak/trough of the mean 10-min count by hour of day, the peak hour, mean over days of the day's
    variance/mean of its 10-min counts), over the whole days [0, floor(last arrival / day)); NaN without one."""
    days = int(arrival_s.max() // DAY_S)
    if days < 1:
        return float("nan"), float("nan"), float("nan")
    bins_per_day = int(DAY_S // BIN_S)
    inside = arrival_s < days * DAY_S
    counts = np.bincount((arrival_s[inside] // BIN_S).astype(np.int64), minlength=days * bins_per_day)
    by_day = counts.reshape(days, bins_per_day).astype(float)
    hourly = by_day.reshape(days, 24, bins_per_day // 24).mean(axis=(0, 2))
    peak_to_trough = float(hourly.max() / hourly.min()) if hourly.min() > 0 else float("inf")
    mean = by_day.mean(axis=1)
    busy = mean > 0
    burstiness = float(np.mean(by_day[busy].var(axis=1) / mean[busy]))
    return peak_to_trough, float(np.argmax(hourly)), burstiness


def compare(stats: WorkloadStats, profile: SyntheticProfile) -> list[Row]:
    """One row per statistic: generated vs published (where published) and whether it is within tolerance.

    The error is relative, except for the peak hour (hours apart on the 24-hour clock, allowed
    PEAK_HOUR_TOLERANCE_H) and shares published below SMALL_SHARE (absolute difference, allowed
    TOLERANCE * SMALL_SHARE), where a relative error would be meaningless.
    """
    targets: dict[str, Target | None] = {
        f.name: getattr(profile.published, f.name) for f in fields(PublishedStats)
    }
    rows = []
    for name, target in targets.items():
        value = getattr(stats, name)
        if target is None:
            rows.append(Row(name, value, None, "not published for this trace", None, "", None))
            continue
        if not target.fitted:
            err = abs(value / target.value - 1.0)
            rows.append(Row(name, value, target.value, target.source, err, "rel", None))
        elif name == "peak_hour_h":
            apart = abs(value - target.value) % 24.0
            err = min(apart, 24.0 - apart)
            rows.append(Row(name, value, target.value, target.source, err, "h", err <= PEAK_HOUR_TOLERANCE_H))
        elif "share" in name and target.value < SMALL_SHARE:
            err = abs(value - target.value)
            rows.append(
                Row(name, value, target.value, target.source, err, "abs", err <= TOLERANCE * SMALL_SHARE)
            )
        else:
            err = abs(value / target.value - 1.0)
            rows.append(Row(name, value, target.value, target.source, err, "rel", err <= TOLERANCE))
    return rows
