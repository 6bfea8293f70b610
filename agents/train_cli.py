"""`--mode train`: turns a RunConfig into an env factory and a call to agents.trainer.train."""

from __future__ import annotations

from pathlib import Path

from agents.checkpoint import checkpoint_path
from agents.trainer import AGENTS, is_training_seed, train
from agents.validation import BestCheckpoint
from config import RunConfig
from env.gym_env import GPUClusterEnv, heuristic_action
from env.scenario import UserError
from schedulers import POLICIES


def heuristic_demonstrator(name: str):
    """demonstrator(env) -> the action heuristic `name` takes in a GPUClusterEnv's current state."""
    policy = POLICIES[name]
    return lambda env: heuristic_action(env.unwrapped, policy)


def train_from_config(cfg: RunConfig) -> Path:
    """Train `cfg.algo` on GPUClusterEnv(cfg) episodes; returns the TensorBoard run directory."""
    from runner import default_log_dir  # the one place run directories are named

    if cfg.algo not in AGENTS:
        raise UserError(f"--mode train needs --algo {' or '.join(AGENTS)}, got {cfg.algo!r}")
    if cfg.resume and not Path(cfg.resume).exists():
        raise UserError(f"--resume {cfg.resume}: no such file")
    demo_policy = getattr(cfg, cfg.algo).demo_policy
    if demo_policy and demo_policy not in POLICIES:
        raise UserError(f"--demo_policy {demo_policy!r}: choose one of {', '.join(POLICIES)} or none")
    if any(is_training_seed(s) for s in cfg.validation_seeds):
        raise UserError("--validation_seeds must be below 1,000,000,000 (the training scenarios' range)")
    run_dir = default_log_dir(cfg)
    validation = None
    if cfg.validation_seeds:
        best = checkpoint_path(cfg.models_dir, cfg.algo, cfg.seed, "best")
        validation = BestCheckpoint(cfg, best, resume=cfg.resume is not None)
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
        demonstrator=heuristic_demonstrator(demo_policy) if demo_policy else None,
        eval_fn=validation,
    )
    print(
        f"{result.algo} seed {result.seed}: {result.global_step} steps, {result.episodes} episodes, "
        f"{result.steps_per_s:,.0f} steps/s; final model {result.final_checkpoint}; TensorBoard: {run_dir}/"
    )
    if validation is not None and validation.best_path.exists():
        print(
            f"best on validation seeds {','.join(map(str, cfg.validation_seeds))}: {validation.best_path} "
            f"(avg JCT {validation.best_jct_s:,.0f} s)"
        )
    return run_dir
