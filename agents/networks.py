"""Per-slot scoring networks for D3QN and SAC: one MLP scores every visible job, so any window K works."""

from __future__ import annotations

import math
from dataclasses import dataclass

import gymnasium as gym
import torch
from torch import nn

MASKED_LOGIT = -1e9
"""logit given to illegal actions: finite, so softmax gives exactly 0 and no inf - inf appears"""


@dataclass(frozen=True)
class ObsSpec:
    """How the flat observation splits: `window` slots of `job_feature_dim` features, then `context_dim`."""

    window: int
    job_feature_dim: int
    context_dim: int

    @property
    def obs_dim(self) -> int:
        return self.window * self.job_feature_dim + self.context_dim

    @property
    def num_actions(self) -> int:
        """K slots + WAIT (the last action)."""
        return self.window + 1

    @classmethod
    def from_env(cls, env: gym.Env) -> ObsSpec:
        base = env.unwrapped
        spec = cls(int(base.window), int(base.job_feature_dim), int(base.context_dim))
        if env.observation_space.shape != (spec.obs_dim,):
            raise ValueError(
                f"observation shape {env.observation_space.shape} != K*F_job+F_ctx = {spec.obs_dim}"
            )
        if not isinstance(env.action_space, gym.spaces.Discrete) or env.action_space.n != spec.num_actions:
            raise ValueError(f"action space {env.action_space} is not Discrete(K+1={spec.num_actions})")
        return spec


def masked_argmax(values_BA: torch.Tensor, mask_BA: torch.Tensor) -> torch.Tensor:
    """Index of the largest value among legal actions (rows need at least one legal action)."""
    lowest = torch.finfo(values_BA.dtype).min
    return torch.where(mask_BA, values_BA, lowest).argmax(dim=-1)


