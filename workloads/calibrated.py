"""The calibrated synthetic generator: jobs drawn from a named profile (workloads/profiles.py) at a target load.

Model (one np.random.Generator drives every draw, so a seed fixes the workload):

- Submission groups as in the legacy generator: single jobs and bursts of one shape at one instant, with the
  profile's burst share and sizes (they set the burstiness of 10-minute arrival counts).
- GPUs per job: the profile's probabilities over its GPU counts, truncated to what the cluster's largest GPU
  type holds (so on a small cluster the mean is lower than published). Memory, acceptable types and
  priorities as in the legacy generator (no published statistics to fit).
- Runtime (reference seconds; the time the job holds its GPUs): per group, a two-component log-normal mixture
  draw times k ** runtime_size_exponent, a small per-job jitter inside bursts, clipped to the profile's range.
- Outcome per job: Failed with probability failed_share, Cancelled with cancelled_share, else Completed
  (`trace_status`). A failed or cancelled job ended after a uniform fraction of the runtime it meant to run;
  its runtime_s is the time it held GPUs, as trace replays record it. Jobs cancelled while still queued are
  not generated (the simulator has no withdrawal; their wait would depend on the policy): the published
  cancelled shares, which include them, are matched by jobs cancelled after they started.
- Requested time (`estimate_s`, used by `--runtime_info estimate` and `--kill_at_estimate`): a round value
  after Tsafrir et al. (workloads/estimates.py) for the runtime the job meant to run.
- Arrivals: total work W = sum(k * runtime_s) fixes the window T = W / (load_factor * cluster GPUs); group
  instants are a non-homogeneous Poisson process on [0, T] (thinning) with the profile's 24 hourly relative
  rates (t = 0 is midnight); the first and last groups are pinned at 0 and T, so the offered load is exact.
"""

from __future__ import annotations

import numpy as np

from sim.cluster_spec import ClusterSpec
from sim.job import Workload
from sim.load import offered_load_factor
from workloads import synthetic as legacy
from workloads.estimates import requested_times_s
from workloads.profiles import SyntheticProfile

COMPLETED = "Completed"
FAILED = "Failed"
CANCELLED = "Cancelled"
KILLED = "Killed"  # set by --kill_at_estimate (scenario/build.py) on a job cut at its requested time


