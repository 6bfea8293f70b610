"""MaskablePPO behind the training contract: learns the toy env, is deterministic (dummy == subproc envs), leaves
the global RNGs alone, and goes train -> checkpoint -> eval -> resume (and Ctrl-C -> resume) through the CLI."""

from __future__ import annotations

import dataclasses
import os
import random
import shlex
import signal
import tempfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_agents import assert_same_networks, shortest_job_rate_and_return, toy_env

from agents.checkpoint import load_checkpoint
from agents.policy import AgentPolicy, load_policy
from agents.ppo import (
    EpisodeStream,
    RewardScaler,
    _rollout_buffer_class,
    ppo_config_from_dict,
    step_discounts,
    time_discounted_gae,
    train_ppo,
)
from agents.ppo_policy import start_or_wait
from agents.run_control import training_episode_seed
from config import PPOConfig
from env.gym_env import GPUClusterEnv
from main import main

torch.set_num_threads(1)

TOY_PPO = PPOConfig(n_steps=128, batch_size=64, n_epochs=4, num_envs=4, learning_rate=1e-3, ent_coef=0.0)
# tiny CLI runs: 20-job episodes, 2 envs x 128 steps per rollout
TINY = ["--difficulty", "easy", "--num_jobs", "20", "--no_progress"]


def toy_run(tmp_path: Path, cfg: PPOConfig, total_steps: int, **kwargs):
    kwargs = {"seed": 0, "checkpoint_every_episodes": 10**6, "progress": False, "device": "cpu"} | kwargs
    return train_ppo(
        toy_env, cfg, total_steps=total_steps, models_dir=str(tmp_path / "models"), run_dir=str(tmp_path / "run"),
        **kwargs,
    )  # fmt: skip


def test_ppo_learns_shortest_job_first_on_the_toy_env(tmp_path):
    result = toy_run(tmp_path, TOY_PPO, 4096)
    rate, mean_return, optimal_return = shortest_job_rate_and_return(load_policy(result.final_checkpoint))
    assert rate >= 0.9
    assert mean_return >= optimal_return * 1.02  # returns are negative: within 2 % of SJF


def test_ppo_training_writes_nothing_into_the_system_temp_dir(tmp_path, monkeypatch):
    """SB3's default logger makes an `SB3-<date>` folder in the temp dir per run; ours must not."""
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    toy_run(tmp_path, PPOConfig(n_steps=64, batch_size=32, n_epochs=1, num_envs=1), 64)
    assert list(temp.iterdir()) == []


def test_ppo_is_deterministic_for_a_seed_and_subproc_envs_give_the_same_run(tmp_path):
    cfg = PPOConfig(n_steps=64, batch_size=32, n_epochs=2, num_envs=2)
    a = toy_run(tmp_path / "a", cfg, 512)
    b = toy_run(tmp_path / "b", dataclasses.replace(cfg, vec_env="subproc"), 512)
    c = toy_run(tmp_path / "c", cfg, 512, seed=1)
    ca, cb, cc = (load_checkpoint(r.final_checkpoint) for r in (a, b, c))
    assert ca["global_step"] == cb["global_step"] == 512 and a.episode_returns == b.episode_returns
    assert_same_networks(ca, cb)
    assert not torch.equal(ca["agent"]["networks"]["policy"]["mlp_extractor.actor.slot_head.weight"],
                           cc["agent"]["networks"]["policy"]["mlp_extractor.actor.slot_head.weight"])  # fmt: skip


def test_ppo_leaves_the_global_random_generators_as_it_found_them(tmp_path):
    np.random.seed(123)
    torch.manual_seed(123)
    random.seed(123)
    expected = (np.random.random(), torch.rand(1).item(), random.random())
    np.random.seed(123)
    torch.manual_seed(123)
    random.seed(123)
    toy_run(tmp_path, PPOConfig(n_steps=64, batch_size=32, n_epochs=1, num_envs=2), 256)
    assert (np.random.random(), torch.rand(1).item(), random.random()) == expected


