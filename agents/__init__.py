"""RL agents (D3QN, discrete SAC) that see the cluster only through the Gymnasium API."""

from agents.policy import AgentPolicy, load_policy
from agents.trainer import TRAIN_SEED_BASE, TrainResult, is_training_seed, train, training_episode_seed

__all__ = [
    "TRAIN_SEED_BASE",
    "AgentPolicy",
    "TrainResult",
    "is_training_seed",
    "load_policy",
    "train",
    "training_episode_seed",
]
