"""Every knob of the platform as frozen dataclasses, with defaults and units; the CLI is built from them."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


class UserError(ValueError):
    """A mistake in the user's options or input files: reported as one `error:` line, without a traceback
    (raised by every layer that reads what the user gave)."""


def a_or_an(word: object) -> str:
    """`word` with its indefinite article for a message: "an es agent", "a d3qn agent" (by its first letter)."""
    text = str(word)
    return f"{'an' if text[:1].lower() in 'aeiou' else 'a'} {text}"


@dataclass(frozen=True)
class DifficultyPreset:
    cluster: str
    """cluster spec string (see sim/cluster_spec.py)"""
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
    """synthetic | csv | google | alibaba (alibaba-openb | alibaba-pai | alibaba-2017) | itp | philly | helios | swf"""
    workload_path: str | None = None
    difficulty: str = "medium"
    """easy | medium | hard: cluster, job count and target load factor"""
    num_jobs: int | None = None
    """override the preset's job count (synthetic)"""
    load_factor: float | None = None
    """override the preset's target load factor (synthetic)"""
    synthetic_profile: str = "philly"
    """synthetic: philly | helios | itp (fitted to published statistics, workloads/profiles.py) | legacy (the
    original generator, exactly)"""
    kill_at_estimate: bool = False
    """end a job at its requested time (estimate_s) as HPC schedulers do; it is recorded as Killed"""
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
    """GPU demand given to each task of a CPU-only trace (google/alibaba 2017/swf): see docs/traces.md"""
    recorded_gpu_type: str | None = None
    """trace: GPU type the recorded durations were measured on (default: the cluster's most common type)"""
    google_unit: str = "task"
    """google: one job per Borg task (task, as Borg schedules them) or one rigid gang per Borg job (job)"""
    job_types: str | None = None
    """per-job GPU-type speeds from a throughput matrix: `gavel` (Gavel's measured matrix, OSDI'20) or a path to
    a file of the same shape; each job gets a job type (sim/throughput.py, workloads/job_types.py); None = the
    catalog's one speed per GPU type"""


@dataclass(frozen=True)
class SimConfig:
    runtime_info: str = "oracle"
    """what policies may know of a job's runtime: oracle (true) | estimate (user estimate or noisy)"""
    estimate_sigma: float = 0.5
    """log-normal sigma of the noisy estimate used when a workload has no user estimate"""
    estimate_median_factor: float = 1.5
    """median over-estimation factor of that noisy estimate"""
    preempt_overhead_s: float = 60.0
    """seconds a preempted job spends restoring its checkpoint (holding its GPUs, doing no work) each time it
    is started again; only the preemptive policies (srtf, tiresias, gavel, gavel_agnostic, themis, las_speed)
    preempt. 60 s: about the 62 s average preemption overhead of Tiresias' testbed (Gu et al., NSDI'19, §5.2.4: 13,724 s over
    221 preemptions, as quoted in Lucid's reference simulator, github.com/S-Lab-System-Group/Lucid,
    simulation/policy/policy.py `ckpt_overhead`; the paper's text was not checked here); Lucid's simulator itself
    charges 40 s for jobs of <= 8 GPUs and 60 s above (docs/schedulers.md, Preemption)"""


@dataclass(frozen=True)
class PolicyConfig:
    """Parameters of the heuristic policies (schedulers/)."""

    gate_s: float = 518_400.0
    """sjf_gate: hold a job back (while others run) rather than start it where it would run this many seconds
    longer than on the fastest type it can use in this cluster; tuned on medium validation seeds 500-509
    (bench/tune_gate.py, BENCHMARKS.md)"""
    round_s: float = 360.0
    """las_speed (and the score env, GPUClusterScore-v0): seconds between the rounds at which jobs are re-chosen
    and preempted (Gavel's default round)"""
    round_on_arrival: bool = False
    """las_speed, the trained scorers and the score env: an instant at which a job arrives (and waits) is a round
    too (the walk may preempt for it at once, as SRTF does), besides the boundaries every `round_s`"""
    score_preempt: bool = True
    """las_speed and the trained scorers (eval, compare, report): the score rounds as they are (True), or their
    non-preemptive ablation (False: no rounds; waiting jobs start at arrivals and completions in score order)"""


