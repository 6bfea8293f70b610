"""Named synthetic-workload profiles: generator parameters fitted to published GPU-cluster statistics.

A profile fixes the distributions the calibrated generator (workloads/calibrated.py) draws from; the
difficulty presets (config.DIFFICULTIES) then choose cluster, job count and target load on top of it.
`legacy` is not a SyntheticProfile: it selects the original generator (workloads/synthetic.py) unchanged.

Every published value below is copied from, or computed from, a file under ../shared/traces/ (cited per row;
tests/test_synthetic_profiles.py recomputes them from the files); "borrowed" marks a value taken from another
trace because the profile's own trace does not publish it. The model parameters were fitted to those values by
`python bench/fit_profiles.py`; the table of generated vs published values is printed by
`python bench/synthetic_stats.py` and checked by tests/test_synthetic_profiles.py.
"""

from __future__ import annotations

from dataclasses import dataclass

from workloads.estimates import RICC_MEDIAN_ACCURACY, RICC_SHARE_MAX_REQUEST, UNDER_REQUEST_PROB

LEGACY = "legacy"

# Venus (Helios) GPU-job submissions: mean count per 10-min bin by hour of day 00..23, divided by the overall
# mean (helios-aggregates/Venus_cluster_throughput_10min.csv, column submit_gpu_job, 2020-04-01..09-28).
# Peak 16:00, trough 06:00, peak/trough 9.25.
VENUS_HOURLY_RATE = (
    0.8968, 0.6580, 0.5995, 0.3843, 0.2681, 0.2055, 0.1875, 0.2239, 0.3743, 0.7960, 1.2949, 1.4741,
    1.1644, 1.2986, 1.5591, 1.6564, 1.7341, 1.7329, 1.2823, 1.3131, 1.3446, 1.3643, 1.1491, 1.0381,
)  # fmt: skip
# ITP submissions of the 8 clusters by hour since the files' common origin (submission_time mod 24 h), divided
# by the mean: the files have no wall clock, so hour 0 is not midnight. Peak/trough 1.98.
ITP_HOURLY_RATE = (
    1.1177, 1.1544, 1.3595, 1.2580, 1.4347, 1.0439, 0.8097, 0.9655, 0.8939, 0.9043, 0.8647, 0.8723,
    0.7424, 0.9061, 0.7855, 0.7251, 0.7902, 0.8420, 0.8903, 1.1213, 0.9014, 1.2001, 1.2440, 1.1731,
)  # fmt: skip
POW2_64 = (1, 2, 4, 8, 16, 32, 64)
"""GPUs per job of every profile"""


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
    """The rows of the profiles' statistics table for one profile; None = not published for this trace (shown,
    not fitted). Runtimes are the time a job held its GPUs, failed and cancelled jobs included."""

    median_runtime_s: Target | None
    mean_over_median_runtime: Target | None
    share_runtime_le_10min: Target | None
    runtime_p75_s: Target | None
    runtime_p90_s: Target | None
    runtime_p95_s: Target | None
    runtime_p99_s: Target | None
    mean_gpus_per_job: Target | None
    share_jobs_ge_8_gpus: Target | None
    gpu_time_share_ge_8_gpus: Target | None
    runtime_weighted_mean_gpus: Target | None
    """sum of GPUs x runtime / sum of runtime: how much longer large jobs run (equals the mean GPUs if runtime
    does not depend on size)"""
    median_runtime_1_gpu_s: Target | None
    median_runtime_2_4_gpus_s: Target | None
    median_runtime_ge_8_gpus_s: Target | None
    peak_to_trough: Target | None
    """of the mean 10-minute submission count by hour of day"""
    peak_hour_h: Target | None
    burstiness: Target | None
    """mean over whole days with submissions of variance/mean of the day's 144 ten-minute submission counts"""
    count_var_over_mean: Target | None
    """variance/mean of all ten-minute submission counts of the trace at once"""
    daily_count_cv: Target | None
    """coefficient of variation of the submissions per whole day"""
    interarrival_cv: Target | None
    """coefficient of variation of the gaps between consecutive submissions"""
    same_instant_share: Target | None
    """share of jobs submitted at the same instant as another job"""
    failed_share: Target | None
    cancelled_share: Target | None
    failed_gpu_time_share: Target | None
    """failed jobs' share of all GPUs x runtime"""
    cancelled_gpu_time_share: Target | None
    median_estimate_accuracy: Target | None
    """median of runtime / requested time"""
    share_requesting_max: Target | None
    """share of jobs requesting the 72 h maximum"""
    share_runtime_over_request: Target | None
    """share of jobs that held their GPUs longer than they requested"""


