"""The PPO network: SB3's maskable actor-critic whose actor is the slot scorer (one logit per job slot plus WAIT)
and its greedy start-or-wait rule; sb3-contrib is imported on first use only."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from agents.networks import ObsSpec, SlotScorer
from config import PPOConfig

CRITIC_HIDDEN = 64
"""width of the critic's two tanh layers (SB3's default MlpPolicy value net)"""


class SlotActorCritic(nn.Module):
    """SB3's `mlp_extractor` slot: the actor's latent IS the action logits (a `SlotScorer`, one logit per job slot
    plus WAIT, weights shared over slots, so PPO sees the window as D3QN and SAC do); the critic's latent is a
    64-64 tanh MLP of the whole observation, which SB3's value head turns into V(s)."""

    def __init__(self, spec: ObsSpec, hidden: int):
        super().__init__()
        self.actor = SlotScorer(spec.job_feature_dim, spec.context_dim, hidden)
        self.critic = nn.Sequential(
            nn.Linear(spec.obs_dim, CRITIC_HIDDEN),
            nn.Tanh(),
            nn.Linear(CRITIC_HIDDEN, CRITIC_HIDDEN),
            nn.Tanh(),
        )
        self.latent_dim_pi = spec.num_actions
        self.latent_dim_vf = CRITIC_HIDDEN

    def forward(self, features_BD: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.forward_actor(features_BD), self.forward_critic(features_BD)

    def forward_actor(self, features_BD: torch.Tensor) -> torch.Tensor:
        return self.actor(features_BD)[0]

    def forward_critic(self, features_BD: torch.Tensor) -> torch.Tensor:
        return self.critic(features_BD)


def start_or_wait(logits_BA: torch.Tensor, mask_BA: torch.Tensor) -> torch.Tensor:
    """WAIT (the last action) where the policy is more likely to wait than to start any job, i.e. where WAIT's
    logit exceeds the logsumexp of the legal slots' logits (P(WAIT) > 1/2), or where no slot is legal; else the
    most likely legal slot.

    Not the argmax of the K + 1 logits: the per-slot scorer spreads the probability of starting over similar
    jobs, so a policy that starts a job with probability 0.9 but gives no single job more than WAIT's 0.1 had
    an argmax of WAIT in most states, held every job back and scored ~2.6 million s where its sampled
    behaviour scored like SJF (the PPO "collapse" of BENCHMARKS.md, RL study). This is the mode of the
    two-stage choice start-or-wait, then which job."""
    slot_mask_BK = mask_BA[:, :-1]
    lowest = torch.finfo(logits_BA.dtype).min
    start_BK = torch.where(slot_mask_BK, logits_BA[:, :-1], lowest)
    start_B = torch.logsumexp(start_BK, dim=-1)
    wait_B = mask_BA[:, -1] & ((logits_BA[:, -1] > start_B) | ~slot_mask_BK.any(dim=-1))
    return torch.where(wait_B, logits_BA.shape[1] - 1, start_BK.argmax(dim=-1))


def policy_class():
    """SlotPolicy, defined on first use so that importing this module does not import sb3-contrib."""
    global _SLOT_POLICY
    if _SLOT_POLICY is not None:
        return _SLOT_POLICY
    from sb3_contrib.common.maskable.policies import MaskableActorCriticPolicy

    class SlotPolicy(MaskableActorCriticPolicy):
        """MaskableActorCriticPolicy whose actor is SlotActorCritic's slot scorer (logits straight from it)."""

        def __init__(self, *args, spec: ObsSpec, hidden: int, **kwargs):
            self.spec, self.hidden = spec, hidden
            super().__init__(*args, **kwargs)

        def _build_mlp_extractor(self) -> None:
            self.mlp_extractor = SlotActorCritic(self.spec, self.hidden)

        def _build(self, lr_schedule) -> None:
            super()._build(lr_schedule)
            self.action_net = nn.Identity()  # the slot scorer's outputs are the logits
            # SB3's convention for the policy output (orthogonal, gain 0.01): a near-uniform first policy
            for head in (self.mlp_extractor.actor.slot_head, self.mlp_extractor.actor.wait_head[-1]):
                head.apply(lambda m: self.init_weights(m, gain=0.01))
            self.optimizer = self.optimizer_class(
                self.parameters(), lr=lr_schedule(1), **self.optimizer_kwargs
            )

        def greedy(self, obs_BD: torch.Tensor, mask_BA: torch.Tensor) -> torch.Tensor:
            """The deterministic action (AgentPolicy's interface): `start_or_wait` of the logits."""
            return start_or_wait(
                self.mlp_extractor.forward_actor(self.pi_features_extractor(obs_BD)), mask_BA
            )

    _SLOT_POLICY = SlotPolicy
    return SlotPolicy


_SLOT_POLICY = None


def make_ppo_policy(cfg: PPOConfig, spec: ObsSpec) -> nn.Module:
    """The SlotPolicy of a PPO run (weights to be loaded); built without touching any global RNG state."""
    with torch.random.fork_rng(devices=[]):
        return policy_class()(
            gym.spaces.Box(0.0, 1.0, (spec.obs_dim,), np.float32),
            gym.spaces.Discrete(spec.num_actions),
            lambda _: cfg.learning_rate,
            spec=spec,
            hidden=cfg.hidden,
        )