@dataclass(frozen=True)
class EnvConfig:
    window: int = 16
    """K visible queued jobs (action = one of them or WAIT)"""
    window_order: str = "runtime"
    """runtime: startable jobs shortest known runtime first | arrival: oldest first"""
    reward: str = "jct"
    """jct: -dt x jobs in system / scale | jct_at_start (same return, run time charged at start) | delay
    (jct_at_start without the policy-independent reference run times) | slowdown | utilization;
    `--mode train` defaults to delay"""
    reward_scale_s: float = 3600.0
    max_steps: int = 200_000
    """truncation limit per episode"""


@dataclass(frozen=True)
class DemonstrationConfig:
    """Learning from a heuristic's demonstrations (DQfD-style), shared by the agent configs."""

    demo_policy: str = "sjf"
    """heuristic whose decisions seed training: its transitions on `demo_episodes` training scenarios stay in
    a separate buffer, the agent pre-trains on them for `demo_pretrain_updates` updates and keeps a supervised
    term on them; "" = pure RL"""
    demo_episodes: int = 20
    """training scenarios the demonstrator is run on (seeds from the training range, disjoint from eval)"""
    demo_pretrain_updates: int = 5_000
    """gradient updates on demonstrations alone before the agent first acts"""
    demo_batch_size: int = 32
    """demonstration transitions added to every training batch"""
    demo_weight: float = 1.0
    """weight of the supervised term on demonstrations (D3QN: large-margin loss; SAC: -log pi(demo action))"""


@dataclass(frozen=True)
class D3QNConfig(DemonstrationConfig):
    total_steps: int = 120_000
    """env steps of a run (RunConfig.total_steps overrides); sized for <= 8 min on one core on the medium philly
    scenarios: about 27 s of setup + 3.2 ms per step, validation included (BENCHMARKS.md, *Agent training*)"""
    learning_rate: float = 3e-4
    buffer_size: int = 100_000
    """replay capacity in transitions"""
    batch_size: int = 128
    gamma: float = 0.9
    """discount per `discount_tau_s` seconds of simulated time (a per-step discount priced 20 starts at
    one instant like 20 hours); 0.9 per hour = an e-folding horizon of about 9.5 h, a few average job
    completion times on the synthetic profiles (not tuned: BENCHMARKS.md)"""
    discount_tau_s: float = 3600.0
    """a step that took dt simulated seconds (info["elapsed_s"]) is discounted by gamma^(dt / discount_tau_s);
    0 = per env step (gamma each, for envs that report no elapsed time)"""
    tau: float = 1.0
    """target <- tau * online + (1 - tau) * target every target_update_every steps (1.0 = hard copy)"""
    target_update_every: int = 1000
    """env steps between target-network updates"""
    learning_starts: int = 2000
    """transitions collected before the first update (again after a resume only if the buffer is empty)"""
    train_every: int = 4
    """env steps per gradient update"""
    eps_start: float | None = None
    """initial epsilon; None = 0.05 with demonstrations (the pre-trained agent already acts well), else 1.0"""
    eps_end: float | None = None
    """final epsilon; None = 0.01 with demonstrations, else 0.05"""
    eps_fraction: float = 0.3
    """fraction of the run's total steps over which epsilon decays linearly"""
    n_step: int = 3
    """n-step returns (1 = one-step TD)"""
    prioritized: bool = False
    """proportional prioritized replay (sum tree) with importance weights"""
    per_alpha: float = 0.6
    """priority exponent"""
    per_beta_start: float = 0.4
    """importance-weight exponent, annealed linearly to 1.0 over the run"""
    per_eps: float = 1e-6
    """added to |TD error| so no transition gets priority 0"""
    max_grad_norm: float = 10.0
    hidden: int = 32
    """width of every hidden layer of the per-slot scoring network (RLScheduler/Decima-sized)"""
    demo_margin: float = 0.8
    """large-margin loss: the demonstrator's action must beat every other legal action's Q by this much
    (in return units, i.e. reward_scale_s seconds of JCT)"""
    save_replay: bool = True
    """store the replay buffer beside the newest checkpoint so a resume need not refill it"""


