"""The RL objective's fixes: time-based discounting (buffer and env), the SAC temperature bound and the decay of
its behaviour-cloning term, and the refusal of checkpoints written for the old observation."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from agents.checkpoint import load_checkpoint, save_checkpoint
from agents.networks import ObsSpec
from agents.replay import ReplayBuffer
from agents.sac import SACAgent
from agents.toy_env import ToySJFEnv
from config import EnvConfig, RunConfig, SACConfig, UserError, WorkloadConfig
from env.gym_env import GPUClusterEnv

torch.set_num_threads(1)


def test_n_step_return_and_discount_follow_simulated_time():
    # gamma 0.5 per 100 s. Steps: r=1 taking 100 s, r=2 taking 0 s, r=4 taking 200 s; n = 3.
    # return = 1 + 0.5^(100/100) * 2 + 0.5^((100+0)/100) * 4 = 1 + 1 + 2 = 4; bootstrap 0.5^(300/100) = 0.125.
    # Second transition (flushed at the end): 2 + 0.5^0 * 4 = 6, discount 0.5^2 = 0.25; third: 4, 0.25.
    b = ReplayBuffer(8, 1, 2, np.random.default_rng(0), 0.5, n_step=3, discount_tau_s=100.0)
    mask = np.array([True, True])
    for k, (r, dt) in enumerate([(1.0, 100.0), (2.0, 0.0), (4.0, 200.0)]):
        b.add(np.array([k], dtype=np.float32), 0, r, np.array([k + 1.0]), k == 2, False, mask, mask, dt)
    assert b.rewards[:3].tolist() == [4.0, 6.0, 4.0]
    assert b.discounts[:3].tolist() == [0.125, 0.25, 0.25]
    # starts at one instant cost no discount at all (a per-step gamma would give 0.5 per start)
    assert b.step_discount(0.0) == 1.0 and b.step_discount(3600.0) == 0.5**36
    per_step = ReplayBuffer(8, 1, 2, np.random.default_rng(0), 0.5)
    assert per_step.step_discount(None) == 0.5 and per_step.step_discount(1e6) == 0.5
    with pytest.raises(ValueError, match=r"needs each step's elapsed simulated seconds"):
        b.add(np.zeros(1), 0, 0.0, np.zeros(1), False, False, mask, mask)


def _rollout(reward: str):
    cfg = RunConfig(
        workload=WorkloadConfig(difficulty="easy", num_jobs=80),
        env=dataclasses.replace(EnvConfig(), reward=reward),
    )
    e = GPUClusterEnv(cfg)
    rng = np.random.default_rng(3)
    _, info = e.reset(seed=3, options={"scenario_seed": 4})
    t0 = info["sim_time_s"]
    rewards, starts_s, elapsed = [], [], []
    done = truncated = False
    while not (done or truncated):
        starts_s.append(e.sim.now_s)
        _, r, done, truncated, info = e.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        rewards.append(r)
        elapsed.append(info["elapsed_s"])
        assert info["sim_time_s"] == pytest.approx(starts_s[-1] + elapsed[-1], abs=1e-9)
    return e, t0, np.array(rewards), np.array(starts_s), np.array(elapsed)


@pytest.mark.parametrize("reward", ["jct", "jct_at_start", "delay"])
def test_elapsed_times_add_up_and_the_discounted_return_is_the_time_discounted_sum(reward):
    e, t0, rewards, starts_s, elapsed = _rollout(reward)
    assert (elapsed >= 0).all() and (elapsed == 0).any()  # several starts at one instant take no time
    assert float(np.sum(elapsed)) == pytest.approx(e.sim.now_s - t0, rel=1e-9)
    gamma, tau = 0.9, 3600.0
    # the n-step machinery over the whole episode: one transition from the first step, its return and discount
    n = len(rewards)
    b = ReplayBuffer(n + 1, e.observation_space.shape[0], e.action_space.n, np.random.default_rng(0), gamma,
                     n_step=n, discount_tau_s=tau)  # fmt: skip
    obs, mask = np.zeros(e.observation_space.shape, np.float32), np.ones(e.action_space.n, bool)
    for k, (r, dt) in enumerate(zip(rewards, elapsed, strict=True)):
        b.add(obs, 0, r, obs, k == n - 1, False, mask, mask, dt)
    expected = float(np.sum(rewards * gamma ** ((starts_s - starts_s[0]) / tau)))
    assert float(b.rewards[0]) == pytest.approx(expected, rel=1e-6)  # stored as float32
    discount = float(np.prod([b.step_discount(dt) for dt in elapsed]))
    assert discount == pytest.approx(gamma ** ((e.sim.now_s - starts_s[0]) / tau), rel=1e-9)
    # undiscounted, the jct return is -sum(JCT) / scale exactly (test_gym_env checks every reward's identity)
    if reward == "jct":
        r = e.sim.result("x", 4)
        done = np.asarray(r.status) == "completed"
        sum_jct = float(np.sum((r.end_s - np.array([j.arrival_s for j in r.jobs]))[done]))
        assert float(np.sum(rewards)) == pytest.approx(-sum_jct / 3600.0, rel=1e-9)


def _toy_sac(cfg: SACConfig, updates: int) -> list[float]:
    """Train SAC on ToySJFEnv with SJF demonstrations mixed into every batch; alpha after every update."""
    env = ToySJFEnv(window=4)
    spec = ObsSpec(4, env.job_feature_dim, env.context_dim)
    rng = np.random.default_rng(0)
    agent = SACAgent(cfg, spec, torch.device("cpu"), rng, torch.Generator().manual_seed(0),
                     torch.Generator().manual_seed(0), schedule_steps=updates * cfg.train_every)  # fmt: skip
    buffer, demos = agent.make_buffer(), agent.make_buffer()
    for target, sjf in ((demos, True), (buffer, False)):
        for seed in range(40):
            obs, info = env.reset(seed=seed)
            done = False
            while not done:
                mask = info["action_mask"]
                if sjf and not mask[-1]:
                    action = int(np.argmin(env.queue_s[: env.window]))
                else:
                    action = int(rng.choice(np.flatnonzero(mask)))
                nxt, r, done, trunc, info = env.step(action)
                target.add(obs, action, r, nxt, done, trunc, mask, info["action_mask"], info["elapsed_s"])
                obs, done = nxt, done or trunc
    alphas = []
    for u in range(updates):
        agent.update(buffer, u * cfg.train_every, demos)
        alphas.append(agent.alpha)
    return alphas


def test_sac_temperature_stays_bounded_on_the_toy_env():
    """The cloned policy is near-deterministic, below any positive entropy target, so an unbounded temperature
    keeps rising (0.38 -> 0.95 on the real env); the bound holds it at alpha_max."""
    cfg = SACConfig(demo_policy="sjf", learning_rate=3e-3, batch_size=32, demo_batch_size=32)
    unbounded = _toy_sac(dataclasses.replace(cfg, alpha_max=1e6, target_entropy_ratio=0.5), 600)
    assert max(unbounded) > 2 * cfg.alpha_max  # the failure the bound prevents
    bounded = _toy_sac(cfg, 600)
    assert max(bounded) <= cfg.alpha_max * (1 + 1e-6) and min(bounded) > 0


def test_behaviour_cloning_weight_decays_to_zero_on_schedule():
    # demo_weight 2, decay over 0.5 x 1000 steps: 2 at 0, 2 x (1 - 250/500) = 1 at 250, 0 from 500 on
    cfg = SACConfig(demo_weight=2.0, demo_decay_fraction=0.5)
    agent = SACAgent(cfg, ObsSpec(2, 2, 3), torch.device("cpu"), np.random.default_rng(0), torch.Generator(),
                     torch.Generator(), schedule_steps=1000)  # fmt: skip
    assert [agent.bc_weight(s) for s in (0, 250, 500, 900)] == [2.0, 1.0, 0.0, 0.0]
    assert agent.schedule_values(250) == {"alpha": pytest.approx(0.01), "bc_weight": 1.0}
    with pytest.raises(ValueError, match="alpha_init <= alpha_max"):
        SACAgent(dataclasses.replace(cfg, alpha_init=0.2), ObsSpec(2, 2, 3), torch.device("cpu"),
                 np.random.default_rng(0), torch.Generator(), torch.Generator(), schedule_steps=10)  # fmt: skip


def test_checkpoint_of_the_old_observation_is_a_clear_error(tmp_path):
    old = tmp_path / "d3qn_seed0_final.pt"
    save_checkpoint(old, {"format": 1, "algo": "d3qn"})
    with pytest.raises(UserError, match=r"checkpoint format 1, written before the observation.*Retrain it"):
        load_checkpoint(old)


class _FixedCritic(torch.nn.Module):
    """Twin critics that value every state's actions as `q_A` (a parameter, so the critic step still runs)."""

    def __init__(self, q_A: list[float]):
        super().__init__()
        self.q_A = torch.nn.Parameter(torch.tensor(q_A))

    def forward(self, obs_BD):
        q_BA = self.q_A.expand(obs_BD.shape[0], -1)
        return q_BA, q_BA


