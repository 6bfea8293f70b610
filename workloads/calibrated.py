"""The calibrated synthetic generator: jobs drawn from a named profile (workloads/profiles.py) at a target load.

Model (one np.random.Generator drives every draw, so a seed fixes the workload):

- Submission groups: single jobs and bursts of one shape at one instant, with the profile's burst share and
  burst-size law (ArrivalModel).
- GPUs per job: the profile's probabilities over its GPU counts, truncated to what the cluster's largest GPU
  type holds (so on a small cluster the mean is lower than published). Memory, acceptable types and
  priorities as in the legacy generator (no published statistics to fit).
- Runtime (reference seconds; the time the job holds its GPUs): per group, a draw from the log-normal
  mixture with the weights of its GPU count, times its GPU count's factor (RuntimeModel), redrawn while below
  the profile's minimum; a small per-job jitter inside bursts; clipped to the profile's range.
- Outcome per job: Failed or Cancelled with probabilities that depend on the job's GPU time (OutcomeModel),
  else Completed (`trace_status`). A failed or cancelled job ended after a uniform fraction of the runtime it
  meant to run (at most the profile's longest runtime); its runtime_s is the time it held GPUs, as trace
  replays record it. Jobs cancelled while still queued are not generated (the simulator has no withdrawal;
  their wait would depend on the policy): the published cancelled shares, which include them, are matched by
  jobs cancelled after they started.
- Requested time (`estimate_s`, used by `--runtime_info estimate` and `--kill_at_estimate`): a round value
  after Tsafrir et al. (workloads/estimates.py) for the runtime the job meant to run.
- Arrivals: total work W = sum(k * runtime_s) fixes the window T = W / (load_factor * cluster GPUs); group
  instants are drawn from the profile's Cox process on [0, T] (t = 0 is midnight) given their number; the
  first and last groups are pinned at 0 and T, so the offered load is exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.cluster_spec import ClusterSpec
from sim.job import Workload
from sim.load import offered_load_factor
from workloads import synthetic as legacy
from workloads.estimates import requested_times_s
from workloads.profiles import ArrivalModel, OutcomeModel, RuntimeModel, SyntheticProfile

COMPLETED = "Completed"
FAILED = "Failed"
CANCELLED = "Cancelled"
KILLED = "Killed"  # set by --kill_at_estimate (scenario/build.py) on a job cut at its requested time

BIN_S = 600.0  # the arrival rate is constant within a 10-minute bin
BINS_PER_HOUR = 6
BINS_PER_DAY = 144
GPU_HOUR_S = 3600.0
MAX_REDRAWS = 50


@dataclass(frozen=True)
class ProfileDraw:
    """One draw of generate_profile as per-job arrays (index = job id), before the Jobs are built."""

    arrival_s: np.ndarray
    runtime_s: np.ndarray
    gpus: np.ndarray
    mem_gb: np.ndarray
    priority: np.ndarray
    group_of_job: np.ndarray
    types_g: list[tuple[str, ...]]
    """acceptable GPU types per submission group"""
    estimate_s: np.ndarray
    status: np.ndarray
    group_sizes: np.ndarray
    max_gpus_per_job: int


def generate_profile(
    cluster: ClusterSpec,
    num_jobs: int,
    load_factor: float,
    rng: np.random.Generator,
    profile: SyntheticProfile,
    name: str = "synthetic",
) -> Workload:
    """Draw `num_jobs` jobs from `profile` that fit `cluster` and offer `load_factor` (see the module docstring)."""
    d = draw_profile(cluster, num_jobs, load_factor, rng, profile)
    jobs = legacy.jobs_from_groups(
        d.arrival_s,
        d.runtime_s,
        d.gpus,
        d.mem_gb,
        d.priority,
        d.group_of_job,
        d.types_g,
        estimate_s=d.estimate_s,
        trace_status=d.status,
    )
    report = {
        "generator": "synthetic",
        "profile": profile.name,
        "cluster": cluster.name,
        "num_jobs": num_jobs,
        "target_load_factor": load_factor,
        "offered_load_factor": offered_load_factor(jobs, cluster.num_gpus),
        "arrival_window_s": float(d.arrival_s[-1] - d.arrival_s[0]),
        "num_bursts": int(np.sum(d.group_sizes > 1)),
        "jobs_in_bursts": int(np.sum(d.group_sizes[d.group_sizes > 1])),
        "max_gpus_per_job": d.max_gpus_per_job,
        "status_counts": {s: int(np.sum(d.status == s)) for s in (COMPLETED, FAILED, CANCELLED)},
    }
    return Workload(name, jobs, report)


def draw_profile(
    cluster: ClusterSpec,
    num_jobs: int,
    load_factor: float,
    rng: np.random.Generator,
    profile: SyntheticProfile,
) -> ProfileDraw:
    """The arrays of generate_profile's jobs."""
    type_names, type_mem_gb, type_gpus = legacy.draw_types(cluster, num_jobs, load_factor)

    group_sizes = burst_group_sizes(num_jobs, profile.arrivals, rng)
    num_groups = group_sizes.size
    group_of_job = np.repeat(np.arange(num_groups), group_sizes)
    in_burst = group_sizes[group_of_job] > 1

    # Shapes, one per group; choice_g indexes the profile's GPU counts.
    choices = np.array(profile.gpu_count_choices)
    probs = np.array(profile.gpu_count_probs, dtype=float)
    fits = (choices <= type_gpus.max()) & (probs > 0)
    sizes_k, probs_k = choices[fits], probs[fits]
    size_idx_g = rng.choice(sizes_k.size, size=num_groups, p=probs_k / probs_k.sum())
    choice_g = np.flatnonzero(fits)[size_idx_g]
    gpus_g = sizes_k[size_idx_g]
    mem_cap_gb = np.array([type_mem_gb[type_gpus >= k].max() for k in sizes_k])
    mem_median_gb = legacy.GPU_MEM_MEDIAN_1GPU_GB * gpus_g**legacy.GPU_MEM_SIZE_EXPONENT
    mem_gb_g = np.round(mem_median_gb * np.exp(legacy.GPU_MEM_SIGMA * rng.standard_normal(num_groups)))
    mem_gb_g = np.clip(mem_gb_g, legacy.GPU_MEM_MIN_GB, mem_cap_gb[size_idx_g])
    priority_g = rng.choice(np.array(legacy.PRIORITY_CLASSES), size=num_groups, p=legacy.PRIORITY_PROBS)
    types_g = legacy._acceptable_types(mem_gb_g, type_names, type_mem_gb)

    # Runtimes: a mixture draw per group, plus a per-job jitter inside bursts.
    model = profile.runtime
    log_runtime_g = _log_runtimes_above_min(model, choice_g, rng)
    jitter = np.where(in_burst, legacy.BURST_RUNTIME_SIGMA * rng.standard_normal(num_jobs), 0.0)
    runtime_s = np.clip(np.round(np.exp(log_runtime_g[group_of_job] + jitter)), model.min_s, model.max_s)

    # Outcomes, and the runtime each job meant to run (what its user's request is based on).
    gpus = gpus_g[group_of_job]
    p_failed, p_cancelled = outcome_probs(profile.outcomes, gpus * runtime_s / GPU_HOUR_S)
    u_status = rng.random(num_jobs)
    failed = u_status < p_failed
    cancelled = ~failed & (u_status < p_failed + p_cancelled)
    status = np.where(failed, FAILED, np.where(cancelled, CANCELLED, COMPLETED))
    done_fraction = 1.0 - rng.random(num_jobs)  # in (0, 1]
    # runtime_s <= max_s, so intended_s >= runtime_s
    intended_s = np.where(failed | cancelled, np.minimum(runtime_s / done_fraction, model.max_s), runtime_s)
    estimate_s = requested_times_s(intended_s, rng, held_s=runtime_s)

    window_s = float(np.sum(gpus * runtime_s)) / (load_factor * cluster.num_gpus)
    arrival_s = group_arrivals_s(num_groups, window_s, profile.arrivals, rng)[group_of_job]
    return ProfileDraw(
        arrival_s=arrival_s,
        runtime_s=runtime_s,
        gpus=gpus,
        mem_gb=mem_gb_g[group_of_job],
        priority=priority_g[group_of_job],
        group_of_job=group_of_job,
        types_g=types_g,
        estimate_s=estimate_s,
        status=status,
        group_sizes=group_sizes,
        max_gpus_per_job=int(sizes_k.max()),
    )


