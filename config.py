"""Every knob of the platform as frozen dataclasses, with defaults and units; the CLI is built from them."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class DifficultyPreset:
    cluster: str
    """cluster spec string (see env/cluster_spec.py)"""
    num_jobs: int
    load_factor: float
    """offered reference-GPU-seconds / (cluster GPUs x arrival window)"""


DIFFICULTIES: dict[str, DifficultyPreset] = {
    "easy": DifficultyPreset("4xA100-80GB:8,4xV100-32GB:4", num_jobs=300, load_factor=0.5),
    "medium": DifficultyPreset("4xA100-80GB:8,4xV100-32GB:8,2xH100:8,4xT4:4", num_jobs=1000, load_factor=0.8),
    "hard": DifficultyPreset(
        "8xA100-80GB:8,8xV100-32GB:8,4xH100:8,8xT4:4,4xA10:4", num_jobs=3000, load_factor=1.0
    ),
}


@dataclass(frozen=True)
class ClusterConfig:
    spec: str | None = None
    """cluster spec string, e.g. 2xA100-80GB:8,4xV100:4 (default: the difficulty preset's)"""
    path: str | None = None
    """CSV node_id,gpu_type,num_gpus[,gpu_mem_gb] or a trace's machine file"""
    uniform_speed: bool = False
    """every GPU type runs at speed 1.0 (compare with simulators that ignore the type)"""
    multi_node_runtime_factor: float = 1.2
    """runtime multiplier for a job spread over several nodes"""


@dataclass(frozen=True)
class WorkloadConfig:
    workload_type: str = "synthetic"
    """synthetic | csv | google | alibaba | itp | philly | helios | swf"""
    workload_path: str | None = None
    difficulty: str = "medium"
    """easy | medium | hard: cluster, job count and target load factor"""
    num_jobs: int | None = None
    """override the preset's job count (synthetic)"""
    load_factor: float | None = None
    """override the preset's target load factor (synthetic)"""
    trace_start_s: float | None = None
    """keep trace jobs arriving at or after this many seconds after the trace start"""
    trace_end_s: float | None = None
    """keep trace jobs arriving before this many seconds after the trace start"""
    time_scale: float = 1.0
    """divide trace inter-arrival times by this (>1 compresses arrivals and raises load)"""
    max_jobs: int | None = None
    """keep the first N trace jobs (after the window)"""
    exclude_failed: bool = False
    """drop trace jobs recorded as failed/killed instead of replaying the time they held resources"""
    round_fractional: bool = False
    """round fractional GPU requests up to whole GPUs (explicit opt-in; off = GPUs are shared)"""
    cpu_job_gpus: int = 1
    """GPU demand given to each task of a CPU-only trace (google/alibaba 2017/swf): see README"""


@dataclass(frozen=True)
class SimConfig:
    runtime_info: str = "oracle"
    """what policies may know of a job's runtime: oracle (true) | estimate (user estimate or noisy)"""
    estimate_sigma: float = 0.5
    """log-normal sigma of the noisy estimate used when a workload has no user estimate"""
    estimate_median_factor: float = 1.5
    """median over-estimation factor of that noisy estimate"""


@dataclass(frozen=True)
class EnvConfig:
    window: int = 16
    """K visible queued jobs (action = one of them or WAIT)"""
    reward: str = "jct"
    """jct: -dt x jobs in system / scale | slowdown | utilization"""
    reward_scale_s: float = 3600.0
    max_steps: int = 200_000
    """truncation limit per episode"""


@dataclass(frozen=True)
class D3QNConfig:
    total_steps: int = 300_000
    learning_rate: float = 3e-4
    buffer_size: int = 100_000
    batch_size: int = 128
    gamma: float = 0.99
    tau: float = 1.0
    target_update_every: int = 1000
    learning_starts: int = 2000
    train_every: int = 4
    eps_start: float = 1.0
    eps_end: float = 0.05
    eps_fraction: float = 0.3
    n_step: int = 1
    prioritized: bool = False
    hidden: int = 64


@dataclass(frozen=True)
class SACConfig:
    total_steps: int = 300_000
    learning_rate: float = 3e-4
    buffer_size: int = 100_000
    batch_size: int = 128
    gamma: float = 0.99
    tau: float = 0.005
    learning_starts: int = 2000
    train_every: int = 4
    target_entropy_ratio: float = 0.5
    hidden: int = 64


@dataclass(frozen=True)
class RunConfig:
    mode: str = "eval"
    """train | eval | compare"""
    algo: str = "easy"
    algos: tuple[str, ...] = ("fcfs", "sjf", "easy")
    seed: int = 0
    seeds: tuple[int, ...] = (0,)
    log_dir: str | None = None
    """put the run's files directly here (default: a descriptive folder under logs/)"""
    models_dir: str = "models"
    checkpoint: str | None = None
    resume: str | None = None
    device: str = "auto"
    """auto | cpu | cuda"""
    total_steps: int | None = None
    checkpoint_every_episodes: int = 50
    progress: bool = True
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    sim: SimConfig = field(default_factory=SimConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    d3qn: D3QNConfig = field(default_factory=D3QNConfig)
    sac: SACConfig = field(default_factory=SACConfig)
