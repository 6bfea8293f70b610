"""`--mode train`: turns a RunConfig into an env factory and a call to agents.trainer.train."""

from __future__ import annotations

from pathlib import Path

from agents.trainer import AGENTS, train
from config import RunConfig
from env.gym_env import GPUClusterEnv
from env.scenario import UserError


def train_from_config(cfg: RunConfig) -> Path:
    """Train `cfg.algo` on GPUClusterEnv(cfg) episodes; returns the TensorBoard run directory."""
    from runner import default_log_dir  # the one place run directories are named

    if cfg.algo not in AGENTS:
        raise UserError(f"--mode train needs --algo {' or '.join(AGENTS)}, got {cfg.algo!r}")
    if cfg.resume and not Path(cfg.resume).exists():
        raise UserError(f"--resume {cfg.resume}: no such file")
    run_dir = default_log_dir(cfg)
    result = train(
        cfg.algo,
        lambda scenario_seed: GPUClusterEnv(cfg),
        cfg,
        seed=cfg.seed,
        total_steps=cfg.total_steps,
        device=cfg.device,
        models_dir=cfg.models_dir,
        run_dir=str(run_dir),
        resume=cfg.resume,
        checkpoint_every_episodes=cfg.checkpoint_every_episodes,
        progress=cfg.progress,
    )
    print(
        f"{result.algo} seed {result.seed}: {result.global_step} steps, {result.episodes} episodes, "
        f"{result.steps_per_s:,.0f} steps/s; final model {result.final_checkpoint}; TensorBoard: {run_dir}/"
    )
    return run_dir
