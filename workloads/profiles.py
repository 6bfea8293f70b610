"""Named synthetic-workload profiles: generator parameters fitted to published GPU-cluster statistics.

A profile fixes the distributions the calibrated generator (workloads/calibrated.py) draws from; the
difficulty presets (config.DIFFICULTIES) then choose cluster, job count and target load on top of it.
`legacy` is not a SyntheticProfile: it selects the original generator (workloads/synthetic.py) unchanged.

Every published value below is copied from a file under ../shared/traces/ (cited per field); "borrowed"
marks a value taken from another trace because the profile's own trace does not publish it. The table of
generated vs published values is printed by `python bench/synthetic_stats.py` and checked by
tests/test_synthetic_profiles.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from workloads.estimates import RICC_MEDIAN_ACCURACY, RICC_SHARE_MAX_REQUEST

LEGACY = "legacy"

# Venus (Helios) GPU-job submissions: mean count per 10-min bin by hour of day 00..23, divided by the overall
# mean (helios-aggregates/Venus_cluster_throughput_10min.csv, column submit_gpu_job, 2020-04-01..09-28).
# Peak 16:00, trough 06:00, peak/trough 9.25.
VENUS_HOURLY_RATE = (
    0.8968, 0.6580, 0.5995, 0.3843, 0.2681, 0.2055, 0.1875, 0.2239, 0.3743, 0.7960, 1.2949, 1.4741,
    1.1644, 1.2986, 1.5591, 1.6564, 1.7341, 1.7329, 1.2823, 1.3131, 1.3446, 1.3643, 1.1491, 1.0381,
)  # fmt: skip


@dataclass(frozen=True)
class Target:
    """One published value a profile is fitted to, and where it comes from."""

    value: float
    source: str
    """file under ../shared/traces/ and the figure (or how it was computed from that file)"""
    fitted: bool = True
    """False: shown beside the generated value but not fitted (the source says why)"""


@dataclass(frozen=True)
class PublishedStats:
    """The rows of the profiles' statistics table for one profile; None = not published for this trace (shown, not fitted)."""

    median_runtime_s: Target | None
    mean_over_median_runtime: Target | None
    share_runtime_le_10min: Target | None
    mean_gpus_per_job: Target | None
    share_jobs_ge_8_gpus: Target | None
    gpu_time_share_ge_8_gpus: Target | None
    peak_to_trough: Target | None
    peak_hour_h: Target | None
    burstiness: Target | None
    """mean over whole days of variance/mean of the day's 144 ten-minute job-submission counts"""
    failed_share: Target | None
    cancelled_share: Target | None
    median_estimate_accuracy: Target | None
    """median of runtime / requested time"""
    share_requesting_max: Target | None
    """share of jobs requesting the 72 h maximum"""


@dataclass(frozen=True)
class SyntheticProfile:
    """Distributions of the calibrated generator (all times in seconds on the reference A100).

    Runtime (the time the job holds its GPUs, failed and cancelled jobs included, as in the published
    statistics) = a draw from a two-component log-normal mixture times k ** runtime_size_exponent for a
    k-GPU job, clipped to [runtime_min_s, runtime_max_s]. GPUs per job: gpu_count_probs over
    gpu_count_choices, truncated to what the cluster's largest GPU type holds. Arrivals: groups (single
    jobs or bursts of one shape) in a non-homogeneous Poisson process with the 24 hourly relative rates.
    """

    name: str
    published: PublishedStats
    gpu_count_choices: tuple[int, ...]
    gpu_count_probs: tuple[float, ...]
    runtime_short_median_s: float
    runtime_short_sigma: float
    runtime_long_median_s: float
    runtime_long_sigma: float
    runtime_long_prob: float
    """probability that a job's runtime comes from the long component"""
    runtime_size_exponent: float
    runtime_min_s: float
    runtime_max_s: float
    failed_share: float
    """share of jobs that fail after holding their GPUs for their runtime (trace_status Failed)"""
    cancelled_share: float
    """share of jobs cancelled by their user after holding their GPUs for their runtime (Cancelled)"""
    hourly_rate: tuple[float, ...] = VENUS_HOURLY_RATE
    burst_job_fraction: float = 0.33
    """expected share of jobs that arrive in a burst (same instant, same shape)"""
    burst_size_min: int = 2
    burst_size_max: int = 40


