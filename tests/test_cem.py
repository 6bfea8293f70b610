"""`--algo cem`: the cross-entropy search of a linear score-round scorer through the command line (train ->
checkpoint -> eval/compare -> resume, Ctrl-C, bad files), its objective by hand and against direct runs."""

from __future__ import annotations

import dataclasses
import math
import shlex

import numpy as np
import pandas as pd
import pytest
import torch

import agents.cem
import agents.score_search
import evaluation.sets
from agents.cem import train_cem
from agents.checkpoint import load_checkpoint, save_checkpoint
from agents.run_control import training_episode_seed
from agents.score_search import log_ratios
from cli.parser import build_parser, config_from_args
from config import CEMConfig, RunConfig, WorkloadConfig, run_config_from_dict
from env.score_env import run_with_scorer
from main import main
from metrics.summary import summarize
from scenario.build import build_scenario
from schedulers import POLICIES, make_policy
from schedulers.score_features import NUM_FEATURES
from schedulers.score_rounds import LAS_SPEED_WEIGHTS, ROUND_S, LinearScorer

torch.set_num_threads(1)

# tiny runs: 20 easy jobs per scenario, 3 candidates + the mean on 2 scenarios per generation, in this process
TINY = ["--difficulty", "easy", "--num_jobs", "20", "--no_progress"]
# two validation seeds, not the default five: model selection is the same code, at 2/5 of its simulations
SEARCH = ["--cem_population", "3", "--cem_scenarios", "2", "--cem_workers", "1",
          "--validation_seeds", "200,201"]  # fmt: skip


def train_args(tmp_path, *extra: str, models: str = "models", log: str = "log") -> list[str]:
    return ["--mode", "train", "--algo", "cem", "--seed", "4", *TINY, *SEARCH, "--models_dir", str(tmp_path / models),
            "--log_dir", str(tmp_path / log), *extra]  # fmt: skip


def search_state(path) -> tuple:
    c = load_checkpoint(path)
    return c["global_step"], c["search"]["mean"], c["search"]["std"], c["history"], c["rng"]["numpy"]


# ---- the objective ------------------------------------------------------------------------------------------


def test_log_ratios_by_hand():
    jct = np.array([[100.0, 300.0], [200.0, 150.0], [50.0, float("nan")]])
    sjf = np.array([100.0, 150.0])
    got = log_ratios(jct, sjf)
    assert got[0] == pytest.approx((0.0 + math.log(2.0)) / 2)
    assert got[1] == pytest.approx((math.log(2.0) + 0.0) / 2)
    assert got[2] == math.inf  # a candidate that finished nothing on a scenario is never elite
    # a scenario where SJF finished nothing counts for no candidate
    assert log_ratios(jct, np.array([float("nan"), 150.0])).tolist() == pytest.approx(
        [math.log(2.0), 0.0, math.inf]
    )


def test_the_first_generations_mean_objective_is_las_speeds_log_ratio_to_sjf_on_its_scenarios(tmp_path):
    """The search starts at las_speed's weights; generation 0's recorded objective of the mean equals the mean
    ln(avg JCT / SJF's) of las_speed and SJF run natively on the generation's two training scenarios."""
    assert main(train_args(tmp_path, "--total_steps", "1")) == 0
    checkpoint = load_checkpoint(tmp_path / "models" / "cem_seed4_final.pt")
    cfg = run_config_from_dict(checkpoint["run_config"])
    expected = []
    for j in range(2):
        sc = build_scenario(cfg, training_episode_seed(4, j))
        jcts = []
        for name in ("las_speed", "sjf"):
            sim = sc.simulator()
            sim.run(POLICIES[name])
            jcts.append(summarize(sim.result(name, sc.seed)).avg_jct_s)
        expected.append(math.log(jcts[0] / jcts[1]))
    assert checkpoint["history"][0][0] == pytest.approx(float(np.mean(expected)), rel=1e-12)
    assert checkpoint["history"][0][1] <= checkpoint["history"][0][0]  # the best candidate includes the mean
    assert checkpoint["global_step"] == 1 and checkpoint["episode"] == 2 * (1 + 3) + 2


# ---- train -> checkpoint -> eval -> resume -----------------------------------------------------------------


