"""MaskablePPO behind the training contract: learns the toy env, is deterministic (dummy == subproc envs), leaves
the global RNGs alone, and goes train -> checkpoint -> eval -> resume (and Ctrl-C -> resume) through the CLI."""

from __future__ import annotations

import dataclasses
import os
import random
import shlex
import signal
from pathlib import Path

import numpy as np
import torch
from test_agents import assert_same_networks, shortest_job_rate_and_return, toy_env

from agents.checkpoint import load_checkpoint
from agents.policy import AgentPolicy, load_policy
from agents.ppo import EpisodeStream, train_ppo
from agents.trainer import training_episode_seed
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
