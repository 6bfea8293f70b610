"""The node-management tasks (GPUClusterPower-v0, GPUClusterAutoscale-v0): Gymnasium contract, masks, exact
reward identities against independent integrations, hand-computed energy, grader anchors, and the reference
node managers cross-checked against a plain implementation."""

from __future__ import annotations

import math
from dataclasses import replace

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import env as _env_package  # noqa: F401  (registers the envs)
from config import RunConfig, WorkloadConfig
from env.autoscale_env import (
    AUTOSCALE_PRESETS,
    AutoscaleOutcome,
    GPUClusterAutoscaleEnv,
    autoscale_config,
    grade,
    node_price_usd_per_h,
)
from env.node_heuristics import always_on, node_manager, provision_to_demand, run_manager, threshold
from env.power_env import GPUClusterPowerEnv
from scenario.build import Scenario, build_scenario
from sim.cluster import ClusterLayout
from sim.cluster_spec import parse_cluster_spec
from sim.job import Workload
from sim.power import OFF, ON, PowerModel
from sim.prices import PriceCurve
from tests.helpers import job
from tests.node_env_reference import (
    completed_value_usd,
    energy_cost_eur,
    plain_threshold_action,
    rental_usd,
    sla_penalty_usd,
    sum_jct_s,
)
from tests.test_invariants import clusters, workloads
from tests.test_power_states import _check_only_on_nodes

FLAT_100 = PriceCurve("flat", 3600.0, np.array([100.0]), np.array([250.0]))
STEP_PRICES = PriceCurve("step", 3600.0, np.array([50.0, 150.0, 80.0]), np.array([100.0, 300.0, 200.0]))


def power_config(num_jobs: int = 40) -> RunConfig:
    return RunConfig(workload=WorkloadConfig(difficulty="easy", num_jobs=num_jobs, load_factor=0.5))


def tiny_scenario(cluster: str, jobs) -> Scenario:
    layout = ClusterLayout(parse_cluster_spec(cluster))
    wl = Workload("tiny", tuple(jobs))
    return Scenario(wl, layout.spec, cluster, layout, np.array([j.runtime_s for j in jobs]), 1.2, 0)


def random_rollout(env, seed: int, scenario_seed: int):
    rng = np.random.default_rng(seed)
    obs, info = env.reset(seed=seed, options={"scenario_seed": scenario_seed})
    trace, rewards = [obs], []
    done = truncated = False
    while not (done or truncated):
        mask = info["action_mask"]
        assert mask.any()
        obs, r, done, truncated, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        assert env.observation_space.contains(obs)
        trace.append(obs)
        rewards.append(r)
    return np.array(trace), rewards, done


# ---- Gymnasium contract ---------------------------------------------------------------------------------


def test_both_registered_and_pass_check_env():
    for name, kw in (
        ("GPUClusterPower-v0", {"config": power_config(20)}),
        ("GPUClusterAutoscale-v0", {"preset": "easy"}),
    ):
        e = gym.make(name, **kw)
        check_env(e.unwrapped, skip_render_check=True)
        assert e.action_space.n == 2 * e.unwrapped.num_types + 1


@pytest.mark.parametrize(
    "make", [lambda: GPUClusterPowerEnv(power_config(20)), lambda: GPUClusterAutoscaleEnv()]
)
def test_same_seed_gives_identical_rollout(make):
    # (20 jobs: 1,656 random steps; random power actions make 30 jobs take 58,400)
    a, ra, _ = random_rollout(make(), 1, 4)
    b, rb, _ = random_rollout(make(), 1, 4)
    assert np.array_equal(a, b) and ra == rb


def test_agents_see_k_slots_and_a_wait():
    """The D3QN/SAC networks read window, job_feature_dim and context_dim: 2T power slots + KEEP."""
    from agents.networks import ObsSpec

    for e in (GPUClusterPowerEnv(power_config(20)), GPUClusterAutoscaleEnv(preset="medium")):
        spec = ObsSpec.from_env(e)
        assert spec.num_actions == e.action_space.n and spec.window == 2 * e.num_types


def test_illegal_action_is_a_flagged_no_op_and_non_integers_raise():
    e = GPUClusterPowerEnv(power_config(20))
    e.reset(seed=0, options={"scenario_seed": 1})
    mask = e.action_masks()
    bad = int(np.flatnonzero(~mask)[0])
    now, state = e.sim.now_s, list(e.sim.node_power.state)
    _, r, done, _, info = e.step(bad)
    assert info["illegal_action"] and r == 0.0 and not done
    assert e.sim.now_s == now and list(e.sim.node_power.state) == state
    with pytest.raises(TypeError):
        e.step(0.5)


