"""Agent parts: masking never yields NaN or illegal actions; replay returns and priorities are exact."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from agents.d3qn import D3QNAgent
from agents.networks import (
    Actor,
    DuelingQNetwork,
    ObsSpec,
    TwinCritic,
    masked_argmax,
    masked_log_softmax,
    masked_mean,
)
from agents.replay import ReplayBuffer, SumTree
from agents.run_control import TRAIN_SEED_BASE, is_training_seed, training_episode_seed
from agents.sac import SACAgent, target_entropy
from agents.toy_env import ToySJFEnv
from config import D3QNConfig, SACConfig

torch.set_num_threads(1)

# ---- masking ----

mask_and_logits = st.integers(1, 12).flatmap(
    lambda n: st.tuples(
        arrays(np.bool_, n).filter(lambda m: m.any()),
        arrays(np.float32, n, elements=st.floats(-1e6, 1e6, width=32)),
    )
)


@settings(max_examples=200, deadline=None)
@given(mask_and_logits)
def test_masked_argmax_picks_the_best_legal_action(case):
    mask, values = case
    action = int(masked_argmax(torch.from_numpy(values)[None], torch.from_numpy(mask)[None])[0])
    assert mask[action]
    assert values[action] == values[mask].max()


@settings(max_examples=200, deadline=None)
@given(mask_and_logits)
def test_masked_softmax_is_a_finite_distribution_over_legal_actions(case):
    mask, logits = case
    probs, log_probs = masked_log_softmax(torch.from_numpy(logits)[None], torch.from_numpy(mask)[None])
    probs, log_probs = probs[0].numpy(), log_probs[0].numpy()
    assert np.isfinite(probs).all() and np.isfinite(log_probs).all()
    assert (probs[~mask] == 0.0).all()
    assert probs.sum() == pytest.approx(1.0, abs=1e-5)
    entropy = -(probs * log_probs).sum()
    assert 0.0 <= entropy + 1e-5 and entropy <= np.log(mask.sum()) + 1e-4


def test_single_legal_action_gets_probability_one_and_zero_entropy():
    mask = torch.tensor([[False, False, True, False]])
    probs, log_probs = masked_log_softmax(torch.tensor([[50.0, -3.0, -80.0, 1e8]]), mask)
    assert probs.tolist() == [[0.0, 0.0, 1.0, 0.0]]
    assert log_probs.tolist() == [[0.0, 0.0, 0.0, 0.0]]
    assert target_entropy(mask, 0.5).item() == 0.0


def test_masked_mean_ignores_illegal_actions():
    values = torch.tensor([[1.0, 1e9, 3.0]])
    assert masked_mean(values, torch.tensor([[True, False, True]])).item() == 2.0


def test_gradients_stay_finite_with_one_legal_action():
    spec = ObsSpec(window=3, job_feature_dim=2, context_dim=2)
    obs = torch.rand(4, spec.obs_dim)
    mask = torch.zeros(4, spec.num_actions, dtype=torch.bool)
    mask[:, -1] = True  # only WAIT
    actor = Actor(2, 2, 8)
    probs, log_probs = actor(obs, mask)
    (probs * log_probs).sum().backward()
    q = DuelingQNetwork(2, 2, 8)(obs, mask)
    q.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in actor.parameters() if p.grad is not None)
    assert torch.isfinite(q).all()


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 20), st.integers(0, 2**31 - 1))
def test_networks_score_any_window_and_never_pick_illegal(window, seed):
    """Slot weights are shared, so one network serves any K; greedy actions are always legal."""
    rng = np.random.default_rng(seed)
    spec = ObsSpec(window=window, job_feature_dim=3, context_dim=2)
    obs = torch.from_numpy(rng.normal(size=(8, spec.obs_dim)).astype(np.float32))
    mask = torch.from_numpy(rng.random((8, spec.num_actions)) < 0.3)
    mask[:, -1] |= ~mask.any(-1)
    for network in (DuelingQNetwork(3, 2, 8), Actor(3, 2, 8)):
        actions = network.greedy(obs, mask)
        assert mask.gather(1, actions[:, None]).all()
    q1, q2 = TwinCritic(3, 2, 8)(obs)
    assert q1.shape == q2.shape == (8, spec.num_actions)


def test_empty_slots_do_not_change_the_scores_of_the_others():
    """Appending empty (all-zero) slots leaves every job's score and WAIT unchanged: the pool skips them."""
    net = DuelingQNetwork(2, 2, 8).advantage
    jobs, ctx = torch.rand(1, 3 * 2) + 0.1, torch.rand(1, 2)
    scores3, _ = net(torch.cat([jobs, ctx], 1))
    scores5, _ = net(torch.cat([jobs, torch.zeros(1, 4), ctx], 1))
    torch.testing.assert_close(scores3[:, :3], scores5[:, :3])
    torch.testing.assert_close(scores3[:, -1], scores5[:, -1])


