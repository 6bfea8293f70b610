"""D3QN: dueling double DQN over legal actions, with n-step and prioritized replay as options."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from agents.networks import DuelingQNetwork, ObsSpec, init_linear
from agents.replay import Batch, ReplayAgent, ReplayBuffer, concat_batches
from config import D3QNConfig


def make_q_network(cfg: D3QNConfig, spec: ObsSpec) -> DuelingQNetwork:
    return DuelingQNetwork(spec.job_feature_dim, spec.context_dim, cfg.hidden)


def linear_schedule(start: float, end: float, duration_steps: int, step: int) -> float:
    if duration_steps <= 0:
        return end
    return start + (end - start) * min(1.0, step / duration_steps)


class D3QNAgent(ReplayAgent):
    """Online and target dueling Q-networks, epsilon-greedy acting and the double-DQN update.

    The epsilon and PER-beta schedules run over `schedule_steps` env steps, fixed when the run first starts and
    kept in checkpoints, so a resume that extends the run continues them instead of restarting them.
    """

    algo = "d3qn"

    def __init__(
        self,
        cfg: D3QNConfig,
        spec: ObsSpec,
        device: torch.device,
        rng: np.random.Generator,
        init_generator: torch.Generator,
        sample_generator: torch.Generator,
        schedule_steps: int,
    ):
        super().__init__(cfg, spec, device, rng, schedule_steps)
        q_network = make_q_network(cfg, spec)
        init_linear(q_network, init_generator)
        self.q_network = q_network.to(device)
        self.target_network = copy.deepcopy(self.q_network).requires_grad_(False)
        self.optimizer = torch.optim.Adam(self.q_network.parameters(), lr=cfg.learning_rate, fused=True)
        self.eps_decay_steps = int(cfg.eps_fraction * schedule_steps)
        # None = the default for the run's kind: a pre-trained agent (demonstrations) already acts well
        demos = bool(cfg.demo_policy)
        self.eps_start = cfg.eps_start if cfg.eps_start is not None else (0.05 if demos else 1.0)
        self.eps_end = cfg.eps_end if cfg.eps_end is not None else (0.01 if demos else 0.05)
        self.last_target_update_step = 0
        self._online_params = list(self.q_network.parameters())
        self._target_params = list(self.target_network.parameters())

    def _buffer_options(self) -> dict:
        cfg = self.cfg
        return {"prioritized": cfg.prioritized, "alpha": cfg.per_alpha, "priority_eps": cfg.per_eps}

    def epsilon(self, global_step: int) -> float:
        return linear_schedule(self.eps_start, self.eps_end, self.eps_decay_steps, global_step)

    def schedule_values(self, global_step: int) -> dict[str, float]:
        """Scalars worth charting at this step."""
        return {"epsilon": self.epsilon(global_step)}

    def act(self, obs: np.ndarray, mask: np.ndarray, global_step: int, random_phase: bool = False) -> int:
        """Epsilon-greedy over legal actions; the network runs only when there is a choice to exploit."""
        legal = np.flatnonzero(mask)
        if len(legal) == 1:  # e.g. a full cluster where only WAIT is legal: nothing to decide
            return int(legal[0])
        if random_phase or self.rng.random() < self.epsilon(global_step):
            return int(legal[self.rng.integers(len(legal))])
        with torch.inference_mode():
            obs_1D = torch.as_tensor(obs, dtype=torch.float32, device=self.device).unsqueeze(0)
            mask_1A = torch.as_tensor(mask, device=self.device).unsqueeze(0)
            return int(self.q_network.greedy(obs_1D, mask_1A)[0])

    def update(
        self, buffer: ReplayBuffer, global_step: int, demos: ReplayBuffer | None = None
    ) -> dict[str, torch.Tensor]:
        """One gradient step on a sampled batch (plus `demo_batch_size` demonstrations), then the target
        update if it is due.

        Returns 0-d tensors to chart (converted only when logged, so a GPU is not synchronised every update).
        """
        cfg = self.cfg
        beta = linear_schedule(cfg.per_beta_start, 1.0, self.schedule_steps, global_step)
        batch = buffer.sample(cfg.batch_size, beta)
        if demos is not None:
            batch = concat_batches(batch, demos.sample(cfg.demo_batch_size))
        losses = self._learn(batch, cfg.batch_size, buffer if buffer.prioritized else None)
        if global_step - self.last_target_update_step >= cfg.target_update_every:
            self.last_target_update_step = global_step
            self._update_target()
        return losses

    def pretrain(
        self, demos: ReplayBuffer, num_updates: int, on_update: Callable[[], None] | None = None
    ) -> dict[str, torch.Tensor]:
        """`num_updates` steps on demonstrations alone (TD + large margin), with the usual target period;
        `on_update()` after each (progress display)."""
        cfg, losses = self.cfg, {}
        period = max(1, cfg.target_update_every // cfg.train_every)
        for u in range(num_updates):
            losses = self._learn(demos.sample(cfg.batch_size), 0, None)
            if (u + 1) % period == 0:
                self._update_target()
            if on_update is not None:
                on_update()
        self._update_target()
        return losses

    def _update_target(self) -> None:
        with torch.no_grad():
            torch._foreach_lerp_(self._target_params, self._online_params, self.cfg.tau)

    def _learn(
        self, batch: Batch, num_agent_rows: int, prioritized: ReplayBuffer | None
    ) -> dict[str, torch.Tensor]:
        """Double-DQN Huber loss on every row; rows from `num_agent_rows` on are demonstrations and also get
        DQfD's large-margin loss: max over legal a of [Q(s, a) + margin * (a != a_demo)] - Q(s, a_demo)."""
        cfg, dev = self.cfg, self.device
        obs_BD = torch.from_numpy(batch.obs_BD).to(dev)
        next_obs_BD = torch.from_numpy(batch.next_obs_BD).to(dev)
        actions_B = torch.from_numpy(batch.actions_B).to(dev)
        rewards_B = torch.from_numpy(batch.rewards_B).to(dev)
        bootstrap_B = torch.from_numpy(batch.discounts_B * (1.0 - batch.dones_B)).to(dev)
        masks_BA = torch.from_numpy(batch.masks_BA).to(dev)
        next_masks_BA = torch.from_numpy(batch.next_masks_BA).to(dev)

        with torch.no_grad():
            # double DQN: the online net picks the next action among legal ones, the target net evaluates it
            next_actions_B = self.q_network.greedy(next_obs_BD, next_masks_BA)
            next_q_BA = self.target_network(next_obs_BD, next_masks_BA)
            next_q_B = next_q_BA.gather(1, next_actions_B.unsqueeze(1)).squeeze(1)
            td_target_B = rewards_B + bootstrap_B * next_q_B

        q_BA = self.q_network(obs_BD, masks_BA)
        q_B = q_BA.gather(1, actions_B.unsqueeze(1)).squeeze(1)
        elementwise_loss_B = F.smooth_l1_loss(q_B, td_target_B, reduction="none")
        if prioritized is not None:
            elementwise_loss_B = torch.from_numpy(batch.weights_B).to(dev) * elementwise_loss_B
        loss = td_loss = elementwise_loss_B.mean()
        margin_loss = torch.zeros((), device=dev)
        if num_agent_rows < len(actions_B):
            demo_q_BA, demo_actions_B = q_BA[num_agent_rows:], actions_B[num_agent_rows:]
            others_BA = torch.arange(q_BA.shape[1], device=dev) != demo_actions_B.unsqueeze(1)
            best_B = torch.where(
                masks_BA[num_agent_rows:],
                demo_q_BA + cfg.demo_margin * others_BA,
                torch.finfo(q_BA.dtype).min,
            ).amax(-1)
            margin_loss = (best_B - q_B[num_agent_rows:]).mean()
            loss = loss + cfg.demo_weight * margin_loss

        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self._online_params, cfg.max_grad_norm, foreach=True)
        self.optimizer.step()
        self.num_updates += 1

        if prioritized is not None:
            td_errors = (q_B - td_target_B)[:num_agent_rows].detach().cpu().numpy()
            prioritized.update_priorities(batch.indices_B[:num_agent_rows], td_errors)
        return {
            "td_loss": td_loss.detach(),
            "margin_loss": margin_loss.detach(),
            "q_values": q_B.detach().mean(),
        }

    # ---- checkpointing ----

    def policy_network(self) -> torch.nn.Module:
        return self.q_network

    def state_dict(self) -> dict[str, Any]:
        return {
            "networks": {
                "q_network": self.q_network.state_dict(),
                "target_network": self.target_network.state_dict(),
            },
            "optimizers": {"q_network": self.optimizer.state_dict()},
            "schedule": {
                "schedule_steps": self.schedule_steps,
                "eps_decay_steps": self.eps_decay_steps,
                "num_updates": self.num_updates,
                "last_target_update_step": self.last_target_update_step,
            },
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.q_network.load_state_dict(state["networks"]["q_network"])
        self.target_network.load_state_dict(state["networks"]["target_network"])
        self.optimizer.load_state_dict(state["optimizers"]["q_network"])
        schedule = state["schedule"]
        self.schedule_steps = schedule["schedule_steps"]
        self.eps_decay_steps = schedule["eps_decay_steps"]
        self.num_updates = schedule["num_updates"]
        self.last_target_update_step = schedule["last_target_update_step"]