def test_train_checkpoint_eval_compare_and_resume_through_the_cli(tmp_path, capsys):
    models = tmp_path / "models"
    assert main(train_args(tmp_path, "--total_steps", "1")) == 0
    final = models / "cem_seed4_final.pt"
    checkpoint = load_checkpoint(final)
    assert checkpoint["algo"] == "cem" and checkpoint["task"] == "scheduling"
    assert len(checkpoint["scorer"]["weights"]) == NUM_FEATURES
    assert checkpoint["scorer"]["weights"] == checkpoint["search"]["mean"]
    assert "1 generation, " in capsys.readouterr().out

    # eval: the scorer's score rounds, exactly as run_with_scorer runs its weights
    out = tmp_path / "eval"
    assert main(["--mode", "eval", "--algo", "cem", "--seed", "4", *TINY, "--models_dir", str(models),
                 "--log_dir", str(out)]) == 0  # fmt: skip
    cfg = run_config_from_dict(checkpoint["run_config"])
    direct = run_with_scorer(cfg, LinearScorer(checkpoint["scorer"]["weights"]), seed=4)
    summary = pd.read_csv(out / "summary.csv")
    assert summary["avg_jct_s"].iloc[0] == pytest.approx(summarize(direct).avg_jct_s, rel=1e-9)
    assert summary["preemptions"].iloc[0] == int(direct.preemptions.sum())

    # compare with --model final beside the heuristics
    assert main(["--mode", "compare", "--algos", "sjf,las_speed,cem", "--seeds", "1,2", "--seed", "4",
                 "--model", "final", *TINY, "--models_dir", str(models), "--log_dir", str(tmp_path / "cmp")]) == 0  # fmt: skip
    assert "cem" in capsys.readouterr().out

    # resume the finished run to 2 generations: the same search as an uninterrupted 2-generation run
    assert main(train_args(tmp_path, "--resume", str(final), "--total_steps", "2", log="log2")) == 0
    assert main(train_args(tmp_path, "--total_steps", "2", models="straight", log="log3")) == 0
    resumed, straight = search_state(final), search_state(tmp_path / "straight" / "cem_seed4_final.pt")
    assert resumed[0] == 2 and resumed == straight
    assert load_checkpoint(final)["run_id"] == checkpoint["run_id"]


def test_ctrl_c_keeps_the_last_whole_generation_and_the_printed_resume_finishes_the_same_run(
    tmp_path, monkeypatch, capsys
):
    calls = [0]
    real = agents.score_search.avg_jct

    def stop_in_generation_two(*args):
        calls[0] += 1
        # generation 0 runs SJF on the 2 validation seeds, 2 + 4 x 2 training simulations and the new mean on
        # the 2 validation seeds; the 3rd simulation of generation 1 is cut
        if calls[0] == 2 + 10 + 2 + 3:
            raise KeyboardInterrupt
        return real(*args)

    with monkeypatch.context() as patch:
        patch.setattr(agents.score_search, "avg_jct", stop_in_generation_two)
        code = main(train_args(tmp_path, "--total_steps", "3"))
    err = capsys.readouterr().err
    assert code == 130 and "Traceback" not in err
    interrupted = tmp_path / "models" / "cem_seed4_interrupted.pt"
    assert load_checkpoint(interrupted)["global_step"] == 1
    assert not (tmp_path / "models" / "cem_seed4_final.pt").exists()
    hint = [line for line in err.splitlines() if line.startswith("resume with: ")]
    command = shlex.split(hint[0].removeprefix("resume with: "))
    assert main(command[2:]) == 0
    assert not interrupted.exists()
    assert main(train_args(tmp_path, "--total_steps", "3", models="straight", log="log3")) == 0
    assert search_state(tmp_path / "models" / "cem_seed4_final.pt") == search_state(
        tmp_path / "straight" / "cem_seed4_final.pt"
    )


def test_the_search_does_not_depend_on_the_number_of_worker_processes(tmp_path):
    cfg = RunConfig(algo="cem", workload=WorkloadConfig(difficulty="easy", num_jobs=20))
    states = []
    for workers in (1, 2):
        c = dataclasses.replace(cfg, cem=CEMConfig(population=3, scenarios=2, workers=workers))
        models = tmp_path / f"w{workers}"
        train_cem(
            c,
            seed=5,
            total_steps=2,
            models_dir=str(models),
            run_dir=str(tmp_path / f"tb{workers}"),
            progress=False,
        )
        states.append(search_state(models / "cem_seed5_final.pt"))
    assert states[0] == states[1]