def test_each_vectorized_env_plays_its_own_sequence_of_training_scenarios():
    seeds: list[int] = []

    def recording(scenario_seed: int):
        seeds.append(scenario_seed)
        return toy_env(scenario_seed)

    stream = EpisodeStream(recording, seed=3, slot=1, num_slots=4, next_index=5)
    for _ in range(3):
        stream.reset()
    # slot 1 of 4 from index 5: episodes 5, 9, 13 (the env built for the first reset is used by it)
    assert seeds == [training_episode_seed(3, i) for i in (5, 9, 13)]
    assert stream.next_index == 17


def test_the_saved_ppo_policy_acts_like_the_live_one(tmp_path):
    rng = np.random.default_rng(1)
    obs_BD = rng.random((256, 4 * 2 + 3), dtype=np.float32)
    masks_BA = rng.random((256, 5)) < 0.5
    masks_BA[:, -1] |= ~masks_BA.any(-1)
    live: list[np.ndarray] = []

    def record(policy: AgentPolicy) -> dict[str, float]:
        live.append(policy.act_batch(obs_BD, masks_BA))
        return {}

    result = toy_run(tmp_path, TOY_PPO, 1024, eval_fn=record)
    loaded = load_policy(result.final_checkpoint)
    assert loaded.algo == "ppo" and loaded.global_step == 1024
    np.testing.assert_array_equal(loaded.act_batch(obs_BD, masks_BA), live[-1])
    assert masks_BA[np.arange(256), live[-1]].all()


def train_args(tmp_path: Path, *extra: str) -> list[str]:
    return ["--mode", "train", "--algo", "ppo", "--seed", "2", *TINY, "--num_envs", "2", "--models_dir",
            str(tmp_path / "models"), "--log_dir", str(tmp_path / "train"), *extra]  # fmt: skip


def test_ppo_train_checkpoint_eval_compare_and_resume_through_the_cli(tmp_path, capsys):
    models = tmp_path / "models"
    args = train_args(
        tmp_path, "--total_steps", "1024", "--validation_seeds", "200", "--checkpoint_every", "5"
    )
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "ppo seed 2" in out and "best on validation seeds 200" in out
    final = load_checkpoint(models / "ppo_seed2_final.pt")
    # 2 envs x 512 steps (the default n_steps) = one rollout of 1,024 steps
    assert final["algo"] == "ppo" and final["global_step"] == 1024 and final["config"]["num_envs"] == 2
    assert final["run_config"]["ppo"]["num_envs"] == 2 and (models / "ppo_seed2_best.pt").exists()

    for model in ("final", "best"):
        log = tmp_path / f"eval_{model}"
        assert main(["--mode", "eval", "--algo", "ppo", "--seed", "2", *TINY, "--models_dir", str(models),
                     "--model", model, "--log_dir", str(log)]) == 0  # fmt: skip
        assert (log / "jobs.csv").read_text().count("\n") == 21  # header + 20 jobs
    compare = tmp_path / "compare"
    assert main(["--mode", "compare", "--algos", "sjf,ppo", "--seeds", "5,6", "--seed", "2", *TINY,
                 "--models_dir", str(models), "--log_dir", str(compare)]) == 0  # fmt: skip
    assert (compare / "ppo_seed6" / "summary.csv").exists()

    resume = ["--mode", "train", "--algo", "ppo", "--seed", "2", "--resume", str(models / "ppo_seed2_final.pt"),
              "--total_steps", "2048", "--models_dir", str(models), "--no_progress"]  # fmt: skip
    assert main(resume) == 0
    extended = load_checkpoint(models / "ppo_seed2_final.pt")
    assert extended["global_step"] == 2048 and extended["run_id"] == final["run_id"]
    assert extended["episode"] > final["episode"] and extended["agent"]["schedule"]["num_updates"] == 2 * 4
    # every env went on with its next, unplayed scenario: slot i continued its own sequence
    assert all(b > a for a, b in zip(final["next_episode"], extended["next_episode"], strict=True))