# ---- masks ------------------------------------------------------------------------------------------------


def test_masks_follow_node_states_busy_nodes_and_counts():
    """1 node of each of two types; a job on the A100 node: it cannot be turned off, the idle T4 node can;
    neither can be turned on (both ON); once the T4 node is off, it can be turned on and not off."""
    sc = tiny_scenario("1xA100-80GB:1,1xT4:1", [job(0, 0, 3600, gpu_types=("A100-80GB",))])
    e = GPUClusterPowerEnv(scenario=sc, prices=FLAT_100)
    e.reset(seed=0)
    assert e.type_names == ("A100-80GB", "T4")
    # actions: 0 on A100, 1 off A100, 2 on T4, 3 off T4, 4 KEEP
    assert e.action_masks().tolist() == [False, False, False, True, True]
    e.step(3)
    assert e.sim.node_power.state[1] != ON
    # T4 shutting down: nothing but KEEP is legal, so the env kept on its own until the shutdown completed
    assert e.sim.node_power.state[1] == OFF and e.sim.now_s == PowerModel().shutdown_s
    assert e.action_masks().tolist() == [False, False, True, False, True]


def test_autoscaling_budget_masks_provisioning():
    """easy preset budget $60/h: one 8xA100-80GB node ($40.97/h) fits, a second does not; T4 nodes
    ($3.912/h) fit until 40.97 + k x 3.912 > 60, i.e. k <= 4."""
    e = GPUClusterAutoscaleEnv("easy")
    e.reset(seed=0, options={"scenario_seed": 0})
    a100, t4 = e.type_names.index("A100-80GB"), e.type_names.index("T4")
    assert e.action_masks()[2 * a100] and e.action_masks()[2 * t4]
    e.step(2 * a100)
    assert not e.action_masks()[2 * a100]
    for _ in range(4):
        assert e.action_masks()[2 * t4]
        e.step(2 * t4)
    assert not e.action_masks()[2 * t4]  # every T4 node is rented (4 of them) and 40.97 + 15.65 <= 60
    assert node_price_usd_per_h("A100-80GB", 8) == pytest.approx(40.9657)


def test_keep_is_masked_only_when_waiting_would_end_the_run():
    """1 A100 node; job A 0-100 s, job B arrives at 200. Turned off at 100 (shutdown 100-160), the node is OFF
    when B arrives with nothing else pending: KEEP would end the run with B unfinished, so only booting is
    legal. Before B arrives (its arrival pending), KEEP is legal."""
    sc = tiny_scenario("1xA100-80GB:1", [job("A", 0, 100), job("B", 200, 100)])
    e = GPUClusterPowerEnv(scenario=sc, prices=FLAT_100)
    e.reset(seed=0)  # time 0, A running: only KEEP is legal
    assert e.sim.now_s == 0.0 and e.action_masks().tolist() == [False, False, True]
    e.step(2)
    assert e.sim.now_s == 100.0 and e.action_masks().tolist() == [False, True, True]
    e.step(1)  # off; nothing else legal while it shuts down, so the env runs on to 160
    assert e.sim.now_s == 160.0 and e.action_masks().tolist() == [True, False, True]
    e.step(2)  # KEEP: on to B's arrival
    assert e.sim.now_s == 200.0 and e.action_masks().tolist() == [True, False, False]
    _, _, done, _, _ = e.step(0)  # boot 200-460 (260 s), B runs 460-560: nothing left to decide
    assert done and e.sim.start_s[1] == 460.0 and e.sim.end_s[1] == 560.0


# ---- exact rewards ------------------------------------------------------------------------------------------


def test_power_energy_hand_computed_with_a_node_switched_off_and_on():
    """1 A100 node of 1 GPU, flat 100 EUR/MWh, default model (base 300 W, A100 idle 50 W / max 400 W,
    PUE 1.58, boot 260 s, shutdown 60 s). provision_to_demand: job A runs 0-600 s; the node is turned off at
    600 (shutting down 600-660 at idle power), is OFF until job B arrives at 7200, boots 7200-7460, B runs
    7460-8060.
    IT energy = 700 W x 600 + 350 W x 60 + 350 W x 260 + 700 W x 600 = 952,000 J; facility x 1.58 =
    1,504,160 J = 0.000417822 MWh -> EUR 0.0417822. JCT: A 600 s + B 860 s = 1460 s -> lambda 0.10 EUR/h x
    1460 / 3600 = EUR 0.0405556. Return = -0.0823378."""
    sc = tiny_scenario("1xA100-80GB:1", [job("A", 0, 600), job("B", 7200, 600)])
    e = GPUClusterPowerEnv(scenario=sc, prices=FLAT_100)
    e.reset(seed=0)
    ret = run_manager(e, provision_to_demand)
    r = e.sim.result("x", 0)
    assert r.start_s.tolist() == [0.0, 7460.0] and r.end_s.tolist() == [600.0, 8060.0]
    energy = 1_504_160 / 3.6e9 * 100
    assert e.energy_cost_eur == pytest.approx(energy, rel=1e-12)
    assert ret == pytest.approx(-(energy + 0.10 * 1460 / 3600), rel=1e-12)


