"""Greedy policies for evaluation, rebuilt from checkpoints: the only agent API eval and compare need."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from agents.checkpoint import load_checkpoint, warn_if_best_of_another_run
from agents.d3qn import make_q_network
from agents.networks import ObsSpec
from agents.ppo_policy import make_ppo_policy
from agents.sac import make_actor
from config import D3QNConfig, PPOConfig, SACConfig, UserError, a_or_an


class AgentPolicy:
    """Deterministic policy: masked argmax of Q (D3QN) or of the policy logits (SAC, PPO); never an illegal action.

    `network` must offer `greedy(obs_BD, mask_BA) -> actions_B` (DuelingQNetwork and Actor do).
    """

    def __init__(
        self,
        algo: str,
        config: dict[str, Any],
        spec: ObsSpec,
        network: torch.nn.Module,
        device: torch.device,
        global_step: int = 0,
        checkpoint_path: str | None = None,
    ):
        self.algo, self.config, self.spec, self.network = algo, config, spec, network
        self.device, self.global_step, self.checkpoint_path = device, global_step, checkpoint_path

    @property
    def name(self) -> str:
        return self.algo

    def act(self, obs: np.ndarray, mask: np.ndarray) -> int:
        """Greedy legal action for one observation (obs: (D,) float32, mask: (K+1,) bool)."""
        return int(self.act_batch(obs[None], np.asarray(mask)[None])[0])

    def act_batch(self, obs_BD: np.ndarray, masks_BA: np.ndarray) -> np.ndarray:
        """Greedy legal actions for a batch -> (B,) int64."""
        if not masks_BA.any(-1).all():
            raise ValueError("every observation needs at least one legal action")
        with torch.inference_mode():
            obs_t = torch.as_tensor(obs_BD, dtype=torch.float32, device=self.device)
            masks_t = torch.as_tensor(masks_BA, dtype=torch.bool, device=self.device)
            return self.network.greedy(obs_t, masks_t).cpu().numpy()


NETWORKS = {"d3qn": (make_q_network, D3QNConfig, "q_network"), "sac": (make_actor, SACConfig, "actor"),
            "ppo": (make_ppo_policy, PPOConfig, "policy")}  # fmt: skip
"""per slot-env algo: the builder of its acting network, its config class and the network's key in a checkpoint"""


def _network(path: str | os.PathLike, checkpoint: dict, spec: ObsSpec) -> torch.nn.Module:
    """The acting network of a slot agent's checkpoint with its weights; a missing entry, an unknown setting or
    weights of another shape (a damaged checkpoint, or one of another version) are a UserError naming the file."""
    make, config_type, key = NETWORKS[checkpoint["algo"]]
    try:
        network = make(config_type(**checkpoint["config"]), spec)
        network.load_state_dict(checkpoint["agent"]["networks"][key])
    except (KeyError, TypeError, RuntimeError) as err:  # torch says why over several lines: one here
        raise UserError(
            f"{path}: unusable {checkpoint['algo']} network ({' '.join(str(err).split())})"
        ) from None
    return network


def load_policy(
    checkpoint_path: str | os.PathLike, device: str | torch.device = "cpu", warn: bool = True
) -> AgentPolicy:
    """Rebuild the greedy policy stored in a checkpoint written by agents.trainer.train (`warn`: say so when a
    `best` model comes from another run than its final one; a caller that has said it already passes False)."""
    device = torch.device(device)
    checkpoint = load_checkpoint(checkpoint_path, device)
    algo, config, spec = checkpoint["algo"], checkpoint["config"], ObsSpec(**checkpoint["obs_spec"])
    if algo not in NETWORKS:
        raise UserError(
            f"{checkpoint_path} holds {a_or_an(algo)} agent, not one of the slot env's (d3qn, sac, ppo)"
        )
    network = _network(checkpoint_path, checkpoint, spec).to(device).eval().requires_grad_(False)
    if warn:
        warn_if_best_of_another_run(Path(checkpoint_path), checkpoint)
    return AgentPolicy(algo, config, spec, network, device, checkpoint["global_step"], str(checkpoint_path))
