"""The training mixture (--train_mix): documented ranges, held-out compositions never drawn, trace windows split
in time, and training through the CLI on it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import scenario.mixtures as mix
from agents.checkpoint import load_checkpoint
from config import MixConfig, RunConfig
from env.gym_env import episode_env_factory
from main import main
from scenario.build import build_scenario
from sim.cluster_spec import parse_cluster_spec

torch.set_num_threads(1)

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
ITP = TRACES / "microsoft-itp-elasticflow-2021" / "cluster04.csv"
SYNTHETIC = RunConfig(mix=MixConfig(train_mix="synthetic"))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**40))
def test_synthetic_episodes_stay_in_the_documented_ranges_and_never_on_a_held_out_cluster(seed):
    cfg = mix.synthetic_config(SYNTHETIC, seed)
    assert cfg == mix.synthetic_config(SYNTHETIC, seed)  # a pure function of the seed
    assert mix.NUM_JOBS[0] <= cfg.workload.num_jobs <= mix.NUM_JOBS[1]
    assert mix.LOAD[0] <= cfg.workload.load_factor <= mix.LOAD[1]
    spec = cfg.cluster.spec
    assert mix._canonical(spec) not in mix._held_out()
    presets = {p.cluster for p in mix.DIFFICULTIES.values()}
    if spec not in presets:
        nodes = parse_cluster_spec(spec).nodes
        types = {n.gpu_type for n in nodes}
        assert mix.TYPES_PER_CLUSTER[0] <= len(types) <= mix.TYPES_PER_CLUSTER[1] and types <= set(
            mix.TRAIN_TYPES
        )
        for t in types:
            of_type = [n for n in nodes if n.gpu_type == t]
            assert mix.NODES_PER_TYPE[0] <= len(of_type) <= mix.NODES_PER_TYPE[1]
            assert len({n.num_gpus for n in of_type}) == 1 and of_type[0].num_gpus in mix.GPUS_PER_NODE


class ScriptedRng:
    """Stands in for np.random.Generator with the draws random_cluster makes, in order."""

    def __init__(self, randoms, integers, choices):
        self.randoms, self.integers_, self.choices = list(randoms), list(integers), list(choices)

    def random(self):
        return self.randoms.pop(0)

    def integers(self, *args):
        return self.integers_.pop(0)

    def choice(self, *args, **kwargs):
        return np.array(self.choices.pop(0))


def test_a_draw_equal_to_a_held_out_composition_is_drawn_again():
    # first draw: 2 types, A100-80GB (index 0) with 3 nodes of 8 GPUs and T4 (index 3) with 5 nodes of 4 GPUs:
    # "3xA100-80GB:8,5xT4:4" is held out ("5xT4:4,3xA100-80GB:8" in another order); second draw: 2 V100 nodes of 8
    rng = ScriptedRng(randoms=[0.9], integers=[2, 3, 1, 5, 0, 1, 2, 1], choices=[[0, 3], [1]])
    assert mix.random_cluster(rng) == "2xV100-32GB:8"


def test_mix_none_is_the_plain_scenario_and_synthetic_keeps_the_observation_shape():
    plain = RunConfig()
    a, b = mix.mixture_scenario(plain, 7), build_scenario(plain, 7)
    assert a.workload.jobs == b.workload.jobs and a.cluster == b.cluster
    make = episode_env_factory(SYNTHETIC)
    shapes, clusters = set(), set()
    for seed in (1, 2, 3):
        env = make(seed)
        obs, info = env.reset(seed=seed, options={"scenario_seed": seed})
        shapes.add(obs.shape)
        clusters.add(env.scenario.cluster.name)
        assert (
            env.scenario.cluster.name
            == parse_cluster_spec(mix.synthetic_config(SYNTHETIC, seed).cluster.spec).name
        )
    assert len(shapes) == 1 and len(clusters) == 3


@pytest.mark.skipif(not ITP.exists(), reason=f"no trace at {ITP}")
def test_trace_windows_train_on_the_first_part_and_evaluate_on_later_windows():
    source = mix.TraceSource.parse(f"itp={ITP}@40xV100:8")
    cfg = RunConfig()
    whole = mix._trace_scenario(cfg, source).workload.jobs
    split = mix.split_index(whole)
    first, last = whole[0].arrival_s, whole[-1].arrival_s
    assert whole[split - 1].arrival_s < first + mix.TRAIN_FRACTION * (last - first) <= whole[split].arrival_s
    ids = {j.job_id: i for i, j in enumerate(whole)}
    for seed in range(20):
        sc = mix.training_window(cfg, source, seed, np.random.default_rng(seed))
        index = [ids[j.job_id] for j in sc.workload.jobs]
        assert index == list(range(index[0], index[0] + len(index))) and index[-1] < split
        assert mix.WINDOW_JOBS[0] <= len(index) <= mix.WINDOW_JOBS[1]
        shift = whole[index[0]].arrival_s - sc.workload.jobs[0].arrival_s
        assert (
            shift % 86_400 == 0 and 0 <= sc.workload.jobs[0].arrival_s < 86_400
        )  # whole days: time of day kept
    later = [mix.later_window(cfg, source, k, 500) for k in range(3)]
    assert [ids[sc.workload.jobs[0].job_id] for sc in later] == [split, split + 500, split + 1000]
    assert all(len(sc.workload.jobs) == 500 and sc.cluster.name == "40xV100:8" for sc in later)


@pytest.mark.skipif(not ITP.exists(), reason=f"no trace at {ITP}")
def test_the_traces_mix_draws_only_trace_windows_and_the_same_ones_as_synthetic_plus_traces():
    """`--train_mix traces`: every episode is a training window of a named trace; where synthetic+traces draws a
    window for a seed, traces draws the same window (same jobs, same estimates)."""
    windows = (f"itp={ITP}@40xV100:8",)
    traces = RunConfig(mix=MixConfig("traces", windows))
    both = RunConfig(mix=MixConfig("synthetic+traces", windows))
    split = mix.split_index(mix._trace_scenario(RunConfig(), mix.TraceSource.parse(windows[0])).workload.jobs)
    same = 0
    for seed in range(12):
        sc = mix.mixture_scenario(traces, seed)
        assert (
            sc.cluster.name == "40xV100:8"
            and mix.WINDOW_JOBS[0] <= len(sc.workload.jobs) <= mix.WINDOW_JOBS[1]
        )
        other = mix.mixture_scenario(both, seed)
        if other.cluster.name == "40xV100:8":
            same += 1
            assert [j.job_id for j in other.workload.jobs] == [j.job_id for j in sc.workload.jobs]
            assert np.array_equal(other.known_runtime_s, sc.known_runtime_s)
    assert 0 < same < 12
    assert split > 0


def test_training_on_the_synthetic_mix_through_the_cli_records_and_resumes_it(tmp_path, capsys):
    models = tmp_path / "models"
    args = ["--mode", "train", "--algo", "d3qn", "--seed", "4", "--train_mix", "synthetic", "--demo_policy", "none",
            "--validation_seeds", "none", "--models_dir", str(models), "--no_progress"]  # fmt: skip
    assert main([*args, "--total_steps", "200", "--log_dir", str(tmp_path / "a")]) == 0
    first = load_checkpoint(models / "d3qn_seed4_final.pt")
    assert first["run_config"]["mix"]["train_mix"] == "synthetic"
    resume = ["--mode", "train", "--algo", "d3qn", "--seed", "4", "--resume", str(models / "d3qn_seed4_final.pt"),
              "--total_steps", "400", "--models_dir", str(models), "--no_progress"]  # fmt: skip
    assert main(resume) == 0
    assert load_checkpoint(models / "d3qn_seed4_final.pt")["run_config"]["mix"] == first["run_config"]["mix"]
    contradicting = [*resume[:-5], "--train_mix", "none", "--total_steps", "600", *resume[-3:]]
    capsys.readouterr()
    assert main(contradicting) == 2
    assert "--train_mix none (the checkpoint's run has synthetic)" in capsys.readouterr().err


@pytest.mark.skipif(not ITP.exists(), reason=f"no trace at {ITP}")
def test_ppo_trains_on_synthetic_and_trace_windows(tmp_path):
    args = ["--mode", "train", "--algo", "ppo", "--seed", "0", "--train_mix", "synthetic+traces", "--train_windows",
            f"itp={ITP}@40xV100:8", "--num_envs", "2", "--total_steps", "1024", "--validation_seeds", "none",
            "--models_dir", str(tmp_path / "models"), "--log_dir", str(tmp_path / "log"), "--no_progress"]  # fmt: skip
    assert main(args) == 0
    saved = load_checkpoint(tmp_path / "models" / "ppo_seed0_final.pt")["run_config"]["mix"]
    assert saved == dataclasses.asdict(MixConfig("synthetic+traces", (f"itp={ITP}@40xV100:8",)))
