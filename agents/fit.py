"""Whether a checkpoint's agent fits the env a run gives it: the same task, and the same features per slot and
context features (what its network reads). The window may differ: one per-slot network scores any number of
slots (agents/networks.py), so a --window 8 agent runs on a --window 16 env."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agents.networks import ObsSpec
from config import UserError, a_or_an


def task_features(task: str) -> tuple[int, int]:
    """(features per slot, context features) of the observation of `task`'s env."""
    if task == "scheduling":
        from env.gym_env import CONTEXT_FEATURES, JOB_FEATURES

        return len(JOB_FEATURES), len(CONTEXT_FEATURES)
    from env.autoscale_env import GPUClusterAutoscaleEnv
    from env.node_env import BASE_CONTEXT_FEATURES, SLOT_FEATURES
    from env.power_env import GPUClusterPowerEnv

    env_class = {"power": GPUClusterPowerEnv, "autoscaling": GPUClusterAutoscaleEnv}[task]
    return len(SLOT_FEATURES), len(BASE_CONTEXT_FEATURES + env_class.task_context_features)


def saved_task(checkpoint: dict[str, Any]) -> str | None:
    """The task a checkpoint was trained on (None when it does not say: trained without a RunConfig)."""
    if checkpoint.get("task"):
        return checkpoint["task"]
    run_config = checkpoint.get("run_config")
    if isinstance(run_config, dict):
        return (run_config.get("task") or {}).get("name", "scheduling")
    return None


def _shown(window: int | None, features: int, context: int) -> str:
    where = f"window {window}, " if window is not None else ""
    return f"{where}{features} features per slot, {context} context features"


def check_fits(path: str | Path, checkpoint: dict[str, Any], task: str, window: int | None = None) -> None:
    """UserError naming both sides when the agent in `checkpoint` (read from `path`) was trained on another task,
    or reads another number of features per slot or context features, than `task`'s env gives (`window`: that
    env's, shown for reference)."""
    if (checkpoint.get("action_space") or {}).get("type") == "scores":  # a score-round scorer (agents/cem.py)
        from agents.scorers import check_scorer_features

        if task != "scheduling":
            raise UserError(
                f"{path} holds {a_or_an(checkpoint.get('algo'))} score-round scorer, which schedules jobs; this run is "
                f"--task {task}: give {a_or_an(task)} checkpoint"
            )
        check_scorer_features(path, checkpoint)
        return
    try:
        spec = ObsSpec(**checkpoint["obs_spec"])
    except (KeyError, TypeError):  # a training checkpoint always records its env's observation
        raise UserError(
            f"{path}: no readable observation spec (obs_spec), so not an agent checkpoint written by this "
            "program's training (a damaged or hand-made file?)"
        ) from None
    trained = saved_task(checkpoint)
    features, context = task_features(task)
    same_task = trained in (None, task)
    if same_task and (spec.job_feature_dim, spec.context_dim) == (features, context):
        return
    agent = f"{a_or_an(checkpoint['algo'])} agent" if checkpoint.get("algo") else "an agent"
    theirs = _shown(spec.window, spec.job_feature_dim, spec.context_dim)
    ours = _shown(window, features, context)
    if not same_task:
        raise UserError(
            f"{path} holds {agent} of --task {trained} ({theirs}), but this run is --task {task} ({ours}): "
            f"run it with --task {trained}, or give {a_or_an(task)} checkpoint"
        )
    raise UserError(
        f"{path} holds {agent} whose network reads {theirs}, but this run's --task {task} env gives "
        f"{ours}: it was trained on another observation; retrain it with this version"
    )


def runtime_info_warning(
    path: str | Path, checkpoint: dict[str, Any], runtime_info: str, run: str
) -> str | None:
    """A `warning:` line when the checkpoint's training run knew runtimes otherwise (`--runtime_info`) than `run`
    (e.g. "the report") evaluates it with; None when they agree or the checkpoint records none."""
    saved = ((checkpoint.get("run_config") or {}).get("sim") or {}).get("runtime_info")
    if saved is None or saved == runtime_info:
        return None
    return f"warning: {path} was trained with --runtime_info {saved}; {run} evaluates with {runtime_info}"