def test_a_resume_may_change_the_worker_count_but_not_the_search(tmp_path, capsys):
    assert main(train_args(tmp_path, "--total_steps", "1")) == 0
    final = str(tmp_path / "models" / "cem_seed4_final.pt")
    args = train_args(tmp_path, "--resume", final, "--total_steps", "2", log="b")
    bad = [
        *args[: args.index("--cem_population")],
        "--cem_population",
        "5",
        *args[args.index("--cem_population") + 2 :],
    ]
    assert main(bad) == 2
    assert "--cem_population 5 (the checkpoint's run has 3)" in capsys.readouterr().err


def test_the_starting_spread_is_an_option_kept_in_the_checkpoint_and_fixed_on_resume(tmp_path, capsys):
    """--cem_init_std sets the search's first standard deviation (generation 0's candidates are the mean plus
    that spread times standard normals: with the same seed, twice the spread gives twice the deviation), the
    checkpoint's run config keeps it, and a resume may not change it."""
    assert main(train_args(tmp_path, "--total_steps", "1", "--cem_init_std", "0.9")) == 0
    checkpoint = load_checkpoint(tmp_path / "models" / "cem_seed4_final.pt")
    assert run_config_from_dict(checkpoint["run_config"]).cem.init_std == 0.9
    rng = np.random.default_rng(0)
    wide, narrow = (agents.cem.CrossEntropy(CEMConfig(init_std=s)) for s in (0.6, 0.3))
    start = wide.initial_search(rng)
    assert start["std"].tolist() == [0.6] * NUM_FEATURES
    a = wide.propose(start, np.random.default_rng(1))
    b = narrow.propose(narrow.initial_search(rng), np.random.default_rng(1))
    assert np.allclose(a[1:] - a[0], 2 * (b[1:] - b[0]))
    final = str(tmp_path / "models" / "cem_seed4_final.pt")
    args = train_args(tmp_path, "--resume", final, "--total_steps", "2", "--cem_init_std", "0.5", log="b")
    assert main(args) == 2
    assert "--cem_init_std 0.5 (the checkpoint's run has 0.9)" in capsys.readouterr().err
    assert main(train_args(tmp_path, "--cem_init_std", "0", models="m3", log="log3")) == 2
    assert "--cem_init_std must be a finite number > 0" in one_error_line(capsys)


def assert_eval_runs_as(out, args: list[str], expected) -> None:
    """`--mode eval --algo cem --seed 4 <args>` writes the average JCT and preemptions of the run `expected`."""
    assert main(["--mode", "eval", "--algo", "cem", "--seed", "4", *args, "--log_dir", str(out)]) == 0
    summary = pd.read_csv(out / "summary.csv")
    assert summary["avg_jct_s"].iloc[0] == pytest.approx(summarize(expected).avg_jct_s, rel=1e-9)
    assert summary["preemptions"].iloc[0] == int(expected.preemptions.sum())