@dataclass(frozen=True)
class LogNormal:
    """One component of a runtime mixture."""

    median_s: float
    sigma: float
    """of the natural log"""


@dataclass(frozen=True)
class RuntimeModel:
    """Runtime of a job with gpu_count_choices[i] GPUs (reference seconds, the time it holds its GPUs, failed
    and cancelled jobs included as in the published statistics): a draw from the log-normal mixture of
    `components` with weights `weights_by_size[i]`, times `size_factors[i]`, truncated below min_s (redrawn:
    the traces hold no shorter job) and clipped above max_s."""

    components: tuple[LogNormal, ...]
    weights_by_size: tuple[tuple[float, ...], ...]
    """one row of component weights (summing to 1) per GPU count"""
    size_factors: tuple[float, ...]
    """one runtime multiplier per GPU count"""
    min_s: float
    max_s: float


@dataclass(frozen=True)
class OutcomeModel:
    """How a job ends, given its GPU time x = ln(GPUs x runtime / 1 GPU-hour): a multinomial logit against
    Completed, P(o) = exp(a_o + b_o x) / (1 + exp(a_F + b_F x) + exp(a_C + b_C x)). Fitted so that both the
    job shares and the GPU-time shares of failed and cancelled jobs are the published ones."""

    failed: tuple[float, float]
    """(a, b) of Failed"""
    cancelled: tuple[float, float]
    """(a, b) of Cancelled"""


@dataclass(frozen=True)
class ArrivalModel:
    """Submission instants (all times from t = 0, midnight where the hourly rates have a wall clock).

    Jobs come in groups submitted at one instant with one shape: single jobs and bursts, a burst holding
    s = 2..burst_size_max jobs with P(s) proportional to s ** -burst_size_exponent, bursts holding
    burst_job_fraction of the jobs. Group instants form a Cox process whose rate in each 10-minute bin is the
    product of the hour-of-day rate, gamma factors of mean 1 per day, per hour and per bin (coefficients of
    variation day_cv, hour_cv, bin_cv), and an on/off state per hour (a two-state Markov chain off off_hour_share of the hours, off
    runs of mean off_run_mean_h hours)."""

    hourly_rate: tuple[float, ...]
    """24 relative rates, hour 0 first"""
    burst_job_fraction: float
    burst_size_max: int
    burst_size_exponent: float
    day_cv: float
    hour_cv: float
    bin_cv: float
    off_hour_share: float
    off_run_mean_h: float


@dataclass(frozen=True)
class SyntheticProfile:
    """Distributions of the calibrated generator. GPUs per job: gpu_count_probs over gpu_count_choices,
    truncated to what the cluster's largest GPU type holds."""

    name: str
    published: PublishedStats
    gpu_count_choices: tuple[int, ...]
    gpu_count_probs: tuple[float, ...]
    runtime: RuntimeModel
    outcomes: OutcomeModel
    arrivals: ArrivalModel


_ACME = "published-stats/acmetrace_cluster_summary.csv"
_HELIOS = "helios-aggregates/helios_cluster_summary.csv"
_VENUS = "helios-aggregates/Venus_cluster_throughput_10min.csv: submit_gpu_job"
_PHILLY_RUNTIMES = "philly-partial/philly_runtime.csv (83,154 runtimes)"
_ITP = "microsoft-itp-elasticflow-2021/cluster0{1,2,3,4,5,7,8,9}.csv (README 'these 8')"
_ITP_MEDIAN = f"{_ITP}: median of the 8 clusters' values"

