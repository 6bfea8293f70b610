"""The Gymnasium facade: API contract, masks, reward accounting, and equivalence with native heuristic runs."""

from __future__ import annotations

from dataclasses import replace

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

import env as _env_package  # noqa: F401  (registers GPUClusterScheduling-v0)
from cli.runner import run_heuristic
from config import EnvConfig, RunConfig, WorkloadConfig
from env.gym_env import GPUClusterEnv, heuristic_action, heuristic_step
from scenario.build import build_scenario
from schedulers import POLICIES
from sim.placement import fit_type
from sim.simulator import Decision
from tests.gate_reference import best_speed


def small_config(**env_kw) -> RunConfig:
    return RunConfig(
        workload=WorkloadConfig(difficulty="easy", num_jobs=120), env=replace(EnvConfig(), **env_kw)
    )


def test_registered_and_passes_check_env():
    e = gym.make("GPUClusterScheduling-v0", config=small_config())
    check_env(e.unwrapped, skip_render_check=True)
    assert e.unwrapped.action_masks().dtype == np.bool_


def random_rollout(env: GPUClusterEnv, seed: int, scenario_seed: int):
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed, options={"scenario_seed": scenario_seed})
    trace = [obs]
    total = 0.0
    done = truncated = False
    while not (done or truncated):
        mask = info["action_mask"]
        assert mask.any()
        obs, r, done, truncated, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        assert env.observation_space.contains(obs)
        trace.append(obs)
        total += r
    return np.array(trace), total


@pytest.mark.parametrize("reward", ["jct", "jct_at_start", "delay"])
def test_same_seed_identical_rollout_and_return_is_minus_sum_jct(reward):
    """jct and jct_at_start return -sum(JCT)/scale; delay leaves out the reference run times' sum."""
    cfg = small_config(reward=reward)
    a, ret_a = random_rollout(GPUClusterEnv(cfg), 1, 5)
    b, ret_b = random_rollout(GPUClusterEnv(cfg), 1, 5)
    assert np.array_equal(a, b) and ret_a == ret_b
    e = GPUClusterEnv(cfg)
    _, ret = random_rollout(e, 1, 5)
    r = e.sim.result("random", 5)
    done = np.asarray(r.status) == "completed"
    assert done.sum() + (np.asarray(r.status) == "rejected").sum() == len(r.status)
    sum_jct = float(np.sum(r.end_s[done] - np.array([j.arrival_s for j in r.jobs])[done]))
    if (
        reward == "delay"
    ):  # sum of (JCT - shortest duration in this cluster): waiting + time lost to slow GPUs
        shortest = [j.runtime_s / best_speed(e.sim.view(), i) for i, j in enumerate(r.jobs) if done[i]]
        sum_jct -= float(np.sum(shortest))
        assert sum_jct > 0
    assert ret == pytest.approx(-sum_jct / cfg.env.reward_scale_s, rel=1e-9)


def test_delay_charges_nothing_where_no_faster_gpu_exists_in_this_cluster():
    """The delay reference is the fastest type the job can use in THIS cluster, not an A100.
    One V100 (speed 0.5): job a (100 s at A100 speed) runs 200 s. Starting it is charged 200 - 200 = 0 (an
    A100-relative charge would be 100 s); the WAIT to its end costs 0 queued jobs x 200 s = 0."""
    from scenario.build import Scenario
    from sim.cluster import ClusterLayout
    from sim.cluster_spec import parse_cluster_spec
    from sim.job import Job, Workload

    spec = parse_cluster_spec("1xV100-32GB:1")
    jobs = (Job("a", 0.0, 100.0, 1), Job("b", 0.0, 50.0, 1))
    sc = Scenario(Workload("w", jobs), spec, "", ClusterLayout(spec), np.array([100.0, 50.0]), 1.2, 0)
    e = GPUClusterEnv(RunConfig(env=replace(EnvConfig(), window=2, reward="delay")), scenario=sc)
    _, info = e.reset(seed=0)
    # t=0: both fit, shown in arrival order. Start a: b waits 200 s -> reward -200 / 3600 in all, none for a
    _, r, done, _, info = e.step(0)
    assert not done and r == pytest.approx(-200.0 / 3600.0, rel=1e-12) and info["elapsed_s"] == 200.0
    _, r, done, _, info = e.step(0)  # b [200, 300]: charged 100 - 100 = 0; nothing waits
    assert done and r == 0.0 and info["elapsed_s"] == 100.0