def test_a_scorer_runs_at_the_round_it_was_trained_at_unless_the_command_line_gives_one(tmp_path, capsys):
    """--round_s trains cem at that round (kept in the checkpoint, fixed on resume); eval runs the model at its
    trained round, or at an explicit --round_s, each exactly as run_with_scorer at that round (on a 4-GPU
    cluster, where 60 s and 360 s rounds give different schedules)."""
    assert main(train_args(tmp_path, "--total_steps", "1", "--round_s", "60")) == 0
    final = tmp_path / "models" / "cem_seed4_final.pt"
    checkpoint = load_checkpoint(final)
    assert run_config_from_dict(checkpoint["run_config"]).policy.round_s == 60
    scorer = LinearScorer(checkpoint["scorer"]["weights"])
    small = [*TINY, "--cluster", "1xA100-80GB:4", "--models_dir", str(tmp_path / "models")]
    sc = build_scenario(config_from_args(build_parser().parse_args(["--mode", "eval", *small])), 4)
    runs = {r: run_with_scorer(sc, scorer, round_s=r) for r in (60.0, 360.0)}
    assert summarize(runs[60.0]).avg_jct_s != summarize(runs[360.0]).avg_jct_s
    for extra, r in (([], 60.0), (["--round_s", "360"], 360.0)):
        assert_eval_runs_as(tmp_path / f"eval{len(extra)}", [*small, *extra], runs[r])
    # the report runs it at its trained round too, and --round_s there sets every score round's length
    log = tmp_path / "report"
    report = ["--mode", "report", "--models_dir", str(tmp_path / "models"), "--num_jobs", "40", "--no_progress",
              "--seeds", "900", "--report_sets", "medium"]  # fmt: skip
    case = evaluation.sets.scenario(run_config_from_dict(checkpoint["run_config"]), evaluation.sets.cases(
        "medium", (900,))[0], None, 40)  # fmt: skip
    for extra, r in (([], 60.0), (["--round_s", "120"], 120.0)):
        assert main([*report, *extra, "--log_dir", str(log / str(r))]) == 0
        got = pd.read_csv(log / str(r) / "evaluations.csv")
        cem = got[(got["policy"] == "cem") & (got["checkpoint"] == "final")]["avg_jct_s"].item()
        assert cem == pytest.approx(summarize(run_with_scorer(case, scorer, round_s=r)).avg_jct_s, rel=1e-9)
        sim = case.simulator()
        sim.run(make_policy("las_speed", round_s=120.0 if extra else ROUND_S))
        las = got[got["policy"] == "las_speed"]["avg_jct_s"].item()
        assert las == pytest.approx(summarize(sim.result("las_speed", 900)).avg_jct_s, rel=1e-9)
    assert cem != pytest.approx(summarize(run_with_scorer(case, scorer, round_s=60.0)).avg_jct_s)
    sim = case.simulator()
    sim.run(make_policy("las_speed"))
    assert las != pytest.approx(summarize(sim.result("las_speed", 900)).avg_jct_s)  # (the rounds matter here)
    args = train_args(tmp_path, "--resume", str(final), "--total_steps", "2", "--round_s", "120", log="b")
    assert main(args) == 2
    assert "--round_s 120.0 (the checkpoint's run has 60.0)" in capsys.readouterr().err
    # a round length for a run without score rounds is refused
    assert main(["--mode", "eval", "--algo", "sjf", *TINY, "--round_s", "60"]) == 2
    assert "--round_s" in one_error_line(capsys)
    assert main(["--mode", "train", "--algo", "d3qn", *TINY, "--round_s", "60", "--total_steps", "10"]) == 2
    assert "this trains d3qn" in one_error_line(capsys)


def test_a_scorer_trained_with_rounds_at_arrivals_runs_with_them_unless_the_command_line_says_otherwise(
    tmp_path, capsys
):
    """--round_on_arrival yes trains cem with a round at every arrival (kept in the checkpoint, fixed on resume);
    eval runs the model with them, or without when `--round_on_arrival no` is given, each exactly as
    run_with_scorer; the report runs the model as trained and las_speed with them only when given."""
    assert main(train_args(tmp_path, "--total_steps", "1", "--round_on_arrival", "yes")) == 0
    final = tmp_path / "models" / "cem_seed4_final.pt"
    checkpoint = load_checkpoint(final)
    assert run_config_from_dict(checkpoint["run_config"]).policy.round_on_arrival is True
    scorer = LinearScorer(checkpoint["scorer"]["weights"])
    small = [*TINY, "--cluster", "1xA100-80GB:4", "--models_dir", str(tmp_path / "models")]
    sc = build_scenario(config_from_args(build_parser().parse_args(["--mode", "eval", *small])), 4)
    runs = {a: run_with_scorer(sc, scorer, on_arrival=a) for a in (True, False)}
    assert summarize(runs[True]).avg_jct_s != summarize(runs[False]).avg_jct_s
    for extra, a in (([], True), (["--round_on_arrival", "no"], False)):
        assert_eval_runs_as(tmp_path / f"eval{len(extra)}", [*small, *extra], runs[a])
    report = ["--mode", "report", "--models_dir", str(tmp_path / "models"), "--num_jobs", "40", "--no_progress",
              "--seeds", "900", "--report_sets", "medium"]  # fmt: skip
    case = evaluation.sets.scenario(run_config_from_dict(checkpoint["run_config"]), evaluation.sets.cases(
        "medium", (900,))[0], None, 40)  # fmt: skip
    for extra, las_arrivals in (([], False), (["--round_on_arrival", "yes"], True)):
        log = tmp_path / f"report{len(extra)}"
        assert main([*report, *extra, "--log_dir", str(log)]) == 0
        got = pd.read_csv(log / "evaluations.csv")
        cem = got[(got["policy"] == "cem") & (got["checkpoint"] == "final")]["avg_jct_s"].item()
        assert cem == pytest.approx(
            summarize(run_with_scorer(case, scorer, on_arrival=True)).avg_jct_s, rel=1e-9
        )
        sim = case.simulator()
        sim.run(make_policy("las_speed", round_on_arrival=las_arrivals))
        las = got[got["policy"] == "las_speed"]["avg_jct_s"].item()
        assert las == pytest.approx(summarize(sim.result("las_speed", 900)).avg_jct_s, rel=1e-9)
        assert ("at every arrival" in (log / "report.md").read_text()) is las_arrivals
    args = train_args(
        tmp_path, "--resume", str(final), "--total_steps", "2", "--round_on_arrival", "no", log="b"
    )
    assert main(args) == 2
    assert "--round_on_arrival" in capsys.readouterr().err
    assert main(["--mode", "eval", "--algo", "sjf", *TINY, "--round_on_arrival", "yes"]) == 2
    assert "--round_on_arrival" in one_error_line(capsys)
    assert (
        main(["--mode", "train", "--algo", "d3qn", *TINY, "--round_on_arrival", "yes", "--total_steps", "10"])
        == 2
    )
    assert "this trains d3qn" in one_error_line(capsys)


