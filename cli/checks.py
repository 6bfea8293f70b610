"""Checks of a parsed command line before any work starts: numbers in range, no option the run would ignore,
output folders usable. A failure is a UserError (one `error:` line, exit 2); a harmless extra is a warning.

The rule for options the run would not use: an option that describes *what* is simulated, trained or evaluated
(workload shaping, seeds, algorithms, checkpoints, training budget, reward) is an error when the run ignores it,
since the results would silently differ from what was asked. An option that only says *where or how* an agent
would run (`--device`, `--models_dir`) is a one-line warning when no agent runs.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from config import DIFFICULTIES, SCORER_ALGOS, RunConfig, UserError
from scenario.build import TRACE_TYPES, check_options
from schedulers import PREEMPTIVE, REPLAYS

AGENTS = ("d3qn", "sac", "ppo", "cem", "es")
MAX_PREEMPT_OVERHEAD_S = 86_400.0  # a restore longer than a day is a typo (minutes: Tiresias, Lucid)
TRACE_ONLY = (
    "trace_start",
    "trace_end",
    "time_scale",
    "max_jobs",
    "exclude_failed",
    "round_fractional",
    "cpu_job_gpus",
    "recorded_gpu_type",
)
CPU_TRACES = ("google", "alibaba", "alibaba-2017", "swf")  # `alibaba` may turn out to be the 2017 CPU trace
NO_STATUS_TRACES = ("itp",)  # formats without a status column: --exclude_failed would drop nothing
TRAIN_ONLY = (
    "total_steps",
    "resume",
    "validation_seeds",
    "checkpoint_every",
    "keep_checkpoints",
    "demo_policy",
    "reward",
    "num_envs",
    "vec_env",
    "train_mix",
    "train_windows",
    "cem_population",
    "cem_scenarios",
    "cem_init_std",
    "cem_workers",
    "cem_minutes",
    "es_pairs",
    "es_scenarios",
    "es_hidden",
    "es_workers",
    "es_minutes",
)
PPO_ONLY = ("num_envs", "vec_env")
CEM_ONLY = ("cem_population", "cem_scenarios", "cem_init_std", "cem_workers", "cem_minutes")
ES_ONLY = ("es_pairs", "es_scenarios", "es_hidden", "es_workers", "es_minutes")
REPORT_ONLY = ("report_sets", "traces_dir", "report_workers")
AGENT_ONLY = ("checkpoint", "model", "window")
AGENT_WHERE = ("device", "models_dir")
NODE_TASK_OPTIONS = ("task_scheduler", "recheck_s", "jct_weight", "autoscale_preset")
AUTOSCALE_FIXED = (
    "workload_type",
    "workload_path",
    "difficulty",
    "num_jobs",
    "load_factor",
    "synthetic_profile",
    "cluster",
    "cluster_path",
)
TEXT_OPTIONS = (
    "algo",
    "workload_type",
    "workload_path",
    "cluster_path",
    "recorded_gpu_type",
    "log_dir",
    "models_dir",
    "checkpoint",
    "resume",
    "demo_policy",
    "prices",
)


def usage_error(message: str) -> None:
    """argparse's error hook: one `error:` line pointing at --help (instead of the whole usage block), exit 2."""
    print(f"error: {message} (python main.py --help lists the options)", file=sys.stderr)
    sys.exit(2)