def test_q_filter_clones_only_demonstrations_the_critic_does_not_value_below_the_policy():
    """Critics value actions (slot 0, slot 1, WAIT) at (1, 0, 0); all three legal. The policy's expected value
    sum_a pi(a) Q(a) lies in (0, 1) since pi puts mass on every legal action. A demonstration of slot 0 (Q 1 >= it)
    is cloned, one of slot 1 (Q 0 < it) is not: half the demonstration rows are kept."""
    import copy

    from agents.replay import Batch

    spec = ObsSpec(2, 2, 3)
    agent = SACAgent(SACConfig(), spec, torch.device("cpu"), np.random.default_rng(0),
                     torch.Generator().manual_seed(0), torch.Generator(), schedule_steps=10)  # fmt: skip
    agent.critic = _FixedCritic([1.0, 0.0, 0.0])
    agent.critic_target = copy.deepcopy(agent.critic).requires_grad_(False)
    agent.critic_optimizer = torch.optim.Adam(agent.critic.parameters(), lr=0.0)
    agent._critic_params = list(agent.critic.parameters())
    agent._target_params = list(agent.critic_target.parameters())
    rows = 3  # one agent row, then demonstrations of slot 0 and slot 1
    obs = np.random.default_rng(1).random((rows, spec.obs_dim), dtype=np.float32)
    mask = np.ones((rows, spec.num_actions), dtype=np.bool_)
    batch = Batch(obs, np.array([2, 0, 1]), np.zeros(rows, np.float32), obs, np.ones(rows, np.float32),
                  np.ones(rows, np.float32), mask, mask, np.ones(rows, np.float32), np.arange(rows))  # fmt: skip
    assert float(agent._learn(batch, 1, 1.0, q_filter=True)["bc_kept"]) == 0.5
    assert float(agent._learn(batch, 1, 1.0, q_filter=False)["bc_kept"]) == 1.0