_VENUS_ROWS = {
    "peak_to_trough": Target(
        9.25,
        "helios-aggregates/Venus_cluster_throughput_10min.csv: hourly mean of submit_gpu_job, 16:00 / 06:00",
    ),
    "peak_hour_h": Target(
        16.0, "helios-aggregates/Venus_cluster_throughput_10min.csv: busiest hour, submit_gpu_job"
    ),
    "burstiness": Target(
        9.19,
        "helios-aggregates/Venus_cluster_throughput_10min.csv: submit_gpu_job, mean over the 180 days with "
        "submissions of the day's variance/mean (whole trace at once: 15.4; an earlier estimate: 8.9)",
    ),
}
_RICC_ROWS = {
    "median_estimate_accuracy": Target(
        RICC_MEDIAN_ACCURACY, "borrowed: swf-pwa/RICC-2010-2.swf.gz: median runtime / requested time"
    ),
    "share_requesting_max": Target(
        RICC_SHARE_MAX_REQUEST, "borrowed: swf-pwa/RICC-2010-2.swf.gz: 205,241 of 447,792 jobs request 72 h"
    ),
}


def _borrowed(rows: dict[str, Target]) -> dict[str, Target]:
    """Rows taken from another trace, marked so in their source."""
    return {k: Target(t.value, f"borrowed: {t.source}", t.fitted) for k, t in rows.items()}


def _accuracy_not_fitted(why: str) -> dict[str, Target]:
    """The RICC rows, the accuracy shown but not fitted: the request model is RICC's, and the median of
    runtime / request follows the profile's runtimes."""
    t = _RICC_ROWS["median_estimate_accuracy"]
    return dict(
        _RICC_ROWS, median_estimate_accuracy=Target(t.value, f"{t.source} (not fitted: {why})", False)
    )


_ACME = "published-stats/acmetrace_cluster_summary.csv"
_ITP = "microsoft-itp-elasticflow-2021/cluster0{1,2,3,4,5,7,8,9}.csv (README 'these 8')"
_POW2_64 = (1, 2, 4, 8, 16, 32, 64)

# Runtime grows as k ** this for a k-GPU job: fitted to ITP's GPU-time share of >= 8-GPU jobs, borrowed by
# philly and helios (no per-size statistics are published for them).
RUNTIME_SIZE_EXPONENT = 0.564


def _power_law(exponent: float) -> tuple[float, ...]:
    """P(k) proportional to k ** -exponent over _POW2_64."""
    weights = [k**-exponent for k in _POW2_64]
    return tuple(w / sum(weights) for w in weights)


PHILLY = SyntheticProfile(
    name="philly",
    published=PublishedStats(
        median_runtime_s=Target(874.0, f"{_ACME}: Philly med_run_time_gpu"),
        mean_over_median_runtime=Target(
            18006.055 / 874.0, f"{_ACME}: Philly avg_run_time_gpu / med_run_time_gpu"
        ),
        share_runtime_le_10min=Target(
            0.3937,
            "philly-partial/philly_runtime.csv: 32,737 of 83,154 runtimes <= 600 s (README: median 1186 s)",
        ),
        mean_gpus_per_job=Target(1.928, f"{_ACME}: Philly avg_gpu_num"),
        share_jobs_ge_8_gpus=None,
        gpu_time_share_ge_8_gpus=None,
        failed_share=Target(0.305, f"{_ACME}: Philly fail_rate_gpu"),
        cancelled_share=Target(0.090, f"{_ACME}: Philly cancel_rate_gpu"),
        **_borrowed(_VENUS_ROWS),
        **_RICC_ROWS,
    ),
    gpu_count_choices=_POW2_64,
    gpu_count_probs=_power_law(1.554),  # mean 1.928 over 1..64
    runtime_short_median_s=525.0,
    runtime_short_sigma=1.088,
    runtime_long_median_s=43_450.0,
    runtime_long_sigma=1.0,
    runtime_long_prob=0.181,
    runtime_size_exponent=RUNTIME_SIZE_EXPONENT,
    runtime_min_s=1.0,
    runtime_max_s=4_240_676.0,  # Philly max_run_time_gpu
    failed_share=0.305,
    cancelled_share=0.090,
)
"""Microsoft Philly (Jeon et al., ATC 2019), as summarised by the Acme authors (Hu et al., NSDI 2024).

Fitted: runtime median, mean/median and share <= 10 min (mixture: 81.9 % short jobs around 525 s, 18.1 % long
around 12 h), mean GPUs (power law k^-1.554 over 1..64; Philly's largest job, 128 GPUs, fits no preset),
failed/cancelled shares. Borrowed: Venus's daily profile and burstiness (no Philly arrival counts here),
ITP's runtime growth with job size."""

