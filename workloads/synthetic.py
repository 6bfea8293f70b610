"""The synthetic workload generator: job shapes, runtimes and arrivals calibrated to a target load factor.

Model (one np.random.Generator drives every draw, so a seed fixes the workload):

- Submissions come in groups: most are single jobs, and a group is a burst (a hyper-parameter sweep) with the
  probability that makes BURST_JOB_FRACTION of all jobs arrive in bursts; a burst holds BURST_SIZE_MIN..MAX
  jobs of one shape (GPUs, memory, types, priority) submitted at the same instant.
- GPUs per job follow a power law P(k) ~ k^-GPU_COUNT_EXPONENT over GPU_COUNT_CHOICES (powers of two),
  truncated to the sizes the cluster can hold (k <= total GPUs of its largest GPU type; a job larger than
  one node spans nodes of one type), so about 80% of jobs use 1 GPU and a few use 8 or more.
- Runtimes (seconds on the reference A100) are log-normal with median RUNTIME_MEDIAN_1GPU_S * k^
  RUNTIME_SIZE_EXPONENT and sigma RUNTIME_SIGMA, shared by a burst up to a small per-job jitter, clipped to
  [RUNTIME_MIN_S, RUNTIME_MAX_S].
- Per-GPU memory is log-normal with a median growing as k^GPU_MEM_SIZE_EXPONENT, rounded to whole GB and
  capped at the largest memory of a GPU type that can hold the job. A job accepts exactly the cluster's
  types with at least that much memory (gpu_types = () when all of them do), so it always fits an empty
  cluster. Priorities are PRIORITY_CLASSES drawn with PRIORITY_PROBS.
- Arrivals: the total work W = sum(k * runtime_s) fixes the window T = W / (load_factor * cluster GPUs);
  group arrival instants are a non-homogeneous Poisson process on [0, T] (by thinning) whose rate follows a
  day/night cosine profile peaking at PEAK_HOUR_H with PEAK_TO_TROUGH_RATIO (t = 0 is midnight). The first
  and last groups are pinned at 0 and T, so offered_load_factor equals the target.
"""

from __future__ import annotations

import numpy as np

from sim.catalog import CATALOG
from sim.cluster_spec import ClusterSpec
from sim.job import FULL_GPU_MILLI, Job, Workload
from sim.load import offered_load_factor

DAY_S = 86_400.0  # seconds in a day
PEAK_HOUR_H = 14.0  # hour of day (t = 0 is midnight) at which the arrival rate peaks
PEAK_TO_TROUGH_RATIO = 3.0  # peak / trough arrival rate of the daily profile

BURST_JOB_FRACTION = 0.10  # expected share of jobs that arrive in a burst
BURST_SIZE_MIN = 2  # jobs per burst, uniform over [MIN, MAX]
BURST_SIZE_MAX = 20

GPU_COUNT_CHOICES = (1, 2, 4, 8, 16, 32, 64)  # GPUs per job
GPU_COUNT_EXPONENT = 2.5  # P(k) proportional to k ** -GPU_COUNT_EXPONENT

RUNTIME_MEDIAN_1GPU_S = 1800.0  # seconds on the reference GPU, median of a 1-GPU job
RUNTIME_SIZE_EXPONENT = 0.35  # median runtime grows as k ** exponent
RUNTIME_SIGMA = 1.5  # log-normal sigma (natural log) of runtimes
BURST_RUNTIME_SIGMA = 0.3  # extra log-normal sigma of each job's runtime within a burst
RUNTIME_MIN_S = 60.0  # seconds
RUNTIME_MAX_S = 48 * 3600.0  # seconds

GPU_MEM_MEDIAN_1GPU_GB = 12.0  # GB per GPU, median of a 1-GPU job
GPU_MEM_SIZE_EXPONENT = 0.3  # median per-GPU memory grows as k ** exponent
GPU_MEM_SIGMA = 0.6  # log-normal sigma (natural log) of per-GPU memory
GPU_MEM_MIN_GB = 1.0  # GB per GPU

PRIORITY_CLASSES = (0, 1, 2)
PRIORITY_PROBS = (0.7, 0.2, 0.1)