@dataclass(frozen=True)
class SACConfig(DemonstrationConfig):
    total_steps: int = 80_000
    """env steps of a run (RunConfig.total_steps overrides); sized for <= 8 min on one core on the medium philly
    scenarios: about 52 s of setup + 4.7 ms per step, validation included (BENCHMARKS.md, *Agent training*)"""
    learning_rate: float = 1e-4
    """actor, critic and temperature learning rate (3e-4 collapsed now and then on validation seeds)"""
    buffer_size: int = 100_000
    """replay capacity in transitions"""
    batch_size: int = 128
    gamma: float = 0.9
    """discount per `discount_tau_s` seconds of simulated time; see D3QNConfig.gamma"""
    discount_tau_s: float = 3600.0
    """time-based discounting: gamma^(dt / discount_tau_s) per step of dt simulated seconds (0 = per step)"""
    tau: float = 0.005
    """soft target-critic update rate, applied after every gradient update"""
    learning_starts: int = 2000
    """uniformly random legal actions until the buffer holds this many transitions"""
    train_every: int = 4
    """env steps per gradient update"""
    target_entropy_ratio: float = 0.2
    """target entropy of a state = ratio x log(number of legal actions in that state); 0.5 kept alpha rising
    (0.38 -> 0.95) while the cloned policy stayed near-deterministic (RL-quality study)"""
    alpha_init: float = 0.01
    """initial entropy temperature (in reward units per nat: a step's reward is hours of job time, so an
    alpha near 1 paid for extra WAIT steps)"""
    alpha_max: float = 0.05
    """upper bound of the learned temperature (log alpha is clamped after every step), so the entropy bonus
    of a decision stays below alpha_max x log(K + 1) ~ 0.14 reward units (8.5 minutes of one job's time)"""
    autotune: bool = True
    """learn the temperature (within (0, alpha_max]); False keeps alpha_init"""
    demo_decay_fraction: float = 0.5
    """the behaviour-cloning weight decays linearly from demo_weight to 0 over this fraction of the run's total
    steps, so the final policy is the critic's, not the demonstrator's; pre-training uses the
    full weight; inf = never decays (the behaviour of checkpoint format 1)"""
    demo_q_filter: bool = True
    """clone a demonstration only where the critics value its action at least as much as the policy's expected
    action value (the Q-filter of Nair et al. 2018, eq. 4), so imitation never overrides what the critic learned
    is better; not while pre-training on demonstrations alone (the critic is untrained then)"""
    n_step: int = 1
    """n-step returns (1 = one-step TD; > 1 adds off-policy bias, uncorrected)"""
    max_grad_norm: float = 10.0
    hidden: int = 32
    """width of every hidden layer of the per-slot scoring networks (RLScheduler/Decima-sized)"""
    save_replay: bool = True
    """store the replay buffer beside the newest checkpoint so a resume need not refill it"""


TASKS = ("scheduling", "power", "autoscaling")


@dataclass(frozen=True)
class TaskConfig:
    """Which decision the agent makes. scheduling: it starts queued jobs (GPUClusterScheduling-v0); power and
    autoscaling: it turns nodes on and off while `scheduler` starts the jobs (env/node_env.py)."""

    name: str = "scheduling"
    """scheduling | power (GPUClusterPower-v0: energy cost + JCT) | autoscaling (GPUClusterAutoscale-v0:
    rent cloud nodes under a budget)"""
    scheduler: str = "easy"
    """power/autoscaling: the heuristic that starts the jobs (fcfs | sjf | easy)"""
    jct_weight_eur_per_job_h: float = 0.10
    """power: lambda, EUR per job-hour in the system (env/power_env.py, JCT_WEIGHT_EUR_PER_JOB_H)"""
    recheck_s: float = 600.0
    """power/autoscaling: longest simulated time without a decision while a power action is possible"""
    autoscale_preset: str = "easy"
    """autoscaling: easy | medium | hard (env/autoscale_env.py AUTOSCALE_PRESETS: fleet, jobs, budget, horizon)"""