def burst_group_sizes(num_jobs: int, model: ArrivalModel, rng: np.random.Generator) -> np.ndarray:
    """Jobs per submission group, 1 or a burst size s in 2..burst_size_max (P(s) ~ s ** -exponent), such that
    burst_job_fraction of the jobs are in bursts; the last group is cut to total exactly num_jobs."""
    sizes = np.arange(2, model.burst_size_max + 1)
    p_size = sizes.astype(float) ** -model.burst_size_exponent
    p_size /= p_size.sum()
    mean_burst = float(sizes @ p_size)
    frac = model.burst_job_fraction
    p_burst = frac / (mean_burst * (1.0 - frac) + frac)
    is_burst = rng.random(num_jobs) < p_burst
    pick = np.searchsorted(np.cumsum(p_size)[:-1], rng.random(num_jobs), side="right")
    return legacy.cut_groups(np.where(is_burst, sizes[pick], 1), num_jobs)


def log_runtimes(
    model: RuntimeModel, choice: np.ndarray, u_component: np.ndarray, z: np.ndarray
) -> np.ndarray:
    """ln(runtime s) of jobs whose GPU count is gpu_count_choices[choice], from a uniform that picks the mixture
    component (by the weights of that GPU count) and a standard normal, before jitter and clipping."""
    cum_weights = np.cumsum(np.array(model.weights_by_size, dtype=float), axis=1)
    num_components = cum_weights.shape[1]
    component = np.minimum((u_component[:, None] >= cum_weights[choice]).sum(axis=1), num_components - 1)
    log_median = np.log([c.median_s for c in model.components])
    sigma = np.array([c.sigma for c in model.components])
    log_factor = np.log(np.array(model.size_factors, dtype=float))
    return log_factor[choice] + log_median[component] + sigma[component] * z