def test_ppo_ctrl_c_writes_a_checkpoint_and_its_resume_command_finishes_the_run(
    tmp_path, monkeypatch, capsys
):
    real_step, calls = GPUClusterEnv.step, [0]

    def step_then_ctrl_c(self, action):
        calls[0] += 1
        result = real_step(self, action)
        if calls[0] == 300:  # inside the first rollout (2 envs x 512 steps): no update yet
            os.kill(os.getpid(), signal.SIGINT)
        return result

    handler_before = signal.getsignal(signal.SIGINT)
    with monkeypatch.context() as patch:
        patch.setattr(GPUClusterEnv, "step", step_then_ctrl_c)
        code = main(train_args(tmp_path, "--total_steps", "1024", "--validation_seeds", "none"))
    err = capsys.readouterr().err
    assert code == 130 and "Traceback" not in err and signal.getsignal(signal.SIGINT) is handler_before
    interrupted = load_checkpoint(tmp_path / "models" / "ppo_seed2_interrupted.pt")
    assert interrupted["global_step"] == 300 and interrupted["total_steps"] == 1024
    assert not (tmp_path / "models" / "ppo_seed2_final.pt").exists()
    hint = [line for line in err.splitlines() if line.startswith("resume with: ")]
    command = shlex.split(hint[0].removeprefix("resume with: "))
    assert main(command[2:]) == 0
    final = load_checkpoint(tmp_path / "models" / "ppo_seed2_final.pt")
    assert final["global_step"] >= 1024 and final["run_id"] == interrupted["run_id"]
    assert not (tmp_path / "models" / "ppo_seed2_interrupted.pt").exists()


# --- time-based discounting in GAE ---


def test_time_discounted_gae_on_a_hand_computed_three_step_rollout():
    # gamma 0.9 per 3,600 s; the steps took 0 s (a start), 1 h and 2 h: discounts 1, 0.9, 0.81
    discounts = step_discounts([0.0, 3600.0, 7200.0], 0.9, 3600.0)
    np.testing.assert_allclose(discounts, [1.0, 0.9, 0.81], rtol=1e-15)
    rewards = np.array([[-1.0], [-2.0], [-3.0]], dtype=np.float32)
    values = np.array([[-10.0], [-8.0], [-4.0]], dtype=np.float32)
    starts, last_value = np.zeros((3, 1), dtype=np.float32), np.array([-2.0], dtype=np.float32)
    not_done = np.array([False])
    adv, ret = time_discounted_gae(rewards, values, discounts[:, None], starts, last_value, not_done, 0.5)
    # delta2 = -3 + 0.81 x -2 + 4 = -0.62                  A2 = -0.62
    # delta1 = -2 + 0.9 x -4 + 8 = 2.4                     A1 = 2.4 + 0.9 x 0.5 x -0.62 = 2.121
    # delta0 = -1 + 1 x -8 + 10 = 1                        A0 = 1 + 1 x 0.5 x 2.121 = 2.0605
    np.testing.assert_allclose(adv[:, 0], [2.0605, 2.121, -0.62], rtol=1e-6)
    np.testing.assert_allclose(ret[:, 0], [2.0605 - 10, 2.121 - 8, -0.62 - 4], rtol=1e-6)
    # lambda 1: the return is the time-discounted sum of rewards plus the discounted bootstrap:
    # R2 = -3 + 0.81 x -2 = -4.62, R1 = -2 + 0.9 x -4.62 = -6.158, R0 = -1 + 1 x -6.158 = -7.158
    _, mc = time_discounted_gae(rewards, values, discounts[:, None], starts, last_value, not_done, 1.0)
    np.testing.assert_allclose(mc[:, 0], [-7.158, -6.158, -4.62], rtol=1e-6)
    # step 2 starts a new episode: step 1 ended its episode, so nothing after it counts:
    # A1 = delta1 = -2 - (-8) = 6, A0 = 1 + 0.5 x 6 = 4
    starts[2] = 1.0
    adv, _ = time_discounted_gae(rewards, values, discounts[:, None], starts, last_value, not_done, 0.5)
    np.testing.assert_allclose(adv[:, 0], [4.0, 6.0, -0.62], rtol=1e-6)
    # the rollout's last step ended its episode: no bootstrap from last_value: A2 = -3 + 4 = 1
    adv, _ = time_discounted_gae(
        rewards, values, discounts[:, None], starts, last_value, np.array([True]), 0.5
    )
    assert adv[2, 0] == 1.0