_VENUS_ROWS = {
    "peak_to_trough": Target(9.2505, f"{_VENUS}, hourly means, 16:00 / 06:00"),
    "peak_hour_h": Target(16.0, f"{_VENUS}, busiest hour"),
    "burstiness": Target(9.1855, f"{_VENUS}, mean over the 180 days with submissions"),
    "count_var_over_mean": Target(15.418, f"{_VENUS}, all 26,064 bins"),
    "daily_count_cv": Target(0.4652, f"{_VENUS}, 181 days"),
    "interarrival_cv": None,
    "same_instant_share": None,
}
_RICC_ROWS = {
    "median_estimate_accuracy": Target(
        RICC_MEDIAN_ACCURACY, "borrowed: swf-pwa/RICC-2010-2.swf.gz: median runtime / requested time"
    ),
    "share_requesting_max": Target(
        RICC_SHARE_MAX_REQUEST, "borrowed: swf-pwa/RICC-2010-2.swf.gz: 205,241 of 447,792 jobs request 72 h"
    ),
    "share_runtime_over_request": Target(
        UNDER_REQUEST_PROB,
        "borrowed: swf-pwa/RICC-2010-2.swf.gz: 7,092 of 447,792 jobs run past their request",
    ),
}
_NO_RUNTIME_BY_SIZE = {
    "median_runtime_1_gpu_s": None,
    "median_runtime_2_4_gpus_s": None,
    "median_runtime_ge_8_gpus_s": None,
}
_PHILLY_OUTCOMES = {
    "failed_share": Target(0.305, f"{_ACME}: Philly fail_rate_gpu"),
    "cancelled_share": Target(0.090, f"{_ACME}: Philly cancel_rate_gpu"),
    "failed_gpu_time_share": Target(0.3857, f"{_ACME}: Philly fail_gpu_time / all three gpu_time columns"),
    "cancelled_gpu_time_share": Target(0.2938, f"{_ACME}: Philly cancel_gpu_time / all three"),
}


def _borrowed(rows: dict[str, Target | None]) -> dict[str, Target | None]:
    """Rows taken from another trace, marked so in their source."""
    return {k: t and Target(t.value, f"borrowed: {t.source}", t.fitted) for k, t in rows.items()}


def _accuracy_not_fitted(why: str) -> dict[str, Target | None]:
    """The RICC rows, the accuracy shown but not fitted: the request model is RICC's, and the median of
    runtime / request follows the profile's runtimes."""
    t = _RICC_ROWS["median_estimate_accuracy"]
    assert t is not None
    return dict(
        _RICC_ROWS, median_estimate_accuracy=Target(t.value, f"{t.source} (not fitted: {why})", False)
    )


def _power_law(exponent: float) -> tuple[float, ...]:
    """P(k) proportional to k ** -exponent over POW2_64."""
    weights = [k**-exponent for k in POW2_64]
    return tuple(w / sum(weights) for w in weights)


def _size_power(exponent: float) -> tuple[float, ...]:
    """Runtime factors k ** exponent over POW2_64."""
    return tuple(float(k) ** exponent for k in POW2_64)


def _every_size(*weights: float) -> tuple[tuple[float, ...], ...]:
    """The same component weights for every GPU count."""
    return (tuple(weights),) * len(POW2_64)


VENUS_ARRIVALS = ArrivalModel(
    hourly_rate=VENUS_HOURLY_RATE,
    burst_job_fraction=0.20730,
    burst_size_max=600,
    burst_size_exponent=2.2209,
    day_cv=0.40370,
    hour_cv=0.61086,
    bin_cv=0.0,
    off_hour_share=0.0,
    off_run_mean_h=1.0,
)
"""Venus's submissions (the one Helios cluster with counts): no same-instant or inter-arrival statistics are
published; bursts of up to 600 jobs (Venus's busiest 10 minutes hold 717 GPU jobs), their share and size law and
the hour factor are fitted to the within-day and whole-trace dispersion of the 10-minute counts, the day factor
to the day-to-day variation; no bin factor, no off hours."""