def test_power_return_is_minus_energy_cost_minus_lambda_sum_jct():
    """Random legal actions on a 40-job scenario with a price step curve: the undiscounted return equals an
    independent integration of the run's power log and job intervals, to 1e-9 relative."""
    e = GPUClusterPowerEnv(power_config(40), prices=STEP_PRICES, jct_weight_eur_per_job_h=0.3)
    _, rewards, done = random_rollout(e, 3, 7)
    assert done
    r = e.sim.result("random", 7)
    assert (np.asarray(r.status) != "unfinished").all()
    end = e.sim.now_s
    expected = -energy_cost_eur(r, e.power_model, STEP_PRICES, end) - 0.3 * sum_jct_s(r) / 3600
    assert math.fsum(rewards) == pytest.approx(expected, rel=1e-9)
    assert len(r.power_log_t_s) > 0  # the random policy did switch nodes


def test_power_energy_cost_is_the_energy_metric_of_the_same_run():
    """A finished episode's energy cost equals metrics/energy.py's cost_eur for its RunResult (summary.csv's
    figure), with the power model's default PUE and the synthetic curve."""
    from metrics.energy import energy_report
    from sim.prices import synthetic_curve

    e = GPUClusterPowerEnv(power_config(40))
    _, rewards, done = random_rollout(e, 5, 11)
    assert done
    r = e.sim.result("random", 11)
    report = energy_report(r, synthetic_curve())
    assert e.energy_cost_eur == pytest.approx(report.cost_eur, rel=1e-9)
    assert math.fsum(rewards) == pytest.approx(-report.cost_eur - 0.10 * sum_jct_s(r) / 3600, rel=1e-9)


def test_autoscale_return_is_value_minus_rental_minus_sla():
    e = GPUClusterAutoscaleEnv("easy")
    _, rewards, done = random_rollout(e, 2, 5)
    assert done
    r = e.sim.result("random", 5)
    end = e.sim.now_s
    layout = e.scenario.layout
    prices = [
        node_price_usd_per_h(layout.type_names[layout.node_type[n]], layout.node_num_gpus[n])
        for n in range(layout.num_nodes)
    ]
    p = e.preset
    expected = completed_value_usd(r, p) - rental_usd(r, prices, end) - sla_penalty_usd(r, p, end)
    assert math.fsum(rewards) == pytest.approx(expected, rel=1e-9)
    assert e.outcome().episode_return_usd == pytest.approx(math.fsum(rewards), rel=1e-12)


def test_renting_nothing_scores_the_trivial_anchor_and_grade_zero():
    e = GPUClusterAutoscaleEnv("easy")
    e.reset(seed=0, options={"scenario_seed": 2})
    ret = run_manager(e, lambda v: e.keep_action)
    o = e.outcome()
    assert e.sim.now_s == AUTOSCALE_PRESETS["easy"].horizon_h * 3600
    assert ret == pytest.approx(o.trivial_return_usd, rel=1e-9)
    assert grade(o) == 0.0


def test_grade_is_zero_at_trivial_one_at_bound_and_monotone():
    o = AutoscaleOutcome(0.0, -100.0, 50.0)
    values = np.linspace(-300, 200, 101)
    scores = [grade(replace(o, episode_return_usd=float(v))) for v in values]
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert all(a <= b for a, b in zip(scores, scores[1:], strict=False))
    assert grade(replace(o, episode_return_usd=-100.0)) == 0.0
    assert grade(replace(o, episode_return_usd=50.0)) == 1.0
    # (-25 - -100) / (50 - -100) = 0.5
    assert grade(replace(o, episode_return_usd=-25.0)) == 0.5
    assert grade(replace(o, episode_return_usd=float("nan"))) == 0.0