def generate_profile(
    cluster: ClusterSpec,
    num_jobs: int,
    load_factor: float,
    rng: np.random.Generator,
    profile: SyntheticProfile,
    name: str = "synthetic",
) -> Workload:
    """Draw `num_jobs` jobs from `profile` that fit `cluster` and offer `load_factor` (see the module docstring)."""
    if num_jobs <= 0:
        raise ValueError(f"num_jobs must be > 0, got {num_jobs}")
    if not load_factor > 0.0:
        raise ValueError(f"load_factor must be > 0, got {load_factor}")
    if not cluster.nodes:
        raise ValueError(f"cluster {cluster.name!r} has no nodes")
    type_names, type_mem_gb, type_gpus = legacy._cluster_types(cluster)

    group_sizes = legacy._group_sizes(
        num_jobs, rng, profile.burst_job_fraction, profile.burst_size_min, profile.burst_size_max
    )
    num_groups = group_sizes.size
    group_of_job = np.repeat(np.arange(num_groups), group_sizes)
    in_burst = group_sizes[group_of_job] > 1

    # Shapes, one per group.
    choices = np.array(profile.gpu_count_choices)
    probs = np.array(profile.gpu_count_probs, dtype=float)
    fits = (choices <= type_gpus.max()) & (probs > 0)
    sizes_k, probs_k = choices[fits], probs[fits]
    size_idx_g = rng.choice(sizes_k.size, size=num_groups, p=probs_k / probs_k.sum())
    gpus_g = sizes_k[size_idx_g]
    mem_cap_gb = np.array([type_mem_gb[type_gpus >= k].max() for k in sizes_k])
    mem_median_gb = legacy.GPU_MEM_MEDIAN_1GPU_GB * gpus_g**legacy.GPU_MEM_SIZE_EXPONENT
    mem_gb_g = np.round(mem_median_gb * np.exp(legacy.GPU_MEM_SIGMA * rng.standard_normal(num_groups)))
    mem_gb_g = np.clip(mem_gb_g, legacy.GPU_MEM_MIN_GB, mem_cap_gb[size_idx_g])
    priority_g = rng.choice(np.array(legacy.PRIORITY_CLASSES), size=num_groups, p=legacy.PRIORITY_PROBS)
    types_g = legacy._acceptable_types(mem_gb_g, type_names, type_mem_gb)

    # Runtimes: a mixture draw per group, plus a per-job jitter inside bursts.
    long_g = rng.random(num_groups) < profile.runtime_long_prob
    median_g = np.where(long_g, profile.runtime_long_median_s, profile.runtime_short_median_s)
    sigma_g = np.where(long_g, profile.runtime_long_sigma, profile.runtime_short_sigma)
    log_runtime_g = (
        np.log(median_g)
        + profile.runtime_size_exponent * np.log(gpus_g)
        + sigma_g * rng.standard_normal(num_groups)
    )
    jitter = np.where(in_burst, legacy.BURST_RUNTIME_SIGMA * rng.standard_normal(num_jobs), 0.0)
    runtime_s = np.clip(
        np.round(np.exp(log_runtime_g[group_of_job] + jitter)), profile.runtime_min_s, profile.runtime_max_s
    )

    # Outcomes and the runtime each job meant to run (what its user's request is based on).
    u_status = rng.random(num_jobs)
    failed = u_status < profile.failed_share
    cancelled = ~failed & (u_status < profile.failed_share + profile.cancelled_share)
    status = np.where(failed, FAILED, np.where(cancelled, CANCELLED, COMPLETED))
    done_fraction = 1.0 - rng.random(num_jobs)  # in (0, 1]
    intended_s = np.where(failed | cancelled, runtime_s / done_fraction, runtime_s)
    estimate_s = requested_times_s(intended_s, rng)

    gpus = gpus_g[group_of_job]
    window_s = float(np.sum(gpus * runtime_s)) / (load_factor * cluster.num_gpus)
    arrival_s = _group_arrivals_s(num_groups, window_s, profile.hourly_rate, rng)[group_of_job]

    mem_gb = mem_gb_g[group_of_job]
    priority = priority_g[group_of_job]
    jobs = legacy.jobs_from_groups(
        arrival_s,
        runtime_s,
        gpus,
        mem_gb,
        priority,
        group_of_job,
        types_g,
        estimate_s=estimate_s,
        trace_status=status,
    )
    report = {
        "generator": "synthetic",
        "profile": profile.name,
        "cluster": cluster.name,
        "num_jobs": num_jobs,
        "target_load_factor": load_factor,
        "offered_load_factor": offered_load_factor(jobs, cluster.num_gpus),
        "arrival_window_s": float(arrival_s[-1] - arrival_s[0]),
        "num_bursts": int(np.sum(group_sizes > 1)),
        "jobs_in_bursts": int(np.sum(in_burst)),
        "max_gpus_per_job": int(sizes_k.max()),
        "status_counts": {s: int(np.sum(status == s)) for s in (COMPLETED, FAILED, CANCELLED)},
    }
    return Workload(name, jobs, report)


def _group_arrivals_s(
    num_groups: int, window_s: float, hourly_rate: tuple[float, ...], rng: np.random.Generator
) -> np.ndarray:
    """Sorted group instants: 0, then NHPP points on (0, window_s) by thinning against the hourly rates, then
    window_s."""
    if num_groups == 1:
        return np.zeros(1)
    rate = np.array(hourly_rate, dtype=float)
    rate_max = rate.max()
    need = num_groups - 2
    kept: list[np.ndarray] = []
    have = 0
    while have < need:
        draw = int((need - have) * rate_max / rate.mean() * 1.2) + 16
        t_s = rng.uniform(0.0, window_s, size=draw)
        hour = ((t_s % legacy.DAY_S) // 3600.0).astype(np.int64)
        t_s = t_s[rng.random(draw) * rate_max < rate[hour]]
        kept.append(t_s)
        have += t_s.size
    interior_s = np.sort(np.concatenate(kept)[:need]) if need else np.zeros(0)
    return np.concatenate(([0.0], interior_s, [window_s]))
