"""The score env (GPUClusterScore-v0): API contract, the return identity, heuristic scores through the env equal
the native policy's run, determinism, and run_with_scorer."""

from __future__ import annotations

import dataclasses
from dataclasses import replace

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import env as _env_package  # noqa: F401  (registers GPUClusterScore-v0)
from cli.runner import run_heuristic
from config import MixConfig, PolicyConfig, RunConfig, SimConfig, WorkloadConfig
from env.score_env import (
    CONTEXT_FEATURES,
    GPUClusterScoreEnv,
    episode_score_env_factory,
    run_scores_in_env,
    run_with_scorer,
)
from scenario.build import build_scenario
from scenario.mixtures import mixture_scenario
from schedulers.score_features import NUM_FEATURES
from schedulers.score_rounds import LAS_SPEED_WEIGHTS, LinearScorer
from sim.job import Job, Workload
from sim.records import Runs
from tests.test_throughput import needs_gavel

LAS_SPEED = LinearScorer.from_named(LAS_SPEED_WEIGHTS)


def small_config(**workload) -> RunConfig:
    return RunConfig(
        workload=WorkloadConfig(difficulty="easy", **({"num_jobs": 120} | workload)),
        sim=SimConfig(runtime_info="estimate"),
    )


def assert_same_run(a, b) -> None:
    """Every recorded field of two RunResults is identical (the scheduler's name aside)."""
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if f.name == "scheduler":
            continue
        if isinstance(x, np.ndarray):
            assert np.array_equal(x, y, equal_nan=True), f.name
        elif isinstance(x, Runs):
            for g in dataclasses.fields(x):
                u, v = getattr(x, g.name), getattr(y, g.name)
                assert np.array_equal(u, v, equal_nan=True) if isinstance(u, np.ndarray) else u == v, g.name
        else:
            assert x == y, f.name


def test_registered_and_passes_check_env():
    e = gym.make("GPUClusterScore-v0", config=small_config(), max_rows=256)
    check_env(e.unwrapped, skip_render_check=True)
    obs, info = e.reset(seed=0)
    assert obs["rows"].shape == (256, NUM_FEATURES) and obs["context"].shape == (len(CONTEXT_FEATURES),)
    assert info["action_mask"].dtype == np.bool_ and info["action_mask"].sum() == info["num_rows"] > 0


def _random_rollout(env: GPUClusterScoreEnv, seed: int, scenario_seed: int):
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed, options={"scenario_seed": scenario_seed})
    trace = [obs["rows"].tobytes() + obs["mask"].tobytes() + obs["context"].tobytes()]
    rewards = []
    done = False
    while not done:
        assert env.observation_space.contains(obs)
        obs, r, done, truncated, info = env.step(rng.normal(size=env.max_rows))
        assert not truncated
        trace.append(obs["rows"].tobytes() + obs["mask"].tobytes() + obs["context"].tobytes())
        rewards.append(r)
    return trace, rewards


def test_return_is_exactly_minus_sum_jct_and_the_same_seed_gives_the_same_bytes():
    cfg = small_config()
    env = GPUClusterScoreEnv(cfg, max_rows=256)
    trace, rewards = _random_rollout(env, 1, 5)
    r = env.sim.result("random", 5, preemptive=True)
    assert all(s == "completed" for s in r.status) and r.preemptions.sum() > 0  # random scores preempt
    jct = r.end_s - np.array([j.arrival_s for j in r.jobs])
    assert sum(rewards) == pytest.approx(-jct.sum() / 3600.0, rel=1e-12, abs=1e-9)
    assert all(x <= 0 for x in rewards)
    again, rewards2 = _random_rollout(GPUClusterScoreEnv(cfg, max_rows=256), 1, 5)
    assert again == trace and rewards2 == rewards  # byte for byte
    other, _ = _random_rollout(GPUClusterScoreEnv(cfg, max_rows=256), 2, 5)
    assert other != trace  # other scores, other episode (same jobs)


