"""`--mode train`: turns a RunConfig into an env factory and a call to agents.trainer.train, safely.

Safety rules (docs/agents.md): options are checked before any work; one training per algo+seed and models
folder at a time (a lock file); a run's best model replaces the previous one only when the run completes;
Ctrl-C leaves a checkpoint and prints the command that resumes it; `--resume` continues the checkpoint's own
run, refusing options that contradict it.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from agents.checkpoint import INTERRUPTED_TAG, checkpoint_path, load_checkpoint, new_run_id, replay_path
from agents.files import TrainingLock
from agents.run_control import TrainingInterrupted, is_training_seed
from agents.trainer import AGENTS, train
from agents.validation import BestCheckpoint, BestKeeper, pending_best_path, validation_record
from cli.run_folder import default_log_dir
from config import SCORER_ALGOS, CEMConfig, ESConfig, PPOConfig, RunConfig, UserError, run_config_from_dict
from env.gym_env import GPUClusterEnv, heuristic_action
from schedulers import POLICIES

# A demonstrator acts through the env, so each of its decisions must be visible in the window: the window shows
# startable jobs shortest-first (SJF's pick is always slot 0) or oldest-first (FCFS's pick is always slot 0).
DEMO_POLICIES = {"runtime": ("sjf",), "arrival": ("fcfs",)}

# RunConfig fields that define a training run's experiment: a resume takes them from the checkpoint
EXPERIMENT_FIELDS = (
    "algo",
    "seed",
    "checkpoint_every_episodes",
    "validation_seeds",
    "cluster",
    "workload",
    "sim",
    "policy",
    "env",
    "d3qn",
    "sac",
    "task",
    "ppo",
    "mix",
    "cem",
    "es",
)
LEARNERS = (*AGENTS, "ppo", "cem", "es")
"""every algo --mode train accepts: the replay-based agents of agents/trainer.py, MaskablePPO (agents/ppo.py) and
the searches of a score-round scorer (agents/cem.py, agents/es.py)"""
# command-line options whose RunConfig field has another name ("{algo}" = the trained agent's config)
FIELD_OF_OPTION = {
    "checkpoint_every": "checkpoint_every_episodes",
    "cluster": "cluster.spec",
    "round_s": "policy.round_s",
    "round_on_arrival": "policy.round_on_arrival",
    "cluster_path": "cluster.path",
    "multi_node_factor": "cluster.multi_node_runtime_factor",
    "trace_start": "workload.trace_start_s",
    "trace_end": "workload.trace_end_s",
    "demo_policy": "{algo}.demo_policy",
    "task": "task.name",
    "task_scheduler": "task.scheduler",
    "jct_weight": "task.jct_weight_eur_per_job_h",
    "recheck_s": "task.recheck_s",
    "autoscale_preset": "task.autoscale_preset",
    "num_envs": "ppo.num_envs",
    "vec_env": "ppo.vec_env",
    "train_mix": "mix.train_mix",
    "train_windows": "mix.train_windows",
    "cem_population": "cem.population",
    "cem_scenarios": "cem.scenarios",
    "cem_init_std": "cem.init_std",
    "cem_workers": "cem.workers",
    "cem_minutes": "cem.minutes",
    "es_pairs": "es.pairs",
    "es_scenarios": "es.scenarios",
    "es_hidden": "es.hidden",
    "es_workers": "es.workers",
    "es_minutes": "es.minutes",
}
NOT_EXPERIMENT = ("total_steps", "cem_workers", "cem_minutes", "es_workers", "es_minutes")
"""options a resume may change: the step target (checked apart), cem's and es's process count (same results) and
time budget (where this call stops)"""
_MISSING = object()


def heuristic_demonstrator(name: str):
    """demonstrator(env) -> the action heuristic `name` takes in a GPUClusterEnv's current state."""
    policy = POLICIES[name]
    return lambda env: heuristic_action(env.unwrapped, policy)


def _env_factory(cfg: RunConfig):
    """make_env(scenario_seed) of the run's task."""
    if cfg.task.name == "scheduling":
        from env.gym_env import episode_env_factory

        # the plain env builds each episode's scenario at reset; a mixture replays the scenario it drew
        if cfg.mix.train_mix == "none":
            return lambda scenario_seed: GPUClusterEnv(cfg)
        return episode_env_factory(cfg)
    from env.node_tasks import make_node_env

    return lambda scenario_seed: make_node_env(cfg)