def plain_gae(rewards, values, discounts, starts, last_values, dones, lam):
    """A second, plain implementation: per env, A_t = sum_k (prod_{j<k} d_{t+j} lam) delta_{t+k} over the steps
    of t's episode inside the rollout, with delta_t = r_t + d_t V(s_t+1) [not the episode's end] - V(s_t)."""
    T, N = rewards.shape
    adv = np.zeros((T, N))
    for n in range(N):
        ends = [t == T - 1 and bool(dones[n]) or t < T - 1 and bool(starts[t + 1, n]) for t in range(T)]
        nxt = [last_values[n] if t == T - 1 else values[t + 1, n] for t in range(T)]
        delta = [
            rewards[t, n] + (0.0 if ends[t] else discounts[t, n] * nxt[t]) - values[t, n] for t in range(T)
        ]
        for t in range(T):
            weight, k = 1.0, t
            while True:
                adv[t, n] += weight * delta[k]
                if ends[k] or k == T - 1:
                    break
                weight *= discounts[k, n] * lam
                k += 1
    return adv, adv + values


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 7), st.integers(1, 3), st.floats(0.0, 1.0), st.integers(0, 2**32 - 1))
def test_time_discounted_gae_equals_a_plain_sum_over_each_episode(T, N, lam, seed):
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(T, N)).astype(np.float32)
    values = rng.normal(size=(T, N)).astype(np.float32)
    elapsed = rng.choice([0.0, 30.0, 3600.0, 50_000.0], size=(T, N))
    discounts = 0.9 ** (elapsed / 3600.0)
    starts = (rng.random((T, N)) < 0.3).astype(np.float32)
    last, dones = rng.normal(size=N).astype(np.float32), rng.random(N) < 0.3
    adv, ret = time_discounted_gae(rewards, values, discounts, starts, last, dones, lam)
    want_adv, want_ret = plain_gae(rewards, values, discounts, starts, last, dones, lam)
    np.testing.assert_allclose(adv, want_adv, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ret, want_ret, rtol=1e-4, atol=1e-4)


def test_per_step_discounting_is_exactly_sb3s_gae():
    from sb3_contrib.common.maskable.buffers import MaskableRolloutBuffer

    rng = np.random.default_rng(7)
    space = gym.spaces.Box(0.0, 1.0, (3,), np.float32)
    sb3 = MaskableRolloutBuffer(16, space, gym.spaces.Discrete(4), n_envs=3, gamma=0.99, gae_lambda=0.95)
    ours = _rollout_buffer_class()(16, space, gym.spaces.Discrete(4), n_envs=3, gamma=0.99, gae_lambda=0.95)
    for buffer in (sb3, ours):
        buffer.reset()
    for name in ("rewards", "values"):
        data = rng.normal(scale=100.0, size=(16, 3)).astype(np.float32)
        setattr(sb3, name, data.copy())
        setattr(ours, name, data.copy())
    sb3.episode_starts = ours.episode_starts = (rng.random((16, 3)) < 0.2).astype(np.float32)
    last, dones = torch.tensor(rng.normal(size=(3, 1)), dtype=torch.float32), np.array([True, False, False])
    # discount_tau_s 0: every step's discount is gamma, which the buffer holds where nothing was written
    ours.discounts[:] = step_discounts([None] * 3, 0.99, 0.0)
    sb3.compute_returns_and_advantage(last, dones)
    ours.compute_returns_and_advantage(last, dones)
    assert np.array_equal(sb3.advantages, ours.advantages) and np.array_equal(sb3.returns, ours.returns)


