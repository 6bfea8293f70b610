"""RL agents (D3QN, discrete SAC, PPO) that see the cluster only through the Gymnasium API. Imports config, the
scenario assembly and env (and metrics for validation scores); never evaluation or the CLI."""

from agents.policy import AgentPolicy, load_policy
from agents.run_control import TRAIN_SEED_BASE, TrainResult, is_training_seed, training_episode_seed
from agents.trainer import train

__all__ = [
    "TRAIN_SEED_BASE",
    "AgentPolicy",
    "TrainResult",
    "is_training_seed",
    "load_policy",
    "train",
    "training_episode_seed",
]
