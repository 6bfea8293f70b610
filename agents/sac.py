"""Discrete SAC (Christodoulou 2019) over legal actions: masked policy, twin critics, learned temperature."""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from agents.networks import Actor, ObsSpec, TwinCritic, init_linear
from agents.replay import Batch, ReplayAgent, ReplayBuffer, concat_batches
from config import SACConfig


def make_actor(cfg: SACConfig, spec: ObsSpec) -> Actor:
    return Actor(spec.job_feature_dim, spec.context_dim, cfg.hidden)


def target_entropy(masks_BA: torch.Tensor, ratio: float) -> torch.Tensor:
    """Per-state target entropy ratio x log(#legal actions), shape (B,).

    The number of legal actions changes from state to state (often only WAIT is legal), so a single
    ratio x log(K+1) would ask for more entropy than a state with two legal actions can ever have and drive
    alpha up without bound. States with one legal action get target 0, which their entropy already meets.
    """
    return ratio * masks_BA.sum(-1).to(torch.float32).log()


class SACAgent(ReplayAgent):
    """Actor, twin critics with soft-updated targets, and a learned temperature alpha."""

    algo = "sac"

    def __init__(
        self,
        cfg: SACConfig,
        spec: ObsSpec,
        device: torch.device,
        rng: np.random.Generator,
        init_generator: torch.Generator,
        sample_generator: torch.Generator,
        schedule_steps: int,
    ):
        super().__init__(cfg, spec, device, rng, schedule_steps)
        self.sample_generator = sample_generator
        actor, critic = make_actor(cfg, spec), TwinCritic(spec.job_feature_dim, spec.context_dim, cfg.hidden)
        init_linear(actor, init_generator)
        init_linear(critic, init_generator)
        self.actor, self.critic = actor.to(device), critic.to(device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        if not 0 < cfg.alpha_init <= cfg.alpha_max:
            raise ValueError(f"need 0 < alpha_init <= alpha_max, got {cfg.alpha_init} and {cfg.alpha_max}")
        self._log_alpha_max = math.log(cfg.alpha_max)
        self.log_alpha = torch.tensor(math.log(cfg.alpha_init), device=device, requires_grad=True)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=cfg.learning_rate, fused=True)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=cfg.learning_rate, fused=True)
        self.alpha_optimizer = torch.optim.Adam([self.log_alpha], lr=cfg.learning_rate, fused=True)
        self._critic_params = list(self.critic.parameters())
        self._target_params = list(self.critic_target.parameters())
        self._actor_params = list(self.actor.parameters())

    @property
    def alpha(self) -> float:
        return float(self.log_alpha.detach().exp())

    def schedule_values(self, global_step: int) -> dict[str, float]:
        return {"alpha": self.alpha, "bc_weight": self.bc_weight(global_step)}

    def act(self, obs: np.ndarray, mask: np.ndarray, global_step: int, random_phase: bool = False) -> int:
        """A sample from the masked policy (uniform over legal actions while the buffer warms up)."""
        legal = np.flatnonzero(mask)
        if len(legal) == 1:  # the policy puts probability 1 on it; skip the network
            return int(legal[0])
        if random_phase:
            return int(legal[self.rng.integers(len(legal))])
        with torch.inference_mode():
            obs_1D = torch.as_tensor(obs, dtype=torch.float32, device=self.device).unsqueeze(0)
            mask_1A = torch.as_tensor(mask, device=self.device).unsqueeze(0)
            probs_1A, _ = self.actor(obs_1D, mask_1A)
            return int(torch.multinomial(probs_1A, 1, generator=self.sample_generator)[0, 0])

    def update(
        self, buffer: ReplayBuffer, global_step: int, demos: ReplayBuffer | None = None
    ) -> dict[str, torch.Tensor]:
        """Critic, actor and temperature steps on one batch (plus `demo_batch_size` demonstrations), then the
        soft target update; 0-d tensors out."""
        batch = buffer.sample(self.cfg.batch_size)
        if demos is not None:
            batch = concat_batches(batch, demos.sample(self.cfg.demo_batch_size))
        return self._learn(batch, self.cfg.batch_size, self.bc_weight(global_step), self.cfg.demo_q_filter)

    def bc_weight(self, global_step: int) -> float:
        """The behaviour-cloning weight at `global_step`: demo_weight decaying linearly to 0 over
        demo_decay_fraction x schedule_steps (0 from then on)."""
        decay_steps = self.cfg.demo_decay_fraction * self.schedule_steps
        if decay_steps <= 0:
            return 0.0
        return self.cfg.demo_weight * max(0.0, 1.0 - global_step / decay_steps)

    def pretrain(
        self, demos: ReplayBuffer, num_updates: int, on_update: Callable[[], None] | None = None
    ) -> dict[str, torch.Tensor]:
        """`num_updates` steps on demonstrations alone: critic TD and behaviour cloning of the actor;
        `on_update()` after each (progress display)."""
        losses = {}
        for _ in range(num_updates):
            losses = self._learn(demos.sample(self.cfg.batch_size), 0, self.cfg.demo_weight, q_filter=False)
            if on_update is not None:
                on_update()
        return losses

    def _learn(
        self, batch: Batch, num_agent_rows: int, bc_weight: float, q_filter: bool = False
    ) -> dict[str, torch.Tensor]:
        """Rows from `num_agent_rows` on are demonstrations: TD targets for the critics like the others, and a
        behaviour-cloning term -log pi(a_demo | s) for the actor instead of the soft policy loss."""
        cfg, dev = self.cfg, self.device
        obs_BD = torch.from_numpy(batch.obs_BD).to(dev)
        next_obs_BD = torch.from_numpy(batch.next_obs_BD).to(dev)
        actions_B1 = torch.from_numpy(batch.actions_B).to(dev).unsqueeze(1)
        rewards_B = torch.from_numpy(batch.rewards_B).to(dev)
        bootstrap_B = torch.from_numpy(batch.discounts_B * (1.0 - batch.dones_B)).to(dev)
        masks_BA = torch.from_numpy(batch.masks_BA).to(dev)
        next_masks_BA = torch.from_numpy(batch.next_masks_BA).to(dev)
        alpha = self.log_alpha.detach().exp()
        n = num_agent_rows

        # critics: V(s') = sum over legal a' of pi(a'|s') [min Q'(s', a') - alpha log pi(a'|s')]
        with torch.no_grad():
            next_probs_BA, next_log_probs_BA = self.actor(next_obs_BD, next_masks_BA)
            next_q1_BA, next_q2_BA = self.critic_target(next_obs_BD)
            soft_q_BA = torch.where(
                next_masks_BA, torch.min(next_q1_BA, next_q2_BA) - alpha * next_log_probs_BA, 0.0
            )
            next_v_B = (next_probs_BA * soft_q_BA).sum(-1)
            td_target_B = rewards_B + bootstrap_B * next_v_B
        q1_BA, q2_BA = self.critic(obs_BD)
        q1_loss = F.mse_loss(q1_BA.gather(1, actions_B1).squeeze(1), td_target_B)
        q2_loss = F.mse_loss(q2_BA.gather(1, actions_B1).squeeze(1), td_target_B)
        self.critic_optimizer.zero_grad(set_to_none=True)
        (q1_loss + q2_loss).backward()
        torch.nn.utils.clip_grad_norm_(self._critic_params, cfg.max_grad_norm, foreach=True)
        self.critic_optimizer.step()

        # actor: E_s sum over legal a of pi(a|s) [alpha log pi(a|s) - min Q(s, a)]; the critic values from the
        # forward pass above (one step stale) are reused, detached, to save a forward pass
        min_q_BA = torch.where(masks_BA, torch.min(q1_BA, q2_BA).detach(), 0.0)
        probs_BA, log_probs_BA = self.actor(obs_BD, masks_BA)
        actor_loss = bc_loss = torch.zeros((), device=dev)
        if n > 0:
            actor_loss = (probs_BA[:n] * (alpha * log_probs_BA[:n] - min_q_BA[:n])).sum(-1).mean()
        bc_kept = torch.ones((), device=dev)
        if n < len(rewards_B):
            demo_log_probs_B = log_probs_BA[n:].gather(1, actions_B1[n:]).squeeze(1)
            if q_filter:
                # Q-filter (Nair et al. 2018, "Overcoming exploration in RL with demonstrations", eq. 4): clone
                # the demonstrator only where the critics value its action at least as much as the policy's
                # own expected action value, so imitation never overrides what the critic has learned is better
                demo_q_B = min_q_BA[n:].gather(1, actions_B1[n:]).squeeze(1)
                policy_v_B = (probs_BA[n:].detach() * min_q_BA[n:]).sum(-1)
                keep_B = (demo_q_B >= policy_v_B).to(demo_log_probs_B.dtype)
                bc_kept = keep_B.mean()
                bc_loss = -(keep_B * demo_log_probs_B).mean()
            else:
                bc_loss = -demo_log_probs_B.mean()
        self.actor_optimizer.zero_grad(set_to_none=True)
        (actor_loss + bc_weight * bc_loss).backward()
        torch.nn.utils.clip_grad_norm_(self._actor_params, cfg.max_grad_norm, foreach=True)
        self.actor_optimizer.step()

        # temperature: E_s sum over legal a of pi(a|s) (-alpha (log pi(a|s) + target entropy(s))), pi detached,
        # over the agent's own states (not while pre-training on demonstrations alone)
        probs_BA, log_probs_BA = probs_BA.detach(), log_probs_BA.detach()
        entropy_B = -(probs_BA * log_probs_BA).sum(-1)
        alpha_loss = torch.zeros((), device=dev)
        if cfg.autotune and n > 0:
            target_B1 = target_entropy(masks_BA[:n], cfg.target_entropy_ratio).unsqueeze(1)
            alpha_loss = (
                (probs_BA[:n] * (-self.log_alpha.exp() * (log_probs_BA[:n] + target_B1))).sum(-1).mean()
            )
            self.alpha_optimizer.zero_grad(set_to_none=True)
            alpha_loss.backward()
            self.alpha_optimizer.step()
            with torch.no_grad():  # bounded: an unbounded alpha made the entropy bonus pay for WAIT steps
                self.log_alpha.clamp_(max=self._log_alpha_max)

        with torch.no_grad():
            torch._foreach_lerp_(self._target_params, self._critic_params, cfg.tau)
        self.num_updates += 1
        return {
            "qf1_loss": q1_loss.detach(),
            "qf2_loss": q2_loss.detach(),
            "qf1_values": q1_BA.detach().gather(1, actions_B1).mean(),
            "actor_loss": actor_loss.detach(),
            "bc_loss": bc_loss.detach(),
            "bc_weight": torch.tensor(bc_weight),
            "bc_kept": bc_kept.detach(),
            "alpha_loss": alpha_loss.detach(),
            "alpha": alpha,
            "entropy": entropy_B.mean(),
        }

    # ---- checkpointing ----

    def policy_network(self) -> torch.nn.Module:
        return self.actor

    def state_dict(self) -> dict[str, Any]:
        return {
            "networks": {
                "actor": self.actor.state_dict(),
                "critic": self.critic.state_dict(),
                "critic_target": self.critic_target.state_dict(),
                "log_alpha": self.log_alpha.detach().clone(),
            },
            "optimizers": {
                "actor": self.actor_optimizer.state_dict(),
                "critic": self.critic_optimizer.state_dict(),
                "alpha": self.alpha_optimizer.state_dict(),
            },
            "schedule": {
                "schedule_steps": self.schedule_steps,
                "num_updates": self.num_updates,
                "alpha": self.alpha,
            },
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        networks, optimizers = state["networks"], state["optimizers"]
        self.actor.load_state_dict(networks["actor"])
        self.critic.load_state_dict(networks["critic"])
        self.critic_target.load_state_dict(networks["critic_target"])
        with torch.no_grad():
            self.log_alpha.copy_(networks["log_alpha"])
        self.actor_optimizer.load_state_dict(optimizers["actor"])
        self.critic_optimizer.load_state_dict(optimizers["critic"])
        self.alpha_optimizer.load_state_dict(optimizers["alpha"])
        self.schedule_steps = state["schedule"]["schedule_steps"]
        self.num_updates = state["schedule"]["num_updates"]