def _run_through_env(cfg: RunConfig, sc, policy: str, drive) -> object:
    e = GPUClusterEnv(cfg, scenario=sc, max_steps=10**9)
    e.reset(seed=0)
    done = False
    while not done:
        _, _, done, _, info = drive(e, POLICIES[policy])
        assert not info["illegal_action"]
    return e.sim.result(policy, 7)


def _assert_same_records(native, via_env) -> None:
    assert np.array_equal(native.start_s, via_env.start_s)
    assert np.array_equal(native.end_s, via_env.end_s)
    assert native.placement == via_env.placement and native.status == via_env.status


def _parity_config(difficulty: str, profile: str) -> RunConfig:
    return RunConfig(
        workload=WorkloadConfig(difficulty=difficulty, num_jobs=300, synthetic_profile=profile),
        env=replace(EnvConfig(), window=256),
    )


# One start per env step, the policy re-asked after each start at the same instant, gives the native run (all of
# an instant's decisions applied at once): the policy's own placement goes through `step_decision`.
@pytest.mark.parametrize("profile", ["legacy", "philly"])
@pytest.mark.parametrize("difficulty", ["easy", "medium"])
@pytest.mark.parametrize("policy", ["fcfs", "sjf", "easy", "sjf_gate", "ect"])
def test_heuristic_through_env_matches_native_run(policy, difficulty, profile):
    cfg = _parity_config(difficulty, profile)
    sc = build_scenario(cfg, 7)
    _assert_same_records(run_heuristic(sc, policy), _run_through_env(cfg, sc, policy, heuristic_step))


# Through plain actions (a job only, placed by the core rule) FCFS and SJF give their native runs too: they never
# choose a placement other than the rule's. EASY does (a backfill on an alternative placement), which no
# action can express: on philly/easy, seed 6, job 35 is backfilled on a V100 at 47,213.2 s while the rule would
# put it on an A100 and delay the reservation (job 11, 32 A100s: from 68,153 s to 935,005 s).
@pytest.mark.parametrize("profile", ["legacy", "philly"])
@pytest.mark.parametrize(
    ("policy", "difficulty"),
    [("fcfs", "easy"), ("sjf", "easy"), ("fcfs", "medium"), ("sjf", "medium")]
    + [("sjf_gate", "medium"), ("ect", "medium")],  # type-aware rules place by the core rule too
)
def test_heuristic_actions_through_env_match_native_run(policy, difficulty, profile):
    cfg = _parity_config(difficulty, profile)
    sc = build_scenario(cfg, 7)
    drive = lambda e, pol: e.step(heuristic_action(e, pol))  # noqa: E731
    _assert_same_records(run_heuristic(sc, policy), _run_through_env(cfg, sc, policy, drive))


def test_easy_actions_alone_cannot_reproduce_alternative_placements():
    cfg = _parity_config("easy", "philly")
    sc = build_scenario(cfg, 6)
    native = run_heuristic(sc, "easy")
    drive = lambda e, pol: e.step(heuristic_action(e, pol))  # noqa: E731
    via_actions = _run_through_env(cfg, sc, "easy", drive)
    assert native.gpu_type[35] == "V100-32GB" and native.start_s[35] == pytest.approx(47_213.16, abs=0.01)
    assert via_actions.gpu_type[35] == "A100-80GB" and via_actions.start_s[35] == native.start_s[35]
    assert via_actions.start_s[11] > native.start_s[11]


def test_step_decision_applies_the_given_placement_and_refuses_what_step_would():
    from sim.placement import alternatives, place

    e = GPUClusterEnv(small_config(reward="delay"))
    _, info = e.reset(seed=0, options={"scenario_seed": 0})
    sim = e.sim
    i = e._slots[0]
    shape = sim.jobs.shape[i]
    alts = list(alternatives(sim.free, *shape))
    other = next((p for p in alts if p != place(sim.free, *shape)), None)
    assert other is not None  # the scenario leaves the first job another free node
    t = sim.now_s
    future = len(sim.jobs) - 1  # not arrived yet: not startable, an illegal no-op as an illegal slot is
    assert future not in sim.queue
    _, r, _, _, info2 = e.step_decision(Decision(future, other))
    assert info2["illegal_action"] and r == 0.0 and sim.now_s == t and sim.placements[future] is None
    with pytest.raises(ValueError, match="does not match"):
        e.step_decision(Decision(i, other._replace(milli=other.milli - 1)))
    _, r, _, _, info3 = e.step_decision(Decision(i, other))
    assert not info3["illegal_action"] and sim.placements[i] == other
    assert r <= -(sim.duration_s[i] - sim.jobs.runtime_s[i]) / e.reward_scale_s + 1e-12