def test_no_policy_beats_the_bound_and_heuristics_beat_renting_nothing():
    for seed in (0, 1):
        scores = {}
        for name in ("always_on", "provision_to_demand", "idle_off:1800"):
            e = GPUClusterAutoscaleEnv("easy")
            e.reset(seed=0, options={"scenario_seed": seed})
            run_manager(e, node_manager(name))
            o = e.outcome()
            assert o.episode_return_usd <= o.bound_return_usd
            scores[name] = grade(o)
        assert scores["provision_to_demand"] > 0.3, scores


# ---- reference node managers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "idle_off_s,reserve,fit",
    [(0.0, 0, False), (900.0, 1, False), (3600.0, 0, False), (0.0, 0, True), (900.0, 1, True)],
)
def test_threshold_rule_matches_plain_implementation(idle_off_s, reserve, fit):
    """Step by step on a power scenario and an autoscaling one, the FleetView rule and the plain rule over the
    raw simulator pick the same action. The power scenario has jobs that cannot start with every node on
    (their type's GPUs partly held by a running job): fit changes the rule's action on some of its steps."""
    rule, unfit = threshold(idle_off_s, reserve, fit), threshold(idle_off_s, reserve)
    differ = 0
    for e, seed in ((GPUClusterPowerEnv(power_config(80)), 5), (GPUClusterAutoscaleEnv("easy"), 1)):
        e.reset(seed=0, options={"scenario_seed": seed})
        done = truncated = False
        steps = 0
        while not (done or truncated):
            view = e.fleet_view()
            a = rule(view)
            assert a == plain_threshold_action(e, idle_off_s, reserve, fit)
            assert e.action_masks()[a]
            differ += a != unfit(view)
            _, _, done, truncated, _ = e.step(a)
            steps += 1
        assert steps > 10
    assert differ > 0 if fit else differ == 0


def test_always_on_keeps_every_node_on_and_matches_the_native_run():
    """In the power task always_on never switches: the job records equal a plain run of the same scheduler."""
    cfg = power_config(40)
    e = GPUClusterPowerEnv(cfg, scheduler="sjf")
    e.reset(seed=0, options={"scenario_seed": 9})
    run_manager(e, always_on)
    r = e.sim.result("sjf", 9)
    assert len(r.power_log_t_s) == 0
    native = build_scenario(cfg, 9).simulator()
    from schedulers import POLICIES

    native.run(POLICIES["sjf"])
    n = native.result("sjf", 9)
    assert np.array_equal(r.start_s, n.start_s) and np.array_equal(r.end_s, n.end_s)
    assert r.placement == n.placement


def test_node_manager_names():
    assert node_manager("always_on") is always_on
    with pytest.raises(ValueError, match="unknown node manager"):
        node_manager("sometimes")
    with pytest.raises(ValueError, match="idle_off_s"):
        node_manager("idle_off:-5")


def test_autoscale_presets_are_frozen_and_build():
    for name, p in AUTOSCALE_PRESETS.items():
        with pytest.raises(AttributeError):
            p.horizon_h = 1.0  # type: ignore[misc]
        sc = build_scenario(autoscale_config(p), 0)
        assert sc.cluster == parse_cluster_spec(p.cluster) and len(sc.workload.jobs) == p.num_jobs, name


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="unknown preset"):
        GPUClusterAutoscaleEnv("extreme")
    with pytest.raises(ValueError, match="unknown scheduler"):
        GPUClusterPowerEnv(power_config(10), scheduler="lifo")
    with pytest.raises(ValueError, match="recheck_s"):
        GPUClusterPowerEnv(power_config(10), recheck_s=0)
    with pytest.raises(ValueError, match="cloud price"):
        node_price_usd_per_h("K80", 4)
    with pytest.raises(ValueError, match="scenario_seed"):
        GPUClusterPowerEnv(power_config(10)).reset(options={"scenario_seed": -1})


def test_initial_states():
    p = GPUClusterPowerEnv(power_config(10))
    p.reset(seed=0, options={"scenario_seed": 0})
    assert set(p.sim.node_power.initial) == {ON}
    a = GPUClusterAutoscaleEnv()
    a.reset(seed=0, options={"scenario_seed": 0})
    assert set(a.sim.node_power.initial) == {OFF}