@dataclass(frozen=True)
class PowerConfig:
    """The power model and power managers (sim/power.py, schedulers/power_managers.py); off unless --power is given."""

    managers: tuple[str, ...] = ()
    """power managers: always_on | idle_off:T[:R] | price_aware:D[:T[:R]]; compare runs each algo with each;
    () = no power model (outputs exactly as without one)"""
    prices_path: str | None = None
    """CSV timestamp,price[,carbon] (EUR/MWh, gCO2/kWh), hourly or finer (default: the synthetic diurnal curve)"""
    price_offset_s: float = 0.0
    """simulated time 0 falls this many seconds after the price series' first timestamp (synthetic: midnight)"""
    pue: float = 1.58
    """facility power / IT power (Uptime Institute Global Data Center Survey 2023 average)"""


@dataclass(frozen=True)
class PPOConfig:
    """MaskablePPO (sb3-contrib 2.9.2) with the per-slot scoring actor D3QN and SAC use; no demonstrations.
    Defaults are stable-baselines3's PPO defaults, which are Schulman et al. 2017 (PPO), Table 3, except where
    noted."""

    total_steps: int = 400_000
    """env steps of a run, summed over the vectorized envs (RunConfig.total_steps overrides); a run stops at the
    first whole rollout (n_steps x num_envs steps) at or past it. About 4.6 min on one core with the synthetic
    mix and validation (BENCHMARKS.md, RL study budget), inside the 8-minute budget per run of a study"""
    num_envs: int = 4
    """episodes played side by side (one vectorized env each); slot i plays training episodes i, i+n, i+2n, ..."""
    vec_env: str = "dummy"
    """dummy: every env in this process (best on one core) | subproc: one process per env; same results"""
    learning_rate: float = 3e-4
    n_steps: int = 512
    """env steps per env and rollout (SB3 default 2048; shorter rollouts update more often on a small budget)"""
    batch_size: int = 256
    """minibatch (SB3 default 64): a rollout of 4 envs x 512 steps is 8 minibatches"""
    n_epochs: int = 4
    """passes over each rollout (SB3 default 10; 4 keeps the update cost below the env's on one core)"""
    gamma: float = 0.9
    """discount per `discount_tau_s` seconds of simulated time, as D3QNConfig/SACConfig (PPO's former
    0.99 per env step priced 20 starts at one instant like 20 hours, and 4 of 5 training seeds collapsed to
    holding jobs back; docs/agents.md, PPO)"""
    discount_tau_s: float = 3600.0
    """a step that took dt simulated seconds (info["elapsed_s"]) is discounted by gamma^(dt / discount_tau_s) in
    GAE's TD errors and traces; 0 = per env step (gamma each: SB3's own GAE, as PPO did before)"""
    gae_lambda: float = 0.95
    """GAE's lambda (Schulman et al. 2016, GAE), applied once per env step on top of each step's discount"""
    normalize_reward: bool = True
    """divide every reward by a running standard deviation of the time-discounted return (SB3's VecNormalize
    reward scaling; Engstrom et al. 2020, "Implementation Matters in Deep Policy Gradients", sec. 3): the raw
    values of thousands of job-hours made the value loss dominate the clipped gradient (max_grad_norm), so the
    policy never moved from its near-uniform start (approx. KL ~1e-5 per update; BENCHMARKS.md, RL study)"""
    clip_range: float = 0.2
    ent_coef: float = 0.01
    """entropy bonus (SB3 default 0.0; a small bonus keeps WAIT and slot choices explored with masked logits)"""
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    hidden: int = 32
    """width of the per-slot scoring actor's layers (as D3QN/SAC); the critic is a 64-64 tanh MLP on the whole
    observation"""
    demo_policy: str = ""
    """PPO learns from its own rollouts only (no demonstrations; `--demo_policy` other than none is refused)"""