# ---- bad files and options are one error line ---------------------------------------------------------------


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    "damage", ["text", "nan_weights", "short_weights", "other_features", "nan_round", "text_arrivals"]
)
def test_a_bad_weights_file_is_one_error_line(tmp_path, capsys, damage):
    path = tmp_path / "cem_seed0_final.pt"
    if damage == "text":
        path.write_text("weights: 1, 2, 3\n")
    else:
        assert main(train_args(tmp_path, "--total_steps", "1")) == 0
        checkpoint = load_checkpoint(tmp_path / "models" / "cem_seed4_final.pt")
        if damage == "nan_weights":
            checkpoint["scorer"]["weights"] = [float("nan")] * NUM_FEATURES
        elif damage == "short_weights":
            checkpoint["scorer"]["weights"] = [1.0, 2.0]
        elif damage == "nan_round":  # (rounds of NaN seconds would never advance)
            checkpoint["run_config"]["policy"]["round_s"] = float("nan")
        elif damage == "text_arrivals":
            checkpoint["run_config"]["policy"]["round_on_arrival"] = "sometimes"
        else:
            checkpoint["action_space"]["features"] = ["log_est_runtime", "something_else"]
        save_checkpoint(path, checkpoint)
        capsys.readouterr()
    code = main(
        [
            "--mode",
            "eval",
            "--algo",
            "cem",
            *TINY,
            "--checkpoint",
            str(path),
            "--log_dir",
            str(tmp_path / "e"),
        ]
    )
    assert code == 2
    line = one_error_line(capsys)
    assert str(path) in line
    expected = {"text": "not a readable checkpoint", "nan_weights": "finite", "short_weights": "weights",
                "other_features": "retrain", "nan_round": "unusable round length nan",
                "text_arrivals": "unusable round_on_arrival 'sometimes'"}[damage]  # fmt: skip
    assert expected in line


def test_a_report_refuses_unusable_scorer_weights_before_any_evaluation(tmp_path, capsys, monkeypatch):
    assert main(train_args(tmp_path, "--total_steps", "1")) == 0
    final = tmp_path / "models" / "cem_seed4_final.pt"
    checkpoint = load_checkpoint(final)
    checkpoint["scorer"]["weights"] = [float("nan")] * NUM_FEATURES
    save_checkpoint(final, checkpoint)
    capsys.readouterr()

    def no_work(*args):
        raise AssertionError("the report evaluated something before refusing the file")

    monkeypatch.setattr("cli.report.run_tasks", no_work)
    log = tmp_path / "report"
    assert main(["--mode", "report", "--models_dir", str(tmp_path / "models"), "--num_jobs", "20", "--no_progress",
                 "--seeds", "900", "--report_sets", "medium", "--log_dir", str(log)]) == 2  # fmt: skip
    line = one_error_line(capsys)
    assert str(final) in line and "finite" in line and not log.exists()


def test_a_cem_checkpoint_is_not_a_slot_agent_and_a_slot_agent_is_not_a_scorer(tmp_path, capsys):
    assert main(train_args(tmp_path, "--total_steps", "1")) == 0
    final = str(tmp_path / "models" / "cem_seed4_final.pt")
    capsys.readouterr()
    assert (
        main(
            [
                "--mode",
                "eval",
                "--algo",
                "d3qn",
                *TINY,
                "--checkpoint",
                final,
                "--log_dir",
                str(tmp_path / "e"),
            ]
        )
        == 2
    )
    assert "holds a cem agent, not one of the slot env's" in one_error_line(capsys)
    assert main(["--mode", "train", "--algo", "cem", "--task", "power", "--no_progress"]) == 2
    assert "--task scheduling" in one_error_line(capsys)
    assert main(["--mode", "eval", "--algo", "sjf", *TINY, "--cem_population", "4"]) == 2
    assert "--cem_population" in one_error_line(capsys)
    assert main(train_args(tmp_path, "--cem_population", "1", models="m2", log="log2")) == 2
    assert "--cem_population must be >= 2" in one_error_line(capsys)