def _demonstrator(cfg: RunConfig, demo_policy: str):
    if cfg.task.name == "scheduling":
        return heuristic_demonstrator(demo_policy)
    from env.node_tasks import demonstrator_for

    return demonstrator_for(demo_policy)


def check_train_options(cfg: RunConfig) -> None:
    """Options a training needs, checked before any work (a mistake found after hours of training is lost); the
    ranges every mode shares (--checkpoint_every, negative seeds) are cli/checks.py's."""
    bad = [s for s in cfg.validation_seeds if is_training_seed(s)]
    if bad:
        raise UserError(
            "--validation_seeds must be below 1,000,000,000 (the training scenarios' range), got "
            f"{','.join(map(str, bad))} ('none' = no validation)"
        )
    if cfg.algo in SCORER_ALGOS:
        from evaluation.sets import TEST_SEEDS

        held_out = [s for s in cfg.validation_seeds if s in TEST_SEEDS]
        if held_out:
            raise UserError(
                f"--validation_seeds {','.join(map(str, held_out))}: --mode report tests on seeds "
                f"{TEST_SEEDS[0]}-{TEST_SEEDS[-1]}; select models on other seeds (default 200-204)"
            )
    if cfg.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UserError(
                f"--device cuda, but torch {torch.__version__} sees no CUDA GPU (a CPU-only build, or no driver); "
                "use --device cpu or auto"
            )


def option_value(cfg: RunConfig, option: str) -> Any:
    """The value command-line `option` set in `cfg`, or _MISSING when it sets no experiment field."""
    path = FIELD_OF_OPTION.get(option, option).format(algo=cfg.algo)
    if "." in path:
        section, name = path.split(".", 1)
        return getattr(getattr(cfg, section), name, _MISSING)
    if path in EXPERIMENT_FIELDS and not dataclasses.is_dataclass(getattr(cfg, path)):
        return getattr(cfg, path)
    for section in ("workload", "cluster", "sim", "env", cfg.algo):
        part = getattr(cfg, section)
        if path in {f.name for f in dataclasses.fields(part)}:
            return getattr(part, path)
    return _MISSING


def _shown(value: Any) -> str:
    if value is None or value == "":
        return "none"
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "none"
    return str(value)


def _check_run_record(path: str, checkpoint: dict[str, Any]) -> None:
    """UserError naming the file when a checkpoint lacks what a resume reads of its run (its algo, seed, agent
    settings, step target and steps done), or holds it in another form."""
    counts = [checkpoint.get(key) for key in ("seed", "total_steps", "global_step")]
    if (
        checkpoint.get("algo") not in LEARNERS
        or not isinstance(checkpoint.get("config"), dict)
        or any(type(n) is not int or n < 0 for n in counts)
    ):
        raise UserError(
            f"{path}: not a resumable training checkpoint (its algo {checkpoint.get('algo')!r}, seed, settings, step "
            f"target or steps done are missing or damaged); resume from another checkpoint of the run, or start a "
            "fresh run"
        )


_EXPERIMENT = ("cluster", "workload", "sim", "env")
"""the sections of a checkpoint's run_config that define its experiment (always written by training)"""