def test_the_rollout_buffer_gets_each_steps_time_discount(tmp_path, monkeypatch):
    seen: list[tuple[np.ndarray, np.ndarray]] = []
    buffer_class = _rollout_buffer_class()
    real = buffer_class.compute_returns_and_advantage

    def record(self, last_values, dones):
        seen.append((self.discounts.copy(), self.rewards.copy()))
        return real(self, last_values, dones)

    elapsed: list[float] = []
    real_step = EpisodeStream.step

    def step(self, action):
        result = real_step(self, action)
        elapsed.append(result[4]["elapsed_s"])
        return result

    monkeypatch.setattr(buffer_class, "compute_returns_and_advantage", record)
    monkeypatch.setattr(EpisodeStream, "step", step)
    cfg = PPOConfig(n_steps=32, batch_size=32, n_epochs=1, num_envs=1, discount_tau_s=60.0)
    toy_run(tmp_path, cfg, 32)
    assert len(seen) == 1 and len(elapsed) == 32 and max(elapsed) > 0 and min(elapsed) == 0
    np.testing.assert_array_equal(seen[0][0][:, 0], 0.9 ** (np.array(elapsed) / 60.0))


def test_time_discounting_needs_elapsed_seconds_and_a_tau_of_at_least_zero(tmp_path):
    with pytest.raises(ValueError, match="elapsed simulated seconds"):
        step_discounts([3.0, None], 0.9, 3600.0)
    with pytest.raises(ValueError, match="discount_tau_s must be >= 0"):
        toy_run(tmp_path, PPOConfig(discount_tau_s=-1.0), 32)


def test_a_checkpoint_from_before_time_discounting_keeps_discounting_per_step():
    old = {k: v for k, v in dataclasses.asdict(PPOConfig(gamma=0.99)).items() if k != "discount_tau_s"}
    assert ppo_config_from_dict(old) == PPOConfig(gamma=0.99, discount_tau_s=0.0)
    assert ppo_config_from_dict(dataclasses.asdict(PPOConfig())) == PPOConfig()


def test_the_deterministic_action_waits_only_where_waiting_is_likelier_than_starting_any_job():
    logits = torch.tensor([[1.0, 1.0, 1.0, 2.0]] * 4)
    mask = torch.tensor([[True, True, True, True], [True, True, False, True], [True, False, True, False],
                         [False, False, False, True]])  # fmt: skip
    # row 0: P(WAIT) = e^2 / (3e + e^2) = 7.389 / 15.544 = 0.475 < 1/2: start the likeliest job (slot 0, first of
    #        the tie), although WAIT is the argmax; row 1: 2 legal slots, e^2 / (2e + e^2) = 0.576 > 1/2: WAIT;
    # row 2: WAIT illegal: the likeliest legal slot; row 3: no slot legal: WAIT
    assert start_or_wait(logits, mask).tolist() == [0, 3, 0, 3]


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 6), st.integers(0, 2**32 - 1))
def test_the_deterministic_action_matches_a_plain_probability_rule(K, seed):
    rng = np.random.default_rng(seed)
    logits = rng.normal(scale=3.0, size=(16, K + 1))
    mask = rng.random((16, K + 1)) < 0.6
    mask[~mask.any(-1), -1] = True
    got = start_or_wait(torch.tensor(logits, dtype=torch.float32), torch.tensor(mask)).tolist()
    for row, action in enumerate(got):
        legal = np.flatnonzero(mask[row])
        probs = np.exp(logits[row, legal] - logits[row, legal].max())
        probs /= probs.sum()
        p_wait = probs[-1] if legal[-1] == K else 0.0
        slots = legal[legal < K]
        if abs(p_wait - 0.5) < 1e-5:
            continue  # a tie within float32 rounding
        if p_wait > 0.5 or len(slots) == 0:
            assert action == K
        else:
            assert action == slots[np.argmax(logits[row, slots])]


