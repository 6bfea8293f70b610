"""Command line entry point: parse the options into a RunConfig, then train, evaluate or compare."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from config import DIFFICULTIES, ClusterConfig, EnvConfig, RunConfig, SimConfig, WorkloadConfig
from env.scenario import WORKLOAD_TYPES, UserError

HEURISTICS = ("fcfs", "sjf", "easy")
AGENTS = ("d3qn", "sac")


def _int_list(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None


def _int_list_or_none(text: str) -> tuple[int, ...]:
    return () if text.strip().lower() == "none" else _int_list(text)


def _name_list(text: str) -> tuple[str, ...]:
    return tuple(x.strip().lower() for x in text.split(",") if x.strip())


def build_parser() -> argparse.ArgumentParser:
    d, w, c, s, e = RunConfig(), WorkloadConfig(), ClusterConfig(), SimConfig(), EnvConfig()
    p = argparse.ArgumentParser(
        prog="main.py",
        description="Simulate GPU-cluster scheduling: evaluate heuristics, train/evaluate RL agents, compare them.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    g = p.add_argument_group("run")
    g.add_argument("--mode", choices=("train", "eval", "compare"), default=d.mode)
    g.add_argument("--algo", default=d.algo, help=f"one of {', '.join(HEURISTICS + AGENTS)}")
    g.add_argument(
        "--algos", type=_name_list, default=d.algos, help="compare mode: comma-separated algorithms"
    )
    g.add_argument("--seed", type=int, default=d.seed)
    g.add_argument(
        "--seeds", type=_int_list, default=None, help="compare mode: comma-separated seeds (default --seed)"
    )
    g.add_argument("--log_dir", default=None, help="put the run's files directly here (default: under logs/)")
    g.add_argument("--no_progress", action="store_true", help="no progress bar")
    g = p.add_argument_group("workload")
    g.add_argument("--workload_type", default=w.workload_type, help=" | ".join(WORKLOAD_TYPES))
    g.add_argument("--workload_path", default=None)
    g.add_argument("--difficulty", default=w.difficulty, choices=tuple(DIFFICULTIES))
    g.add_argument("--num_jobs", type=int, default=None, help="synthetic: override the preset's job count")
    g.add_argument(
        "--load_factor", type=float, default=None, help="synthetic: override the preset's target load"
    )
    g.add_argument(
        "--trace_start", type=float, default=None, help="trace: keep jobs arriving at/after this (s)"
    )
    g.add_argument("--trace_end", type=float, default=None, help="trace: keep jobs arriving before this (s)")
    g.add_argument(
        "--time_scale", type=float, default=w.time_scale, help="trace: divide arrival times by this"
    )
    g.add_argument("--max_jobs", type=int, default=None, help="trace: keep the first N jobs")
    g.add_argument("--exclude_failed", action="store_true", help="trace: drop failed/killed jobs")
    g.add_argument("--round_fractional", action="store_true", help="round fractional GPU requests up")
    g.add_argument(
        "--cpu_job_gpus", type=int, default=w.cpu_job_gpus, help="GPUs per task of CPU-only traces"
    )
    g.add_argument(
        "--recorded_gpu_type",
        default=None,
        help="trace: GPU type its durations were measured on (default: most common)",
    )
    g.add_argument(
        "--google_unit",
        choices=("task", "job"),
        default=w.google_unit,
        help="google: one job per Borg task (default) or one rigid gang per Borg job",
    )
    g = p.add_argument_group("cluster")
    g.add_argument(
        "--cluster", default=None, help="e.g. 2xA100-80GB:8,4xV100:4 (default: the difficulty preset)"
    )
    g.add_argument(
        "--cluster_path", default=None, help="CSV node_id,gpu_type,num_gpus[,gpu_mem_gb] or machine file"
    )
    g.add_argument("--uniform_speed", action="store_true", help="every GPU type runs at speed 1.0")
    g.add_argument("--multi_node_factor", type=float, default=c.multi_node_runtime_factor)
    g = p.add_argument_group("policy information")
    g.add_argument("--runtime_info", choices=("oracle", "estimate"), default=s.runtime_info)
    g = p.add_argument_group("agents")
    g.add_argument("--total_steps", type=int, default=None, help="training budget in env steps")
    g.add_argument(
        "--checkpoint", default=None, help="eval: checkpoint file (default models/<algo>_seed<S>_final.pt)"
    )
    g.add_argument("--resume", default=None, help="train: continue from this checkpoint")
    g.add_argument("--device", choices=("auto", "cpu", "cuda"), default=d.device)
    g.add_argument("--models_dir", default=d.models_dir)
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
        "find better (DQfD-style), or 'none' for pure RL (default: the agent config's)",
    )
    g.add_argument("--checkpoint_every", type=int, default=d.checkpoint_every_episodes, help="episodes")
    return p


def config_from_args(a: argparse.Namespace) -> RunConfig:
    d = RunConfig()
    algos = a.algos if isinstance(a.algos, tuple) else _name_list(a.algos)
    return RunConfig(
        mode=a.mode,
        algo=a.algo.lower(),
        algos=algos,
        seed=a.seed,
        seeds=a.seeds if a.seeds else (a.seed,),
        log_dir=a.log_dir,
        models_dir=a.models_dir,
        checkpoint=a.checkpoint,
        resume=a.resume,
        device=a.device,
        total_steps=a.total_steps,
        checkpoint_every_episodes=a.checkpoint_every,
        validation_seeds=a.validation_seeds,
        model=a.model,
        progress=not a.no_progress,
        cluster=ClusterConfig(a.cluster, a.cluster_path, a.uniform_speed, a.multi_node_factor),
        workload=WorkloadConfig(
            workload_type=a.workload_type.lower(),
            workload_path=a.workload_path,
            difficulty=a.difficulty,
            num_jobs=a.num_jobs,
            load_factor=a.load_factor,
            trace_start_s=a.trace_start,
            trace_end_s=a.trace_end,
            time_scale=a.time_scale,
            max_jobs=a.max_jobs,
            exclude_failed=a.exclude_failed,
            round_fractional=a.round_fractional,
            cpu_job_gpus=a.cpu_job_gpus,
            recorded_gpu_type=a.recorded_gpu_type,
            google_unit=a.google_unit,
        ),
        sim=replace(d.sim, runtime_info=a.runtime_info),
        env=replace(
            d.env, window=a.window, reward=a.reward or ("delay" if a.mode == "train" else d.env.reward)
        ),
        d3qn=d.d3qn if a.demo_policy is None else replace(d.d3qn, demo_policy=_demo(a.demo_policy)),
        sac=d.sac if a.demo_policy is None else replace(d.sac, demo_policy=_demo(a.demo_policy)),
    )


def _demo(name: str) -> str:
    return "" if name.lower() == "none" else name.lower()


def validate(cfg: RunConfig) -> None:
    known = HEURISTICS + AGENTS
    if cfg.mode in ("eval", "train") and cfg.algo not in known:
        raise UserError(f"unknown --algo {cfg.algo!r}; choose one of {', '.join(known)}")
    if cfg.mode == "train" and cfg.algo not in AGENTS:
        raise UserError(f"--mode train needs an RL --algo ({', '.join(AGENTS)}); heuristics need no training")
    if cfg.mode == "compare":
        bad = [x for x in cfg.algos if x not in known]
        if bad or not cfg.algos:
            raise UserError(f"unknown --algos {bad}; choose from {', '.join(known)}")
    if cfg.total_steps is not None and cfg.total_steps <= 0:
        raise UserError("--total_steps must be > 0")
    if cfg.env.window <= 0:
        raise UserError("--window must be > 0")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        cfg = config_from_args(args)
        validate(cfg)
        from runner import run_mode

        run_mode(cfg)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
