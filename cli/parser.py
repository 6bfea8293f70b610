"""The command line's options: the parser, its translation into a RunConfig, and the checks that need the whole
config (the option-by-option checks are cli/checks.py's)."""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import replace
from pathlib import Path

from config import (
    DIFFICULTIES,
    PLOT_FILE_FORMATS,
    PLOT_FORMATS,
    PLOT_SPANS,
    SCORER_ALGOS,
    TASKS,
    CEMConfig,
    ClusterConfig,
    D3QNConfig,
    EnvConfig,
    ESConfig,
    MixConfig,
    PolicyConfig,
    PowerConfig,
    PPOConfig,
    RunConfig,
    SACConfig,
    ServeConfig,
    SimConfig,
    TaskConfig,
    UserError,
    WorkloadConfig,
)
from scenario.build import WORKLOAD_TYPES
from schedulers import POLICIES, PREEMPTIVE, REPLAYS
from workloads.profiles import PROFILE_NAMES

HEURISTICS = tuple(POLICIES)  # fcfs, sjf, easy, ..., las_speed, the replays of the authors' simulators last
AGENTS = ("d3qn", "sac", "ppo", "cem", "es")
NODE_AGENTS = ("d3qn", "sac", "ppo")  # cem and es score jobs: scheduling only


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _int_list_or_none(text: str) -> tuple[int, ...]:
    return () if text.strip().lower() == "none" else _int_list(text)


def _time_window(text: str) -> tuple[float, float]:
    """--timeline_window START:END, seconds of simulated time, START < END."""
    start, sep, end = text.partition(":")
    try:
        window = (float(start), float(end)) if sep else None
    except ValueError:
        window = None
    if window is None or not (all(map(math.isfinite, window)) and window[0] < window[1]):
        raise argparse.ArgumentTypeError(f"expected START:END in seconds with START < END, got {text!r}")
    return window


def parse_plot_formats(text: str) -> tuple[str, ...]:
    """--plot_formats: comma-separated formats of PLOT_FILE_FORMATS, at least one, in the order given."""
    formats = tuple(dict.fromkeys(x.strip().lower() for x in text.split(",") if x.strip()))
    bad = [f for f in formats if f not in PLOT_FILE_FORMATS]
    if bad or not formats:
        named = f"unknown format {', '.join(bad)}" if bad else "no format"
        raise argparse.ArgumentTypeError(
            f"{named} in {text!r}; list some of {', '.join(PLOT_FILE_FORMATS)} (comma-separated; --plots none "
            "draws no figure)"
        )
    return formats


def _power_list(text: str) -> tuple[str, ...]:
    return tuple(x.strip().lower() for x in text.split(",") if x.strip())


def _name_list(text: str) -> tuple[str, ...]:
    return tuple(x.strip().lower() for x in text.split(",") if x.strip())