def resumed_config(cfg: RunConfig, checkpoint: dict[str, Any]) -> tuple[RunConfig, int]:
    """(cfg with the checkpoint run's experiment settings, the run's step target).

    Everything that defines the experiment comes from the checkpoint; an option given on the command line
    that contradicts it is a UserError naming both values. A finished run may be extended by a larger
    --total_steps; an unfinished one keeps its target.
    """
    algo, resume = checkpoint["algo"], cfg.resume
    config_cls = {"ppo": PPOConfig, "cem": CEMConfig, "es": ESConfig}.get(algo) or AGENTS[algo][1]
    recorded = checkpoint.get("run_config")
    if recorded is not None:
        if not isinstance(recorded, dict) or not all(isinstance(recorded.get(k), dict) for k in _EXPERIMENT):
            # (run_config_from_dict fills what is missing with defaults: a damaged record would train silently on
            # the default workload and validation seeds)
            raise UserError(
                f"{resume}: its recorded run settings (run_config) lack the {', '.join(_EXPERIMENT)} sections every "
                "training run writes (a damaged or hand-made file?); resume from another checkpoint of the run"
            )
        saved = run_config_from_dict(recorded)
    else:  # written by agents.trainer.train without a RunConfig: only the agent's own settings are known
        print(
            f"warning: {resume} records no workload or env settings; using the command line's",
            file=sys.stderr,
        )
        saved = cfg
    # checkpoints written before demonstrations existed were pure RL runs
    # and PPO checkpoints written before time-based discounting discounted per env step
    from agents.ppo import LEGACY_PPO_FIELDS

    legacy = (
        {} if algo in SCORER_ALGOS else {"demo_policy": ""} | (LEGACY_PPO_FIELDS if algo == "ppo" else {})
    )
    try:
        agent_cfg = config_cls(**(legacy | checkpoint["config"]))
    except TypeError as err:  # settings this version does not know
        raise UserError(
            f"{resume}: its {algo} settings do not fit this version ({err}); start a fresh run"
        ) from None
    saved = dataclasses.replace(saved, **{"algo": algo, "seed": checkpoint["seed"], algo: agent_cfg})

    conflicts = []
    for option in cfg.explicit_options:
        if option in NOT_EXPERIMENT:
            continue
        given = option_value(cfg, option)
        kept = option_value(saved, option) if given is not _MISSING else _MISSING
        if given is not _MISSING and given != kept:
            conflicts.append(f"--{option} {_shown(given)} (the checkpoint's run has {_shown(kept)})")
    target, done = checkpoint["total_steps"], checkpoint["global_step"]
    if cfg.total_steps is not None and cfg.total_steps != target:
        if done >= target and cfg.total_steps > target:
            target = cfg.total_steps  # said once the run starts (train_from_config), not at every check
        else:
            conflicts.append(f"--total_steps {cfg.total_steps} (the checkpoint's run targets {target})")
    if conflicts:
        raise UserError(
            f"--resume {resume} continues that run with its own settings, but {'; '.join(conflicts)}: drop "
            "the option(s), or start a fresh run without --resume"
        )
    if done >= target:
        raise UserError(
            f"--resume {resume}: that run already finished its {target:,} steps; "
            "pass a larger --total_steps to extend it"
        )
    resumed = dataclasses.replace(cfg, **{name: getattr(saved, name) for name in EXPERIMENT_FIELDS})
    # the process count and time budget of this call are the command line's, not the checkpoint's
    resumed = dataclasses.replace(
        resumed,
        cem=dataclasses.replace(resumed.cem, workers=cfg.cem.workers, minutes=cfg.cem.minutes),
        es=dataclasses.replace(resumed.es, workers=cfg.es.workers, minutes=cfg.es.minutes),
    )
    return resumed, target


def resume_command(cfg: RunConfig, checkpoint: str) -> str:
    """The command line that resumes from `checkpoint` with this run's output options."""
    words = ["python", "main.py", "--mode", "train", "--algo", cfg.algo, "--seed", str(cfg.seed)]
    if cfg.models_dir != RunConfig.models_dir:
        words += ["--models_dir", cfg.models_dir]
    if cfg.log_dir:
        words += ["--log_dir", cfg.log_dir]
    if "device" in cfg.explicit_options:
        words += ["--device", cfg.device]
    if "no_progress" in cfg.explicit_options or "progress" in cfg.explicit_options:  # else the default, auto
        words += ["--progress", "always" if cfg.progress else "never"]
    return " ".join(map(shlex.quote, [*words, "--resume", checkpoint]))


def earlier_checkpoints(cfg: RunConfig) -> list[Path]:
    """The periodic (`_ep<N>.pt`) and interrupted checkpoints of cfg.algo seed cfg.seed in --models_dir, in
    episode order: a fresh run of that algo and seed would write over them."""
    models = Path(cfg.models_dir)
    if not models.is_dir():
        return []
    pattern = re.compile(rf"{re.escape(cfg.algo)}_seed{cfg.seed}_(?:ep(\d+)|{INTERRUPTED_TAG})\.pt")
    found = [(m, p) for p in models.iterdir() if (m := pattern.fullmatch(p.name))]
    return [p for m, p in sorted(found, key=lambda mp: int(mp[0].group(1) or 10**12))]


def _check_earlier_checkpoints(cfg: RunConfig) -> None:
    """A fresh run would overwrite another run's checkpoints one by one, leaving a mix of two runs: refused
    unless --overwrite (then they are removed when the run starts)."""
    found = earlier_checkpoints(cfg)
    if cfg.resume or not found or cfg.overwrite:
        return
    names = [p.name for p in found]
    listed = ", ".join(names[:3]) + (f" … {names[-1]} ({len(names)} files)" if len(names) > 3 else "")
    stopped = found[-1].name.endswith(f"_{INTERRUPTED_TAG}.pt")  # Ctrl-C; else it finished or was killed
    resume = (
        f" with --resume {found[-1]}" if stopped else f", if it did not finish, with --resume {found[-1]}"
    )
    final, best = (checkpoint_path(cfg.models_dir, cfg.algo, cfg.seed, tag).name for tag in (None, "best"))
    raise UserError(
        f"{cfg.models_dir}/ holds checkpoints of an earlier {cfg.algo} seed {cfg.seed} training ({listed}) that "
        f"a fresh run would overwrite: continue that run{resume}, or pass --overwrite to start "
        f"over (they are removed when it starts; {final} and {best} stay until it completes), or train into "
        "another --models_dir or --seed"
    )