def test_rewards_are_divided_by_the_running_std_of_the_time_discounted_return():
    from stable_baselines3.common.running_mean_std import RunningMeanStd

    scaler, reference = RewardScaler(2), RunningMeanStd(shape=())
    # step 1: rewards -1, -2; env 0's step took half a discount, env 1's episode ends: returns G = [-1, -2]
    first = scaler.scale(np.array([-1.0, -2.0]), np.array([0.5, 1.0]), np.array([False, True]))
    reference.update(np.array([-1.0, -2.0]))
    np.testing.assert_array_equal(first, np.array([-1.0, -2.0]) / np.sqrt(reference.var + 1e-8))
    # step 2: env 0: G = 0.5 x -1 + -4 = -4.5; env 1 starts over: G = -3
    second = scaler.scale(np.array([-4.0, -3.0]), np.array([1.0, 1.0]), np.array([False, False]))
    reference.update(np.array([-4.5, -3.0]))
    np.testing.assert_array_equal(second, np.array([-4.0, -3.0]) / np.sqrt(reference.var + 1e-8))
    # a checkpoint's moments give the same scale after a resume (the returns restart with fresh episodes)
    resumed = RewardScaler(2, scaler.state())
    assert resumed.state() == scaler.state() and not resumed.returns_N.any()


def test_a_truncated_step_bootstraps_with_its_own_time_discount(tmp_path, monkeypatch):
    from sb3_contrib import MaskablePPO

    from agents.toy_env import ToySJFEnv

    models, stored, steps = [], [], []
    real_collect, real_step = MaskablePPO.collect_rollouts, EpisodeStream.step
    buffer_class = _rollout_buffer_class()
    real_gae = buffer_class.compute_returns_and_advantage

    def collect(self, *args, **kwargs):
        models.append(self)
        return real_collect(self, *args, **kwargs)

    def gae(self, last_values, dones):
        obs = torch.tensor(np.stack([s[1] for s in steps]), dtype=torch.float32)
        with torch.no_grad():
            values = models[0].policy.predict_values(obs)[:, 0].numpy()
        stored.append((self.rewards[:, 0].copy(), values))
        return real_gae(self, last_values, dones)

    def step(self, action):
        result = real_step(self, action)
        steps.append((result[1], result[0], result[3], result[4]["elapsed_s"]))
        return result

    monkeypatch.setattr(MaskablePPO, "collect_rollouts", collect)
    monkeypatch.setattr(buffer_class, "compute_returns_and_advantage", gae)
    monkeypatch.setattr(EpisodeStream, "step", step)
    cfg = PPOConfig(
        n_steps=8, batch_size=8, n_epochs=1, num_envs=1, discount_tau_s=60.0, normalize_reward=False
    )
    train_ppo(lambda seed: ToySJFEnv(window=4, max_steps=3), cfg, seed=0, total_steps=8,
              models_dir=str(tmp_path / "m"), run_dir=str(tmp_path / "r"), progress=False, device="cpu")  # fmt: skip
    rewards, values = stored[0]
    truncated = [i for i, s in enumerate(steps) if s[2]]
    assert truncated == [2, 5]  # episodes of 3 steps
    for i, (raw, _, trunc, elapsed) in enumerate(steps):
        # stored = raw reward + (a truncated step only) its discount 0.9^(elapsed / 60 s) x V(last observation)
        want = raw + (0.9 ** (elapsed / 60.0) * values[i] if trunc else 0.0)
        assert rewards[i] == pytest.approx(want, rel=1e-5, abs=1e-6)
    # and SB3's own gamma x V would have differed: the correction was exercised
    assert any(abs((0.9 ** (steps[i][3] / 60.0) - 0.9) * values[i]) > 1e-4 for i in truncated)