HELIOS = SyntheticProfile(
    name="helios",
    published=PublishedStats(
        median_runtime_s=Target(
            206.0, "helios-aggregates/helios_cluster_summary.csv: total med_run_time_gpu"
        ),
        mean_over_median_runtime=Target(
            6651.681 / 206.0, "helios-aggregates/helios_cluster_summary.csv: total avg_/med_run_time_gpu"
        ),
        share_runtime_le_10min=None,
        mean_gpus_per_job=Target(3.716, "helios-aggregates/helios_cluster_summary.csv: total avg_gpu_num"),
        share_jobs_ge_8_gpus=None,
        gpu_time_share_ge_8_gpus=None,
        failed_share=Target(0.155, "helios-aggregates/helios_cluster_summary.csv: total fail_rate_gpu"),
        cancelled_share=Target(0.221, "helios-aggregates/helios_cluster_summary.csv: total cancel_rate_gpu"),
        **_VENUS_ROWS,
        **_accuracy_not_fitted("median runtime 206 s against RICC's 1,218 s"),
    ),
    gpu_count_choices=_POW2_64,
    gpu_count_probs=_power_law(0.964),  # mean 3.716 over 1..64
    runtime_short_median_s=89.1,
    runtime_short_sigma=1.5,
    runtime_long_median_s=11_730.0,
    runtime_long_sigma=1.0,
    runtime_long_prob=0.188,
    runtime_size_exponent=RUNTIME_SIZE_EXPONENT,
    runtime_min_s=1.0,
    runtime_max_s=4_320_009.0,  # Helios max_run_time_gpu (published-stats/acmetrace_cluster_summary.csv)
    failed_share=0.155,
    cancelled_share=0.221,
)
"""SenseTime Helios, 4 clusters (Hu et al., SC 2021).

Fitted: runtime median and mean/median (mixture; Helios publishes no share <= 10 min, so the short
component's sigma is set to 1.5), mean GPUs (power law k^-0.964 over 1..64; Helios jobs of up to 2,048 GPUs
fit no preset), failed/cancelled shares, Venus's daily profile and burstiness. Borrowed: ITP's runtime growth
with job size."""

ITP = SyntheticProfile(
    name="itp",
    published=PublishedStats(
        median_runtime_s=Target(10_581.0, f"{_ITP}: median duration"),
        mean_over_median_runtime=Target(18_462.5 / 10_581.0, f"{_ITP}: mean duration 18,462.5 s / median"),
        share_runtime_le_10min=Target(0.000135, f"{_ITP}: 9 of 66,695 durations <= 600 s (minimum 600 s)"),
        mean_gpus_per_job=Target(2.0295, f"{_ITP}: GPUs per job counts"),
        share_jobs_ge_8_gpus=Target(0.0996, f"{_ITP}: 6,644 of 66,695 jobs"),
        gpu_time_share_ge_8_gpus=Target(0.7839, f"{_ITP}: their share of num_gpu x duration"),
        failed_share=Target(0.305, f"borrowed: {_ACME}: Philly fail_rate_gpu (ITP records no status)"),
        cancelled_share=Target(0.090, f"borrowed: {_ACME}: Philly cancel_rate_gpu"),
        **_borrowed(_VENUS_ROWS),
        **_accuracy_not_fitted("median runtime 10,581 s against RICC's 1,218 s"),
    ),
    gpu_count_choices=_POW2_64,
    # README counts over the 8 clusters: 56,416 / 1,426 / 2,209 / 5,927 / 320 / 334 / 63 jobs
    gpu_count_probs=(0.8459, 0.0214, 0.0331, 0.0889, 0.0048, 0.0050, 0.0009),
    runtime_short_median_s=9_230.0,
    runtime_short_sigma=0.923,
    runtime_long_median_s=9_230.0,
    runtime_long_sigma=0.923,
    runtime_long_prob=0.0,
    runtime_size_exponent=RUNTIME_SIZE_EXPONENT,
    runtime_min_s=600.0,  # the trace's minimum (shorter jobs were filtered upstream)
    runtime_max_s=1_573_360.0,  # the trace's maximum
    failed_share=0.305,
    cancelled_share=0.090,
)
"""Microsoft ITP, 8 clusters, 2021 (ElasticFlow traces, Gu et al., ASPLOS 2023).

Fitted: runtime median and mean/median (one log-normal), GPU counts (the trace's own distribution), the
share of >= 8-GPU jobs and their GPU-time share (runtime grows as k^0.564). Borrowed: Philly's failed and
cancelled shares (Microsoft's earlier cluster; ITP records no status), Venus's daily profile and burstiness
(ITP's submission times have no wall-clock origin)."""

PROFILES: dict[str, SyntheticProfile] = {p.name: p for p in (PHILLY, HELIOS, ITP)}
PROFILE_NAMES = (LEGACY, *PROFILES)