def _name_list_keep_case(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


class _HelpFormatter(argparse.HelpFormatter):
    """Appends "(default: X)" to an option's help unless the help already states its default or there is none
    to show (None, or off for a flag); tuples are shown as the comma-separated text the option accepts."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        nothing = action.default is None or action.default is False or action.default == argparse.SUPPRESS
        if "default" in text or nothing or not action.option_strings:
            return text
        shown = (
            ",".join(map(str, action.default)) if isinstance(action.default, tuple) else str(action.default)
        )
        return f"{text} (default: {shown.replace('%', '%%')})".lstrip()


def _per_preset(field: str) -> str:
    return ", ".join(f"{name} {getattr(p, field):g}" for name, p in DIFFICULTIES.items())


def build_parser() -> argparse.ArgumentParser:
    d, w, c, s, e = RunConfig(), WorkloadConfig(), ClusterConfig(), SimConfig(), EnvConfig()
    p = argparse.ArgumentParser(
        prog="main.py",
        description="Simulate GPU-cluster scheduling: evaluate heuristics, train/evaluate RL agents, compare them.",
        formatter_class=_HelpFormatter,
    )
    g = p.add_argument_group("run")
    g.add_argument(
        "--mode",
        choices=("train", "eval", "compare", "sweep", "serve", "report", "dispatch"),
        default=d.mode,
        help="train an agent, evaluate one algorithm, compare several on the same jobs, run a study (--study), "
        "serve environments over HTTP (--port), evaluate trained models against every heuristic on the "
        "held-out sets (report; docs/agents.md), or run a jobs file's commands on this machine's GPUs (dispatch: "
        "python main.py --mode dispatch --help)",
    )
    g.add_argument("--algo", default=d.algo, help=f"one of {', '.join(HEURISTICS + AGENTS)}")
    g.add_argument(
        "--algos", type=_name_list, default=d.algos, help="compare mode: comma-separated algorithms"
    )
    g.add_argument("--seed", type=int, default=d.seed, help="scenario seed (and training seed of an agent)")
    g.add_argument(
        "--seeds", type=_int_list, default=None, help="compare mode: comma-separated seeds (default --seed)"
    )
    g.add_argument(
        "--log_dir",
        default=None,
        help="put the run's files directly here (default: logs/<mode>_<algo>_<workload>_seed<S>_<hash>)",
    )
    g.add_argument(
        "--overwrite",
        action="store_true",
        help="replace another run's files in the run folder (never files no run writes); train: also start over "
        "when --models_dir holds an earlier run's _ep<N>/_interrupted checkpoints of that algo and seed",
    )
    g.add_argument(
        "--progress",
        choices=("auto", "always", "never"),
        default="auto",
        help="progress bars on stderr: auto shows them only when stderr is a terminal (none in a redirected log)",
    )
    g.add_argument(
        "--no_progress", action="store_true", help="no progress bar (the same as --progress never)"
    )
    g.add_argument(
        "--plots",
        choices=PLOT_FORMATS,
        default=d.plots,
        help="eval/compare/report: write the figures as PNG files, or none (the same CSV and JSON files; "
        "most of a small run's time goes into the figures)",
    )
    g.add_argument(
        "--plot_formats",
        type=parse_plot_formats,
        default=d.plot_formats,
        help="eval/compare: comma-separated file formats of every figure, of png, svg, pdf (e.g. png,svg,pdf "
        "for papers; report.html embeds the PNG, else the SVG)",
    )
    g.add_argument(
        "--timeline_window",
        type=_time_window,
        default=None,
        metavar="START:END",
        help="eval/compare: draw gantt.png (the GPU timeline) for this window of simulated time in seconds only, "
        "also for runs of more than 2,000 jobs (default: the whole run, for runs of at most 2,000 jobs)",
    )
    g.add_argument(
        "--plot_span",
        choices=PLOT_SPANS,
        default=d.plot_span,
        help="eval/compare: the time axis of utilization.png and queue_length.png: the arrival window (shaded "
        "either way) or the whole run, drain tail included",
    )
    g = p.add_argument_group("sweep (--mode sweep; the runs' options are in the study file; docs/sweeps.md)")
    g.add_argument(
        "--study",
        default=None,
        help="sweep: the study file, TOML (required with --mode sweep; there --resume alone skips finished runs)",
    )
    g.add_argument(
        "--workers", type=int, default=None, help="sweep: runs at a time (default: all cores, os.cpu_count())"
    )
    g.add_argument(
        "--backend", choices=("local", "ray"), default="local", help="sweep: where the runs execute"
    )
    g.add_argument(
        "--address", default=None, help="sweep: address of a Ray cluster (default: start a local Ray)"
    )
    g.add_argument(
        "--baseline",
        default=None,
        help="sweep: the policy the paired differences are taken from (default: the first policy of the study)",
    )
    add_serve_options(p)
    g = p.add_argument_group("workload")
    g.add_argument("--workload_type", default=w.workload_type, help=" | ".join(WORKLOAD_TYPES))
    g.add_argument(
        "--workload_path", default=None, help="jobs CSV or trace file/folder (required unless synthetic)"
    )
    g.add_argument(
        "--difficulty",
        default=w.difficulty,
        choices=tuple(DIFFICULTIES),
        help="synthetic preset: cluster, job count and target load; its cluster is also a jobs CSV's when no "
        "--cluster is given (default: medium)",
    )
    g.add_argument(
        "--num_jobs",
        type=int,
        default=None,
        help=f"synthetic: number of jobs (default: the difficulty preset's: {_per_preset('num_jobs')})",
    )
    g.add_argument(
        "--load_factor",
        type=float,
        default=None,
        help=f"synthetic: target offered load (default: the difficulty preset's: {_per_preset('load_factor')})",
    )
    g.add_argument(
        "--synthetic_profile",
        default=w.synthetic_profile,
        choices=PROFILE_NAMES,
        help="synthetic: published statistics the jobs are drawn from (legacy: the original generator)",
    )
    g.add_argument(
        "--job_types",
        default=None,
        help="synthetic or jobs CSV: give each job a job type whose speed differs per GPU type, from a throughput "
        "matrix: 'gavel' (Gavel's measured K80/P100/V100 matrix in ../shared/traces/gavel-throughputs) or a JSON "
        "file of the same shape (default: none, one speed per GPU type)",
    )
    g.add_argument(
        "--kill_at_estimate",
        action="store_true",
        help="end a job at its requested time, as HPC schedulers do (recorded as Killed)",
    )
    g.add_argument(
        "--trace_start",
        type=float,
        default=None,
        help="trace: keep jobs arriving at/after this (s on the trace's clock; default: from the first job)",
    )
    g.add_argument(
        "--trace_end",
        type=float,
        default=None,
        help="trace: keep jobs arriving before this (s; default: up to the last job)",
    )
    g.add_argument(
        "--time_scale", type=float, default=w.time_scale, help="trace: divide arrival times by this"
    )
    g.add_argument("--max_jobs", type=int, default=None, help="trace: keep the first N jobs (default: all)")
    g.add_argument(
        "--exclude_failed",
        action="store_true",
        help="trace: drop failed/killed jobs (formats with a job status)",
    )
    g.add_argument(
        "--round_fractional",
        action="store_true",
        help="trace: round fractional GPU requests (a share of one GPU) up to whole GPUs",
    )
    g.add_argument(
        "--cpu_job_gpus", type=int, default=w.cpu_job_gpus, help="trace: GPUs per task of CPU-only traces"
    )
    g.add_argument(
        "--recorded_gpu_type",
        default=None,
        help="trace: GPU type its durations were measured on (default: the cluster's most common type)",
    )
    g.add_argument(
        "--google_unit",
        choices=("task", "job"),
        default=w.google_unit,
        help="google: one job per Borg task (default) or one rigid gang per Borg job",
    )
    g = p.add_argument_group("cluster")
    g.add_argument(
        "--cluster",
        default=None,
        help="e.g. 2xA100-80GB:8,4xV100:4 (default: the difficulty preset's; for a trace, one sized to it)",
    )
    g.add_argument(
        "--cluster_path",
        default=None,
        help="CSV node_id,gpu_type,num_gpus[,gpu_mem_gb] or a trace's machine file (default: none, --cluster is used)",
    )
    g.add_argument("--uniform_speed", action="store_true", help="every GPU type runs at speed 1.0")
    g.add_argument(
        "--multi_node_factor",
        type=float,
        default=c.multi_node_runtime_factor,
        help="runtime multiplier of a job spread over several nodes",
    )
    g = p.add_argument_group("energy and power (docs/power.md)")
    pc = PowerConfig()
    g.add_argument(
        "--power",
        type=_power_list,
        default=None,
        help="power model with power manager(s): always_on | idle_off:T[:R] | price_aware:D[:T[:R]]; compare: "
        "comma-separated, each runs with every --algos (default: no power model)",
    )
    g.add_argument(
        "--prices",
        default=None,
        help="CSV timestamp,price[,carbon] in EUR/MWh and gCO2/kWh, hourly or finer (default: synthetic diurnal)",
    )
    g.add_argument(
        "--price_offset_s",
        type=float,
        default=pc.price_offset_s,
        help="simulated time 0 is this many seconds after the price series' first timestamp",
    )
    g.add_argument("--pue", type=float, default=pc.pue, help="facility power / IT power")
    g = p.add_argument_group("policy information")
    g.add_argument(
        "--runtime_info",
        choices=("oracle", "estimate"),
        default=s.runtime_info,
        help="what policies and agents know of runtimes: the true one, or the user estimate (else a noisy one)",
    )
    g.add_argument(
        "--preempt_overhead_s",
        type=float,
        default=s.preempt_overhead_s,
        help="seconds a preempted job spends restoring when started again (the preemptive policies: "
        f"{', '.join(p for p in POLICIES if p in PREEMPTIVE)})",
    )
    g.add_argument(
        "--gate_s",
        type=float,
        default=PolicyConfig().gate_s,
        help="sjf_gate: do not start a job (while others run) where it would run more than this many seconds "
        "longer than on the fastest GPU type it can use in this cluster",
    )
    g.add_argument(
        "--round_s",
        type=float,
        default=PolicyConfig().round_s,
        help="las_speed, cem, es: seconds between the rounds at which running and waiting jobs are re-chosen (and "
        "preempted); a cem/es model runs at the round it was trained at unless this is given",
    )
    g.add_argument(
        "--round_on_arrival",
        choices=("yes", "no"),
        default="no",
        help="las_speed, cem, es: an instant at which a job arrives is a round too (the walk may preempt for it at "
        "once, as SRTF does), besides the boundaries every --round_s; a cem/es model runs as it was trained unless "
        "this is given",
    )
    g.add_argument(
        "--score_preempt",
        choices=("yes", "no"),
        default="yes",
        help="las_speed and trained scorers (cem, es): the preemptive score rounds (yes), or the ablation without "
        "rounds or preemption (no: waiting jobs start at arrivals and completions in score order)",
    )
    g = p.add_argument_group("agents")
    g.add_argument(
        "--total_steps",
        type=int,
        default=None,
        help=f"training budget in env steps (default: d3qn {D3QNConfig().total_steps:,}, sac {SACConfig().total_steps:,}, "
        f"ppo {PPOConfig().total_steps:,}); for cem and es: generations (cem {CEMConfig().total_steps}, "
        f"es {ESConfig().total_steps} unless given)",
    )
    g.add_argument(
        "--checkpoint",
        default=None,
        help="eval/compare: the agent's checkpoint file, or ALGO=PATH[,ALGO=PATH] for several agents in compare "
        "(default models/<algo>_seed<S>_<model>.pt)",
    )
    g.add_argument("--resume", default=None, help="train: continue from this checkpoint (default: a new run)")
    g.add_argument(
        "--device",
        choices=("auto", "cpu", "cuda"),
        default=d.device,
        help="torch device of agents (auto: cuda if available)",
    )
    g.add_argument(
        "--models_dir",
        default=d.models_dir,
        help="folder where training writes <algo>_seed<S>_final.pt, _best.pt, _ep<N>.pt and where eval/compare "
        "looks for them",
    )
    g.add_argument("--window", type=int, default=e.window, help="K visible queued jobs in the env")
    g.add_argument(
        "--reward",
        choices=("jct", "jct_at_start", "delay", "slowdown", "utilization"),
        default=None,
        help=f"env reward (default: delay to train, {e.reward} otherwise); see the env docstring",
    )
    g.add_argument(
        "--validation_seeds",
        type=_int_list_or_none,
        default=d.validation_seeds,
        help="train: scenarios each checkpoint is scored on; the best is kept as models/<algo>_seed<S>_best.pt "
        "('none' = no validation)",
    )
    g.add_argument(
        "--model",
        choices=("final", "best"),
        default=d.model,
        help="eval/compare: load models/<algo>_seed<S>_<model>.pt when --checkpoint is not given",
    )
    g.add_argument(
        "--demo_policy",
        default=None,
        help="train: heuristic whose decisions the agent pre-trains on and keeps imitating where RL does not "
        f"find better (DQfD-style), or 'none' for pure RL (default: {D3QNConfig().demo_policy or 'none'})",
    )
    g.add_argument(
        "--checkpoint_every",
        type=int,
        default=d.checkpoint_every_episodes,
        help="train: save a checkpoint every N episodes",
    )
    g.add_argument(
        "--keep_checkpoints",
        type=int,
        default=d.keep_checkpoints,
        help="train: keep the newest N periodic <algo>_seed<S>_ep<N>.pt files, removing older ones (0: keep all)",
    )
    t = TaskConfig()
    g = p.add_argument_group("node-management tasks (docs/power.md)")
    g.add_argument(
        "--task",
        choices=TASKS,
        default=t.name,
        help="what the agent decides: scheduling (starts jobs), power (GPUClusterPower-v0: which nodes are on, "
        "for energy cost + JCT) or autoscaling (GPUClusterAutoscale-v0: rents cloud nodes under a budget); "
        "train/eval only. With power/autoscaling, --algo is d3qn, sac or a reference node manager (eval: "
        "always_on, idle_off:T[:R], idle_off_fit:T[:R], provision_to_demand) and models go to <models_dir>/<task>/",
    )
    g.add_argument(
        "--task_scheduler",
        choices=tuple(h for h in HEURISTICS if h not in REPLAYS),
        default=t.scheduler,
        help="power/autoscaling: the heuristic that starts the jobs (not a replay of an authors' simulator)",
    )
    g.add_argument(
        "--jct_weight",
        type=float,
        default=t.jct_weight_eur_per_job_h,
        help="power: lambda, EUR per job-hour in the system in the reward -(energy cost + lambda x JCT)",
    )
    g.add_argument(
        "--recheck_s",
        type=float,
        default=t.recheck_s,
        help="power/autoscaling: longest simulated time between decisions while a power action is possible",
    )
    g.add_argument(
        "--autoscale_preset",
        choices=("easy", "medium", "hard"),
        default=t.autoscale_preset,
        help="autoscaling: fleet, jobs, budget and horizon (docs/power.md)",
    )
    g.add_argument(
        "--num_envs",
        type=int,
        default=PPOConfig().num_envs,
        help="train ppo: episodes played side by side (vectorized envs)",
    )
    g.add_argument(
        "--vec_env",
        choices=("dummy", "subproc"),
        default=PPOConfig().vec_env,
        help="train ppo: envs in this process (dummy) or one process each (subproc); same results",
    )
    c = CEMConfig()
    g.add_argument(
        "--cem_population",
        type=int,
        default=c.population,
        help="train cem: candidate weight vectors per generation (--total_steps counts generations for cem, "
        f"default {c.total_steps})",
    )
    g.add_argument(
        "--cem_scenarios",
        type=int,
        default=c.scenarios,
        help="train cem: training scenarios per generation, the same for every candidate",
    )
    g.add_argument(
        "--cem_init_std",
        type=float,
        default=c.init_std,
        help="train cem: the search's starting standard deviation of every weight (around las_speed's weights); "
        "larger searches further from that prior",
    )
    g.add_argument(
        "--cem_workers",
        type=int,
        default=c.workers,
        help="train cem: processes simulating candidates (1: this process); same results",
    )
    g.add_argument(
        "--cem_minutes",
        type=float,
        default=c.minutes,
        help="train cem: wall-clock budget of this call in minutes; the run ends after the generation that passes "
        "it, and that search is the final model (0: no limit)",
    )
    e = ESConfig()
    g.add_argument(
        "--es_pairs",
        type=int,
        default=e.pairs,
        help="train es: antithetic pairs of perturbed MLP parameters per generation (--total_steps counts "
        f"generations for es, default {e.total_steps})",
    )
    g.add_argument(
        "--es_scenarios",
        type=int,
        default=e.scenarios,
        help="train es: training scenarios per generation, the same for every candidate",
    )
    g.add_argument(
        "--es_hidden", type=int, default=e.hidden, help="train es: hidden units of the per-row MLP scorer"
    )
    g.add_argument(
        "--es_workers",
        type=int,
        default=e.workers,
        help="train es: processes simulating candidates (1: this process); same results",
    )
    g.add_argument(
        "--es_minutes",
        type=float,
        default=e.minutes,
        help="train es: wall-clock budget of this call in minutes, as --cem_minutes (0: no limit)",
    )
    g.add_argument(
        "--train_mix",
        choices=("none", "synthetic", "synthetic+traces", "traces"),
        default=MixConfig().train_mix,
        help="train: what episodes are drawn from: the configured scenario (none), random cluster compositions, "
        "difficulties and loads (synthetic), plus real-trace windows (synthetic+traces), or only the trace windows "
        "(traces; scenario/mixtures.py)",
    )
    g.add_argument(
        "--train_windows",
        type=_name_list_keep_case,
        default=(),
        help="train: FORMAT=PATH[@CLUSTER][#MAX_JOBS],... traces whose first 70%% of time gives training windows "
        "(with --train_mix synthetic+traces or traces; default: none)",
    )
    g = p.add_argument_group("report (--mode report; docs/agents.md)")
    g.add_argument(
        "--report_sets",
        type=_name_list,
        default=None,
        help="report: held-out sets to evaluate on (default: medium,hard,clusters, plus itp,google,swf with "
        "--traces_dir; gavel, a K80/P100/V100 cluster, needs --job_types); evaluation/sets.py",
    )
    g.add_argument(
        "--traces_dir",
        default=None,
        help="report: folder holding the shared traces (as ../shared/traces) for the later-window sets "
        "(default: none, no trace set)",
    )
    g.add_argument(
        "--report_workers",
        type=int,
        default=1,
        help="report: evaluations run at a time (processes)",
    )
    return p


def config_from_args(a: argparse.Namespace) -> RunConfig:
    d = RunConfig()
    algos = a.algos if isinstance(a.algos, tuple) else _name_list(a.algos)
    demo = _task_demo(a)
    return RunConfig(
        mode=a.mode,
        algo=a.algo.lower(),
        algos=algos,
        seed=a.seed,
        seeds=a.seeds if a.seeds else (a.seed,),
        log_dir=a.log_dir,
        overwrite=a.overwrite,
        models_dir=_task_models_dir(a),
        checkpoint=a.checkpoint,
        resume=a.resume,
        device=a.device,
        total_steps=a.total_steps,
        checkpoint_every_episodes=a.checkpoint_every,
        keep_checkpoints=a.keep_checkpoints,
        validation_seeds=a.validation_seeds,
        model=a.model,
        progress=show_progress(a),
        plots=a.plots,
        plot_formats=a.plot_formats,
        plot_span=a.plot_span,
        timeline_window_s=a.timeline_window,
        cluster=ClusterConfig(a.cluster, a.cluster_path, a.uniform_speed, a.multi_node_factor),
        workload=WorkloadConfig(
            workload_type=a.workload_type.lower(),
            workload_path=a.workload_path,
            difficulty=a.difficulty,
            num_jobs=a.num_jobs,
            load_factor=a.load_factor,
            synthetic_profile=a.synthetic_profile,
            kill_at_estimate=a.kill_at_estimate,
            trace_start_s=a.trace_start,
            trace_end_s=a.trace_end,
            time_scale=a.time_scale,
            max_jobs=a.max_jobs,
            exclude_failed=a.exclude_failed,
            round_fractional=a.round_fractional,
            cpu_job_gpus=a.cpu_job_gpus,
            recorded_gpu_type=a.recorded_gpu_type,
            google_unit=a.google_unit,
            job_types=a.job_types,
        ),
        sim=replace(d.sim, runtime_info=a.runtime_info, preempt_overhead_s=a.preempt_overhead_s),
        policy=PolicyConfig(
            gate_s=a.gate_s,
            round_s=a.round_s,
            round_on_arrival=a.round_on_arrival == "yes",
            score_preempt=a.score_preempt == "yes",
        ),
        env=replace(
            d.env, window=a.window, reward=a.reward or ("delay" if a.mode == "train" else d.env.reward)
        ),
        d3qn=d.d3qn if demo is None else replace(d.d3qn, demo_policy=demo),
        sac=d.sac if demo is None else replace(d.sac, demo_policy=demo),
        task=TaskConfig(a.task, a.task_scheduler, a.jct_weight, a.recheck_s, a.autoscale_preset),
        power=PowerConfig(a.power or (), a.prices, a.price_offset_s, a.pue),
        ppo=replace(
            d.ppo,
            num_envs=a.num_envs,
            vec_env=a.vec_env,
            demo_policy=d.ppo.demo_policy if demo is None else demo,
        ),
        cem=replace(
            d.cem,
            population=a.cem_population,
            scenarios=a.cem_scenarios,
            init_std=a.cem_init_std,
            workers=a.cem_workers,
            minutes=a.cem_minutes,
        ),
        es=replace(
            d.es,
            pairs=a.es_pairs,
            scenarios=a.es_scenarios,
            hidden=a.es_hidden,
            workers=a.es_workers,
            minutes=a.es_minutes,
        ),
        mix=MixConfig(train_mix=a.train_mix, train_windows=a.train_windows),
        report_sets=a.report_sets,
        traces_dir=a.traces_dir,
        report_workers=a.report_workers,
    )


def show_progress(a: argparse.Namespace) -> bool:
    """Whether progress bars show: --progress always|never, --no_progress (never), else (auto) only when stderr is
    a terminal, so a redirected log holds no bar."""
    if a.no_progress:
        return False
    if a.progress == "auto":
        return sys.stderr.isatty()
    return a.progress == "always"


def _task_models_dir(a: argparse.Namespace) -> str:
    """A node task's agents live apart from the scheduling agents (same file names, other networks)."""
    return a.models_dir if a.task == "scheduling" else str(Path(a.models_dir) / a.task)


def _task_demo(a: argparse.Namespace) -> str | None:
    """--demo_policy, or for a node task the task's reference node manager (the scheduling default, sjf, cannot
    act there)."""
    if a.demo_policy is not None:
        return _demo(a.demo_policy)
    if a.task != "scheduling":
        from env.node_tasks import REFERENCE_MANAGER

        return REFERENCE_MANAGER[a.task]
    return None


def _demo(name: str) -> str:
    return "" if name.lower() == "none" else name.lower()


def validate(cfg: RunConfig) -> None:
    if cfg.task.name != "scheduling":
        _validate_node_task(cfg)
        return
    known = HEURISTICS + AGENTS
    if cfg.mode in ("eval", "train") and cfg.algo not in known:
        raise UserError(f"unknown --algo {cfg.algo!r}; choose one of {', '.join(known)}")
    if cfg.mode == "train" and cfg.algo not in AGENTS:
        raise UserError(f"--mode train needs an RL --algo ({', '.join(AGENTS)}); heuristics need no training")
    if cfg.mode == "compare":
        bad = [x for x in cfg.algos if x not in known]
        if bad or not cfg.algos:
            named = f"unknown --algos {', '.join(bad)}" if bad else "--algos names no algorithm"
            raise UserError(f"{named}; choose from {', '.join(known)} (comma-separated)")
    if cfg.total_steps is not None and cfg.total_steps <= 0:
        unit = "generations" if cfg.algo in SCORER_ALGOS else "env steps"
        raise UserError(f"--total_steps must be > 0 {unit}, got {cfg.total_steps}")
    if not cfg.policy.gate_s >= 0:
        raise UserError(f"--gate_s must be >= 0 seconds, got {cfg.policy.gate_s}")
    if not (math.isfinite(cfg.policy.round_s) and cfg.policy.round_s > 0):
        raise UserError(f"--round_s must be a finite number of seconds > 0, got {cfg.policy.round_s}")
    if cfg.env.window <= 0:
        raise UserError(f"--window must be > 0 visible jobs, got {cfg.env.window}")
    if cfg.ppo.num_envs <= 0:
        raise UserError(f"--num_envs must be > 0, got {cfg.ppo.num_envs}")
    if cfg.report_workers <= 0:
        raise UserError(f"--report_workers must be > 0, got {cfg.report_workers}")


def _validate_node_task(cfg: RunConfig) -> None:
    from env.node_heuristics import node_manager
    from env.node_tasks import check_task_config

    check_task_config(cfg.task)
    task = cfg.task.name
    if cfg.algo in ("cem", "es"):
        raise UserError(
            f"--algo {cfg.algo} learns a job scorer (--task scheduling); --task {task} trains d3qn or sac"
        )
    if cfg.mode not in ("train", "eval"):
        raise UserError(f"--task {task} runs in --mode train or eval; --mode {cfg.mode} compares schedulers")
    if cfg.mode == "train" and cfg.algo not in NODE_AGENTS:
        raise UserError(
            f"--mode train needs an RL --algo ({', '.join(NODE_AGENTS)}); node managers need no training"
        )
    if cfg.algo not in NODE_AGENTS:
        try:
            node_manager(cfg.algo)
        except ValueError as err:
            raise UserError(
                f"--task {task}: --algo must be {', '.join(NODE_AGENTS)} or a node manager ({err})"
            ) from None
    demo = getattr(cfg, cfg.algo).demo_policy if cfg.algo in NODE_AGENTS else ""
    if cfg.mode == "train" and demo:
        try:
            node_manager(demo)
        except ValueError as err:
            raise UserError(f"--task {task}: --demo_policy must be a node manager or none ({err})") from None
    if cfg.total_steps is not None and cfg.total_steps <= 0:
        raise UserError(f"--total_steps must be > 0 env steps, got {cfg.total_steps}")


SERVE_OPTIONS = (
    "host",
    "port",
    "max_sessions",
    "session_ttl_s",
    "evict_idle_s",
    "token",
    "data_dir",
    "processes",
    "limit_body_kb",
    "limit_jobs",
    "limit_nodes",
    "limit_gpus",
    "limit_steps",
    "limit_session_mb",
    "drain_s",
)
SERVE_TOKEN_ENV = "SERVE_TOKEN"
"""the environment variable that may hold the serve token (instead of --token, which `ps` shows)"""


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    """The serve options, as main.py's --help lists them (and the serve parser reads them)."""
    d = ServeConfig()
    g = parser.add_argument_group(
        "serve (--mode serve: the HTTP server; each session's workload and cluster options go in its POST /reset)"
    )
    g.add_argument(
        "--host",
        default=None,
        help=f"serve: address to listen on (default: {d.host}, this machine only; any other needs a token)",
    )
    g.add_argument("--port", type=int, default=None, help=f"serve: TCP port (default: {d.port})")
    g.add_argument(
        "--max_sessions",
        type=int,
        default=None,
        help=f"serve: sessions open at once (default: {d.max_sessions})",
    )
    g.add_argument(
        "--session_ttl_s",
        type=float,
        default=None,
        help=f"serve: close a session unused for this many seconds (default: {d.session_ttl_s:g})",
    )
    g.add_argument(
        "--evict_idle_s",
        type=float,
        default=None,
        help="serve: when every session place is taken, close an HTTP session idle this many seconds to make "
        f"room (default: {d.evict_idle_s:g})",
    )
    g.add_argument(
        "--token",
        default=None,
        help="serve: every request must send `Authorization: Bearer TOKEN` (GET /health excepted); required "
        f"with a --host other than loopback; default: ${SERVE_TOKEN_ENV} if set",
    )
    g.add_argument(
        "--data_dir",
        action="append",
        default=None,
        help="serve: a folder whose files sessions may read (workload_path, cluster_path); repeatable; default: "
        "none, only built-in scenarios",
    )
    g.add_argument(
        "--processes",
        type=int,
        default=None,
        help=f"serve: server processes (default: {d.processes}; one per core for throughput)",
    )
    for name, unit, what in (
        ("limit_body_kb", "KiB", "the largest request body or WebSocket message"),
        ("limit_jobs", "jobs", "the most jobs in one session's scenario"),
        ("limit_nodes", "nodes", "the most nodes in one session's cluster"),
        ("limit_gpus", "GPUs", "the most GPUs in one session's cluster"),
        ("limit_steps", "steps", "the longest episode (truncated there)"),
        ("limit_session_mb", "MB", "the most memory one session may need (estimated)"),
    ):
        g.add_argument(
            f"--{name}", type=int, default=None, help=f"serve: {what}, {unit} (default: {getattr(d, name)})"
        )
    g.add_argument(
        "--drain_s",
        type=float,
        default=None,
        help="serve: on SIGTERM or Ctrl-C, wait this many seconds at most for requests in flight, then close "
        f"every session (default: {d.drain_s:g})",
    )
