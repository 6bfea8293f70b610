"""What every learner's training loop shares: the reserved training-seed range, the result record, stop-signal
handling (Ctrl-C, SIGTERM, ...), the device choice, hparam flattening and the clean-up of an interrupted run's checkpoint."""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from agents.checkpoint import replay_path
from interrupts import StopRequest

# Training episodes draw their scenario seeds from [TRAIN_SEED_BASE, ...): seed S, episode N uses
# TRAIN_SEED_BASE + S * TRAIN_SEEDS_PER_RUN + N. Evaluation must use seeds below TRAIN_SEED_BASE, so no
# evaluation scenario is ever trained on, and different training seeds never share a scenario.
TRAIN_SEED_BASE = 1_000_000_000
TRAIN_SEEDS_PER_RUN = 1_000_000


def training_episode_seed(seed: int, episode: int) -> int:
    """Scenario seed of training episode `episode` (0-based) of training seed `seed`."""
    if not 0 <= episode < TRAIN_SEEDS_PER_RUN or seed < 0:
        raise ValueError(f"training seed {seed} / episode {episode} outside the reserved seed range")
    return TRAIN_SEED_BASE + seed * TRAIN_SEEDS_PER_RUN + episode


def demonstration_seeds(seed: int, count: int) -> list[int]:
    """Scenario seeds of the demonstration episodes of training seed `seed`: the last of its reserved range,
    so they never coincide with the agent's own episodes (which count up from the first)."""
    return [training_episode_seed(seed, TRAIN_SEEDS_PER_RUN - 1 - k) for k in range(count)]


def is_training_seed(scenario_seed: int) -> bool:
    return scenario_seed >= TRAIN_SEED_BASE


@dataclass(frozen=True)
class TrainResult:
    algo: str
    seed: int
    global_step: int
    """env steps taken in total (including those before a resume)"""
    episodes: int
    """episodes finished in total"""
    final_checkpoint: str
    checkpoints: tuple[str, ...]
    """every checkpoint this call wrote, final last"""
    episode_returns: tuple[float, ...]
    """undiscounted returns of the episodes finished in this call"""
    wall_s: float
    steps_per_s: float
    """env steps of this call / wall_s (acting, env, updates, logging and checkpoints included)"""
    run_dir: str
    eval_history: tuple[tuple[int, dict[str, float]], ...] = ()
    """(global_step, eval_fn result) at each checkpoint"""
    run_id: str = ""
    """the training run (agents.checkpoint.new_run_id), the same across its resumes"""
    setup_s: float = 0.0
    """part of wall_s spent before the first step: building env and agent, demonstrations, pre-training"""


class TrainingInterrupted(KeyboardInterrupt):
    """A stop signal (Ctrl-C, SIGTERM, ...; interrupts.py) stopped training after a complete checkpoint to resume
    from was written. `signum` is that signal's number (the exit status is 128 + it)."""

    def __init__(
        self, checkpoint: str, global_step: int, total_steps: int, run_id: str, signum: int = signal.SIGINT
    ):
        super().__init__(f"interrupted at step {global_step:,} of {total_steps:,}; checkpoint {checkpoint}")
        self.checkpoint = checkpoint
        self.global_step, self.total_steps = global_step, total_steps
        self.run_id = run_id
        self.signum = signum


CtrlC = StopRequest
"""Stop-signal handling of the training loops (interrupts.StopRequest, main thread only; elsewhere a signal raises
KeyboardInterrupt as usual, which the loops catch too). The first Ctrl-C, SIGTERM, SIGHUP or SIGUSR1 asks the loop
to stop after the current step, so the checkpoint holds a consistent state; a second one interrupts the step at
once. While a checkpoint that ends the run is written (`saving`), signals are ignored with a message, so the file
is always complete."""


def resolve_device(device: str | torch.device) -> torch.device:
    """auto -> cuda when available, else cpu."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(device)


def flatten(prefix: str, value: Any, out: dict[str, Any]) -> dict[str, Any]:
    if isinstance(value, dict):
        for key, item in value.items():
            flatten(f"{prefix}.{key}" if prefix else key, item, out)
    else:
        out[prefix] = value if isinstance(value, int | float | str | bool) else str(value)
    return out


def remove_own_interrupted_checkpoint(path: Path, run_id: str) -> None:
    """A run that completed no longer needs the checkpoint Ctrl-C left; another run's is left alone."""
    if not path.exists():
        return
    try:
        owner = torch.load(path, map_location="cpu", weights_only=True).get("run_id")
    except Exception:  # unreadable: not ours to judge
        return
    if owner == run_id:
        replay_path(path).unlink(missing_ok=True)
        path.unlink(missing_ok=True)
