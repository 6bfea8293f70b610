"""Checkpoint files: names, atomic writes and loading; the layout is documented in `save_checkpoint`."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import torch

CHECKPOINT_FORMAT = 1


def checkpoint_path(models_dir: str | os.PathLike, algo: str, seed: int, episode: int | str | None) -> Path:
    """models/<algo>_seed<S>_ep<N>.pt; models/<algo>_seed<S>_final.pt when `episode` is None; a str `episode`
    is used as the tag itself (e.g. "best")."""
    tag = "final" if episode is None else episode if isinstance(episode, str) else f"ep{episode}"
    return Path(models_dir) / f"{algo}_seed{seed}_{tag}.pt"


def copy_checkpoint(source: str | os.PathLike, target: str | os.PathLike) -> None:
    """Copy a checkpoint file atomically (tmp file + os.replace)."""
    target = Path(target)
    tmp = target.with_name(target.name + ".tmp")
    shutil.copyfile(source, tmp)
    os.replace(tmp, target)


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
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save(checkpoint, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: str | os.PathLike, device: str | torch.device = "cpu") -> dict[str, Any]:
    checkpoint = torch.load(path, map_location=device, weights_only=True)
    if checkpoint.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(
            f"{path}: checkpoint format {checkpoint.get('format')!r}, expected {CHECKPOINT_FORMAT}"
        )
    return checkpoint
