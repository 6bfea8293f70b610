"""The ablations of the score rounds that `--mode report` runs: the weights non-preemptive (`--score_preempt no`),
a restore overhead (`--preempt_overhead_s`), exact runtimes (`--runtime_info oracle`) and job types
(`--job_types`); each is what it says, and the report's figures are an eval's under the same options."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest
import torch

from config import RunConfig, WorkloadConfig
from env.score_env import run_with_scorer
from evaluation.sets import GAVEL_CLUSTER
from main import main
from schedulers.score_rounds import LAS_SPEED_WEIGHTS, LinearScorer, make_score_policy
from sim.cluster import ClusterLayout
from sim.cluster_spec import parse_cluster_spec
from sim.job import Workload
from sim.simulator import Simulator
from tests.helpers import job
from tests.test_throughput import needs_gavel

torch.set_num_threads(1)

MEDIUM = RunConfig(workload=WorkloadConfig(difficulty="medium", num_jobs=60))
LAS = LinearScorer.from_named(LAS_SPEED_WEIGHTS)


def test_the_non_preemptive_ablation_never_preempts_and_starts_jobs_only_at_arrivals_and_completions():
    rounds = run_with_scorer(MEDIUM, LAS, seed=3)
    fill = run_with_scorer(MEDIUM, LAS, seed=3, preempt=False)
    assert rounds.preemptions.sum() > 0  # the same scenario does preempt with rounds: the check can fail
    assert fill.preemptions.sum() == 0 and len(fill.runs.job) == int(np.isfinite(fill.start_s).sum())
    events = {j.arrival_s for j in fill.jobs} | set(fill.end_s[np.isfinite(fill.end_s)].tolist())
    started = fill.start_s[np.isfinite(fill.start_s)]
    assert all(s in events for s in started.tolist())  # never at a round boundary between events
    # the config's switch is the same ablation
    cfg = dataclasses.replace(MEDIUM, policy=dataclasses.replace(MEDIUM.policy, score_preempt=False))
    assert run_with_scorer(cfg, LAS, seed=3).start_s.tolist() == fill.start_s.tolist()


def _run(jobs, weights: dict, preempt: bool, round_s: float = 30.0):
    sim = Simulator(
        Workload("t", tuple(jobs)), ClusterLayout(parse_cluster_spec("1xA100-80GB:1")), None, 1.2, 0.0
    )
    sim.run(make_score_policy(LinearScorer.from_named(weights), round_s, preempt))
    return sim.result("score", 0, preemptive=True)


@pytest.mark.parametrize(
    ("weights", "start", "end"),
    [
        ({"log_est_runtime": -1.0}, [0.0, 110.0, 100.0], [100.0, 160.0, 110.0]),  # shortest first: C, then B
        (
            {"log_attained_gpu": -1.0},
            [0.0, 100.0, 150.0],
            [100.0, 150.0, 160.0],
        ),  # all tie at 0: lower index B
    ],
)
def test_non_preemptive_fill_by_hand(weights, start, end):
    """One GPU; A (100 s) arrives at 0, B (50 s) at 10, C (10 s) at 20. Without rounds A runs to the end; at its
    completion B and C both fit and start in score order. With 30 s rounds, least attained service preempts A."""
    jobs = [job("A", 0, 100), job("B", 10, 50), job("C", 20, 10)]
    r = _run(jobs, weights, preempt=False)
    assert r.start_s.tolist() == start and r.end_s.tolist() == end
    assert r.preemptions.tolist() == [0, 0, 0]
    assert _run(jobs, {"log_attained_gpu": -1.0}, preempt=True).preemptions[0] >= 1


@pytest.fixture(scope="module")
def cem_models(tmp_path_factory):
    root = tmp_path_factory.mktemp("cem")
    assert main(["--mode", "train", "--algo", "cem", "--seed", "1", "--difficulty", "easy", "--num_jobs", "20",
                 "--total_steps", "1", "--cem_population", "2", "--cem_scenarios", "1", "--cem_workers", "1",
                 "--validation_seeds", "none", "--no_progress", "--models_dir", str(root / "models"),
                 "--log_dir", str(root / "train")]) == 0  # fmt: skip
    return root / "models"


ABLATIONS = {
    "non_preemptive": ["--score_preempt", "no"],
    "overhead": ["--preempt_overhead_s", "120"],
    "oracle": ["--runtime_info", "oracle"],
    "job_types": ["--job_types", "gavel"],
}
SETS = {"job_types": "gavel"}


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=needs_gavel) if n == "job_types" else n for n in ABLATIONS]
)
def test_each_report_ablation_scores_cem_and_las_speed_as_an_eval_with_the_same_options(
    tmp_path, cem_models, name
):
    options = ABLATIONS[name]
    log = tmp_path / "report"
    common = ["--num_jobs", "40", "--no_progress", "--plots", "none", *options]
    set_name = SETS.get(name, "medium")
    assert main(["--mode", "report", "--models_dir", str(cem_models), "--seeds", "901", "--report_sets", set_name,
                 "--log_dir", str(log), *common]) == 0  # fmt: skip
    evaluations = pd.read_csv(log / "evaluations.csv")
    ablation = [line for line in (log / "report.md").read_text().splitlines() if line.startswith("Ablation:")]
    assert len(ablation) == (0 if name == "oracle" else 1)  # oracle: the header's runtime information says it
    for algo in ("cem", "las_speed"):
        ev = tmp_path / f"eval_{algo}"
        model = ["--checkpoint", str(cem_models / "cem_seed1_final.pt")] if algo == "cem" else []
        cluster = ["--cluster", GAVEL_CLUSTER] if set_name == "gavel" else []
        assert main(["--mode", "eval", "--algo", algo, *model, "--seed", "901", "--difficulty", "medium", *cluster,
                     "--log_dir", str(ev), *common]) == 0  # fmt: skip
        summary = pd.read_csv(ev / "summary.csv")
        mine = evaluations[(evaluations["policy"] == algo) & (evaluations["checkpoint"].fillna("") != "best")]
        assert mine["avg_jct_s"].item() == pytest.approx(summary["avg_jct_s"].item(), rel=1e-9)
        if name == "non_preemptive":
            assert summary["preemptions"].item() == 0


def test_job_types_with_a_trace_set_is_one_error_line(tmp_path, cem_models, capsys):
    code = main(["--mode", "report", "--models_dir", str(cem_models), "--report_sets", "medium,itp", "--traces_dir",
                 "/work/shared/traces", "--job_types", "gavel", "--log_dir", str(tmp_path / "r")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and "--report_sets medium,hard,clusters,gavel" in err
    code = main(["--mode", "report", "--models_dir", str(cem_models), "--report_sets", "gavel", "--log_dir",
                 str(tmp_path / "r2")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "add --job_types gavel" in err and "Traceback" not in err
