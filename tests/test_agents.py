"""Agents learn a toy env with a known optimum; checkpoints reload to the same actions and resume exactly."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from agents.checkpoint import load_checkpoint, replay_path
from agents.d3qn import linear_schedule
from agents.demos import collect_demonstrations
from agents.policy import AgentPolicy, load_policy
from agents.replay import ReplayBuffer
from agents.run_control import TRAIN_SEED_BASE, demonstration_seeds, is_training_seed, training_episode_seed
from agents.toy_env import ToySJFEnv
from agents.trainer import train
from config import D3QNConfig, RunConfig, SACConfig

torch.set_num_threads(1)

EPISODE_STEPS = 8  # ToySJFEnv(window=4): 4 starts + 4 WAITs, always
# settings that learn the toy env in a few thousand steps (the defaults are sized for the real env)
TOY_D3QN = D3QNConfig(
    demo_policy="",
    gamma=0.99,
    learning_rate=1e-3,
    buffer_size=20_000,
    learning_starts=500,
    train_every=2,
    target_update_every=200,
    eps_fraction=0.5,
)
TOY_SAC = SACConfig(
    demo_policy="", gamma=0.99, learning_rate=1e-3, buffer_size=20_000, learning_starts=500, train_every=2
)
EVAL_SEEDS = range(100)  # below TRAIN_SEED_BASE: never trained on


def toy_env(scenario_seed: int) -> ToySJFEnv:
    return ToySJFEnv(window=4)


def run(tmp_path: Path, algo: str, cfg, total_steps: int, **kwargs):
    kwargs = {"seed": 0, "checkpoint_every_episodes": 10**6, "progress": False, "device": "cpu"} | kwargs
    models_dir, run_dir = str(tmp_path / "models"), str(tmp_path / "runs" / algo)
    return train(
        algo, toy_env, cfg, total_steps=total_steps, models_dir=models_dir, run_dir=run_dir, **kwargs
    )


def assert_same_networks(a: dict, b: dict) -> None:
    """Every network (state dict or tensor) in checkpoint `a` equals the one in checkpoint `b`, weight for weight."""
    for name, state in a["agent"]["networks"].items():
        other = b["agent"]["networks"][name]
        if isinstance(state, torch.Tensor):
            assert torch.equal(state, other), name
        else:
            assert all(torch.equal(state[key], other[key]) for key in state), name


def shortest_job_rate_and_return(policy: AgentPolicy) -> tuple[float, float, float]:
    """(share of decision states with >= 2 jobs where the policy starts the shortest, return, SJF return)."""
    hits = decisions = 0
    total = optimal = 0.0
    env = toy_env(0)
    for seed in EVAL_SEEDS:
        obs, info = env.reset(seed=seed)
        optimal += env.optimal_return()
        done = False
        while not done:
            mask = info["action_mask"]
            action = policy.act(obs, mask)
            assert mask[action], "a greedy policy chose an illegal action"
            if mask[:-1].sum() >= 2:
                decisions += 1
                hits += action == int(np.argmin(env.queue_s[: env.window]))
            obs, reward, terminated, truncated, info = env.step(action)
            total += reward
            done = terminated or truncated
    return hits / decisions, total / len(EVAL_SEEDS), optimal / len(EVAL_SEEDS)


@pytest.mark.parametrize(
    ("algo", "cfg"),
    [
        ("d3qn", TOY_D3QN),
        ("d3qn", dataclasses.replace(TOY_D3QN, n_step=3, prioritized=True)),
        ("sac", TOY_SAC),
    ],
    ids=["d3qn", "d3qn-3step-per", "sac"],
)
def test_agent_learns_shortest_job_first(tmp_path, algo, cfg):
    result = run(tmp_path, algo, cfg, 4000)
    rate, mean_return, optimal_return = shortest_job_rate_and_return(load_policy(result.final_checkpoint))
    assert rate >= 0.9
    assert mean_return >= optimal_return * 1.02  # returns are negative: within 2 % of SJF


@pytest.mark.parametrize(("algo", "cfg"), [("d3qn", TOY_D3QN), ("sac", TOY_SAC)])
def test_saved_policy_acts_like_the_trained_one(tmp_path, algo, cfg):
    rng = np.random.default_rng(1)
    obs_BD = rng.random((256, 4 * 2 + 3), dtype=np.float32)
    masks_BA = rng.random((256, 5)) < 0.5
    masks_BA[:, -1] |= ~masks_BA.any(-1)
    cfg = dataclasses.replace(cfg, learning_starts=200)
    live_actions = []  # eval_fn sees the live network right after each checkpoint is written

    def record_live_actions(policy: AgentPolicy) -> dict[str, float]:
        live_actions.append(policy.act_batch(obs_BD, masks_BA))
        return {}

    result = run(tmp_path, algo, cfg, 600, eval_fn=record_live_actions)
    loaded = load_policy(result.final_checkpoint)
    assert loaded.algo == algo and loaded.config == dataclasses.asdict(cfg)
    np.testing.assert_array_equal(loaded.act_batch(obs_BD, masks_BA), live_actions[-1])
    assert masks_BA[np.arange(256), live_actions[-1]].all()
    assert [loaded.act(obs, mask) for obs, mask in zip(obs_BD[:8], masks_BA[:8], strict=True)] == list(
        live_actions[-1][:8]
    )


@pytest.mark.parametrize(("algo", "cfg"), [("d3qn", TOY_D3QN), ("sac", TOY_SAC)])
def test_resume_continues_exactly_where_training_stopped(tmp_path, algo, cfg):
    """40 episodes, then a resume to 600 steps == 600 steps in one go, weight for weight."""
    cfg = dataclasses.replace(cfg, learning_starts=100)
    if algo == "d3qn":  # constant epsilon: the two runs' schedule horizons (600 vs 320 steps) must not matter
        cfg = dataclasses.replace(cfg, eps_start=0.2, eps_end=0.2)
    whole = run(tmp_path / "whole", algo, cfg, 600)
    first = run(tmp_path / "split", algo, cfg, 40 * EPISODE_STEPS)
    assert Path(replay_path(first.final_checkpoint)).exists()
    second = run(tmp_path / "split", algo, cfg, 600, resume=first.final_checkpoint)
    assert second.global_step == 600 and second.episodes == whole.episodes
    assert len(second.episode_returns) == whole.episodes - 40
    a, b = load_checkpoint(whole.final_checkpoint), load_checkpoint(second.final_checkpoint)
    assert b["global_step"] == 600
    # the schedule horizons are the first run's (600 vs 320 steps; epsilon is constant here), all else equal
    assert a["agent"]["schedule"]["schedule_steps"] == 600
    assert b["agent"]["schedule"]["schedule_steps"] == 40 * EPISODE_STEPS
    same = {key: value for key, value in a["agent"]["schedule"].items() if not key.endswith("_steps")}
    assert same == {key: b["agent"]["schedule"][key] for key in same}
    assert_same_networks(a, b)


def test_resume_continues_the_epsilon_schedule_and_step_count(tmp_path):
    # eps decays over 2 x the first run's 300 steps, so it is still mid-decay when the run stops
    cfg = dataclasses.replace(TOY_D3QN, learning_starts=100, eps_fraction=2.0)
    first = run(tmp_path, "d3qn", cfg, 300)
    checkpoint = load_checkpoint(first.final_checkpoint)
    assert checkpoint["global_step"] == 300
    assert checkpoint["schedule_values"]["epsilon"] == pytest.approx(linear_schedule(1.0, 0.05, 600, 300))
    second = run(tmp_path, "d3qn", cfg, 600, resume=first.final_checkpoint, checkpoint_every_episodes=10)
    assert second.global_step == 600
    assert second.episodes > first.episodes and len(second.checkpoints) >= 2
    for path in second.checkpoints:
        checkpoint = load_checkpoint(path)
        step = checkpoint["global_step"]
        assert 300 < step <= 600
        assert checkpoint["schedule_values"]["epsilon"] == pytest.approx(
            linear_schedule(1.0, 0.05, 600, step)
        )
        assert checkpoint["agent"]["schedule"]["num_updates"] > 0  # the saved buffer: no second warm-up
    assert load_checkpoint(second.final_checkpoint)["schedule_values"]["epsilon"] == pytest.approx(0.05)


def test_checkpoints_logs_and_scenario_seeds(tmp_path):
    seeds: list[int] = []

    def recording_env(scenario_seed: int) -> ToySJFEnv:
        seeds.append(scenario_seed)
        return toy_env(scenario_seed)

    result = train(
        "sac",
        recording_env,
        RunConfig(sac=dataclasses.replace(TOY_SAC, learning_starts=50)),
        seed=3,
        total_steps=5 * EPISODE_STEPS,
        device="auto",
        models_dir=str(tmp_path / "models"),
        run_dir=str(tmp_path / "run"),
        resume=None,
        checkpoint_every_episodes=2,
        progress=False,
        eval_fn=lambda policy: {"mean_return": 1.0},
    )
    assert seeds[:5] == [TRAIN_SEED_BASE + 3 * 1_000_000 + episode for episode in range(5)]
    names = sorted(Path(p).name for p in result.checkpoints)
    assert names == ["sac_seed3_ep2.pt", "sac_seed3_ep4.pt", "sac_seed3_final.pt"]
    assert [step for step, _ in result.eval_history] == [16, 32, 40]
    replays = sorted(p.name for p in (tmp_path / "models").glob("*.replay.npz"))
    assert replays == ["sac_seed3_final.replay.npz"]  # only the newest buffer is kept
    checkpoint = load_checkpoint(result.final_checkpoint)
    assert checkpoint["run_config"]["sac"]["learning_starts"] == 50
    assert checkpoint["rng"]["numpy"]["bit_generator"] == "PCG64"
    assert list((tmp_path / "run").glob("events.out.tfevents.*"))
    assert not list((tmp_path / "models").glob("*.tmp*"))


def toy_sjf(env) -> int:
    """The toy env's optimal demonstrator: start the shortest visible job when the machine is idle."""
    toy = env.unwrapped
    if toy.running_left_s > 0 or not toy.queue_s:
        return toy.window
    return int(np.argmin(toy.queue_s[: toy.window]))