def _prepare(cfg: RunConfig) -> tuple[RunConfig, dict[str, Any] | None, int | None, str]:
    """(the run's config, the resumed checkpoint, the step target, the demonstrator): every check of a
    training's options, before any work."""
    if cfg.algo not in LEARNERS:
        raise UserError(f"--mode train needs --algo {', '.join(LEARNERS)}, got {cfg.algo!r}")
    resumed, total_steps = None, cfg.total_steps
    if cfg.resume:
        resumed = load_checkpoint(cfg.resume)  # a UserError for anything but a checkpoint
        _check_run_record(cfg.resume, resumed)
        cfg, total_steps = resumed_config(cfg, resumed)
        from agents.fit import check_fits

        check_fits(
            f"--resume {cfg.resume}",
            resumed,
            cfg.task.name,
            cfg.env.window if cfg.task.name == "scheduling" else None,
        )
    check_train_options(cfg)
    from scenario.mixtures import check_mix

    check_mix(cfg)
    if cfg.algo in SCORER_ALGOS:
        if cfg.algo == "cem":
            from agents.cem import CrossEntropy, check_cem_config

            check_cem_config(cfg.cem)
            method = CrossEntropy(cfg.cem)
        else:
            from agents.es import EvolutionStrategies, check_es_config

            check_es_config(cfg.es)
            method = EvolutionStrategies(cfg.es)
        if resumed is not None:
            from agents.score_search import resumed_state

            resumed_state(cfg.resume, resumed, method)  # a damaged search state: one error line, no traceback
        _check_earlier_checkpoints(cfg)
        return cfg, resumed, total_steps, ""
    demo_policy = getattr(cfg, cfg.algo).demo_policy
    allowed = DEMO_POLICIES[cfg.env.window_order]
    if demo_policy and cfg.algo == "ppo":
        raise UserError(
            f"--demo_policy {demo_policy}: ppo learns from its own rollouts only; use --demo_policy none"
        )
    if cfg.task.name != "scheduling":
        pass  # a node task's demonstrator is a node manager (main.py checked the name)
    elif demo_policy and demo_policy not in allowed:
        raise UserError(
            f"--demo_policy {demo_policy!r}: with window order {cfg.env.window_order!r} only "
            f"{', '.join(allowed)} (or none) can act through the window"
        )
    _check_earlier_checkpoints(cfg)
    return cfg, resumed, total_steps, demo_policy


def check_training(cfg: RunConfig) -> None:
    """Refuse (UserError) what train_from_config would refuse, before the run folder is touched."""
    _prepare(cfg)