PHILLY = SyntheticProfile(
    name="philly",
    published=PublishedStats(
        median_runtime_s=Target(1186.0, f"{_PHILLY_RUNTIMES}: median"),
        mean_over_median_runtime=Target(12.3215, f"{_PHILLY_RUNTIMES}: mean 14,613 s / median"),
        share_runtime_le_10min=Target(0.3937, f"{_PHILLY_RUNTIMES}: 32,737 <= 600 s"),
        runtime_p75_s=Target(3341.5, f"{_PHILLY_RUNTIMES}: 75th percentile"),
        runtime_p90_s=Target(12_859.4, f"{_PHILLY_RUNTIMES}: 90th percentile"),
        runtime_p95_s=Target(49_947.6, f"{_PHILLY_RUNTIMES}: 95th percentile"),
        runtime_p99_s=Target(287_283.2, f"{_PHILLY_RUNTIMES}: 99th percentile"),
        mean_gpus_per_job=Target(1.928, f"{_ACME}: Philly avg_gpu_num"),
        share_jobs_ge_8_gpus=None,
        gpu_time_share_ge_8_gpus=None,
        runtime_weighted_mean_gpus=Target(
            3.3899, f"{_ACME}: Philly (complete_+cancel_+fail_gpu_time) / gpu_job_num / avg_run_time_gpu"
        ),
        **_NO_RUNTIME_BY_SIZE,
        **_borrowed(_VENUS_ROWS),
        **_PHILLY_OUTCOMES,
        **_accuracy_not_fitted("Philly's runtime curve is not RICC's"),
    ),
    gpu_count_choices=POW2_64,
    gpu_count_probs=_power_law(1.554),  # mean 1.928 over 1..64
    runtime=RuntimeModel(
        components=(LogNormal(59.91, 0.3407), LogNormal(1445.1, 0.9731), LogNormal(42_121.0, 1.3182)),
        weights_by_size=_every_size(0.29147, 0.61561, 0.09292),
        size_factors=_size_power(0.5623),
        min_s=1.0,
        max_s=4_628_239.0,  # the runtimes' maximum
    ),
    outcomes=OutcomeModel(failed=(-0.56789, 0.11755), cancelled=(-1.7477, 0.24247)),
    arrivals=VENUS_ARRIVALS,
)
"""Microsoft Philly (Jeon et al., ATC 2019): runtimes from the one per-job Philly file here (Alibaba's
philly_runtime.csv), GPUs per job, size-runtime coupling and outcomes from the Acme authors' summary of the
Philly log (Hu et al., NSDI 2024). Arrivals borrowed from Venus (no Philly submission counts here)."""

HELIOS = SyntheticProfile(
    name="helios",
    published=PublishedStats(
        median_runtime_s=Target(206.0, f"{_HELIOS}: total med_run_time_gpu"),
        mean_over_median_runtime=Target(6651.681 / 206.0, f"{_HELIOS}: total avg_/med_run_time_gpu"),
        share_runtime_le_10min=None,
        runtime_p75_s=None,
        runtime_p90_s=None,
        runtime_p95_s=None,
        runtime_p99_s=None,
        mean_gpus_per_job=Target(3.716, f"{_HELIOS}: total avg_gpu_num"),
        share_jobs_ge_8_gpus=None,
        gpu_time_share_ge_8_gpus=None,
        runtime_weighted_mean_gpus=Target(
            7.4194, f"{_HELIOS}: total (complete_+cancel_+fail_gpu_time) / gpu_job_num / avg_run_time_gpu"
        ),
        **_NO_RUNTIME_BY_SIZE,
        **_VENUS_ROWS,
        failed_share=Target(0.155, f"{_HELIOS}: total fail_rate_gpu"),
        cancelled_share=Target(0.221, f"{_HELIOS}: total cancel_rate_gpu"),
        failed_gpu_time_share=Target(0.0934, f"{_HELIOS}: total fail_gpu_time / all three gpu_time columns"),
        cancelled_gpu_time_share=Target(0.3938, f"{_HELIOS}: total cancel_gpu_time / all three"),
        **_accuracy_not_fitted("median runtime 206 s against RICC's 1,218 s"),
    ),
    gpu_count_choices=POW2_64,
    gpu_count_probs=_power_law(0.964),  # mean 3.716 over 1..64
    runtime=RuntimeModel(
        components=(LogNormal(97.91, 1.5), LogNormal(13_471.0, 1.0)),
        weights_by_size=_every_size(0.812, 0.188),
        size_factors=_size_power(0.4262),
        min_s=1.0,
        max_s=4_320_009.0,  # Helios max_run_time_gpu (published-stats/acmetrace_cluster_summary.csv)
    ),
    outcomes=OutcomeModel(failed=(-1.4694, -0.038849), cancelled=(-0.89279, 0.099249)),
    arrivals=VENUS_ARRIVALS,
)
"""SenseTime Helios, 4 clusters (Hu et al., SC 2021): runtimes, GPUs, size-runtime coupling and outcomes from
the authors' summary of all four clusters (no percentiles published: the short component's sigma is set to
1.5 and the long one's to 1.0); arrivals from Venus, the one cluster with submission counts."""

