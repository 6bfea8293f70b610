"""`--mode train`: turns a RunConfig into an env factory and a call to agents.trainer.train."""

from __future__ import annotations

from pathlib import Path

from agents.checkpoint import checkpoint_path, load_checkpoint
from agents.trainer import AGENTS, is_training_seed, train
from agents.validation import BestCheckpoint
from config import RunConfig
from env.gym_env import GPUClusterEnv, heuristic_action
from env.scenario import UserError
from schedulers import POLICIES

# A demonstrator acts through the env, so each of its decisions must be visible in the window: the window shows
# startable jobs shortest-first (SJF's pick is always slot 0) or oldest-first (FCFS's pick is always slot 0).
DEMO_POLICIES = {"runtime": ("sjf",), "arrival": ("fcfs",)}


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
    demo_policy, seed = getattr(cfg, cfg.algo).demo_policy, cfg.seed
    if cfg.resume:  # a resumed run keeps its own settings (agents.trainer.train reads them from the file)
        resumed = load_checkpoint(cfg.resume)
        demo_policy, seed = resumed["config"].get("demo_policy", ""), resumed["seed"]
    allowed = DEMO_POLICIES[cfg.env.window_order]
    if demo_policy and demo_policy not in allowed:
        raise UserError(
            f"--demo_policy {demo_policy!r}: with window order {cfg.env.window_order!r} only "
            f"{', '.join(allowed)} (or none) can act through the window"
        )
    if any(is_training_seed(s) for s in cfg.validation_seeds):
        raise UserError("--validation_seeds must be below 1,000,000,000 (the training scenarios' range)")
    run_dir = default_log_dir(cfg)
    best = checkpoint_path(cfg.models_dir, cfg.algo, seed, "best")
    if not cfg.resume:  # a fresh run never leaves an earlier run's best model behind to be loaded by mistake
        best.unlink(missing_ok=True)
        best.with_suffix(".json").unlink(missing_ok=True)
    validation = BestCheckpoint(cfg, best, resume=cfg.resume is not None) if cfg.validation_seeds else None
    result = train(
        cfg.algo,
        lambda scenario_seed: GPUClusterEnv(cfg),
        cfg,
        seed=seed,
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