def masked_log_softmax(logits_BA: torch.Tensor, mask_BA: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(probs_BA, log_probs_BA) over legal actions; illegal ones get prob exactly 0 and log-prob 0 (not -inf).

    Setting illegal log-probs to 0 makes every `probs * f(log_probs)` term vanish for illegal actions without
    ever multiplying 0 by an infinity.
    """
    log_probs_BA = torch.log_softmax(torch.where(mask_BA, logits_BA, MASKED_LOGIT), dim=-1)
    probs_BA = torch.where(mask_BA, log_probs_BA.exp(), 0.0)
    return probs_BA, torch.where(mask_BA, log_probs_BA, 0.0)


def masked_mean(values_BA: torch.Tensor, mask_BA: torch.Tensor) -> torch.Tensor:
    """Mean over legal actions, shape (B, 1)."""
    legal_BA = mask_BA.to(values_BA.dtype)
    return (values_BA * legal_BA).sum(-1, keepdim=True) / legal_BA.sum(-1, keepdim=True).clamp_min(1.0)


def init_linear(module: nn.Module, generator: torch.Generator) -> None:
    """PyTorch's default Linear init, drawn from `generator` instead of the global RNG."""
    for layer in module.modules():
        if isinstance(layer, nn.Linear):
            nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
            if layer.bias is not None:
                bound = 1.0 / math.sqrt(layer.in_features)
                nn.init.uniform_(layer.bias, -bound, bound, generator=generator)


class SlotScorer(nn.Module):
    """Scores each of the K job slots and WAIT from (slot features, context); weights are shared over slots.

    context -> ctx_emb (H); slot k -> h_k = MLP(job_k, ctx_emb) (H), score_k = w . h_k;
    pooled = mean of h_k over non-empty slots; WAIT score = MLP(ctx_emb, pooled).
    `summary_BH2` (ctx_emb ++ pooled) is exposed so a dueling head can compute V(s) from it.
    """

    def __init__(self, job_feature_dim: int, context_dim: int, hidden: int):
        super().__init__()
        self.job_feature_dim, self.context_dim = job_feature_dim, context_dim
        self.context_encoder = nn.Sequential(nn.Linear(context_dim, hidden), nn.ReLU())
        # first slot layer split in two so the context embedding is broadcast-added instead of concatenated
        self.slot_job_in = nn.Linear(job_feature_dim, hidden)
        self.slot_ctx_in = nn.Linear(hidden, hidden, bias=False)
        self.slot_body = nn.Sequential(nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.slot_head = nn.Linear(hidden, 1)
        self.wait_head = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, obs_BD: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (scores_BA with A = K+1, WAIT last; summary_BH2)."""
        batch = obs_BD.shape[0]
        jobs_BKF = obs_BD[:, : obs_BD.shape[1] - self.context_dim].reshape(batch, -1, self.job_feature_dim)
        ctx_BC = obs_BD[:, obs_BD.shape[1] - self.context_dim :]
        ctx_emb_BH = self.context_encoder(ctx_BC)
        slot_h_BKH = self.slot_body(self.slot_job_in(jobs_BKF) + self.slot_ctx_in(ctx_emb_BH).unsqueeze(1))
        slot_scores_BK = self.slot_head(slot_h_BKH).squeeze(-1)
        # empty slots are all-zero feature rows; they must not dilute the pooled summary
        occupied_BK1 = (jobs_BKF != 0).any(-1, keepdim=True).to(slot_h_BKH.dtype)
        pooled_BH = (slot_h_BKH * occupied_BK1).sum(1) / occupied_BK1.sum(1).clamp_min(1.0)
        summary_BH2 = torch.cat([ctx_emb_BH, pooled_BH], dim=-1)
        wait_score_B1 = self.wait_head(summary_BH2)
        return torch.cat([slot_scores_BK, wait_score_B1], dim=-1), summary_BH2


class DuelingQNetwork(nn.Module):
    """Q(s, a) = V(s) + A(s, a) - mean over legal a' of A(s, a'); A per slot (+ WAIT), V from the summary."""

    def __init__(self, job_feature_dim: int, context_dim: int, hidden: int):
        super().__init__()
        self.advantage = SlotScorer(job_feature_dim, context_dim, hidden)
        self.value_head = nn.Sequential(nn.Linear(2 * hidden, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, obs_BD: torch.Tensor, mask_BA: torch.Tensor) -> torch.Tensor:
        """-> q_values_BA (entries of illegal actions are meaningless; mask them before use)."""
        advantages_BA, summary_BH2 = self.advantage(obs_BD)
        return self.value_head(summary_BH2) + advantages_BA - masked_mean(advantages_BA, mask_BA)

    def greedy(self, obs_BD: torch.Tensor, mask_BA: torch.Tensor) -> torch.Tensor:
        """Masked argmax of Q, computed from A alone: V and the legal mean shift every action equally."""
        return masked_argmax(self.advantage(obs_BD)[0], mask_BA)


class Actor(nn.Module):
    """Discrete policy: one logit per slot plus WAIT; illegal actions are masked to probability 0."""

    def __init__(self, job_feature_dim: int, context_dim: int, hidden: int):
        super().__init__()
        self.scorer = SlotScorer(job_feature_dim, context_dim, hidden)

    def forward(self, obs_BD: torch.Tensor, mask_BA: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """-> (probs_BA, log_probs_BA), both exactly 0 on illegal actions."""
        return masked_log_softmax(self.scorer(obs_BD)[0], mask_BA)

    def greedy(self, obs_BD: torch.Tensor, mask_BA: torch.Tensor) -> torch.Tensor:
        return masked_argmax(self.scorer(obs_BD)[0], mask_BA)


class TwinCritic(nn.Module):
    """Two independent slot-scoring Q networks: (q1_BA, q2_BA) for every action."""

    def __init__(self, job_feature_dim: int, context_dim: int, hidden: int):
        super().__init__()
        self.q1 = SlotScorer(job_feature_dim, context_dim, hidden)
        self.q2 = SlotScorer(job_feature_dim, context_dim, hidden)

    def forward(self, obs_BD: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.q1(obs_BD)[0], self.q2(obs_BD)[0]