# ---- properties ---------------------------------------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cluster=clusters(),
    workload=workloads(),
    scheduler=st.sampled_from(["fcfs", "sjf", "easy"]),
    seed=st.integers(0, 2**16),
    lam=st.sampled_from([0.0, 0.1, 5.0]),
)
def test_random_power_managers_keep_the_invariants(cluster, workload, scheduler, seed, lam):
    """Random legal actions on random clusters and workloads: no job ever runs on a node that is not ON, no
    illegal switch is ever attempted (the simulator would raise), and the return is exactly -(energy cost) -
    lambda x sum(JCT) of the run so far (also when truncated)."""
    layout = ClusterLayout(cluster)
    sc = Scenario(workload, cluster, "", layout, np.array([j.runtime_s for j in workload.jobs]), 1.2, 0)
    e = GPUClusterPowerEnv(
        scenario=sc,
        scheduler=scheduler,
        prices=STEP_PRICES,
        jct_weight_eur_per_job_h=lam,
        recheck_s=900.0,
        max_steps=400,
    )
    _, rewards, done = random_rollout(e, seed, 0)
    _check_only_on_nodes(e.sim)
    r = e.sim.result("random", 0)
    end = e.sim.now_s
    arrival = np.array([j.arrival_s for j in r.jobs])
    started = ~np.isnan(r.start_s)
    # jobs in the system until `end`: completed ones count end - arrival, the rest end - arrival if arrived
    in_system = np.where(np.isnan(r.end_s), np.maximum(0.0, end - arrival), r.end_s - arrival)
    in_system[np.asarray(r.status) == "rejected"] = 0.0
    expected = -energy_cost_eur(r, e.power_model, STEP_PRICES, end) - lam * in_system.sum() / 3600
    assert math.fsum(rewards) == pytest.approx(expected, rel=1e-9, abs=1e-12)
    if done:  # KEEP is masked when it would strand waiting jobs, so a finished episode finished every job
        assert all(s in ("completed", "rejected") for s in r.status)
    assert started.sum() >= r.status.count("completed")


def test_idle_off_threshold_acts_at_the_first_recheck_past_its_deadline():
    """threshold(1000 s): the A100 node falls idle at 600; re-checks come every 600 s while it can be turned
    off, at 1200 (idle 600 s < 1000) and 1800 (1200 s >= 1000): off at 1800, shut down 1800-1860, booted for
    job B at 7200 (7200-7460), B runs 7460-8060.
    IT energy = 700 W x 600 + 350 W x 1200 + 350 W x 60 + 350 W x 260 + 700 W x 600 = 1,372,000 J; x PUE 1.58 =
    2,167,760 J; at 100 EUR/MWh: 2,167,760 / 3.6e9 x 100 = EUR 0.0602156."""
    sc = tiny_scenario("1xA100-80GB:1", [job("A", 0, 600), job("B", 7200, 600)])
    e = GPUClusterPowerEnv(scenario=sc, prices=FLAT_100)
    e.reset(seed=0)
    run_manager(e, threshold(1000.0))
    r = e.sim.result("x", 0)
    assert r.power_log_t_s.tolist() == [1800.0, 1860.0, 7200.0, 7460.0]
    assert r.start_s[1] == 7460.0
    assert e.energy_cost_eur == pytest.approx(2_167_760 / 3.6e9 * 100, rel=1e-12)


def test_autoscale_reward_hand_computed():
    """One 1-GPU A100-80GB node ($40.9657/8 = $5.1207125/h), one 1-GPU job of 3600 s arriving at 0.
    provision_to_demand rents the node at 0; it boots 0-260, the job runs 260-3860 and the episode ends then.
    value = $8 x 1 GPU-hour = 8; rental = 5.1207125 x 3860 / 3600 = 5.49054618; SLA: waited 260 s < 600 s,
    nothing. Return = 2.50945382."""
    from env.autoscale_env import AutoscalePreset

    preset = AutoscalePreset(
        "1xA100-80GB:1", num_jobs=1, load_factor=0.5, horizon_h=2.0, budget_usd_per_h=10.0
    )
    sc = tiny_scenario("1xA100-80GB:1", [job("A", 0, 3600)])
    e = GPUClusterAutoscaleEnv(preset, scenario=sc)
    e.reset(seed=0)
    ret = run_manager(e, provision_to_demand)
    assert e.sim.start_s[0] == 260.0 and e.sim.now_s == 3860.0
    assert ret == pytest.approx(8.0 - 40.9657 / 8 * 3860 / 3600, rel=1e-12)
    # anchors: trivial = -$4/GPU-h x (7200 - 0 - 600) s = -7.3333; bound = 8 - 5.1207125 x 1 h = 2.8792875
    o = e.outcome()
    assert o.trivial_return_usd == pytest.approx(-4.0 * 6600 / 3600, rel=1e-12)
    assert o.bound_return_usd == pytest.approx(8.0 - 40.9657 / 8, rel=1e-12)
    assert grade(o) == pytest.approx((ret + 4.0 * 6600 / 3600) / (8.0 - 40.9657 / 8 + 4.0 * 6600 / 3600))