def test_illegal_action_is_flagged_noop():
    e = GPUClusterEnv(small_config())
    obs, info = e.reset(seed=0, options={"scenario_seed": 0})
    illegal = np.flatnonzero(~info["action_mask"])
    assert len(illegal) > 0
    t = info["sim_time_s"]
    obs2, r, done, trunc, info2 = e.step(int(illegal[0]))
    assert info2["illegal_action"] and r == 0.0 and info2["sim_time_s"] == t
    assert np.array_equal(obs, obs2)
    _, _, _, _, info3 = e.step(10**6)  # out of range too
    assert info3["illegal_action"]


@pytest.mark.parametrize(
    "action", [0.7, 0.0, np.float64(1.0), "0", True, np.bool_(False), np.array([0]), None]
)
def test_non_integer_action_is_refused_not_truncated(action):
    e = GPUClusterEnv(small_config())
    e.reset(seed=0, options={"scenario_seed": 0})
    with pytest.raises(TypeError, match="action must be an integer"):
        e.step(action)


def test_integer_actions_of_every_kind_sb3_passes_are_accepted():
    def first_legal_start(kind):
        e = GPUClusterEnv(small_config())
        _, info = e.reset(seed=0, options={"scenario_seed": 0})
        slot = int(np.flatnonzero(info["action_mask"][:-1])[0])
        obs, r, _, _, info = e.step(kind(slot))
        return obs, r, info["illegal_action"]

    ref = first_legal_start(int)
    assert not ref[2]
    for kind in (np.int64, np.int32, np.uint8, lambda a: np.array(a), lambda a: np.array(a, dtype=np.int16)):
        obs, r, illegal = first_legal_start(kind)
        assert np.array_equal(obs, ref[0]) and r == ref[1] and not illegal


def test_wait_is_illegal_when_it_would_deadlock():
    from scenario.build import Scenario
    from sim.cluster import ClusterLayout
    from sim.cluster_spec import parse_cluster_spec
    from sim.job import Job, Workload

    spec = parse_cluster_spec("1xA100:1")
    wl = Workload("one", (Job("a", 0.0, 10.0, 1),))
    sc = Scenario(wl, spec, "", ClusterLayout(spec), np.array([10.0]), 1.2, 0)
    e = GPUClusterEnv(RunConfig(env=replace(EnvConfig(), window=4)), scenario=sc)
    _, info = e.reset(seed=0)
    assert info["action_mask"].tolist() == [True, False, False, False, False]
    _, r, done, _, _ = e.step(0)
    assert done and r == pytest.approx(-10.0 / 3600.0)


def _window_env(order: str) -> GPUClusterEnv:
    from scenario.build import Scenario
    from sim.cluster import ClusterLayout
    from sim.cluster_spec import parse_cluster_spec
    from sim.job import Job, Workload

    spec = parse_cluster_spec("1xA100:4")
    jobs = [Job("hold", 0.0, 10.0, 3)]
    jobs += [Job(f"wide{i}", 0.0, 10.0 + i, 4) for i in range(4)]
    jobs += [Job("late_small", 0.0, 1.0, 1), Job("late_mid", 0.0, 3.0, 1)]
    known = np.array([j.runtime_s for j in jobs])
    sc = Scenario(Workload("w", tuple(jobs)), spec, "", ClusterLayout(spec), known, 1.2, 0)
    cfg = RunConfig(env=replace(EnvConfig(), window=3, window_order=order))
    return GPUClusterEnv(cfg, scenario=sc)


@pytest.mark.parametrize("order", ["arrival", "runtime"])
def test_window_shows_startable_jobs_before_blocked_ones(order):
    e = _window_env(order)
    _, info = e.reset(seed=0)
    names = [e.sim.jobs.jobs[i].job_id for i in e._slots]
    # empty cluster: everything fits; nothing runs and nothing will arrive, so WAIT would deadlock
    # (shown in arrival order whichever jobs the order selects: SJF's pick is not always slot 0)
    assert names == (["hold", "wide0", "wide1"] if order == "arrival" else ["hold", "late_small", "late_mid"])
    assert info["action_mask"].tolist() == [True, True, True, False]
    _, _, _, _, info = e.step(names.index("hold"))
    # 1 GPU left: the small jobs fit and come first although the wide ones are older; WAIT is legal again
    names = [e.sim.jobs.jobs[i].job_id for i in e._slots]
    assert names == ["late_small", "late_mid", "wide0"] and e.sim.now_s == 0.0
    assert info["action_mask"].tolist() == [True, True, False, True]