def _log_runtimes_above_min(model: RuntimeModel, choice: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """log_runtimes of fresh draws, redrawing those below min_s (the traces hold no shorter job: the mixture is
    truncated there, not clipped); after MAX_REDRAWS rounds what is left is clipped."""
    log_s = log_runtimes(model, choice, rng.random(choice.size), rng.standard_normal(choice.size))
    log_min = np.log(model.min_s)
    low = np.flatnonzero(log_s < log_min)
    for _ in range(MAX_REDRAWS):
        if low.size == 0:
            break
        log_s[low] = log_runtimes(model, choice[low], rng.random(low.size), rng.standard_normal(low.size))
        low = low[log_s[low] < log_min]
    return log_s


def outcome_probs(model: OutcomeModel, gpu_hours: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(P(Failed), P(Cancelled)) of jobs that hold `gpu_hours` GPU-hours (> 0)."""
    x = np.log(gpu_hours)
    e_failed = np.exp(np.clip(model.failed[0] + model.failed[1] * x, -50.0, 50.0))
    e_cancelled = np.exp(np.clip(model.cancelled[0] + model.cancelled[1] * x, -50.0, 50.0))
    total = 1.0 + e_failed + e_cancelled
    return e_failed / total, e_cancelled / total


def group_arrivals_s(
    num_groups: int, window_s: float, model: ArrivalModel, rng: np.random.Generator
) -> np.ndarray:
    """Sorted group instants: 0, then num_groups - 2 instants drawn from the Cox process's rate on (0, window_s)
    (given their number they are independent draws from the normalised rate), then window_s."""
    if num_groups == 1:
        return np.zeros(1)
    num_bins = max(1, int(np.ceil(window_s / BIN_S)))
    bin_idx = np.arange(num_bins)
    hour_idx = bin_idx // BINS_PER_HOUR
    rate = np.array(model.hourly_rate, dtype=float)[hour_idx % 24]
    if model.day_cv > 0:
        rate = rate * _gamma_factors(model.day_cv, num_bins // BINS_PER_DAY + 1, rng)[bin_idx // BINS_PER_DAY]
    if model.hour_cv > 0:
        rate = rate * _gamma_factors(model.hour_cv, int(hour_idx[-1]) + 1, rng)[hour_idx]
    if model.bin_cv > 0:
        rate = rate * _gamma_factors(model.bin_cv, num_bins, rng)
    width_s = np.minimum(BIN_S, window_s - bin_idx * BIN_S)  # the last bin may be partial
    need = num_groups - 2
    u_pick, u_within = rng.random(need), rng.random(need)
    if model.off_hour_share > 0:  # drawn last: the number of draws varies
        on = _on_hours(int(hour_idx[-1]) + 1, model.off_hour_share, model.off_run_mean_h, rng)[hour_idx]
        if np.any(on & (width_s > 0)):  # else (a short window, all off) the on/off state is ignored
            rate = rate * on
    cum = np.cumsum(rate * width_s)
    pick = np.minimum(np.searchsorted(cum, u_pick * cum[-1], side="right"), num_bins - 1)
    interior_s = np.sort(pick * BIN_S + u_within * width_s[pick])
    return np.concatenate(([0.0], np.minimum(interior_s, window_s), [window_s]))


def _gamma_factors(cv: float, n: int, rng: np.random.Generator) -> np.ndarray:
    """n gamma-distributed rate factors of mean 1 and coefficient of variation cv (a gamma-mixed Poisson count
    is negative binomial; the gamma's tail is lighter than a log-normal's of the same variance, so the
    dispersion statistics of a draw vary less)."""
    return rng.gamma(1.0 / cv**2, cv**2, size=n)


def _on_hours(
    num_hours: int, off_share: float, off_run_mean_h: float, rng: np.random.Generator
) -> np.ndarray:
    """Per hour, whether submissions are on: alternating geometric runs of off (mean off_run_mean_h hours)
    and on hours (mean chosen so that off_share of the hours are off), starting in a random state."""
    on_run_mean_h = off_run_mean_h * (1.0 - off_share) / off_share
    if min(on_run_mean_h, off_run_mean_h) < 1.0:
        raise ValueError(
            f"on and off runs must last >= 1 h on average, got {on_run_mean_h}, {off_run_mean_h}"
        )
    first_on = rng.random() >= off_share
    runs: list[np.ndarray] = []
    have = 0
    while have < num_hours:
        pairs = int((num_hours - have) / (on_run_mean_h + off_run_mean_h)) + 2
        on = rng.geometric(1.0 / on_run_mean_h, size=pairs)
        off = rng.geometric(1.0 / off_run_mean_h, size=pairs)
        pair = np.stack((on, off) if first_on else (off, on), axis=1).ravel()
        runs.append(pair)
        have += int(pair.sum())
    state = np.tile([first_on, not first_on], sum(r.size for r in runs) // 2)
    return np.repeat(state, np.concatenate(runs))[:num_hours]