SCORER_ALGOS = ("cem", "es")
"""learners whose checkpoints hold a score-round scorer (agents/cem.py, agents/es.py), run natively like las_speed;
the other learners' checkpoints hold a slot-env network"""


@dataclass(frozen=True)
class CEMConfig:
    """The cross-entropy search of a linear score-round scorer (agents/cem.py): a Gaussian over the weights of the
    score features (schedulers/score_features.py), refit each generation to its best candidates. Every candidate of
    a generation runs on the same training scenarios (common random numbers); its objective is the mean over them of
    ln(its average JCT / SJF's average JCT), lower is better."""

    total_steps: int = 30
    """generations of a run (RunConfig.total_steps overrides): about 15 min with the synthetic mix on 2 shared
    cores (docs/results.md)"""
    population: int = 16
    """candidates per generation"""
    elite_frac: float = 0.25
    """share of a generation's candidates the Gaussian is refit to"""
    scenarios: int = 4
    """training scenarios per generation, the same for every candidate"""
    init: str = "las_speed"
    """the search's starting mean: las_speed (its hand-set weights) | zero"""
    init_std: float = 0.3
    """the starting standard deviation of every weight"""
    min_std: float = 0.02
    """floor of every weight's standard deviation (keeps the search from collapsing on a noisy generation)"""
    smoothing: float = 0.7
    """new mean/std = smoothing x the elite's + (1 - smoothing) x the old (de Boer et al. 2005, sec. 3.1)"""
    workers: int = 2
    """processes simulating candidates (1: in this process); results do not depend on it"""
    minutes: float = 0.0
    """wall-clock budget of one training call (0: none): the run ends after the first generation that finishes past
    it, as if that were its last (a later --resume may continue it); what it changes is only where the run stops"""


@dataclass(frozen=True)
class ESConfig:
    """Antithetic evolution strategies (OpenAI-ES, Salimans et al. 2017) over the flattened parameters of a per-row
    MLP scorer (agents/es.py, RowMLP: s(x) = x . w + v . tanh(W x + b) for each (job, GPU type) feature row), with
    the same objective, scenarios and files as cem (agents/score_search.py)."""

    total_steps: int = 30
    """generations of a run (RunConfig.total_steps overrides)"""
    pairs: int = 8
    """antithetic pairs per generation: 2 x pairs candidates (+ the current parameters, for the history)"""
    scenarios: int = 4
    """training scenarios per generation, the same for every candidate"""
    sigma: float = 0.05
    """standard deviation of the parameter noise"""
    learning_rate: float = 0.02
    """Adam's step size on the fitness-shaped gradient estimate (centred ranks)"""
    hidden: int = 16
    """width of the MLP's hidden layer"""
    init: str = "las_speed"
    """the linear part's start: las_speed (its hand-set weights) | zero; the hidden layer starts with W drawn
    N(0, init_scale^2 / features), b = 0 and v = 0, so the starting scorer is exactly the linear one"""
    init_scale: float = 0.1
    workers: int = 2
    """processes simulating candidates (1: in this process); results do not depend on it"""
    minutes: float = 0.0
    """wall-clock budget of one training call (0: none), as CEMConfig.minutes"""


@dataclass(frozen=True)
class MixConfig:
    """What training episodes are drawn from (scenario/mixtures.py); evaluation always uses the plain scenario."""

    train_mix: str = "none"
    """none: every episode is the configured scenario with a new seed | synthetic: random cluster compositions,
    difficulties and loads (scenario/mixtures.py documents the distribution) | synthetic+traces: half of the episodes
    are windows of the --train_windows traces"""
    train_windows: tuple[str, ...] = ()
    """FORMAT=PATH[@CLUSTER] traces whose first TRAIN_FRACTION of time training windows are drawn from"""


PLOT_FORMATS = ("png", "none")
"""what --plots takes (run modes and --mode dispatch alike): the figures' file format, or none (no figure; every
other file is the same)"""
PLOT_FILE_FORMATS = ("png", "svg", "pdf")
"""what --plot_formats lists: each figure is written once per format named (svg and pdf for papers)"""
PLOT_SPANS = ("window", "full")
"""--plot_span: the time axis of utilization and queue figures over the arrival window, or the whole run"""