@pytest.mark.parametrize("reward", ["slowdown", "utilization"])
def test_alternative_rewards_run(reward):
    e = GPUClusterEnv(small_config(reward=reward))
    _, total = random_rollout(e, 0, 1)
    assert np.isfinite(total) and (total <= 0 if reward == "slowdown" else total >= 0)


def test_maskable_ppo_runs_on_the_env():
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.logger import Logger

    e = GPUClusterEnv(small_config())
    model = MaskablePPO("MlpPolicy", e, n_steps=64, batch_size=32, n_epochs=1, seed=0, device="cpu")
    model.set_logger(Logger(folder=None, output_formats=[]))  # (SB3's default makes a folder in the temp dir)
    model.learn(total_timesteps=128)
    obs, info = e.reset(seed=3)
    action, _ = model.predict(obs, action_masks=e.action_masks(), deterministic=True)
    assert info["action_mask"][int(action)]


def test_episode_with_every_job_rejected_terminates():
    from env.gym_env import run_policy_in_env
    from scenario.build import Scenario
    from sim.cluster import ClusterLayout
    from sim.cluster_spec import parse_cluster_spec
    from sim.job import Job, Workload

    spec = parse_cluster_spec("1xA100:4")
    sc = Scenario(
        Workload("w", (Job("huge", 0.0, 10.0, 16),)), spec, "", ClusterLayout(spec), np.array([10.0]), 1.2, 0
    )
    e = GPUClusterEnv(RunConfig(), scenario=sc)
    _, info = e.reset(seed=0)
    assert not info["action_mask"].any()
    _, r, done, truncated, _ = e.step(0)
    assert done and not truncated and r == 0.0
    result = run_policy_in_env(RunConfig(), sc, lambda obs, mask: 0, "x")
    assert result.status == ("rejected",)


def test_step_before_reset_and_bad_reset_options_or_window_are_clear_errors():
    e = GPUClusterEnv(small_config())
    with pytest.raises(RuntimeError, match=r"step\(\) before reset\(\): call env.reset\(\)"):
        e.step(0)
    with pytest.raises(ValueError, match="unknown key\\(s\\) 'scenario'; the only option is 'scenario_seed'"):
        e.reset(options={"scenario": 3})
    for bad in (-1, "3", 1.5, True):
        with pytest.raises(ValueError, match=f"'scenario_seed' must be an integer >= 0, got {bad!r}"):
            e.reset(options={"scenario_seed": bad})
    e.reset(options={"scenario_seed": np.int64(3)})  # numpy integers are fine
    cfg = small_config()
    for window in (0, -2):
        with pytest.raises(ValueError, match=f"window must be an integer >= 1 .*got {window}"):
            GPUClusterEnv(replace(cfg, env=replace(cfg.env, window=window)))


_MANY_NODES = "20xV100-32GB:4,2xA100-80GB:8,18xT4:1"