def train_from_config(cfg: RunConfig) -> Path:
    """Train `cfg.algo` on GPUClusterEnv(cfg) episodes; returns the TensorBoard run directory."""
    cfg, resumed, total_steps, demo_policy = _prepare(cfg)
    if resumed is not None and total_steps > resumed["total_steps"]:
        unit = "generations" if cfg.algo in SCORER_ALGOS else "steps"
        print(
            f"extending the finished run of {cfg.resume} from {resumed['total_steps']:,} to {total_steps:,} {unit}"
        )
    run_id = (resumed or {}).get("run_id") or new_run_id()
    run_dir = default_log_dir(cfg, {})  # a training evaluates no checkpoint
    models = Path(cfg.models_dir)
    best = checkpoint_path(models, cfg.algo, cfg.seed, "best")
    with TrainingLock(models / f"{cfg.algo}_seed{cfg.seed}.lock", f"{cfg.algo} seed {cfg.seed}"):
        if not cfg.resume:  # --overwrite (else _prepare refused): start over without the earlier run's files
            removed = earlier_checkpoints(cfg)
            for old in removed:
                old.unlink(missing_ok=True)
                replay_path(old).unlink(missing_ok=True)
            if removed:
                shown = removed[0].name + (f" … {removed[-1].name}" if len(removed) > 1 else "")
                print(f"note: --overwrite removed {len(removed)} checkpoint(s) of an earlier run ({shown})")
        try:
            validation = None
            node_task = cfg.task.name != "scheduling"
            if node_task and cfg.validation_seeds:
                print(
                    f"note: --task {cfg.task.name} trains without validation (model selection scores average JCT "
                    "of the scheduling task); the final model is the result"
                )
            if cfg.validation_seeds and cfg.algo in SCORER_ALGOS:
                resume_step = resumed["global_step"] if resumed is not None else None
                validation = BestKeeper(
                    best, run_id, resume_step, key="val_objective", resumed_from=cfg.resume
                )
            elif cfg.validation_seeds and not node_task:
                resume_step = resumed["global_step"] if resumed is not None else None
                validation = BestCheckpoint(cfg, best, run_id, resume_step, resumed_from=cfg.resume)
            make_env = _env_factory(cfg)
            common = dict(
                seed=cfg.seed,
                total_steps=total_steps,
                device=cfg.device,
                models_dir=cfg.models_dir,
                run_dir=str(run_dir),
                resume=cfg.resume,
                checkpoint_every_episodes=cfg.checkpoint_every_episodes,
                keep_checkpoints=cfg.keep_checkpoints,
                progress=cfg.progress,
                eval_fn=validation,
                run_id=run_id,
            )
            if cfg.algo == "cem":
                from agents.cem import train_cem

                result = train_cem(cfg, **common)
            elif cfg.algo == "es":
                from agents.es import train_es

                result = train_es(cfg, **common)
            elif cfg.algo == "ppo":
                from agents.ppo import train_ppo

                result = train_ppo(make_env, cfg, **common)
            else:
                result = train(
                    cfg.algo,
                    make_env,
                    cfg,
                    demonstrator=_demonstrator(cfg, demo_policy) if demo_policy else None,
                    **common,
                )
        except TrainingInterrupted as stop:
            pending = pending_best_path(best)
            record = validation_record(pending)
            so_far = (
                f"; its best model so far: {pending}"
                if record and record.get("run_id") == stop.run_id
                else ""
            )
            print(
                f"interrupted at {'generation' if cfg.algo in SCORER_ALGOS else 'step'} {stop.global_step:,} of "
                f"{stop.total_steps:,}: wrote {stop.checkpoint}{so_far} "
                f"(earlier final/best models are untouched until the run completes)\n"
                f"resume with: {resume_command(cfg, stop.checkpoint)}",
                file=sys.stderr,
            )
            raise
        except KeyboardInterrupt:
            print(
                "interrupted before the first training step: no checkpoint written, earlier models untouched",
                file=sys.stderr,
            )
            raise
        published = validation.publish() if validation is not None else False
    if cfg.algo in SCORER_ALGOS:
        print(
            f"{cfg.algo} seed {result.seed} (run {result.run_id}): {result.global_step:,} generation{'' if result.global_step == 1 else 's'}, {result.episodes:,} "
            f"simulations in {result.wall_s:,.0f} s; final model {result.final_checkpoint} (the search's {'mean' if cfg.algo == 'cem' else 'parameters'}, "
            f"objective {result.episode_returns[-1] if result.episode_returns else float('nan'):+.4f} on the last "
            f"generation's scenarios); TensorBoard: {run_dir}/"
        )
    else:
        print(
            f"{result.algo} seed {result.seed} (run {result.run_id}): {result.global_step:,} steps, "
            f"{result.episodes} episodes in {result.wall_s:,.0f} s ({result.setup_s:,.0f} s of it before the first step: "
            f"setup, demonstrations, pre-training), {result.steps_per_s:,.0f} steps/s; final model {result.final_checkpoint}; "
            f"TensorBoard: {run_dir}/"
        )
    if published:
        record = validation.record or {}
        shown = (
            f"objective {record['val_objective']:+.4f}, avg JCT {record['val_avg_jct_s']:,.0f} s, generation "
            f"{record['global_step']}"
            if cfg.algo in SCORER_ALGOS
            else f"avg JCT {validation.best_score:,.0f} s"
        )
        print(f"best on validation seeds {','.join(map(str, cfg.validation_seeds))}: {best} ({shown})")
    elif best.exists():
        record = validation_record(best)
        origin = f"run {record['run_id']}" if record and record.get("run_id") else "an earlier run"
        print(
            f"note: {best} is from {origin}, not this one (it validated no checkpoint); --model best warns so"
        )
    interrupted = checkpoint_path(models, cfg.algo, cfg.seed, INTERRUPTED_TAG)
    if interrupted.exists():
        print(f"note: {interrupted} holds another, unfinished run; resume it with --resume {interrupted}")
    return run_dir