@pytest.mark.parametrize(
    ("difficulty", "seed", "job_types", "round_s", "overhead_s", "on_arrival"),
    [
        ("medium", 200, None, 360.0, 60.0, False),
        ("hard", 201, None, 360.0, 60.0, False),
        pytest.param("easy", 3, "gavel", 120.0, 30.0, False, marks=needs_gavel),
        ("medium", 202, None, 360.0, 60.0, True),
    ],
)
def test_las_speed_scores_through_the_env_reproduce_the_native_run(
    difficulty, seed, job_types, round_s, overhead_s, on_arrival
):
    """las_speed run natively (the CLI's run) and its weights applied to the env's observation rows: identical
    RunResults (job records, runs, timeline); with rounds at arrivals too."""
    num_jobs = {"hard": 400, "easy": 80}.get(difficulty)
    cfg = RunConfig(
        workload=WorkloadConfig(difficulty=difficulty, num_jobs=num_jobs, job_types=job_types),
        sim=SimConfig(runtime_info="estimate", preempt_overhead_s=overhead_s),
        policy=PolicyConfig(round_s=round_s, round_on_arrival=on_arrival),
    )
    sc = build_scenario(cfg, seed)
    native = run_heuristic(sc, "las_speed", round_s=round_s, round_on_arrival=on_arrival)
    via_env, ret = run_scores_in_env(GPUClusterScoreEnv(cfg, scenario=sc), lambda obs: LAS_SPEED(obs["rows"]))
    assert native.preemptions.sum() > 0
    assert_same_run(native, via_env)
    assert_same_run(native, run_with_scorer(sc, LAS_SPEED, round_s=round_s, on_arrival=on_arrival))
    if on_arrival:  # (the rounds at arrivals change this schedule)
        assert native.preemptions.sum() != run_heuristic(sc, "las_speed", round_s=round_s).preemptions.sum()
    assert ret == pytest.approx(
        -(native.end_s - [j.arrival_s for j in native.jobs]).sum() / 3600.0, rel=1e-12
    )


def test_scores_of_padded_rows_are_ignored():
    cfg = small_config()
    sc = build_scenario(cfg, 4)

    def noisy_padding(obs):
        scores = LAS_SPEED(obs["rows"])
        pad = obs["mask"] == 0
        scores[pad] = np.linspace(-1e9, 1e9, int(pad.sum()))
        return scores

    plain, _ = run_scores_in_env(
        GPUClusterScoreEnv(cfg, scenario=sc, max_rows=300), lambda o: LAS_SPEED(o["rows"])
    )
    padded, _ = run_scores_in_env(GPUClusterScoreEnv(cfg, scenario=sc, max_rows=300), noisy_padding)
    assert_same_run(plain, padded)


def test_run_with_scorer_builds_the_scenario_of_a_config_and_seed():
    cfg = small_config()
    assert_same_run(
        run_with_scorer(cfg, LAS_SPEED, seed=9), run_heuristic(build_scenario(cfg, 9), "las_speed")
    )
    with pytest.raises(ValueError, match="seed"):
        run_with_scorer(cfg, LAS_SPEED)


def test_errors_are_clear():
    cfg = small_config()
    env = GPUClusterScoreEnv(cfg, max_rows=256)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(256))
    obs, info = env.reset(seed=0)
    with pytest.raises(ValueError, match="256 scores"):
        env.step(np.zeros(3))
    bad = np.zeros(256)
    bad[0] = np.nan
    with pytest.raises(ValueError, match="finite"):
        env.step(bad)
    with pytest.raises(RuntimeError, match="max_rows"):
        GPUClusterScoreEnv(cfg, max_rows=1).reset(seed=0)
    with pytest.raises(ValueError, match="max_rows"):
        GPUClusterScoreEnv(cfg, max_rows=0)
    with pytest.raises(ValueError, match="scenario_seed"):
        env.reset(options={"scenario_seed": -1})


def test_episode_of_only_rejected_jobs_ends_at_reset():
    cfg = replace(small_config(), cluster=replace(small_config().cluster, spec="1xT4:1"))
    sc = build_scenario(cfg, 0)
    sc = replace(sc, workload=Workload("t", (Job("a", 0.0, 10.0, 4),)), known_runtime_s=np.array([10.0]))
    env = GPUClusterScoreEnv(cfg, scenario=sc, max_rows=8)
    obs, info = env.reset(seed=0)
    assert info["num_rows"] == 0 and not obs["mask"].any()
    _, reward, done, truncated, _ = env.step(np.zeros(8))
    assert done and not truncated and reward == 0.0


def test_episode_factory_replays_the_training_mixture():
    cfg = RunConfig(mix=MixConfig(train_mix="synthetic"), sim=SimConfig(runtime_info="estimate"))
    make = episode_score_env_factory(cfg, max_rows=512)
    env = make(3)
    obs, info = env.reset(seed=3)
    want = mixture_scenario(cfg, 3)
    assert env.scenario.workload.jobs == want.workload.jobs and env.scenario.cluster == want.cluster
    assert obs["rows"].shape == (512, NUM_FEATURES) and info["num_rows"] > 0
    assert isinstance(episode_score_env_factory(small_config())(0), GPUClusterScoreEnv)