def _random_scenario(seed: int, cluster: str = "2xA100-80GB:8,3xV100-32GB:4,2xT4:2"):
    """A small random workload on a three-type cluster: whole-GPU jobs of 1-16 GPUs (some only on some types,
    some spread over nodes), fractional ones, priorities, and known runtimes that are not the true ones."""
    from scenario.build import Scenario
    from sim.cluster import ClusterLayout
    from sim.cluster_spec import parse_cluster_spec
    from sim.job import Job, Workload

    rng = np.random.default_rng(seed)
    spec = parse_cluster_spec(cluster)
    type_sets = [(), ("A100-80GB",), ("V100-32GB", "T4"), ("T4",)]
    arrivals = np.sort(rng.exponential(400.0, 150).cumsum())
    jobs = []
    for n, t in enumerate(arrivals):
        fractional = rng.random() < 0.2
        jobs.append(
            Job(
                f"j{n}",
                float(t),
                float(rng.lognormal(7.0, 1.5)),
                1 if fractional else int(rng.choice([1, 2, 4, 8, 16])),
                gpu_mem_gb=float(rng.choice([0.0, 8.0, 30.0])),
                gpu_milli=int(rng.choice([250, 500])) if fractional else 1000,
                gpu_types=type_sets[int(rng.integers(len(type_sets)))],
                priority=int(rng.integers(0, 3)),
            )
        )
    known = np.array([j.runtime_s for j in jobs]) * rng.uniform(0.5, 2.0, len(jobs))
    return Scenario(Workload("random", tuple(jobs)), spec, "", ClusterLayout(spec), known, 1.2, seed)


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    reward=st.sampled_from(["jct", "jct_at_start", "delay", "slowdown", "utilization"]),
    window=st.sampled_from([1, 3, 16]),
    order=st.sampled_from(["runtime", "arrival"]),
    preset=st.sampled_from(["random", "many_nodes", "easy", "medium"]),
)
def test_env_matches_its_plain_reference_step_for_step(seed, reward, window, order, preset):
    """The env's fast window, observation and rewards give what the plain reference computes from the raw
    simulator state (tests/slot_env_reference.py): every observation byte, mask, reward, flag and info, through
    random play with illegal actions and resets."""
    from tests.slot_env_reference import ReferenceSlotEnv

    cfg = RunConfig(
        workload=WorkloadConfig(difficulty=preset if preset in ("easy", "medium") else "easy", num_jobs=150),
        env=replace(EnvConfig(), reward=reward, window=window, window_order=order, max_steps=700),
    )
    # many_nodes: types of more nodes than the observation reads one by one (its largest free block found by
    # scanning the free counts instead)
    sc = None
    if preset in ("random", "many_nodes"):
        sc = _random_scenario(seed, _MANY_NODES) if preset == "many_nodes" else _random_scenario(seed)
    fast, plain = GPUClusterEnv(cfg, scenario=sc), ReferenceSlotEnv(cfg, scenario=sc)
    rng = np.random.default_rng(seed)
    obs, info = fast.reset(seed=seed)
    ref_obs, ref_info = plain.reset(seed=seed)
    for _ in range(800):
        assert obs.tobytes() == ref_obs.tobytes() and obs.dtype == ref_obs.dtype == np.float32
        assert np.array_equal(info.pop("action_mask"), ref_info.pop("action_mask")) and info == ref_info
        assert np.array_equal(fast.action_masks(), plain.action_masks())
        legal = np.flatnonzero(fast.action_masks())
        if rng.random() < 0.1 or not len(legal):
            action = int(rng.integers(-1, window + 2))
        else:
            action = int(legal[rng.integers(len(legal))])
        obs, r, done, truncated, info = fast.step(action)
        ref_obs, ref_r, ref_done, ref_truncated, ref_info = plain.step(action)
        assert repr(r) == repr(ref_r) and (done, truncated) == (ref_done, ref_truncated)
        if done or truncated:
            obs, info = fast.reset()
            ref_obs, ref_info = plain.reset()


@pytest.mark.parametrize("seed", [3, 17])
def test_window_fit_memo_agrees_with_fit_type_at_every_decision_point(seed):
    """The window remembers each waiting shape's fit_type between decision points (forgotten when capacity
    grows, a fitting shape asked again after a start): at every decision point each remembered answer is what
    fit_type gives on the live free state, through starts, completions, illegal actions and resets."""
    cfg = RunConfig(
        workload=WorkloadConfig(difficulty="easy", num_jobs=150), env=replace(EnvConfig(), window=3)
    )
    env = GPUClusterEnv(cfg, scenario=_random_scenario(seed))
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed)
    checked = 0
    for _ in range(1500):
        if not env._done:
            free = env.sim.free
            for shape, t in env._fit_of.items():
                assert t == fit_type(free, *shape)
                checked += 1
            assert set(env.sim.queue_by_shape) <= set(env._fit_of)
        legal = np.flatnonzero(info["action_mask"])
        action = int(rng.integers(-1, 5)) if rng.random() < 0.1 else int(legal[rng.integers(len(legal))])
        obs, _, done, truncated, info = env.step(action)
        if done or truncated:
            obs, info = env.reset()
    assert checked > 1000


def test_scenarios_of_one_cluster_share_its_layout_and_run_as_on_a_fresh_one():
    """Each env reset builds a scenario; those of an equal cluster share one layout (its memos of eligible nodes
    and placement options are built once), and a run on that shared, already used layout gives the job records
    of the same run on a layout of its own."""
    from sim.cluster import ClusterLayout

    cfg = RunConfig(workload=WorkloadConfig(difficulty="easy", num_jobs=120))
    first, second = build_scenario(cfg, 1), build_scenario(cfg, 2)
    assert first.layout is second.layout
    run_heuristic(first, "easy")  # the shared layout's memos filled by another scenario's run
    fresh = replace(second, layout=ClusterLayout(second.cluster, uniform_speed=cfg.cluster.uniform_speed))
    assert fresh.layout is not second.layout
    shared_run, fresh_run = run_heuristic(second, "easy"), run_heuristic(fresh, "easy")
    assert np.array_equal(shared_run.start_s, fresh_run.start_s, equal_nan=True)
    assert np.array_equal(shared_run.end_s, fresh_run.end_s, equal_nan=True)
    assert shared_run.placement == fresh_run.placement and np.isfinite(shared_run.end_s).sum() > 100