# ---- agent updates stay finite where only one action is legal ----


@pytest.mark.parametrize("algo", ["d3qn", "sac"])
def test_updates_are_finite_when_only_one_action_is_legal(algo):
    spec = ObsSpec(window=3, job_feature_dim=2, context_dim=2)
    rng = np.random.default_rng(0)
    cls, cfg = (
        (D3QNAgent, D3QNConfig(batch_size=16)) if algo == "d3qn" else (SACAgent, SACConfig(batch_size=16))
    )
    agent = cls(cfg, spec, torch.device("cpu"), rng, torch.Generator(), torch.Generator(), schedule_steps=100)
    buffer = agent.make_buffer()
    for i in range(40):
        mask = np.zeros(spec.num_actions, dtype=np.bool_)
        mask[i % spec.num_actions] = True  # exactly one legal action, varying
        next_mask = np.zeros_like(mask) if i % 5 == 0 else mask  # some terminal states report none
        obs = rng.random(spec.obs_dim, dtype=np.float32)
        buffer.add(obs, int(np.flatnonzero(mask)[0]), -1.0, obs, i % 5 == 0, False, mask, next_mask, 60.0)
        assert agent.act(obs, mask, 10**6) == int(np.flatnonzero(mask)[0])
    for _ in range(3):
        losses = agent.update(buffer, 10)
        assert all(np.isfinite(float(v)) for v in losses.values()), losses


# ---- replay ----


def make_buffer(
    n_step: int, gamma: float = 0.5, capacity: int = 16, prioritized: bool = False
) -> ReplayBuffer:
    return ReplayBuffer(
        capacity, 1, 2, np.random.default_rng(0), gamma, n_step=n_step, prioritized=prioritized
    )


def add_episode(buffer: ReplayBuffer, rewards: list[float], terminated: bool) -> None:
    mask = np.array([True, True])
    for t, reward in enumerate(rewards):
        last = t == len(rewards) - 1
        obs, next_obs = np.array([t], np.float32), np.array([t + 1], np.float32)
        buffer.add(obs, t % 2, reward, next_obs, terminated and last, not terminated and last, mask, mask)


def stored(buffer: ReplayBuffer) -> list[tuple[float, float, float, float, float]]:
    """(obs, n-step reward, next_obs, done, discount) of every stored transition, in insertion order."""
    n = len(buffer)
    return [
        (buffer.obs[i, 0], buffer.rewards[i], buffer.next_obs[i, 0], buffer.dones[i], buffer.discounts[i])
        for i in range(n)
    ]


def test_n_step_returns_by_hand_on_termination():
    buffer = make_buffer(n_step=3, gamma=0.5)
    add_episode(buffer, [1.0, 2.0, 4.0, 8.0], terminated=True)
    assert stored(buffer) == [
        (0, 1 + 0.5 * 2 + 0.25 * 4, 3, 0.0, 0.125),  # full 3-step sum, bootstraps from s3
        (1, 2 + 0.5 * 4 + 0.25 * 8, 4, 1.0, 0.125),  # reaches the terminal state: no bootstrap
        (2, 4 + 0.5 * 8, 4, 1.0, 0.25),
        (3, 8, 4, 1.0, 0.5),
    ]


def test_n_step_returns_by_hand_on_truncation_still_bootstrap():
    buffer = make_buffer(n_step=2, gamma=0.5)
    add_episode(buffer, [1.0, 2.0, 4.0], terminated=False)
    assert stored(buffer) == [(0, 2.0, 2, 0.0, 0.25), (1, 4.0, 3, 0.0, 0.25), (2, 4.0, 3, 0.0, 0.5)]


def test_one_step_buffer_stores_the_transition_as_given():
    buffer = make_buffer(n_step=1, gamma=0.9)
    add_episode(buffer, [3.0, 5.0], terminated=True)
    assert stored(buffer) == [(0, 3.0, 1, 0.0, np.float32(0.9)), (1, 5.0, 2, 1.0, np.float32(0.9))]


