"""Checkpoint files: names, atomic writes and loading; the layout is documented in `save_checkpoint`."""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import torch

from agents.files import atomic_write
from config import UserError

CHECKPOINT_FORMAT = 2
"""2 (the RL-quality study): new observation (per-type total and next-release features, no arrived_frac, window in arrival
order), delay reward against the in-cluster fastest type, time-based discounting; a format-1 network would read
the new observation wrongly, so loading one is an error that says to retrain"""
INTERRUPTED_TAG = "interrupted"
"""checkpoint_path(..., INTERRUPTED_TAG): the checkpoint Ctrl-C writes, to resume from"""


def new_run_id() -> str:
    """Identifies one training run across its resumes: start time + random suffix, e.g. 20261126-124512-3f9a1c."""
    return f"{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"


def checkpoint_path(models_dir: str | os.PathLike, algo: str, seed: int, episode: int | str | None) -> Path:
    """models/<algo>_seed<S>_ep<N>.pt; models/<algo>_seed<S>_final.pt when `episode` is None; a str `episode`
    is used as the tag itself (e.g. "best")."""
    tag = "final" if episode is None else episode if isinstance(episode, str) else f"ep{episode}"
    return Path(models_dir) / f"{algo}_seed{seed}_{tag}.pt"


def copy_checkpoint(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """Copy a checkpoint file atomically (unique temp file + os.replace)."""
    with open(source, "rb") as src:
        atomic_write(target, lambda dst: shutil.copyfileobj(src, dst))


def prune_periodic(models_dir: str | os.PathLike, algo: str, seed: int, keep: int) -> None:
    """Remove all but the newest `keep` periodic checkpoints (`<algo>_seed<S>_ep<N>.pt`, with their replay
    buffers) of `algo` seed `seed` in `models_dir`; `keep` 0 keeps every one. (A fresh training starts only where
    no other run's periodic checkpoints of that algo and seed are, so each is this run's.)"""
    if keep <= 0:
        return
    pattern = re.compile(rf"{re.escape(algo)}_seed{seed}_ep(\d+)\.pt")
    found = sorted(
        (int(m.group(1)), p) for p in Path(models_dir).iterdir() if (m := pattern.fullmatch(p.name))
    )
    for _, old in found[:-keep]:
        replay_path(old).unlink(missing_ok=True)
        old.unlink(missing_ok=True)


def replay_path(checkpoint: str | os.PathLike) -> Path:
    """The replay-buffer file stored beside a checkpoint: <checkpoint stem>.replay.npz."""
    path = Path(checkpoint)
    return path.with_name(path.stem + ".replay.npz")


def save_checkpoint(path: str | os.PathLike, checkpoint: dict[str, Any]) -> None:
    """Write `checkpoint` atomically (tmp file + os.replace), so a crash never leaves a half-written file.

    Layout (all plain types, tensors and state dicts; loadable with weights_only=True):
      format: int                      CHECKPOINT_FORMAT
      algo: "d3qn" | "sac"
      config: dict                     the agent dataclass (D3QNConfig / SACConfig) as a dict
      run_config: dict | None          the whole RunConfig when train() was given one
      obs_spec: {window, job_feature_dim, context_dim}
      task: "scheduling" | "power" | "autoscaling" | None   the env's task (None: trained without a RunConfig;
                                       absent in files written before it was recorded: run_config.task.name)
      action_space: {type: "Discrete", n}   K slots + WAIT/KEEP (absent in older files: window + 1)
      seed: int                        the training seed
      global_step: int                 env steps taken so far
      episode: int                     episodes finished so far
      next_episode: int                scenario index a resume starts with (a begun episode is skipped)
      total_steps: int                 the step target of the run that wrote it
      agent: {networks: {...}, optimizers: {...}, schedule: {...}}
        d3qn networks: q_network, target_network; schedule: schedule_steps, eps_decay_steps, num_updates,
             last_target_update_step
        sac networks: actor, critic (q1, q2), critic_target, log_alpha; schedule: schedule_steps,
             num_updates, alpha
      schedule_values: {epsilon} | {alpha}   the value at global_step, for people reading the file
      rng: {numpy: np.random.Generator.bit_generator.state, torch_init: ByteTensor, torch_sample: ByteTensor}
      replay: {file: str, size: int} | None  the replay buffer written beside this checkpoint (file name in
                                       the checkpoint's folder; only the newest checkpoint of a run keeps one)
      run_id: str                      the training run it belongs to (agents.checkpoint.new_run_id; kept
                                       across resumes; absent in checkpoints written before run ids existed)
      validation: dict                 only in <algo>_seed<S>_best.pt: its validation score, as in best.json
    """
    atomic_write(path, lambda file: torch.save(checkpoint, file))


def env_record(run_config: dict[str, Any] | None, spec: Any) -> dict[str, Any]:
    """What a checkpoint records of the env it was trained on: obs_spec, task and action_space (see
    save_checkpoint's layout); `spec` is an agents.networks.ObsSpec."""
    task = (run_config or {}).get("task", {}).get("name") if run_config is not None else None
    return {
        "obs_spec": {
            "window": spec.window,
            "job_feature_dim": spec.job_feature_dim,
            "context_dim": spec.context_dim,
        },
        "task": task,
        "action_space": {"type": "Discrete", "n": spec.num_actions},
    }


def load_checkpoint(path: str | os.PathLike, device: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint written by save_checkpoint; anything else (missing, a folder, empty, truncated, text,
    another program's file, another format) is a UserError naming the file and what is wrong with it."""
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: no such checkpoint file")
    if path.is_dir():
        raise UserError(f"{path} is a directory, not a checkpoint file (.pt)")
    if path.stat().st_size == 0:
        raise UserError(f"{path}: empty file, not a checkpoint (a copy or download that did not finish?)")
    try:
        checkpoint = torch.load(path, map_location=device, weights_only=True)
    except Exception as err:  # torch.load raises many types on a damaged or foreign file (KeyError on text)
        reason = f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}"
        raise UserError(
            f"{path}: not a readable checkpoint (truncated, or not written by this program) [{reason[:120]}]"
        ) from None
    if not isinstance(checkpoint, dict) or "format" not in checkpoint:
        raise UserError(f"{path}: a torch file, but not a checkpoint written by this program's training")
    if checkpoint["format"] == 1:
        raise UserError(
            f"{path}: checkpoint format 1, written before the observation, the delay reward and the discounting "
            f"changed (this version reads format {CHECKPOINT_FORMAT}): its network would misread the new "
            "observation. Retrain it (python main.py --mode train ...), or evaluate it with the version that wrote it"
        )
    if checkpoint["format"] != CHECKPOINT_FORMAT:
        raise UserError(f"{path}: checkpoint format {checkpoint['format']!r}, expected {CHECKPOINT_FORMAT}")
    return checkpoint


def warn_if_best_of_another_run(path: Path, checkpoint: dict[str, Any]) -> None:
    """A `<algo>_seed<S>_best.pt` selected in another training run than the `_final.pt` beside it (a later run
    validated nothing, or stopped between writing its final and its best model) gets a one-line warning."""
    if not path.name.endswith("_best.pt"):
        return
    final = path.with_name(path.name.removesuffix("_best.pt") + "_final.pt")
    if not final.is_file():
        return
    try:
        final_run = load_checkpoint(final).get("run_id")
    except ValueError:  # a damaged final model is reported when someone loads it
        return
    best_run = checkpoint.get("run_id")
    if final_run and not best_run:
        print(
            f"warning: {path} predates run ids, so it may not come from the run of {final} (run {final_run})",
            file=sys.stderr,
        )
    elif final_run and final_run != best_run:
        print(
            f"warning: {path} was selected in training run {best_run}, but {final} comes from run {final_run}: "
            "they are not one run's models",
            file=sys.stderr,
        )