def dash_values(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """`argv` with `--option -value` written `--option=-value` where the option takes a value and `-value` is no
    option (argparse would read `--cluster -1xA100:8` as a missing value, "expected one argument"); the value then
    gets the option's own check ("--cluster: counts must be positive")."""
    options = {s for action in parser._actions for s in action.option_strings}
    takes_value = {s for action in parser._actions if action.nargs != 0 for s in action.option_strings}
    out: list[str] = []
    i = 0
    while i < len(argv):
        word = argv[i]
        following = argv[i + 1] if i + 1 < len(argv) else None
        if (
            word in takes_value
            and following is not None
            and following.startswith("-")
            and not following.startswith("--")
            and following not in options
        ):
            out.append(f"{word}={following}")
            i += 2
            continue
        out.append(word)
        i += 1
    return out


def given_options(parser: argparse.ArgumentParser, argv: list[str] | None) -> dict[str, object]:
    """The options the user typed (dest -> parsed value): `parser` (a fresh one; it is changed) parses `argv`
    again with every default suppressed, so an option typed with its default value still counts as given."""
    for action in parser._actions:
        action.default = argparse.SUPPRESS
    return vars(parser.parse_args(argv))


def check_command_line(cfg: RunConfig, given: dict[str, object]) -> list[str]:
    """Raise UserError for an out-of-range value or an option this run would ignore; return warnings to print."""
    for name in TEXT_OPTIONS:
        if name in given and not str(given[name]).strip():
            raise UserError(f"--{name} is empty")
    if "no_progress" in given and given.get("progress", "never") != "never":
        raise UserError(f"--no_progress and --progress {given['progress']} contradict each other; give one")
    _check_numbers(cfg, given)
    check_options(cfg)
    _check_power(cfg, given)
    warnings = _check_ignored(cfg, given)
    _note_size(cfg)
    if cfg.log_dir:
        check_output_dir(cfg.log_dir, "--log_dir")
    if cfg.mode == "train":
        check_output_dir(cfg.models_dir, "--models_dir")
    return warnings


def _check_numbers(cfg: RunConfig, given: dict[str, object]) -> None:
    if cfg.seed < 0:
        raise UserError(f"--seed must be >= 0 (numpy seeds are non-negative), got {cfg.seed}")
    if "seeds" in given:
        seeds = given["seeds"]
        if not seeds:
            raise UserError("--seeds lists no seed; give comma-separated integers, e.g. 0,1,2")
        _no_negative_or_repeated("--seeds", seeds)
    if cfg.mode == "compare":
        repeated = sorted({a for a in cfg.algos if cfg.algos.count(a) > 1})
        if repeated:
            raise UserError(f"--algos names {', '.join(repeated)} more than once; each algorithm runs once")
    if "validation_seeds" in given:
        _no_negative_or_repeated("--validation_seeds", given["validation_seeds"])
    if cfg.checkpoint_every_episodes <= 0:  # else a ZeroDivisionError at the end of the first episode
        raise UserError(f"--checkpoint_every must be > 0 episodes, got {cfg.checkpoint_every_episodes}")
    if cfg.keep_checkpoints < 0:
        raise UserError(f"--keep_checkpoints must be >= 0 (0 keeps every one), got {cfg.keep_checkpoints}")
    overhead_s = cfg.sim.preempt_overhead_s
    if not 0 <= overhead_s <= MAX_PREEMPT_OVERHEAD_S:
        raise UserError(
            f"--preempt_overhead_s must be between 0 and {MAX_PREEMPT_OVERHEAD_S:g} seconds, got {overhead_s}"
        )


def _no_negative_or_repeated(option: str, seeds) -> None:
    negative = [s for s in seeds if s < 0]
    if negative:
        raise UserError(f"{option} must be >= 0 (numpy seeds are non-negative), got {negative[0]}")
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:
        raise UserError(f"{option} lists {', '.join(map(str, repeated))} more than once; give each seed once")


def _check_ignored(cfg: RunConfig, given: dict[str, object]) -> list[str]:
    """Errors for options the run would ignore (see the module docstring); warnings for harmless ones."""
    w = cfg.workload
    algos = cfg.algos if cfg.mode == "compare" else (cfg.algo,)
    runs_agent = any(a in AGENTS for a in algos) or cfg.mode == "report"

    def refuse(names, why: str) -> None:
        hit = [f"--{n}" for n in names if n in given]
        if hit:
            one = len(hit) == 1
            raise UserError(
                f"{', '.join(hit)} {'has' if one else 'have'} no effect on this run ({why}); "
                f"remove {'it' if one else 'them'}"
            )

    if cfg.mode not in ("compare", "report"):
        refuse(("seeds", "algos"), f"--mode compare only; --mode {cfg.mode} runs --algo on --seed")
    elif cfg.mode == "compare":
        refuse(("algo",), "--mode compare runs every algorithm of --algos")
        if "seeds" in given and not runs_agent:  # with agents --seed picks models/<algo>_seed<S>_*.pt
            refuse(("seed",), "--mode compare runs every seed of --seeds")
    if cfg.mode != "train":
        refuse(TRAIN_ONLY, f"training options; this is --mode {cfg.mode}")
    else:
        refuse(("checkpoint", "model"), "training starts fresh or continues with --resume CHECKPOINT")
        if cfg.algo != "ppo":
            refuse(PPO_ONLY, f"options of --algo ppo's vectorized envs; this trains {cfg.algo}")
        if cfg.algo != "cem":
            refuse(CEM_ONLY, f"options of --algo cem's search; this trains {cfg.algo}")
        if cfg.algo != "es":
            refuse(ES_ONLY, f"options of --algo es's search; this trains {cfg.algo}")
    if cfg.mode != "report":
        refuse(REPORT_ONLY, f"--mode report options; this is --mode {cfg.mode}")
    else:
        refuse(
            (
                "algo",
                "algos",
                "seed",
                "checkpoint",
                "model",
                "window",
                "difficulty",
                "cluster",
                "cluster_path",
                "load_factor",
            ),
            "--mode report evaluates every heuristic and every <algo>_seed<S>_final/best.pt in --models_dir, "
            "each agent with its own training's env settings, on the clusters of each held-out set (--seeds: the "
            "synthetic sets' test seeds, --num_jobs: every set's job count)",
        )
        if w.workload_type != "synthetic":
            raise UserError(
                "--mode report builds its held-out sets itself (--report_sets; traces from --traces_dir); remove "
                "--workload_type/--workload_path"
            )
    if cfg.mode != "train" and not runs_agent:
        refuse(AGENT_ONLY, f"agent options; no RL agent ({', '.join(AGENTS)}) runs, only {', '.join(algos)}")
    preemptive = (*sorted(PREEMPTIVE), *SCORER_ALGOS)
    if cfg.mode == "train" or (cfg.mode != "report" and not any(a in preemptive for a in algos)):
        refuse(
            ("preempt_overhead_s",),
            f"only the preemptive policies ({', '.join(preemptive)}) preempt; this run has {', '.join(algos)}",
        )
    scorers = ("las_speed", *SCORER_ALGOS)
    if cfg.mode == "train" or (cfg.mode != "report" and not any(a in scorers for a in algos)):
        refuse(
            ("score_preempt",), f"an ablation of the score rounds ({', '.join(scorers)}), which do not run"
        )
    if cfg.mode == "eval" and "checkpoint" in given:
        refuse(("model",), "--checkpoint names the model file itself")
    if "sjf_gate" not in algos or cfg.mode == "train":
        refuse(("gate_s",), "sjf_gate's gate; sjf_gate does not run")
    rounds = {
        "round_s": "the length of the score rounds",
        "round_on_arrival": "rounds at arrivals in the score rounds",
    }
    for option, what in rounds.items():
        if cfg.mode == "train" and cfg.algo not in SCORER_ALGOS:
            refuse((option,), f"{what} of las_speed, cem and es; this trains {cfg.algo}")
        elif cfg.mode in ("eval", "compare") and not any(a in scorers for a in algos):
            refuse((option,), f"{what} of las_speed, cem and es, none of which runs")
    if w.workload_type != "google":
        refuse(("google_unit",), f"it maps the google trace; the workload is {w.workload_type}")
    if w.workload_type != "synthetic":
        refuse(("synthetic_profile",), f"the synthetic generator's option; the workload is {w.workload_type}")
    if w.workload_type in ("synthetic", "csv", "dispatch"):
        refuse(TRACE_ONLY, f"trace options; the workload is {w.workload_type}")
    if w.workload_type == "dispatch":
        refuse(
            ("difficulty",),
            "a dispatch run folder brings its own jobs and GPUs; pick a cluster with --cluster",
        )
    elif w.workload_type in TRACE_TYPES:
        refuse(
            ("difficulty",), "a trace brings its own jobs and default cluster; pick a cluster with --cluster"
        )
        if w.workload_type not in CPU_TRACES:
            refuse(("cpu_job_gpus",), f"it maps the CPU-only traces {', '.join(CPU_TRACES)}")
        if w.workload_type in NO_STATUS_TRACES:
            refuse(
                ("exclude_failed",), f"the {w.workload_type} trace records no job status, so no job is failed"
            )
    task = cfg.task.name
    if task == "scheduling":
        refuse(NODE_TASK_OPTIONS, "options of --task power and autoscaling")
    else:
        refuse(
            ("window", "reward"), f"the scheduling env's options; --task {task} has its own action and reward"
        )
        if task != "power":
            refuse(("jct_weight",), "the power task's lambda")
        if task != "autoscaling":
            refuse(("autoscale_preset",), "the autoscaling task's preset")
        else:
            refuse(AUTOSCALE_FIXED, "--autoscale_preset sets the autoscaling task's fleet and jobs")
    if cfg.cluster.uniform_speed:
        refuse(("recorded_gpu_type",), "with --uniform_speed every GPU type runs at speed 1")
    if w.workload_type == "csv" and (cfg.cluster.spec or cfg.cluster.path):
        refuse(("difficulty",), "a jobs CSV with --cluster/--cluster_path takes nothing from the preset")
    warnings = []
    if cfg.mode != "train" and not runs_agent:
        hit = [f"--{n}" for n in AGENT_WHERE if n in given]
        if hit:
            warnings.append(f"{', '.join(hit)} ignored: no RL agent runs")
    plot_options = [f"--{n}" for n in ("plots", "plot_formats", "plot_span", "timeline_window") if n in given]
    if cfg.mode == "train" and plot_options:
        warnings.append(
            f"{', '.join(plot_options)} ignored: training draws no figures (its curves are in TensorBoard)"
        )
    if cfg.mode != "train" and cfg.plots == "none" and (how := [o for o in plot_options if o != "--plots"]):
        warnings.append(f"{', '.join(how)} ignored: --plots none draws no figures")
    elif cfg.mode == "report" and {"plot_formats", "plot_span", "timeline_window"} & set(given):
        warnings.append(
            "--plot_formats, --plot_span, --timeline_window ignored: a report draws its learning curves as PNG"
        )
    return warnings


def _note_size(cfg: RunConfig) -> None:
    """A synthetic workload's size is known before any work: above sim/limits.py's notice size, say the memory
    it needs (a workload file's size is noted once it is loaded, cli/runner.py)."""
    from sim.cluster_spec import parse_cluster_spec
    from sim.limits import size_notice

    w = cfg.workload
    if w.workload_type != "synthetic" or cfg.mode == "report" or cfg.task.name == "autoscaling":
        return
    preset = DIFFICULTIES[w.difficulty]
    try:
        num_gpus = (
            parse_cluster_spec(cfg.cluster.spec or preset.cluster).num_gpus if not cfg.cluster.path else 0
        )
    except ValueError:
        return  # reported when the scenario is built
    notice = size_notice(w.num_jobs or preset.num_jobs, num_gpus)
    if notice:
        print(notice, file=sys.stderr)


def _check_power(cfg: RunConfig, given: dict[str, object]) -> None:
    """--power and its companions: parseable managers, one per eval, heuristics only for managers that act."""
    from schedulers.power_managers import parse_manager

    p = cfg.power
    if cfg.task.name != "scheduling":
        _check_node_task_power(cfg, given)
        return
    if not p.managers:
        hit = [f"--{n}" for n in ("prices", "price_offset_s", "pue") if n in given]
        if "power" in given:
            raise UserError("--power names no power manager; e.g. --power always_on,idle_off:600")
        if hit:
            raise UserError(f"{', '.join(hit)} need a power model: add --power (e.g. --power always_on)")
        return
    if cfg.mode == "train":
        raise UserError("--power applies to --mode eval and compare (the agents train on scheduling only)")
    specs = []
    for text in p.managers:
        try:
            specs.append(parse_manager(text))
        except ValueError as err:
            raise UserError(f"--power: {err}") from None
    labels = [s.label for s in specs]
    repeated = sorted({x for x in labels if labels.count(x) > 1})
    if repeated:
        raise UserError(f"--power names {', '.join(repeated)} more than once")
    if cfg.mode == "eval" and len(specs) > 1:
        raise UserError("--mode eval runs one power manager; list several with --mode compare")
    algos = cfg.algos if cfg.mode == "compare" else (cfg.algo,)
    agents = [a for a in algos if a in AGENTS]
    acting = [s.label for s in specs if s.name != "always_on"]
    if agents and acting:
        raise UserError(
            f"--power {','.join(acting)} needs a heuristic scheduler; the agents {', '.join(agents)} run through "
            "the Gymnasium env, which keeps every node on (use --power always_on to measure their energy)"
        )
    replays = [a for a in algos if a in REPLAYS]
    if replays and acting:
        raise UserError(
            f"--power {','.join(acting)} switches nodes off or holds jobs back; {', '.join(replays)} "
            f"{'replays' if len(replays) == 1 else 'replay'} the authors' simulators, which have every node on "
            "and see every job (use --power always_on)"
        )
    if not (p.pue >= 1.0 and p.pue < 10.0):
        raise UserError(f"--pue must be between 1 and 10 (facility / IT power), got {p.pue}")
    if not abs(p.price_offset_s) < 1e12:
        raise UserError(f"--price_offset_s must be a finite number of seconds, got {p.price_offset_s}")


def _check_node_task_power(cfg: RunConfig, given: dict[str, object]) -> None:
    """--task power takes the power model's --prices/--price_offset_s/--pue (its agent or --algo node manager
    switches the nodes, so no --power); --task autoscaling pays cloud prices and takes none of them."""
    task, p = cfg.task.name, cfg.power
    if "power" in given:
        raise UserError(
            f"--power has no effect with --task {task}: the agent (or the --algo node manager) switches the nodes"
        )
    if task == "autoscaling":
        hit = [f"--{n}" for n in ("prices", "price_offset_s", "pue") if n in given]
        if hit:
            raise UserError(f"{', '.join(hit)} have no effect with --task autoscaling (it pays cloud prices)")
    if not (p.pue >= 1.0 and p.pue < 10.0):
        raise UserError(f"--pue must be between 1 and 10 (facility / IT power), got {p.pue}")
    if not abs(p.price_offset_s) < 1e12:
        raise UserError(f"--price_offset_s must be a finite number of seconds, got {p.price_offset_s}")
    if p.prices_path:  # a bad price file is reported before any work
        from sim.prices import load_price_csv

        load_price_csv(p.prices_path, p.price_offset_s)  # (PriceFileError is a UserError)


def check_output_dir(path: str, option: str) -> None:
    """Refuse an output folder that is a file, lies under a file, or cannot be written, before any work starts."""
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise UserError(f"{option} {path}: is a file, not a folder")
    existing = target
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"{option} {path}: {existing} is a file, not a folder")
    try:  # the only reliable test (permissions, read-only mounts, root): write a scratch file and remove it
        fd, scratch = tempfile.mkstemp(dir=existing, prefix=".write-test-")
        os.close(fd)
        os.unlink(scratch)
    except OSError as e:
        raise UserError(f"{option} {path}: cannot write in {existing} ({e.strerror})") from None