@dataclass(frozen=True)
class RunConfig:
    mode: str = "eval"
    """train | eval | compare | report"""
    algo: str = "easy"
    algos: tuple[str, ...] = ("fcfs", "sjf", "easy")
    seed: int = 0
    seeds: tuple[int, ...] = (0,)
    log_dir: str | None = None
    """put the run's files directly here (default: logs/<descriptive name>_<hash of the run>, cli/run_folder.py, default_log_dir)"""
    overwrite: bool = False
    """replace another run held in the run folder (its files are removed first); see run_folder.RunFolder"""
    models_dir: str = "models"
    checkpoint: str | None = None
    resume: str | None = None
    explicit_options: tuple[str, ...] = ()
    """argparse names of the options given on the command line: --resume takes every other experiment
    setting from the checkpoint and rejects a given one that contradicts it"""
    device: str = "auto"
    """auto | cpu | cuda"""
    total_steps: int | None = None
    checkpoint_every_episodes: int = 20
    keep_checkpoints: int = 3
    """train: keep the newest N periodic <algo>_seed<S>_ep<N>.pt files (0 = every one)"""
    validation_seeds: tuple[int, ...] = (200, 201, 202, 203, 204)
    """train: scenarios every checkpoint is scored on (avg JCT); the best is kept as <algo>_seed<S>_best.pt.
    () = no validation. Keep them apart from the seeds you report results on (the docs use 100-109)"""
    model: str = "final"
    """eval/compare: which checkpoint of a training seed to load when --checkpoint is not given (final | best)"""
    progress: bool = True
    plots: str = "png"
    """eval/compare/report: one of PLOT_FORMATS (png: the run's figures as PNG files; none: no figure; the
    figures take most of a small run's time)"""
    plot_formats: tuple[str, ...] = ("png",)
    """eval/compare: the file formats of each figure (PLOT_FILE_FORMATS); report.html embeds the PNG (else SVG)"""
    plot_span: str = "window"
    """one of PLOT_SPANS: utilization and queue figures over the arrival window or the whole run"""
    timeline_window_s: tuple[float, float] | None = None
    """eval/compare: (start, end) in seconds of simulated time: the gantt timeline drawn for that window only (the
    runs overlapping it), whatever the run's size; None: the whole run, for runs of at most 2,000 jobs"""
    command: tuple[str, ...] = ()
    """the command line that reproduces the run (cli/command.py, reproducing_command), shown in report.html"""
    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    sim: SimConfig = field(default_factory=SimConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    d3qn: D3QNConfig = field(default_factory=D3QNConfig)
    sac: SACConfig = field(default_factory=SACConfig)
    power: PowerConfig = field(default_factory=PowerConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    ppo: PPOConfig = field(default_factory=PPOConfig)
    cem: CEMConfig = field(default_factory=CEMConfig)
    es: ESConfig = field(default_factory=ESConfig)
    mix: MixConfig = field(default_factory=MixConfig)
    report_sets: tuple[str, ...] | None = None
    """report: the held-out sets (evaluation/sets.py); None = medium, hard, clusters (+ the trace sets with
    traces_dir)"""
    traces_dir: str | None = None
    """report: folder holding the shared traces (the later-window sets read them from there)"""
    report_workers: int = 1
    """report: evaluations run at a time (processes)"""


@dataclass(frozen=True)
class ServeConfig:
    """`--mode serve`: the HTTP server of remote Gymnasium sessions (server/, docs/server.md). The limits' defaults
    let a 2-core, 24 GB machine hold `max_sessions` sessions of the largest size allowed (64 x 256 MB = 16 GB)."""

    host: str = "127.0.0.1"
    """address to listen on (loopback: only this machine; any other address needs `token`)"""
    port: int = 8000
    max_sessions: int = 64
    """sessions open at once (HTTP and WebSocket together); one more is refused (429) unless an HTTP session has
    been idle for `evict_idle_s` (it is closed to make room)"""
    session_ttl_s: float = 600.0
    """a session unused for this many seconds (wall clock) is closed (a WebSocket: the socket is closed)"""
    evict_idle_s: float = 60.0
    """when every place is taken, an HTTP session idle this long (seconds) is closed to make room"""
    token: str | None = field(default=None, repr=False)
    """the bearer token every request but GET /health must carry (`Authorization: Bearer TOKEN`); None: none
    asked (allowed on loopback only)"""
    data_dirs: tuple[str, ...] = ()
    """folders a session's workload_path/cluster_path may name files in; () = no file is read (built-in
    scenarios only)"""
    processes: int = 1
    """server processes; a session lives in one of them (a request that reaches another is passed to it)"""
    limit_body_kb: int = 1024
    """the largest request body or WebSocket message, KiB (413 beyond)"""
    limit_jobs: int = 50_000
    """the most jobs one session's scenario may hold (422 beyond)"""
    limit_nodes: int = 2048
    """the most nodes one session's cluster may hold (422 beyond)"""
    limit_gpus: int = 16_384
    """the most GPUs one session's cluster may hold (422 beyond)"""
    limit_steps: int = 200_000
    """the longest episode, in steps: it is truncated there (the env's own default max_steps)"""
    limit_session_mb: int = 256
    """the most memory one session may need, MB, estimated from its jobs and nodes before it is built (422
    beyond)"""
    drain_s: float = 10.0
    """on SIGTERM or Ctrl-C: the longest wait for requests in flight before sessions are closed, seconds"""


@dataclass(frozen=True)
class DispatchConfig:
    """`--mode dispatch`: real shell commands on local GPUs under a scheduling policy (dispatch/, docs/dispatch.md)."""

    jobs_path: str = ""
    """the jobs file: one shell command a line with optional [vram=.. gpus=.. est=.. retries=.. timeout=..
    priority=..] attributes; read only, re-read while running"""
    algo: str = "easy"
    gate_s: float | None = None
    """sjf_gate's gate (None: its default)"""
    log_dir: str | None = None
    """the run folder (None: logs/dispatch_<jobs file>_<hash>); running the same command again resumes it"""
    sim: str | None = None
    """simulated GPUs, e.g. 4xA100-80GB (None: the real GPUs, through NVML)"""
    gpus: tuple[int, ...] | None = None
    """the device indices jobs may use (None: all)"""
    poll_s: float = 0.5
    """seconds between two looks at the GPUs, the jobs and the jobs file"""
    vram_margin_mib: int = 1024
    """memory of each GPU never given to jobs (CUDA contexts, fragmentation)"""
    default_est_s: float = 3600.0
    """the runtime estimate policies see for a job without est="""
    kill_grace_s: float = 30.0
    """seconds between SIGTERM and SIGKILL when a job times out or is stopped"""
    watch: bool = False
    """keep running when every job has finished, waiting for new lines in the jobs file"""
    on_interrupt: str = "ask"
    """Ctrl-C: ask (on a terminal; wait elsewhere), wait (for the running jobs), stop (them) or detach (leave them)"""
    status_every_s: float = 60.0
    """without a terminal: seconds between two status lines"""
    progress: bool = True
    """the live status board on a terminal"""
    plots: str = "png"
    """one of PLOT_FORMATS: the run's plots beside its CSV files as PNG files, or none"""


def run_config_from_dict(saved: dict[str, Any]) -> RunConfig:
    """The RunConfig a checkpoint's `run_config` dict was made from (fields it lacks keep their defaults;
    fields this version does not know are dropped)."""
    defaults = RunConfig()
    values: dict[str, Any] = {}
    for f in dataclasses.fields(RunConfig):
        if f.name not in saved:
            continue
        value, default = saved[f.name], getattr(defaults, f.name)
        if dataclasses.is_dataclass(default) and isinstance(value, dict):
            known = {f.name for f in dataclasses.fields(default)}
            parts = {k: tuple(v) if isinstance(v, list) else v for k, v in value.items() if k in known}
            value = dataclasses.replace(default, **parts)
        elif isinstance(value, list):
            value = tuple(value)
        values[f.name] = value
    return dataclasses.replace(defaults, **values)
