"""The statistics of the synthetic profiles' table (docs/workloads.md) measured on jobs or on a trace's own columns, and their comparison with a profile's published values.

One definition serves bench/synthetic_stats.py, bench/fit_profiles.py and tests/test_synthetic_profiles.py, and
the same functions compute the published values from the trace files where those files are available (the
tests recompute them). Arrival statistics use whole days and 10-minute bins, as the Venus counts they are
compared with; day 0 starts at t = 0 (midnight for the generated jobs and Venus, the files' origin for ITP).
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
BINS_PER_DAY = int(DAY_S // BIN_S)
TOLERANCE = 0.15  # relative error allowed on each fitted row
SMALL_SHARE = 0.05  # below this a share is compared by absolute error <= TOLERANCE * SMALL_SHARE
PEAK_HOUR_TOLERANCE_H = 1.0


@dataclass(frozen=True)
class RuntimeStats:
    """The runtime rows of WorkloadStats."""

    median_runtime_s: float
    mean_over_median_runtime: float
    share_runtime_le_10min: float
    runtime_p75_s: float
    runtime_p90_s: float
    runtime_p95_s: float
    runtime_p99_s: float


@dataclass(frozen=True)
class SizeStats:
    """The GPU-count rows of WorkloadStats."""

    mean_gpus_per_job: float
    share_jobs_ge_8_gpus: float
    gpu_time_share_ge_8_gpus: float
    runtime_weighted_mean_gpus: float
    median_runtime_1_gpu_s: float
    median_runtime_2_4_gpus_s: float
    median_runtime_ge_8_gpus_s: float


@dataclass(frozen=True)
class CountStats:
    """The arrival rows computable from 10-minute submission counts alone (see WorkloadStats)."""

    peak_to_trough: float
    peak_hour_h: float
    burstiness: float
    count_var_over_mean: float
    daily_count_cv: float


@dataclass(frozen=True)
class WorkloadStats(CountStats, SizeStats, RuntimeStats):
    """Every measured value, named like the fields of PublishedStats (whose docstrings define them)."""

    interarrival_cv: float
    same_instant_share: float
    failed_share: float
    cancelled_share: float
    failed_gpu_time_share: float
    cancelled_gpu_time_share: float
    median_estimate_accuracy: float
    share_requesting_max: float
    share_runtime_over_request: float


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


def runtime_stats(runtime_s: np.ndarray) -> RuntimeStats:
    """Median, mean/median, share <= 10 min and the upper percentiles of `runtime_s`."""
    median_s = float(np.median(runtime_s))
    p75, p90, p95, p99 = (float(v) for v in np.percentile(runtime_s, (75, 90, 95, 99)))
    return RuntimeStats(
        median_runtime_s=median_s,
        mean_over_median_runtime=float(runtime_s.mean() / median_s),
        share_runtime_le_10min=float(np.mean(runtime_s <= BIN_S)),
        runtime_p75_s=p75,
        runtime_p90_s=p90,
        runtime_p95_s=p95,
        runtime_p99_s=p99,
    )


def size_stats(runtime_s: np.ndarray, gpus: np.ndarray) -> SizeStats:
    """GPUs per job and how runtime goes with them (NaN for a size class with no job)."""
    big = gpus >= 8
    mid = (gpus >= 2) & (gpus <= 4)
    gpu_time = gpus * runtime_s
    return SizeStats(
        mean_gpus_per_job=float(gpus.mean()),
        share_jobs_ge_8_gpus=float(np.mean(big)),
        gpu_time_share_ge_8_gpus=float(gpu_time[big].sum() / gpu_time.sum()),
        runtime_weighted_mean_gpus=float(gpu_time.sum() / runtime_s.sum()),
        median_runtime_1_gpu_s=_median(runtime_s[gpus == 1]),
        median_runtime_2_4_gpus_s=_median(runtime_s[mid]),
        median_runtime_ge_8_gpus_s=_median(runtime_s[big]),
    )


def _median(values: np.ndarray) -> float:
    return float(np.median(values)) if values.size else float("nan")


def day_counts(arrival_s: np.ndarray) -> np.ndarray:
    """10-minute submission counts over the whole days from the day of the first arrival to the day of the last
    (exclusive), as a (days, 144) array; (0, 144) when the arrivals span no whole day."""
    first_day = int(arrival_s.min() // DAY_S)
    days = int(arrival_s.max() // DAY_S) - first_day
    if days < 1:
        return np.zeros((0, BINS_PER_DAY))
    t_s = arrival_s - first_day * DAY_S
    inside = t_s < days * DAY_S
    counts = np.bincount((t_s[inside] // BIN_S).astype(np.int64), minlength=days * BINS_PER_DAY)
    return counts.reshape(days, BINS_PER_DAY).astype(float)


def count_stats(by_day: np.ndarray) -> CountStats:
    """From (days, 144) 10-minute counts: peak/trough of the mean count by hour of day and the peak hour; the
    mean over days with submissions of the day's variance/mean (burstiness); variance/mean of all the counts at
    once; and the coefficient of variation of the daily totals. NaN without a whole day."""
    if by_day.shape[0] < 1:
        return CountStats(*(float("nan"),) * 5)
    hourly = by_day.reshape(by_day.shape[0], 24, BINS_PER_DAY // 24).mean(axis=(0, 2))
    peak_to_trough = float(hourly.max() / hourly.min()) if hourly.min() > 0 else float("inf")
    mean = by_day.mean(axis=1)
    busy = mean > 0
    daily = by_day.sum(axis=1)
    return CountStats(
        peak_to_trough=peak_to_trough,
        peak_hour_h=float(np.argmax(hourly)),
        burstiness=float(np.mean(by_day[busy].var(axis=1) / mean[busy])),
        count_var_over_mean=float(by_day.var() / by_day.mean()),
        daily_count_cv=float(daily.std() / daily.mean()),
    )


def interarrival_cv(arrival_s: np.ndarray) -> float:
    """Coefficient of variation of the gaps between consecutive submissions (same-instant ones give 0)."""
    gaps_s = np.diff(np.sort(arrival_s))
    return float(gaps_s.std() / gaps_s.mean())


def same_instant_share(arrival_s: np.ndarray) -> float:
    """Share of jobs submitted at the same instant as another job."""
    _, counts = np.unique(arrival_s, return_counts=True)
    return float(counts[counts > 1].sum() / arrival_s.size)


def measure(jobs: Sequence[Job]) -> WorkloadStats:
    """The statistics of `jobs` (runtimes in reference seconds, the time each job held its GPUs)."""
    estimate_s = np.array([np.nan if j.estimate_s is None else j.estimate_s for j in jobs], dtype=float)
    return measure_arrays(
        runtime_s=np.array([j.runtime_s for j in jobs], dtype=float),
        gpus=np.array([j.gpu_demand for j in jobs], dtype=float),
        arrival_s=np.array([j.arrival_s for j in jobs], dtype=float),
        status=np.array([j.trace_status for j in jobs], dtype=object),
        estimate_s=estimate_s,
    )


def measure_arrays(
    runtime_s: np.ndarray, gpus: np.ndarray, arrival_s: np.ndarray, status: np.ndarray, estimate_s: np.ndarray
) -> WorkloadStats:
    """measure() on per-job arrays; estimate_s NaN where a job has no request."""
    gpu_time = gpus * runtime_s
    has = ~np.isnan(estimate_s) & (estimate_s > 0)
    nan = float("nan")
    return WorkloadStats(
        **vars(runtime_stats(runtime_s)),
        **vars(size_stats(runtime_s, gpus)),
        **vars(count_stats(day_counts(arrival_s))),
        interarrival_cv=interarrival_cv(arrival_s),
        same_instant_share=same_instant_share(arrival_s),
        failed_share=float(np.mean(status == "Failed")),
        cancelled_share=float(np.mean(status == "Cancelled")),
        failed_gpu_time_share=float(gpu_time[status == "Failed"].sum() / gpu_time.sum()),
        cancelled_gpu_time_share=float(gpu_time[status == "Cancelled"].sum() / gpu_time.sum()),
        median_estimate_accuracy=float(np.median(runtime_s[has] / estimate_s[has])) if has.any() else nan,
        share_requesting_max=float(np.mean(estimate_s[has] == MAX_REQUEST_S)) if has.any() else nan,
        share_runtime_over_request=float(np.mean(runtime_s[has] > estimate_s[has])) if has.any() else nan,
    )


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
        if name == "peak_hour_h":
            apart = abs(value - target.value) % 24.0
            err, kind, allowed = min(apart, 24.0 - apart), "h", PEAK_HOUR_TOLERANCE_H
        elif "share" in name and target.value < SMALL_SHARE:
            err, kind, allowed = abs(value - target.value), "abs", TOLERANCE * SMALL_SHARE
        else:
            err, kind, allowed = abs(value / target.value - 1.0), "rel", TOLERANCE
        rows.append(
            Row(
                name, value, target.value, target.source, err, kind, err <= allowed if target.fitted else None
            )
        )
    return rows