def generate_synthetic(
    cluster: ClusterSpec, num_jobs: int, load_factor: float, rng: np.random.Generator, name: str = "synthetic"
) -> Workload:
    """Draw `num_jobs` jobs that fit `cluster` and offer `load_factor` (see the module docstring)."""
    type_names, type_mem_gb, type_gpus = draw_types(cluster, num_jobs, load_factor)

    # Submission groups: sizes 1 (single job) or a burst; the last group is cut to total exactly num_jobs.
    group_sizes = _group_sizes(num_jobs, rng)
    num_groups = group_sizes.size
    group_of_job = np.repeat(np.arange(num_groups), group_sizes)
    in_burst = group_sizes[group_of_job] > 1

    # Shapes, one per group.
    sizes_k = np.array([k for k in GPU_COUNT_CHOICES if k <= type_gpus.max()])
    probs_k = sizes_k.astype(float) ** -GPU_COUNT_EXPONENT
    size_idx_g = rng.choice(sizes_k.size, size=num_groups, p=probs_k / probs_k.sum())
    gpus_g = sizes_k[size_idx_g]
    # The most memory a job of each size may ask for: that of the roomiest type with enough GPUs in total.
    mem_cap_gb = np.array([type_mem_gb[type_gpus >= k].max() for k in sizes_k])
    mem_median_gb = GPU_MEM_MEDIAN_1GPU_GB * gpus_g**GPU_MEM_SIZE_EXPONENT
    mem_gb_g = np.round(mem_median_gb * np.exp(GPU_MEM_SIGMA * rng.standard_normal(num_groups)))
    mem_gb_g = np.clip(mem_gb_g, GPU_MEM_MIN_GB, mem_cap_gb[size_idx_g])
    priority_g = rng.choice(np.array(PRIORITY_CLASSES), size=num_groups, p=PRIORITY_PROBS)
    types_g = _acceptable_types(mem_gb_g, type_names, type_mem_gb)

    # Runtimes: a log-normal draw per group, plus a per-job jitter inside bursts.
    runtime_median_s = RUNTIME_MEDIAN_1GPU_S * gpus_g**RUNTIME_SIZE_EXPONENT
    log_runtime_g = np.log(runtime_median_s) + RUNTIME_SIGMA * rng.standard_normal(num_groups)
    jitter = np.where(in_burst, BURST_RUNTIME_SIGMA * rng.standard_normal(num_jobs), 0.0)
    runtime_s = np.clip(np.round(np.exp(log_runtime_g[group_of_job] + jitter)), RUNTIME_MIN_S, RUNTIME_MAX_S)

    # Arrivals over the window that makes the offered load equal the target.
    gpus = gpus_g[group_of_job]
    window_s = float(np.sum(gpus * runtime_s)) / (load_factor * cluster.num_gpus)
    arrival_s = _group_arrivals_s(num_groups, window_s, rng)[group_of_job]

    mem_gb = mem_gb_g[group_of_job]
    priority = priority_g[group_of_job]
    jobs = jobs_from_groups(arrival_s, runtime_s, gpus, mem_gb, priority, group_of_job, types_g)
    report = {
        "generator": "synthetic",
        "cluster": cluster.name,
        "num_jobs": num_jobs,
        "target_load_factor": load_factor,
        "offered_load_factor": offered_load_factor(jobs, cluster.num_gpus),
        "arrival_window_s": float(arrival_s[-1] - arrival_s[0]),
        "num_bursts": int(np.sum(group_sizes > 1)),
        "jobs_in_bursts": int(np.sum(in_burst)),
        "max_gpus_per_job": int(sizes_k.max()),
    }
    return Workload(name, jobs, report)