DEMO_SETTINGS = {"demo_policy": "toy-sjf", "demo_episodes": 20, "demo_pretrain_updates": 1500}


@pytest.mark.parametrize(("algo", "cfg"), [("d3qn", TOY_D3QN), ("sac", TOY_SAC)])
def test_pretraining_on_demonstrations_alone_reproduces_the_demonstrator(tmp_path, algo, cfg):
    """No RL step to speak of (16 env steps, before learning starts): the policy comes from the demos."""
    cfg = dataclasses.replace(cfg, **DEMO_SETTINGS)
    result = run(tmp_path, algo, cfg, 2 * EPISODE_STEPS, demonstrator=toy_sjf)
    rate, mean_return, optimal_return = shortest_job_rate_and_return(load_policy(result.final_checkpoint))
    assert rate >= 0.95
    assert mean_return >= optimal_return * 1.01


def test_demonstrations_are_required_collected_deterministically_and_apart_from_agent_episodes(tmp_path):
    cfg = dataclasses.replace(TOY_D3QN, **DEMO_SETTINGS)
    with pytest.raises(ValueError, match="needs a demonstrator"):
        run(tmp_path / "none", "d3qn", cfg, 8)
    seeds = demonstration_seeds(0, 20)
    assert not set(seeds) & {training_episode_seed(0, n) for n in range(10_000)}
    assert all(is_training_seed(s) for s in seeds) and len(set(seeds)) == 20

    def collect():
        def make_buffer(capacity):
            return ReplayBuffer(capacity, 4 * 2 + 3, 5, np.random.default_rng(0), 0.99, n_step=3)

        return collect_demonstrations(toy_env, toy_sjf, seeds, make_buffer)

    (first, returns), (second, _) = collect(), collect()
    assert len(first) == 20 * EPISODE_STEPS  # every step of every episode, n-step tails flushed
    np.testing.assert_array_equal(first.obs[: len(first)], second.obs[: len(second)])
    np.testing.assert_array_equal(first.actions[: len(first)], second.actions[: len(second)])
    optimal = []
    for seed in seeds:
        env = toy_env(seed)
        env.reset(seed=seed)
        optimal.append(env.optimal_return())
    assert returns == pytest.approx(optimal)  # the demonstrator is SJF, optimal here


@pytest.mark.parametrize(("algo", "cfg"), [("d3qn", TOY_D3QN), ("sac", TOY_SAC)])
def test_resume_with_demonstrations_reproduces_the_uninterrupted_run(tmp_path, algo, cfg):
    cfg = dataclasses.replace(
        cfg,
        learning_starts=100,
        demo_pretrain_updates=200,
        **{k: v for k, v in DEMO_SETTINGS.items() if k != "demo_pretrain_updates"},
    )
    if algo == "d3qn":
        cfg = dataclasses.replace(cfg, eps_start=0.2, eps_end=0.2)
    else:  # like epsilon above, SAC's behaviour-cloning decay runs over the first run's target: keep it flat
        cfg = dataclasses.replace(cfg, demo_decay_fraction=math.inf)
    whole = run(tmp_path / "whole", algo, cfg, 400, demonstrator=toy_sjf)
    first = run(tmp_path / "split", algo, cfg, 20 * EPISODE_STEPS, demonstrator=toy_sjf)
    second = run(tmp_path / "split", algo, cfg, 400, resume=first.final_checkpoint, demonstrator=toy_sjf)
    a, b = load_checkpoint(whole.final_checkpoint), load_checkpoint(second.final_checkpoint)
    assert_same_networks(a, b)