ITP = SyntheticProfile(
    name="itp",
    published=PublishedStats(
        median_runtime_s=Target(10_581.0, f"{_ITP}: median duration"),
        mean_over_median_runtime=Target(1.7449, f"{_ITP}: mean duration 18,462.5 s / median"),
        share_runtime_le_10min=Target(0.000135, f"{_ITP}: 9 of 66,695 durations <= 600 s (minimum 600 s)"),
        runtime_p75_s=Target(16_272.0, f"{_ITP}: 75th percentile of duration"),
        runtime_p90_s=Target(28_711.0, f"{_ITP}: 90th percentile"),
        runtime_p95_s=Target(56_546.7, f"{_ITP}: 95th percentile"),
        runtime_p99_s=Target(206_462.8, f"{_ITP}: 99th percentile"),
        mean_gpus_per_job=Target(2.0295, f"{_ITP}: GPUs per job counts"),
        share_jobs_ge_8_gpus=Target(0.0996, f"{_ITP}: 6,644 of 66,695 jobs"),
        gpu_time_share_ge_8_gpus=Target(0.7839, f"{_ITP}: their share of num_gpu x duration"),
        runtime_weighted_mean_gpus=Target(4.3995, f"{_ITP}: sum of num_gpu x duration / sum of duration"),
        median_runtime_1_gpu_s=Target(10_457.0, f"{_ITP}: median duration of 56,416 1-GPU jobs"),
        median_runtime_2_4_gpus_s=Target(4160.0, f"{_ITP}: median duration of 3,635 2- and 4-GPU jobs"),
        median_runtime_ge_8_gpus_s=Target(19_632.5, f"{_ITP}: median duration of 6,644 jobs of 8-64 GPUs"),
        peak_to_trough=Target(1.9787, f"{_ITP}: hourly counts by submission_time mod 24 h, all 8 files"),
        peak_hour_h=None,  # no wall clock
        burstiness=Target(12.95, _ITP_MEDIAN),
        count_var_over_mean=Target(24.20, _ITP_MEDIAN),
        daily_count_cv=Target(0.8716, _ITP_MEDIAN),
        interarrival_cv=Target(5.183, _ITP_MEDIAN),
        same_instant_share=Target(0.2287, _ITP_MEDIAN),
        **_borrowed(_PHILLY_OUTCOMES),
        **_accuracy_not_fitted("median runtime 10,581 s against RICC's 1,218 s"),
    ),
    gpu_count_choices=POW2_64,
    # README counts over the 8 clusters: 56,416 / 1,426 / 2,209 / 5,927 / 320 / 334 / 63 jobs
    gpu_count_probs=(0.8459, 0.0214, 0.0331, 0.0889, 0.0048, 0.0050, 0.0009),
    runtime=RuntimeModel(
        components=(LogNormal(584.85, 2.2802), LogNormal(12926.0, 0.40745), LogNormal(4168.9, 1.3145)),
        weights_by_size=(
            (0.44826, 0.44826, 0.10348),
            (0.99808, 0.00095932, 0.00096294),
            (0.96738, 0.031612, 0.0010056),
            (0.46881, 0.062383, 0.4688),
            (0.49825, 0.0035157, 0.49824),
            (0.32396, 0.35209, 0.32395),
            (0.42661, 0.14679, 0.4266),
        ),
        size_factors=(1.0, 0.7267, 5.0457, 5.9661, 7.8704, 9.397, 8.9397),
        min_s=600.0,  # the trace's minimum (shorter jobs were filtered upstream)
        max_s=1_573_360.0,  # the trace's maximum
    ),
    outcomes=OutcomeModel(failed=(-0.91103, 0.20115), cancelled=(-2.4598, 0.40382)),
    arrivals=ArrivalModel(
        hourly_rate=ITP_HOURLY_RATE,
        burst_job_fraction=0.22869,
        burst_size_max=10,
        burst_size_exponent=3.2459,
        day_cv=0.74678,
        hour_cv=0.29463,
        bin_cv=1.9844,
        off_hour_share=0.44521,
        off_run_mean_h=2.9446,
    ),
)
"""Microsoft ITP, 8 clusters, 2021 (ElasticFlow traces, Gu et al., ASPLOS 2023): runtimes, GPUs, runtime by
GPU count and arrivals from the 66,695 jobs of the 8 files. Borrowed: Philly's outcomes (Microsoft's earlier
cluster; ITP records no status)."""

PROFILES: dict[str, SyntheticProfile] = {p.name: p for p in (PHILLY, HELIOS, ITP)}
PROFILE_NAMES = (LEGACY, *PROFILES)