def test_ring_buffer_overwrites_the_oldest():
    buffer = make_buffer(n_step=1, capacity=4)
    add_episode(buffer, [float(r) for r in range(6)], terminated=True)
    assert len(buffer) == 4 and sorted(buffer.rewards.tolist()) == [2.0, 3.0, 4.0, 5.0]


def test_sum_tree_sums_and_finds():
    tree = SumTree(5)
    tree.set(np.arange(5), np.array([1.0, 2.0, 3.0, 4.0, 0.0]))
    assert tree.total == 10.0
    assert tree.find(np.array([0.0, 0.5, 1.5, 3.0, 3.01, 9.99])).tolist() == [0, 0, 1, 1, 2, 3]


def test_prioritized_sampling_is_proportional_with_exact_weights():
    buffer = make_buffer(n_step=1, capacity=8, prioritized=True)
    buffer.alpha, buffer.priority_eps = 1.0, 0.0
    add_episode(buffer, [0.0, 1.0, 2.0, 3.0], terminated=True)
    buffer.update_priorities(np.arange(4), np.array([1.0, 2.0, 3.0, 4.0]))
    counts = np.zeros(4)
    for _ in range(500):
        batch = buffer.sample(64, beta=0.5)
        counts += np.bincount(batch.indices_B, minlength=4)
    expected = np.array([0.1, 0.2, 0.3, 0.4])
    assert counts / counts.sum() == pytest.approx(expected, abs=0.01)
    weights = (4 * expected[batch.indices_B]) ** -0.5
    assert batch.weights_B == pytest.approx(weights / weights.max(), rel=1e-5)


def test_new_transitions_get_the_largest_priority():
    buffer = make_buffer(n_step=1, capacity=8, prioritized=True)
    add_episode(buffer, [0.0, 1.0], terminated=True)
    buffer.update_priorities(np.array([0, 1]), np.array([5.0, 0.1]))
    add_episode(buffer, [2.0], terminated=True)
    assert buffer.tree.leaves(np.array([2]))[0] == pytest.approx(buffer.tree.leaves(np.array([0]))[0])


def test_buffer_save_load_round_trip(tmp_path):
    buffer = make_buffer(n_step=1, prioritized=True)
    add_episode(buffer, [1.0, 2.0, 3.0], terminated=True)
    buffer.update_priorities(np.arange(3), np.array([1.0, 2.0, 3.0]))
    buffer.save(str(tmp_path / "r.npz"))
    copy = make_buffer(n_step=1, prioritized=True)
    copy.load(str(tmp_path / "r.npz"))
    assert stored(copy) == stored(buffer) and copy.pos == buffer.pos
    np.testing.assert_array_equal(copy.tree.nodes, buffer.tree.nodes)


# ---- the toy env follows the env contract; training seeds never meet evaluation seeds ----


def test_toy_env_follows_the_contract():
    env = ToySJFEnv(window=4)
    check_env(env, skip_render_check=True)
    assert ObsSpec.from_env(env) == ObsSpec(4, 2, 3)
    assert isinstance(env.action_space, gym.spaces.Discrete)
    obs, info = env.reset(seed=3)
    optimal = env.optimal_return()
    assert info["action_mask"].dtype == np.bool_ and info["action_mask"].any()
    _, _, _, _, info = env.step(env.window)  # WAIT while idle: illegal, a flagged no-op
    assert info["illegal_action"]
    total, done = 0.0, False
    while not done:  # shortest job first reaches the optimum
        mask = info["action_mask"]
        action = env.window if mask[-1] else int(np.argmin(env.queue_s[: env.window]))
        _, reward, terminated, truncated, info = env.step(action)
        total, done = total + reward, terminated or truncated
        assert info["action_mask"].any()
    assert terminated and total == pytest.approx(optimal)


def test_training_seeds_are_disjoint_from_evaluation_and_other_runs():
    assert training_episode_seed(0, 0) == TRAIN_SEED_BASE
    assert is_training_seed(training_episode_seed(7, 123)) and not is_training_seed(999_999_999)
    assert training_episode_seed(0, 999_999) < training_episode_seed(1, 0)
    with pytest.raises(ValueError):
        training_episode_seed(0, 1_000_000)