def draw_types(
    cluster: ClusterSpec, num_jobs: int, load_factor: float
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """The distinct GPU types of the cluster a draw of `num_jobs` jobs at `load_factor` is for, in catalog order,
    each with its per-GPU memory (smallest over its nodes) and GPUs; a ValueError for no jobs, a load that is not
    positive or a cluster without nodes."""
    if num_jobs <= 0:
        raise ValueError(f"num_jobs must be > 0, got {num_jobs}")
    if not load_factor > 0.0:
        raise ValueError(f"load_factor must be > 0, got {load_factor}")
    if not cluster.nodes:
        raise ValueError(f"cluster {cluster.name!r} has no nodes")
    order = list(CATALOG)
    names = sorted({n.gpu_type for n in cluster.nodes}, key=order.index)
    mem_gb = np.array([min(n.gpu_mem_gb for n in cluster.nodes if n.gpu_type == t) for t in names])
    gpus = np.array([sum(n.num_gpus for n in cluster.nodes if n.gpu_type == t) for t in names])
    return names, mem_gb, gpus


def _group_sizes(
    num_jobs: int,
    rng: np.random.Generator,
    job_fraction: float = BURST_JOB_FRACTION,
    size_min: int = BURST_SIZE_MIN,
    size_max: int = BURST_SIZE_MAX,
) -> np.ndarray:
    """Jobs per submission group: 1, or a burst size in [size_min, size_max], such that `job_fraction` of the
    jobs are in bursts."""
    mean_burst = (size_min + size_max) / 2
    p_burst = job_fraction / (mean_burst * (1.0 - job_fraction) + job_fraction)
    is_burst = rng.random(num_jobs) < p_burst
    burst_sizes = rng.integers(size_min, size_max + 1, size=num_jobs)
    return cut_groups(np.where(is_burst, burst_sizes, 1), num_jobs)


def cut_groups(sizes: np.ndarray, num_jobs: int) -> np.ndarray:
    """The leading group sizes (each >= 1, num_jobs of them at least) that hold num_jobs jobs, the last cut."""
    ends = np.cumsum(sizes)
    num_groups = int(np.searchsorted(ends, num_jobs)) + 1  # num_jobs groups of >= 1 always suffice
    sizes = sizes[:num_groups].copy()
    sizes[-1] -= ends[num_groups - 1] - num_jobs
    return sizes


def _acceptable_types(
    mem_gb: np.ndarray, type_names: list[str], type_mem_gb: np.ndarray
) -> list[tuple[str, ...]]:
    """Per job, the types with enough memory; () when that is every type of the cluster."""
    fits = mem_gb[:, None] <= type_mem_gb[None, :]
    codes = fits.astype(np.int64) @ (1 << np.arange(len(type_names), dtype=np.int64))
    all_code = (1 << len(type_names)) - 1
    by_code = {
        c: () if c == all_code else tuple(t for b, t in enumerate(type_names) if c >> b & 1)
        for c in np.unique(codes).tolist()
    }
    return [by_code[c] for c in codes.tolist()]


def _relative_rate(t_s: np.ndarray) -> np.ndarray:
    """Arrival rate at time t_s relative to the daily mean (cosine day/night profile)."""
    amplitude = (PEAK_TO_TROUGH_RATIO - 1.0) / (PEAK_TO_TROUGH_RATIO + 1.0)
    return 1.0 + amplitude * np.cos(2.0 * np.pi * (t_s - PEAK_HOUR_H * 3600.0) / DAY_S)


def _group_arrivals_s(num_groups: int, window_s: float, rng: np.random.Generator) -> np.ndarray:
    """Sorted arrival instants of the groups: 0, then NHPP points on (0, window_s) by thinning, then window_s."""
    if num_groups == 1:
        return np.zeros(1)
    need = num_groups - 2
    rate_max = 2.0 * PEAK_TO_TROUGH_RATIO / (PEAK_TO_TROUGH_RATIO + 1.0)  # 1 + amplitude
    kept: list[np.ndarray] = []
    have = 0
    while have < need:
        draw = int((need - have) * rate_max * 1.2) + 16
        t_s = rng.uniform(0.0, window_s, size=draw)
        t_s = t_s[rng.random(draw) * rate_max < _relative_rate(t_s)]
        kept.append(t_s)
        have += t_s.size
    interior_s = np.sort(np.concatenate(kept)[:need]) if need else np.zeros(0)
    return np.concatenate(([0.0], interior_s, [window_s]))


def jobs_from_groups(
    arrival_s: np.ndarray,
    runtime_s: np.ndarray,
    gpus: np.ndarray,
    mem_gb: np.ndarray,
    priority: np.ndarray,
    group_of_job: np.ndarray,
    types_g: list[tuple[str, ...]],
    estimate_s: np.ndarray | None = None,
    trace_status: np.ndarray | None = None,
) -> tuple[Job, ...]:
    """Whole-GPU Jobs from per-job arrays; a job accepts its submission group's types (`types_g[group]`).
    `estimate_s`, `trace_status`: the optional Job fields as arrays of the same length (None: Job's default)."""
    n = len(arrival_s)
    # (every field a keyword of its own: no ** merge of keyword dicts per job, 1,000 jobs per env reset)
    return tuple(
        Job(
            job_id=str(i),
            arrival_s=a,
            runtime_s=r,
            num_gpus=k,
            gpu_mem_gb=m,
            gpu_milli=FULL_GPU_MILLI,
            gpu_types=types_g[g],
            priority=p,
            estimate_s=e,
            trace_status=st,
        )
        for i, (a, r, k, m, g, p, e, st) in enumerate(
            zip(
                arrival_s.tolist(),
                runtime_s.tolist(),
                gpus.tolist(),
                mem_gb.tolist(),
                group_of_job.tolist(),
                priority.tolist(),
                [None] * n if estimate_s is None else estimate_s.tolist(),
                [""] * n if trace_status is None else trace_status.tolist(),
                strict=True,
            )
        )
    )