def test_eval_warns_when_the_scorer_was_trained_with_other_runtime_information(tmp_path, capsys):
    assert main(train_args(tmp_path, "--total_steps", "1")) == 0  # (--runtime_info oracle, the default)
    final = tmp_path / "models" / "cem_seed4_final.pt"
    capsys.readouterr()
    run = ["--mode", "eval", "--algo", "cem", "--seed", "4", *TINY, "--models_dir", str(tmp_path / "models")]
    assert main([*run, "--runtime_info", "estimate", "--log_dir", str(tmp_path / "e1")]) == 0
    warned = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert warned == [
        f"warning: {final} was trained with --runtime_info oracle; this run evaluates with estimate"
    ]
    assert main([*run, "--log_dir", str(tmp_path / "e2")]) == 0
    assert "warning:" not in capsys.readouterr().err


def test_las_speed_weights_are_the_search_start():
    assert (
        agents.cem.initial_mean(CEMConfig()).tolist()
        == LinearScorer.from_named(LAS_SPEED_WEIGHTS).weights.tolist()
    )
    assert agents.cem.initial_mean(CEMConfig(init="zero")).tolist() == [0.0] * NUM_FEATURES


def test_the_report_evaluates_cem_checkpoints_like_the_other_learners(tmp_path):
    """Two training seeds' final models in the report's table (train_seeds 2), each case's figure the same as an
    eval run of that checkpoint on that scenario."""
    for seed in ("4", "5"):
        args = train_args(tmp_path, "--total_steps", "1", log=f"log{seed}")
        args[args.index("--seed") + 1] = seed
        assert main(args) == 0
    models = tmp_path / "models"
    log = tmp_path / "report"
    assert main(["--mode", "report", "--models_dir", str(models), "--num_jobs", "20", "--no_progress", "--seeds",
                 "900,901", "--report_sets", "medium", "--log_dir", str(log)]) == 0  # fmt: skip
    evaluations = pd.read_csv(log / "evaluations.csv")
    assert set(evaluations[evaluations["policy"] == "cem"]["checkpoint"]) == {"final", "best"}  # validated
    cem = evaluations[(evaluations["policy"] == "cem") & (evaluations["checkpoint"] == "final")]
    assert sorted(zip(cem["train_seed"], cem["case"], strict=True)) == [
        (4, "seed900"), (4, "seed901"), (5, "seed900"), (5, "seed901")
    ]  # fmt: skip
    ev = tmp_path / "eval"
    assert main(["--mode", "eval", "--algo", "cem", "--checkpoint", str(models / "cem_seed5_final.pt"), "--seed",
                 "901", "--difficulty", "medium", "--num_jobs", "20", "--no_progress", "--log_dir", str(ev)]) == 0  # fmt: skip
    mine = cem[(cem["train_seed"] == 5) & (cem["case"] == "seed901")]["avg_jct_s"].item()
    assert mine == pytest.approx(pd.read_csv(ev / "summary.csv")["avg_jct_s"].item(), rel=1e-9)
    table = pd.read_csv(log / "report.csv")
    row = table[(table["policy"] == "cem") & (table["checkpoint"] == "final")]
    assert row["train_seeds"].item() == 2 and row["cases"].item() == 2


def test_a_time_budget_ends_the_run_after_a_whole_generation_and_a_resume_continues_it(tmp_path):
    models = tmp_path / "models"
    assert main(train_args(tmp_path, "--total_steps", "3", "--cem_minutes", "0.00001")) == 0
    final = models / "cem_seed4_final.pt"
    assert load_checkpoint(final)["global_step"] == 1 and load_checkpoint(final)["total_steps"] == 3
    assert not (models / "cem_seed4_interrupted.pt").exists()
    assert main(train_args(tmp_path, "--resume", str(final), log="b")) == 0
    assert main(train_args(tmp_path, "--total_steps", "3", models="straight", log="c")) == 0
    assert search_state(final) == search_state(tmp_path / "straight" / "cem_seed4_final.pt")
