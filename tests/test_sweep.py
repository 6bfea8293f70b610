"""Sweeps: study files (expansion, validation), a study end to end, byte identity across worker counts and Ray,
failed runs, --resume and the study folder rules."""

from __future__ import annotations

import contextlib
import csv
import json
import math
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evaluation.paired import t975
from main import main
from sweep.report import mean_ci95
from sweep.study import load_study
from tests.chromium_page import CHROMIUM
from tests.test_run_figures import NO_CHROMIUM, assert_renders_cleanly

TINY = """
name = "tiny"
[options]
difficulty = "easy"
num_jobs = 15
[grid]
algo = ["fcfs", "easy"]
seed = [0, 1]
"""


def _write(tmp_path: Path, text: str, name: str = "study.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _sweep(study: Path, out: Path, *extra: str) -> int:
    return main(["--mode", "sweep", "--study", str(study), "--log_dir", str(out), "--no_progress", *extra])


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def _tree(folder: Path) -> dict[str, bytes]:
    """Every file under folder (relative path -> bytes), except the captured output logs, study_config.json
    (whose run command lines name the folder) and the hidden token (random per invocation)."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
        and p.parts[len(folder.parts)] != "output"
        and p.name not in ("study_config.json", ".sweep_token")
    }


# ---------------------------------------------------------------- expansion and validation


def test_grid_expands_in_file_order_last_key_fastest_crossed_with_each_run(tmp_path):
    study = load_study(
        _write(
            tmp_path,
            'name = "x"\n[options]\nnum_jobs = 10\n[grid]\nalgo = ["fcfs", "sjf"]\nload_factor = [0.5, 1]\n'
            '[[runs]]\ndifficulty = "easy"\n[[runs]]\ndifficulty = "hard"\nseed = 3\n',
        )
    )
    assert [s.name for s in study.runs] == [
        "000_difficulty=easy_algo=fcfs_load_factor=0.5",
        "001_difficulty=easy_algo=fcfs_load_factor=1.0",
        "002_difficulty=easy_algo=sjf_load_factor=0.5",
        "003_difficulty=easy_algo=sjf_load_factor=1.0",
        "004_difficulty=hard_seed=3_algo=fcfs_load_factor=0.5",
        "005_difficulty=hard_seed=3_algo=fcfs_load_factor=1.0",
        "006_difficulty=hard_seed=3_algo=sjf_load_factor=0.5",
        "007_difficulty=hard_seed=3_algo=sjf_load_factor=1.0",
    ]
    assert study.runs[1].options == (
        ("mode", "eval"), ("num_jobs", 10), ("difficulty", "easy"), ("algo", "fcfs"), ("load_factor", 1.0),
    )  # fmt: skip
    assert study.params == ("mode", "num_jobs", "difficulty", "seed", "algo", "load_factor")
    assert study.varying == ("difficulty", "seed", "algo", "load_factor")
    assert study.runs[0].value("seed") is None and study.runs[4].value("seed") == 3
    assert not study.has_train


def test_train_runs_come_first_and_evaluations_use_the_study_models(tmp_path):
    text = (
        '[train.options]\ntotal_steps = 500\n[train.grid]\nalgo = ["d3qn", "sac"]\nseed = [0, 1]\n'
        '[options]\nmode = "compare"\nalgos = ["fcfs", "d3qn", "sac"]\nseeds = [100, 101]\n[grid]\nseed = [0, 1]\n'
    )
    study = load_study(_write(tmp_path, text))
    assert [(s.phase, s.name) for s in study.runs] == [
        ("train", "train_000_algo=d3qn_seed=0"),
        ("train", "train_001_algo=d3qn_seed=1"),
        ("train", "train_002_algo=sac_seed=0"),
        ("train", "train_003_algo=sac_seed=1"),
        ("eval", "000_seed=0"),
        ("eval", "001_seed=1"),
    ]
    assert study.runs[0].options == (("mode", "train"), ("total_steps", 500), ("algo", "d3qn"), ("seed", 0))
    assert study.runs[4].value("algos") == ("fcfs", "d3qn", "sac") and study.has_train
    from sweep.cli import run_argv

    argv = run_argv(study, study.runs[4], Path("S"))
    assert argv == [
        "--mode", "compare", "--algos", "fcfs,d3qn,sac", "--seeds", "100,101", "--seed", "0",
        "--log_dir", "S/runs/000_seed=0", "--no_progress", "--models_dir", "S/models",
    ]  # fmt: skip


def test_with_a_single_model_set_evaluations_that_run_no_agent_get_no_models_dir(tmp_path):
    text = (
        '[train.grid]\nalgo = ["sac"]\n[[runs]]\nalgo = "fcfs"\n[[runs]]\nalgo = "sac"\n'
        '[[runs]]\nmode = "compare"\n[[runs]]\nmode = "compare"\nalgos = "easy,SAC"\n'
    )
    study = load_study(_write(tmp_path, text))
    assert [(s.name, s.models, s.model_set) for s in study.runs] == [
        ("train_000_algo=sac", "models", ()),
        ("000_algo=fcfs", "", ()),
        ("001_algo=sac", "models", ()),
        ("002_mode=compare", "", ()),  # compare's default --algos: fcfs, sjf, easy
        ("003_mode=compare_algos=easy,SAC", "models", ()),
    ]
    from sweep.cli import run_argv
    from sweep.worker import parse_run

    for spec in study.runs:
        parse_run(run_argv(study, spec, Path("S")))
    assert run_argv(study, study.runs[1], Path("S"))[-1] == "--no_progress"
    assert run_argv(study, study.runs[2], Path("S"))[-2:] == ["--models_dir", "S/models"]


def test_a_train_grid_varying_the_budget_makes_model_sets_crossed_with_agent_evaluations(tmp_path):
    text = (
        '[train.options]\nalgo = "d3qn"\n[train.grid]\ntotal_steps = [100, 200]\nseed = [0, 1]\n'
        '[options]\nmode = "compare"\nseeds = [100]\n[[runs]]\nalgos = ["fcfs", "easy"]\n'
        '[[runs]]\nalgos = ["fcfs", "d3qn"]\n[grid]\nseed = [0, 1]\n'
    )
    study = load_study(_write(tmp_path, text))
    # 2 budgets x 2 seeds of training; the heuristics-only compare runs once per seed, the one with d3qn once per
    # seed and budget (budget inner), each loading the models of its budget
    assert [(s.phase, s.name, s.models) for s in study.runs] == [
        ("train", "train_000_total_steps=100_seed=0", "models/total_steps=100"),
        ("train", "train_001_total_steps=100_seed=1", "models/total_steps=100"),
        ("train", "train_002_total_steps=200_seed=0", "models/total_steps=200"),
        ("train", "train_003_total_steps=200_seed=1", "models/total_steps=200"),
        ("eval", "000_algos=fcfs,easy_seed=0", ""),
        ("eval", "001_algos=fcfs,easy_seed=1", ""),
        ("eval", "002_train_total_steps=100_algos=fcfs,d3qn_seed=0", "models/total_steps=100"),
        ("eval", "003_train_total_steps=200_algos=fcfs,d3qn_seed=0", "models/total_steps=200"),
        ("eval", "004_train_total_steps=100_algos=fcfs,d3qn_seed=1", "models/total_steps=100"),
        ("eval", "005_train_total_steps=200_algos=fcfs,d3qn_seed=1", "models/total_steps=200"),
    ]
    assert study.runs[2].options == (("mode", "train"), ("algo", "d3qn"), ("total_steps", 200), ("seed", 0))
    assert study.runs[7].options == (
        ("mode", "compare"),
        ("seeds", (100,)),
        ("algos", ("fcfs", "d3qn")),
        ("seed", 0),
    )
    assert study.params == ("mode", "algo", "total_steps", "seed", "train_total_steps", "seeds", "algos")
    assert study.varying == ("train_total_steps", "seed", "algos")
    assert [s.value("train_total_steps") for s in study.runs] == [
        100,
        100,
        200,
        200,
        None,
        None,
        100,
        200,
        100,
        200,
    ]
    assert study.runs[7].value("total_steps") is None
    from sweep.cli import run_argv
    from sweep.report import group_columns

    assert group_columns(study) == ["train_total_steps", "scheduler"]
    assert run_argv(study, study.runs[7], Path("S"))[-2:] == ["--models_dir", "S/models/total_steps=200"]
    assert run_argv(study, study.runs[2], Path("S"))[-2:] == ["--models_dir", "S/models/total_steps=200"]
    assert "--models_dir" not in run_argv(study, study.runs[4], Path("S"))  # runs no agent: loads no model


def test_model_sets_of_train_runs_that_set_different_keys(tmp_path):
    text = (
        '[train.grid]\nalgo = ["sac"]\n[[train.runs]]\n[[train.runs]]\nreward = "delay"\n'
        '[[train.runs]]\nreward = "delay"\nwindow = 8\n[grid]\nalgo = ["sac", "fcfs"]\n'
    )
    study = load_study(_write(tmp_path, text))
    assert [(s.name, s.models) for s in study.runs] == [
        ("train_000_algo=sac", "models/default"),
        ("train_001_reward=delay_algo=sac", "models/reward=delay"),
        ("train_002_reward=delay_window=8_algo=sac", "models/reward=delay_window=8"),
        ("000_algo=sac", "models/default"),
        ("001_train_reward=delay_algo=sac", "models/reward=delay"),
        ("002_train_reward=delay_train_window=8_algo=sac", "models/reward=delay_window=8"),
        ("003_algo=fcfs", ""),
    ]
    assert study.params == ("mode", "reward", "window", "algo", "train_reward", "train_window")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[grid]\nalgoo = ['fcfs']\n", "[grid] key 'algoo' is not an option of main.py"),
        ("[grid]\nseed = ['zero']\n", "[grid] key 'seed': expected an integer, got 'zero'"),
        ("[grid]\nseed = [true]\n", "[grid] key 'seed': expected an integer, got True"),
        (
            "[options]\nload_factor = 'high'\n[grid]\nseed = [0]\n",
            "[options] key 'load_factor': expected a number",
        ),
        (
            "[grid]\ndifficulty = ['extreme']\n",
            "[grid] key 'difficulty': 'extreme' is not one of easy, medium, hard",
        ),
        ("[grid]\nuniform_speed = [1]\n", "[grid] key 'uniform_speed': expected true or false"),
        ("[grid]\nseeds = ['a,b']\n", "[grid] key 'seeds': expected comma-separated integers"),
        ("[grid]\n", "[grid] is empty"),
        ("[grid]\nseed = []\n", "[grid] key 'seed': empty list"),
        ("[grid]\nseed = 3\n", "[grid] key 'seed': expected a list of values, got 3"),
        ("[options]\nseed = 3\n", "no runs: give [grid]"),
        ("[grid]\nlog_dir = ['x']\n", "[grid] key 'log_dir' is set by the sweep itself"),
        ("[grids]\nseed = [0]\n", "top level key 'grids' is unknown"),
        ("[[runs]]\nalgo = 'fcfs'\nwindow = 'big'\n", "[[runs]] #1 key 'window': expected an integer"),
        ("[grid]\nmode = ['train']\n", "key 'mode': training runs go in [train]"),
        (
            "[train.options]\nalgo = 'd3qn'\n[train.grid]\nmodels_dir = ['a', 'b']\n[grid]\nseed = [0]\n",
            "[train.grid] key 'models_dir': training runs are mode 'train' and write into the study's models/",
        ),
        (
            "[train.grid]\nalgo = ['d3qn']\n[[train.runs]]\nmode = 'eval'\n[grid]\nseed = [0]\n",
            "[[train.runs]] key 'mode': training runs are mode 'train'",
        ),
        (
            "[train.grid]\nalgo = ['d3qn']\nlog_dir = ['a']\n[grid]\nseed = [0]\n",
            "[train.grid] key 'log_dir' is set by the sweep itself",
        ),
        (
            "[train.grid]\nalgo = ['d3qn']\n[grid]\nmodels_dir = ['a']\n",
            "[grid] key 'models_dir': with [train], runs use the study's models/",
        ),
        ("[grid\nseed = [0]\n", "not valid TOML"),
        ("[grid]\nseed = [0]\n[[runs]]\nseed = 1\n", "[grid] key 'seed' is also set in [[runs]]"),
        (
            "[options]\nseed = 1\n[grid]\nseed = [0, 1]\n",
            "key 'seed' is set in both [options] and [grid]: set it in one place",
        ),
        (
            "[options]\nmode = 'eval'\n[[runs]]\nmode = 'compare'\n",
            "key 'mode' is set in both [options] and [[runs]]",
        ),
        (
            "[train.options]\nseed = 0\n[train.grid]\nalgo = ['d3qn']\nseed = [0, 1]\n[grid]\nseed = [0]\n",
            "key 'seed' is set in both [train.options] and [train.grid]",
        ),
        ("[grid]\nseed = [1, 1]\n", "[grid] key 'seed': 1 is listed twice"),
        ("[grid]\nload_factor = [1, 0.5, 1.0]\n", "[grid] key 'load_factor': 1.0 is listed twice"),
        (
            "[train.grid]\nalgo = ['d3qn', 'sac', 'd3qn']\n[grid]\nseed = [0]\n",
            "[train.grid] key 'algo': d3qn is listed twice",
        ),
        (
            "[[runs]]\nalgo = 'fcfs'\n[[runs]]\nalgo = 'easy'\n[[runs]]\nalgo = 'fcfs'\n",
            "runs 000_algo=fcfs and 002_algo=fcfs have the same options",
        ),
        ("[resources]\nnum_gpu = 1\n[grid]\nseed = [0]\n", "[resources] key 'num_gpu' is unknown"),
        (
            "[resources]\nnum_gpus = -1\n[grid]\nseed = [0]\n",
            "[resources] key 'num_gpus': expected a number >= 0",
        ),
        (
            "[resources]\ntimeout_s = 0\n[grid]\nseed = [0]\n",
            "[resources] key 'timeout_s': expected a number > 0",
        ),
        (
            "[train.resources]\nnum_cpus = 'two'\n[train.grid]\nalgo = ['d3qn']\n[grid]\nseed = [0]\n",
            "[train.resources] key 'num_cpus': expected a number, got 'two'",
        ),
    ],
)
def test_study_mistakes_name_the_file_and_key_and_run_nothing(tmp_path, capsys, text, expected):
    study = _write(tmp_path, text, "bad_study.toml")
    out = tmp_path / "out"
    assert _sweep(study, out) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {study}") and expected in err and err.count("\n") == 1, err
    assert not out.exists()


def test_each_run_is_validated_by_mains_own_checks_before_any_run(tmp_path, capsys):
    study = _write(tmp_path, '[options]\nalgo = "d3qn"\n[grid]\nwindow = [4, 0]\n')
    out = tmp_path / "out"
    assert _sweep(study, out) == 2
    err = capsys.readouterr().err
    assert "run 001_window=0: --window must be > 0" in err and str(study) in err
    assert not out.exists()


def test_sweep_options_need_mode_sweep_and_run_options_go_in_the_study(tmp_path, capsys):
    assert main(["--mode", "eval", "--study", "x.toml"]) == 2
    assert "options of --mode sweep" in capsys.readouterr().err
    assert main(["--mode", "compare", "--baseline", "sjf"]) == 2
    assert "--baseline: options of --mode sweep" in capsys.readouterr().err
    study = _write(tmp_path, TINY)
    assert main(["--mode", "sweep", "--study", str(study), "--seed", "3"]) == 2
    assert "not from the command line: --seed 3" in capsys.readouterr().err
    assert main(["--mode", "sweep", "--study", str(study), "--workers", "0"]) == 2
    assert "--workers must be >= 1" in capsys.readouterr().err
    assert main(["--mode", "sweep", "--study", str(study), "--address", "auto"]) == 2
    assert "it needs --backend ray" in capsys.readouterr().err


def test_t_quantiles_and_confidence_interval_by_hand():
    assert t975(1) == pytest.approx(12.7062, abs=1e-4)
    assert t975(9) == pytest.approx(2.2622, abs=1e-4)
    assert t975(40) == pytest.approx(2.0211, abs=1e-4)  # past the table: Cornish-Fisher
    assert t975(120) == pytest.approx(1.9799, abs=1e-4)
    mean, ci = mean_ci95([1.0, 2.0, 3.0])  # s = 1, n = 3: 4.3027 / sqrt(3)
    assert mean == 2.0 and ci == pytest.approx(4.302652730 / math.sqrt(3))
    assert math.isnan(mean_ci95([5.0])[1]) and mean_ci95([5.0])[0] == 5.0


def test_t_quantiles_match_scipy():
    stats = pytest.importorskip("scipy.stats", reason="scipy absent: the by-hand quantiles above still run")
    for df in (1, 2, 5, 10, 29, 30, 31, 35, 50, 100, 1000):
        assert t975(df) == pytest.approx(stats.t.ppf(0.975, df), abs=2e-5), df


# ---------------------------------------------------------------- end to end (local backend)


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
    """The TINY study run once with 1 worker: (study file, its folder)."""
    tmp = tmp_path_factory.mktemp("tiny")
    study = _write(tmp, TINY)
    out = tmp / "w1"
    assert _sweep(study, out, "--workers", "1") == 0
    return study, out


def test_tiny_study_writes_results_aggregate_plots_and_records(tiny_study):
    study, out = tiny_study
    rows = _csv(out / "results.csv")
    assert [r["run"] for r in rows] == [
        "000_algo=fcfs_seed=0",
        "001_algo=fcfs_seed=1",
        "002_algo=easy_seed=0",
        "003_algo=easy_seed=1",
    ]
    assert {r["status"] for r in rows} == {"ok"} and {r["error"] for r in rows} == {""}
    assert [(r["algo"], r["seed"], r["scheduler"], r["summary_seed"]) for r in rows] == [
        ("fcfs", "0", "fcfs", "0"),
        ("fcfs", "1", "fcfs", "1"),
        ("easy", "0", "easy", "0"),
        ("easy", "1", "easy", "1"),
    ]
    assert {r["num_jobs"] for r in rows} == {"15"} and {r["difficulty"] for r in rows} == {"easy"}
    for r in rows:  # every summary metric of the run, as its summary.csv has it
        (summary,) = _csv(out / "runs" / r["run"] / "summary.csv")
        assert r["avg_jct_s"] == summary["avg_jct_s"] and r["completed"] == summary["completed"]
    agg = _csv(out / "aggregate.csv")
    assert [(a["scheduler"], a["n"]) for a in agg] == [("fcfs", "2"), ("easy", "2")]
    jct = [float(r["avg_jct_s"]) for r in rows[:2]]
    mean = (jct[0] + jct[1]) / 2
    ci = 12.706204736 * abs(jct[0] - jct[1]) / math.sqrt(2) / math.sqrt(2)  # s = |a - b| / sqrt(2), n = 2
    assert float(agg[0]["avg_jct_s_mean"]) == pytest.approx(mean, abs=1e-6)
    assert float(agg[0]["avg_jct_s_ci95"]) == pytest.approx(ci, abs=1e-5)
    for metric in ("avg_jct_s", "avg_wait_s", "avg_bounded_slowdown"):
        assert (out / f"{metric}.png").stat().st_size > 0
    assert (out / "study.toml").read_text() == study.read_text()
    record = json.loads((out / "study_config.json").read_text())
    assert record["result"] == {"ok": 4, "failed": 0, "not run": 0}
    assert record["runs"][0]["argv"][:6] == ["--mode", "eval", "--difficulty", "easy", "--num_jobs", "15"]


def test_the_study_page_shows_the_tables_figures_files_and_command(tiny_study):
    from sweep.page import study_cases
    from sweep.report import result_rows
    from sweep.study import load_study as load

    study, out = tiny_study
    page = (out / "report.html").read_text()
    assert "<pre>python main.py --mode sweep --study " in page and "--workers" not in page
    for name in ("results.csv", "aggregate.csv", "study.toml", "study_config.json", "sweep_paired.png"):
        assert f'href="{name}"' in page, name
    for run in ("000_algo=fcfs_seed=0", "003_algo=easy_seed=1"):
        assert f'href="runs/{run}/report.html"' in page and f'href="output/{run}.log"' in page
    assert page.count("data:image/png;base64,") == len(list(out.glob("*.png"))) >= 5
    # the paired differences drawn are easy - fcfs on each seed, as results.csv has them
    rows = _csv(out / "results.csv")
    jct = {(r["scheduler"], r["seed"]): float(r["avg_jct_s"]) for r in rows}
    spec = load(study)
    status = {r["run"]: ("ok", "") for r in rows}
    cases = study_cases(spec, result_rows(spec, out / "runs", status), out / "runs")
    (case,) = cases
    from metrics.plots import paired_figure

    ax = paired_figure(list(case.rows)).axes[0]
    (dots,) = [line.get_ydata().tolist() for line in ax.get_lines() if line.get_marker() == "o"]
    assert dots == pytest.approx([jct["easy", s] - jct["fcfs", s] for s in ("0", "1")])
    # each row's jobs.csv is its own run's
    run_of = {(r["scheduler"], int(r["seed"])): r["run"] for r in rows}
    for row, jobs in zip(case.rows, case.jobs_csv, strict=True):
        assert jobs == out / "runs" / run_of[row.scheduler, row.seed] / "jobs.csv"


def test_a_study_with_plots_none_has_a_page_without_figures_and_a_baseline_must_be_a_policy(tmp_path, capsys):
    study = _write(tmp_path, TINY.replace("seed = [0, 1]", "seed = [0]"))
    assert _sweep(study, tmp_path / "o", "--baseline", "sjf") == 2
    assert (
        "--baseline sjf: no run of the study evaluates it; its policies are fcfs, easy"
        in capsys.readouterr().err
    )
    assert not (tmp_path / "o").exists()
    assert _sweep(study, tmp_path / "o", "--plots", "none") == 0
    assert (
        not list((tmp_path / "o").glob("*.png"))
        and "--plots none" in (tmp_path / "o" / "report.html").read_text()
    )
    assert _sweep(study, tmp_path / "o", "--resume", "--baseline", "easy", "--plot_formats", "svg") == 0
    assert {p.name for p in (tmp_path / "o").glob("sweep_paired.*")} == {"sweep_paired.svg"}


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_the_study_page_renders_in_headless_chromium(tiny_study):
    assert_renders_cleanly(tiny_study[1] / "report.html")


def test_a_study_run_equals_the_same_command_line_run_by_hand(tiny_study, tmp_path):
    _, out = tiny_study
    hand = tmp_path / "hand"
    argv = ["--mode", "eval", "--difficulty", "easy", "--num_jobs", "15", "--algo", "easy", "--seed", "1"]
    assert main([*argv, "--log_dir", str(hand), "--no_progress"]) == 0
    run = out / "runs" / "003_algo=easy_seed=1"
    for name in ("jobs.csv", "summary.csv", "cluster.csv", "workload_report.json", "run_config.json"):
        assert (run / name).read_bytes() == (hand / name).read_bytes(), name


def test_two_workers_give_byte_identical_files(tiny_study, tmp_path):
    study, out = tiny_study
    assert _sweep(study, tmp_path / "w2", "--workers", "2") == 0
    one, two = _tree(out), _tree(tmp_path / "w2")
    assert one.keys() == two.keys() and len(one) > 20
    assert [k for k in one if one[k] != two[k]] == []


@pytest.mark.ray
def test_ray_gives_byte_identical_files(tiny_study, tmp_path):
    pytest.importorskip("ray", reason="Ray absent: pip install -r requirements-ray.txt")
    study, out = tiny_study
    assert _sweep(study, tmp_path / "ray", "--backend", "ray", "--workers", "2") == 0
    one, ray = _tree(out), _tree(tmp_path / "ray")
    assert one.keys() == ray.keys()
    assert [k for k in one if one[k] != ray[k]] == []


def test_a_failed_run_is_recorded_and_the_study_goes_on(tmp_path, capsys):
    study = _write(
        tmp_path,
        '[options]\ndifficulty = "easy"\n[[runs]]\nalgo = "fcfs"\nnum_jobs = 10\n'
        '[[runs]]\nworkload_type = "csv"\nworkload_path = "no_such_jobs.csv"\n[[runs]]\nalgo = "sjf"\nnum_jobs = 10\n',
    )
    out = tmp_path / "out"
    assert _sweep(study, out, "--workers", "2") == 1
    rows = _csv(out / "results.csv")
    assert [r["status"] for r in rows] == ["ok", "failed", "ok"]
    assert rows[1]["error"].startswith("error: ") and "no_such_jobs.csv" in rows[1]["error"]
    assert rows[1]["avg_jct_s"] == "" and rows[2]["avg_jct_s"] != ""
    assert "no_such_jobs.csv" in (out / "output" / f"{rows[1]['run']}.log").read_text()
    printed = capsys.readouterr().out
    assert "2 ok, 1 failed" in printed and f"failed: {rows[1]['run']}" in printed
    assert json.loads((out / "study_config.json").read_text())["result"] == {
        "ok": 2,
        "failed": 1,
        "not run": 0,
    }


def test_resume_skips_complete_runs_and_reruns_interrupted_ones(tiny_study, tmp_path, capsys):
    study, first = tiny_study
    out = tmp_path / "again"
    shutil.copytree(first, out)
    runs = out / "runs"
    stamp = {p: p.stat().st_mtime_ns for p in runs.rglob("jobs.csv")}
    # run 001 was in flight when the study was killed: its run_config.json says it never finished
    rc = runs / "001_algo=fcfs_seed=1" / "run_config.json"
    record = json.loads(rc.read_text())
    rc.write_text(json.dumps({**record, "outputs": None}))
    shutil.rmtree(runs / "002_algo=easy_seed=0")  # and 002 had not started
    capsys.readouterr()
    assert _sweep(study, out, "--resume", "--workers", "1") == 0
    assert "2 already complete (skipped)" in capsys.readouterr().out
    for p, t in stamp.items():
        rerun = p.parent.name in ("001_algo=fcfs_seed=1", "002_algo=easy_seed=0")
        assert (p.stat().st_mtime_ns != t) == rerun, p
    assert _tree(out) == _tree(first)


def test_study_folder_holding_another_study_or_foreign_files_is_refused(tiny_study, tmp_path, capsys):
    study, first = tiny_study
    other = _write(
        tmp_path, TINY.replace('"tiny"', '"other"').replace("num_jobs = 15", "num_jobs = 12"), "other.toml"
    )
    out = tmp_path / "out"
    shutil.copytree(first, out)
    assert _sweep(other, out) == 2
    assert "holds another study" in capsys.readouterr().err
    (out / "notes.txt").write_text("mine")
    assert _sweep(other, out, "--overwrite") == 2
    assert "notes.txt" in capsys.readouterr().err and (out / "results.csv").exists()
    (out / "notes.txt").unlink()
    assert _sweep(other, out, "--overwrite", "--workers", "2") == 0
    assert {r["num_jobs"] for r in _csv(out / "results.csv")} == {"12"}
    assert (out / "study.toml").read_text() == other.read_text()


def test_training_runs_finish_first_and_their_models_live_in_the_study(tmp_path, capsys):
    study = _write(
        tmp_path,
        '[train.options]\ntotal_steps = 150\ndemo_policy = "none"\nvalidation_seeds = "none"\n'
        'difficulty = "easy"\nnum_jobs = 12\ndevice = "cpu"\n[train.grid]\nalgo = ["d3qn"]\nseed = [0]\n'
        '[options]\nmode = "compare"\nalgos = ["fcfs", "d3qn"]\nseeds = [100]\ndifficulty = "easy"\n'
        "num_jobs = 12\n[grid]\nseed = [0]\n",
    )
    out = tmp_path / "out"
    assert _sweep(study, out, "--workers", "2") == 0
    assert (out / "models" / "d3qn_seed0_final.pt").is_file()
    rows = _csv(out / "results.csv")
    assert [(r["run"], r["phase"], r["status"], r["scheduler"]) for r in rows] == [
        ("train_000_algo=d3qn_seed=0", "train", "ok", ""),
        ("000_seed=0", "eval", "ok", "fcfs"),
        ("000_seed=0", "eval", "ok", "d3qn"),
    ]
    record = json.loads((out / "runs" / "000_seed=0" / "run_config.json").read_text())
    assert record["run"]["checkpoints"]["d3qn"]["path"] == str(out / "models" / "d3qn_seed0_final.pt")
    # one more training seed: the finished training is reused, but the evaluation loads models of a set that was
    # trained again, so it is rerun rather than reused
    model = out / "models" / "d3qn_seed0_final.pt"
    stamps = (model.stat().st_mtime_ns, (out / "runs" / "000_seed=0" / "summary.csv").stat().st_mtime_ns)
    (tmp_path / "grown").mkdir()  # the same study (its name is the file's), one more seed
    text = study.read_text().replace("seed = [0]\n[options]", "seed = [0, 1]\n[options]")
    grown = _write(tmp_path / "grown", text)
    capsys.readouterr()
    assert _sweep(grown, out, "--workers", "2", "--resume") == 0
    printed = capsys.readouterr().out
    assert (
        "3 runs (2 training, 1 evaluation), 1 already complete (skipped), 1 finished evaluation rerun"
        in printed
    )
    assert model.stat().st_mtime_ns == stamps[0] and (out / "models" / "d3qn_seed1_final.pt").is_file()
    assert (out / "runs" / "000_seed=0" / "summary.csv").stat().st_mtime_ns != stamps[1]


def test_a_study_training_two_budgets_evaluates_each_budgets_model(tmp_path):
    study = _write(
        tmp_path,
        '[train.options]\nalgo = "d3qn"\ndemo_policy = "none"\nvalidation_seeds = "none"\ndifficulty = "easy"\n'
        'num_jobs = 10\ndevice = "cpu"\n[train.grid]\ntotal_steps = [100, 200]\nseed = [0]\n'
        '[options]\ndifficulty = "easy"\nnum_jobs = 10\n[[runs]]\nalgo = "fcfs"\n[[runs]]\nalgo = "d3qn"\n'
        "[grid]\nseed = [0]\n",
    )
    out = tmp_path / "out"
    assert _sweep(study, out, "--workers", "2") == 0
    small, big = (out / "models" / f"total_steps={n}" / "d3qn_seed0_final.pt" for n in (100, 200))
    assert small.read_bytes() != big.read_bytes()
    assert sorted(p.name for p in (out / "models").iterdir()) == ["total_steps=100", "total_steps=200"]
    rows = _csv(out / "results.csv")
    assert [
        (r["run"], r["phase"], r["total_steps"], r["train_total_steps"], r["scheduler"]) for r in rows
    ] == [
        ("train_000_total_steps=100_seed=0", "train", "100", "100", ""),
        ("train_001_total_steps=200_seed=0", "train", "200", "200", ""),
        ("000_algo=fcfs_seed=0", "eval", "", "", "fcfs"),
        ("001_train_total_steps=100_algo=d3qn_seed=0", "eval", "", "100", "d3qn"),
        ("002_train_total_steps=200_algo=d3qn_seed=0", "eval", "", "200", "d3qn"),
    ]
    for run, model in (
        ("001_train_total_steps=100_algo=d3qn_seed=0", small),
        ("002_train_total_steps=200_algo=d3qn_seed=0", big),
    ):
        record = json.loads((out / "runs" / run / "run_config.json").read_text())
        assert record["run"]["checkpoints"]["d3qn"]["path"] == str(model)
    agg = _csv(out / "aggregate.csv")
    assert [(a["train_total_steps"], a["scheduler"], a["n"]) for a in agg] == [
        ("", "fcfs", "1"),
        ("100", "d3qn", "1"),
        ("200", "d3qn", "1"),
    ]
    assert [a["avg_jct_s_mean"] for a in agg[1:]] == [repr(round(float(r["avg_jct_s"]), 6)) for r in rows[3:]]


@pytest.mark.parametrize("path", sorted((Path(__file__).resolve().parents[1] / "studies").glob("*.toml")))
def test_shipped_studies_are_valid(path):
    from sweep.cli import run_argv
    from sweep.worker import parse_run

    study = load_study(path)
    assert study.runs and study.name == path.stem
    for spec in study.runs:
        parse_run(run_argv(study, spec, Path("logs") / "x"))
    assert len(set(study.params)) == len(study.params), study.params  # no column twice in results.csv


def test_a_sweep_option_argparse_refuses_is_one_error_line(tmp_path, capsys):
    study = tmp_path / "s.toml"
    study.write_text('[grid]\nalgo = ["fcfs"]\n')
    with pytest.raises(SystemExit) as exit_info:
        main(["--mode", "sweep", "--study", str(study), "--backend", "foo"])
    err = capsys.readouterr().err
    assert exit_info.value.code == 2 and err.startswith("error: argument --backend: invalid choice")
    assert err.count("\n") == 1 and "usage:" not in err


def test_a_ray_address_nothing_answers_on_is_an_error_at_once(tmp_path, capsys):
    pytest.importorskip("ray", reason="Ray is not installed (pip install -r requirements-ray.txt)")
    import socket

    with socket.socket() as s:  # a loopback port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    study = tmp_path / "s.toml"
    study.write_text('[grid]\nalgo = ["fcfs"]\ndifficulty = ["easy"]\nnum_jobs = [10]\n')
    args = ["--mode", "sweep", "--study", str(study), "--backend", "ray", "--address", f"127.0.0.1:{port}"]
    assert main([*args, "--no_progress", "--log_dir", str(tmp_path / "out")]) == 2
    assert f"--address 127.0.0.1:{port}: no Ray head answers there" in capsys.readouterr().err


# ---------------------------------------------------------------- columns, identity, grown studies


def test_results_csv_names_each_column_once_when_options_set_mode(tmp_path):
    from sweep.report import write_results

    study = load_study(_write(tmp_path, '[options]\nmode = "eval"\nnum_jobs = 10\n[grid]\nalgo = ["fcfs"]\n'))
    assert study.params == ("mode", "num_jobs", "algo")
    write_results(study, [], tmp_path / "results.csv")
    header = (tmp_path / "results.csv").read_text().splitlines()[0].split(",")
    assert header == ["run", "phase", "status", "error", "mode", "num_jobs", "algo"]


def test_a_run_key_covers_its_options_and_model_set_but_not_its_place_in_the_study(tmp_path):
    small = load_study(_write(tmp_path, TINY, "a.toml"))
    grown = load_study(_write(tmp_path, TINY.replace("seed = [0, 1]", "seed = [0, 1, 2]"), "b.toml"))
    keys = {s.key: s.name for s in small.runs}
    # the same four runs under other names (the index moved), two new ones
    assert [keys.get(s.key) for s in grown.runs] == [
        "000_algo=fcfs_seed=0", "001_algo=fcfs_seed=1", None, "002_algo=easy_seed=0", "003_algo=easy_seed=1", None,
    ]  # fmt: skip
    assert len({s.key for s in grown.runs}) == 6
    changed = load_study(_write(tmp_path, TINY.replace("num_jobs = 15", "num_jobs = 16"), "c.toml"))
    assert not {s.key for s in changed.runs} & set(keys)
    # the study folder's default name does not depend on the file, so a grown study finds its folder again
    from sweep.cli import default_study_dir

    assert (
        default_study_dir(small)
        == default_study_dir(grown)
        != default_study_dir(load_study(_write(tmp_path, TINY.replace('"tiny"', '"other"'), "d.toml")))
    )


def test_a_grown_study_reuses_its_finished_runs_and_equals_a_fresh_run(tiny_study, tmp_path, capsys):
    study, first = tiny_study
    out = tmp_path / "grown"
    shutil.copytree(first, out)
    stamps = {p.parent.name: p.stat().st_mtime_ns for p in (out / "runs").rglob("jobs.csv")}
    grown = _write(tmp_path, TINY.replace("seed = [0, 1]", "seed = [0, 1, 2]"), "grown.toml")
    capsys.readouterr()
    assert _sweep(grown, out, "--resume", "--workers", "2") == 0
    printed = capsys.readouterr().out
    assert (
        "6 runs (0 training, 6 evaluation), 4 already complete (skipped), 2 found again under a new name"
        in printed
    )
    renamed = {"002_algo=easy_seed=0": "003_algo=easy_seed=0", "003_algo=easy_seed=1": "004_algo=easy_seed=1"}
    for old, stamp in stamps.items():  # not rerun: the same file, moved to the run's new name
        assert (out / "runs" / renamed.get(old, old) / "jobs.csv").stat().st_mtime_ns == stamp
    fresh = tmp_path / "fresh"
    assert _sweep(grown, fresh, "--workers", "2") == 0
    assert _tree(out) == _tree(fresh)
    # shrinking it back: the two runs the study no longer has are refused, then removed with --overwrite
    assert _sweep(study, out, "--resume") == 2
    err = capsys.readouterr().err
    assert "holds 2 runs that this version of the study no longer has" in err and err.count("\n") == 1
    assert _sweep(study, out, "--resume", "--overwrite") == 0
    assert "4 already complete (skipped)" in capsys.readouterr().out
    assert _tree(out) == _tree(first)


# ---------------------------------------------------------------- signals and time limits


def test_the_sweeps_stop_request_notes_two_signals_and_gives_the_shells_exit_status(capsys):
    import os
    import signal

    from interrupts import STOP_SIGNALS, exit_status, signal_name
    from sweep.backends import stop_request

    before = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    with stop_request() as stop:
        assert not stop.requested
        os.kill(os.getpid(), signal.SIGTERM)  # delivered to the main thread before the next bytecode
        assert stop.requested and not stop.again and exit_status(stop) == 143
        assert signal_name(stop.signum) == "SIGTERM"
        signal.signal(signal.SIGINT, signal.default_int_handler)  # as ray.init replaces a handler
        stop.install()
        os.kill(os.getpid(), signal.SIGINT)  # noted, not raised: the sweep still writes its tables
        assert stop.again and exit_status(stop) == 143  # the first signal decides the exit status
    assert {sig: signal.getsignal(sig) for sig in STOP_SIGNALS} == before
    assert {signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1} <= set(STOP_SIGNALS)
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "SIGTERM: stopping: the runs in flight get Ctrl-C and up to 10 s to end; finished runs are kept "
        "(SIGTERM again to stop at once)"
    ]


def _descendants(pid: int) -> set[int]:
    """Every live process below pid (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_sigterm_keeps_finished_runs_writes_the_tables_and_the_study_resumes(tmp_path):
    import signal
    import subprocess
    import sys
    import time

    root = Path(__file__).resolve().parents[1]
    study = _write(
        # 3,000-job runs: one is still in flight when the SIGTERM lands, however loaded the machine (with 200 jobs
        # a run could end, outputs written, between the poll below and the signal, and none was interrupted)
        tmp_path,
        TINY.replace("num_jobs = 15", "num_jobs = 3000").replace("seed = [0, 1]", "seed = [0, 1, 2]"),
    )
    out = tmp_path / "out"
    cmd = [sys.executable, "main.py", "--mode", "sweep", "--study", str(study), "--log_dir", str(out)]
    proc = subprocess.Popen(
        [*cmd, "--workers", "1", "--no_progress"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while True:  # until a run has finished and the next one is under way (its folder claimed)
            records = [json.loads(p.read_text() or "{}") for p in out.glob("runs/*/run_config.json")]
            if any(r.get("outputs") for r in records) and any(r.get("outputs", []) is None for r in records):
                break
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.05)
        below = _descendants(proc.pid)
        assert below  # the fork server and the run in flight
        proc.send_signal(signal.SIGTERM)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 143, (stdout, stderr)
    # the run in flight got Ctrl-C (it says so in its log) rather than SIGKILL after the grace period
    logs = [p.read_text() for p in (out / "output").glob("*.log")]
    assert any("interrupted" in text for text in logs)
    assert "SIGTERM: stopping" in stderr and "continue with --resume" in stderr and "Traceback" not in stderr
    rows = _csv(out / "results.csv")
    done = [r["run"] for r in rows if r["status"] == "ok"]
    assert len(rows) == 6 and done and {r["status"] for r in rows} == {"ok", "not run"}
    assert all(r["avg_jct_s"] for r in rows if r["status"] == "ok")
    assert (out / "aggregate.csv").is_file()
    record = json.loads((out / "study_config.json").read_text())
    assert record["result"] == {"ok": len(done), "failed": 0, "not run": 6 - len(done)}
    for r in rows:  # a stopped run left nothing but the study's marker (the run cleaned up as on Ctrl-C)
        if r["status"] != "ok":
            assert not [p for p in (out / "runs" / r["run"]).iterdir() if p.name != ".sweep_run"], r["run"]
    time.sleep(0.5)
    assert not [pid for pid in below if _alive(pid)]  # no fork server or run left behind
    stamps = {run: (out / "runs" / run / "jobs.csv").stat().st_mtime_ns for run in done}
    resumed = subprocess.run(
        [*cmd, "--workers", "2", "--no_progress", "--resume"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert f"{len(done)} already complete (skipped)" in resumed.stdout
    assert {r["status"] for r in _csv(out / "results.csv")} == {"ok"}
    assert stamps == {run: (out / "runs" / run / "jobs.csv").stat().st_mtime_ns for run in done}


def test_a_run_past_its_time_limit_is_stopped_and_recorded_failed(tmp_path):
    study = _write(
        tmp_path,
        '[options]\ndifficulty = "easy"\nalgo = "fcfs"\n[resources]\ntimeout_s = 3\n[grid]\nnum_jobs = [400000]\n',
    )  # about 30 s of compute on a fast machine (2026-11: 40,000 jobs took 3.4 s)
    out = tmp_path / "out"
    assert _sweep(study, out) == 1
    (row,) = _csv(out / "results.csv")
    assert (row["status"], row["error"]) == ("failed", "timed out after 3 s (timeout_s of the study)")
    log = (out / "output" / "000_num_jobs=400000.log").read_text()
    assert log.rstrip().endswith("timed out after 3 s (timeout_s of the study)")
    assert "interrupted" in log  # it got Ctrl-C (not SIGKILL) and removed its own files, as by hand
    assert [p.name for p in (out / "runs" / "000_num_jobs=400000").iterdir()] == [".sweep_run"]


# ---------------------------------------------------------------- runs on a node that does not see the study folder


def _node_run(study, spec, folder: Path, token: str = "driver-token", timeout_s=None):
    from sweep.cli import run_argv
    from sweep.node import NodeRun
    from sweep.worker import parse_run

    argv = run_argv(study, spec, folder)
    cfg = parse_run(argv)
    prefix = f"{cfg.algo}_seed{cfg.seed}_" if spec.phase == "train" else ""
    return NodeRun(spec.name, tuple(argv), str(folder), spec.models, prefix, token, timeout_s), prefix


def test_runs_on_nodes_without_the_study_folder_send_every_file_back(tmp_path, monkeypatch):
    """Two 'nodes' (working folders) that never see the driver's study folder: the study folder is named by a
    relative path, as on a cluster without a shared filesystem. A training run on one, an evaluation of its model
    on the other (the driver sends the model there), each result sent back; the driver's folder equals the same
    runs done locally."""
    from sweep.folder import receive_files, run_complete
    from sweep.node import REPLICA, run_on_node

    text = (
        '[train.options]\ntotal_steps = 150\ndemo_policy = "none"\nvalidation_seeds = "none"\ndifficulty = "easy"\n'
        'num_jobs = 12\ndevice = "cpu"\n[train.grid]\nalgo = ["d3qn"]\nseed = [0]\n'
        '[options]\nalgo = "d3qn"\ndifficulty = "easy"\nnum_jobs = 12\n[grid]\nseed = [0]\n'
    )
    study = load_study(_write(tmp_path, text))
    train, evaluation = study.runs
    driver, node_a, node_b = (tmp_path / d for d in ("driver", "node_a", "node_b"))
    for d in (driver, node_a, node_b):
        d.mkdir()
    rel = Path("study")

    monkeypatch.chdir(node_a)
    run, prefix = _node_run(study, train, rel)
    outcome = run_on_node(run, ())
    assert outcome.status == "ok", outcome.output
    assert {name for name, _ in outcome.files} >= {
        "runs/train_000_algo=d3qn_seed=0/run_config.json", "models/d3qn_seed0_final.pt",
    }  # fmt: skip
    assert (node_a / rel / REPLICA).is_file() and not (node_a / rel / "runs" / train.name).exists()
    assert receive_files(driver / rel, train, prefix, outcome.files) == ""
    assert run_complete(driver / rel / "runs" / train.name, "train")

    from sweep.cli import _model_files

    models = _model_files(driver / rel, evaluation.models)
    assert [name for name, _ in models] == ["models/d3qn_seed0_final.pt"]  # no replay buffer
    monkeypatch.chdir(node_b)
    run, prefix = _node_run(study, evaluation, rel)
    outcome = run_on_node(run, models)
    assert outcome.status == "ok", outcome.output
    assert (node_b / rel / "models" / "d3qn_seed0_final.pt").read_bytes() == models[0][1]
    assert receive_files(driver / rel, evaluation, prefix, outcome.files) == ""
    assert run_complete(driver / rel / "runs" / evaluation.name, "eval")

    # the evaluation by hand, in the driver's folder with the model the node sent back: the same results
    monkeypatch.chdir(driver)
    argv = [*run.argv[: run.argv.index("--log_dir")], "--models_dir", "study/models", "--log_dir", "hand"]
    assert main([*argv, "--no_progress"]) == 0
    for name in ("summary.csv", "jobs.csv"):
        assert (driver / "hand" / name).read_bytes() == (
            driver / rel / "runs" / evaluation.name / name
        ).read_bytes()


def test_a_node_refuses_a_foreign_folder_at_the_study_path_and_the_driver_refuses_stray_files(
    tmp_path, monkeypatch
):
    from sweep.folder import receive_files
    from sweep.node import run_on_node

    study = load_study(_write(tmp_path, TINY))
    spec = study.runs[0]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "study").mkdir()
    (tmp_path / "study" / "thesis.tex").write_text("mine")
    run, _ = _node_run(study, spec, Path("study"))
    outcome = run_on_node(run, ())
    assert outcome.status == "failed" and "holds files that are not this study's" in outcome.error
    assert (tmp_path / "study" / "thesis.tex").read_text() == "mine"
    driver = tmp_path / "driver"
    wrong = receive_files(driver, spec, "", (("runs/another_run/summary.csv", b"x"),))
    assert wrong == "the node sent back a file outside the run's folder: runs/another_run/summary.csv"
    wrong = receive_files(driver, spec, "", ((f"runs/{spec.name}/../../evil.csv", b"x"),))
    assert wrong.startswith("the node sent back a file outside") and not driver.exists()


def test_an_ok_run_whose_files_never_arrived_is_failed_not_an_empty_ok_row(tmp_path):
    from sweep.backends import stop_request
    from sweep.cli import _Phase
    from sweep.worker import RunOutcome

    study = load_study(_write(tmp_path, TINY))
    spec = study.runs[0]
    phase = _Phase(study, tmp_path / "S", {}, {spec.name: ""}, "t", {}, True, stop_request())
    state, error = phase._check(spec, RunOutcome(spec.name, "ok", "", "", 1.0, ()))
    assert state == "failed" and "did not reach the study folder" in error


# ---------------------------------------------------------------- confidence bars of the plots


def test_geometric_interval_by_hand():
    from sweep.report import geometric_ci95

    # log values 0 and ln 100: mean ln 10, s = ln 100 / sqrt 2, half-width t(1) * s / sqrt 2 = 12.7062 * ln 100 / 2
    gmean, low, high = geometric_ci95([1.0, 100.0])
    half = 12.706204736 * math.log(100.0) / 2
    assert gmean == pytest.approx(10.0)
    assert low == pytest.approx(10.0 * math.exp(-half)) and high == pytest.approx(10.0 * math.exp(half))
    assert 0 < low < 1.0 and high > 100.0
    assert geometric_ci95([5.0])[0] == pytest.approx(5.0) and math.isnan(geometric_ci95([5.0])[1])
    assert all(math.isnan(v) for v in geometric_ci95([0.0, 3.0]))  # no logarithm of 0


@given(st.lists(st.floats(min_value=1e-3, max_value=1e9), min_size=2, max_size=12))
@settings(max_examples=200, deadline=None)
def test_geometric_interval_is_positive_and_symmetric_on_a_log_axis(values):
    from sweep.report import geometric_ci95

    gmean, low, high = geometric_ci95(values)
    assert 0 < low <= gmean * (1 + 1e-12) and gmean <= high * (1 + 1e-12)
    assert math.log(gmean) - math.log(low) == pytest.approx(math.log(high) - math.log(gmean), abs=1e-9)


def _groups_for(tmp_path, jcts: dict[str, list[float]], waits: dict[str, list[float]]):
    from sweep.report import ResultRow, aggregate

    study = load_study(_write(tmp_path, '[grid]\nalgo = ["fcfs", "easy"]\nseed = [0, 1, 2]\n'))
    rows = []
    for spec in study.runs:
        algo, seed = spec.value("algo"), spec.value("seed")
        metrics = (
            ("scheduler", algo),
            ("avg_jct_s", repr(jcts[algo][seed])),
            ("avg_wait_s", repr(waits[algo][seed])),
        )
        params = tuple(str(spec.value(k)) for k in study.params)
        rows.append(ResultRow(spec.name, "eval", "ok", "", params, metrics))
    return study, aggregate(study, rows)


def test_plotted_bars_never_go_below_zero(tmp_path):
    from sweep.report import figures, plot_groups

    # FCFS's JCT over 3 seeds is so spread that mean - t-interval is far below zero (as at overload)
    jcts = {"fcfs": [1_000.0, 5_000.0, 400_000.0], "easy": [900.0, 1_000.0, 1_100.0]}
    waits = {"fcfs": [0.0, 10.0, 300_000.0], "easy": [0.0, 0.0, 5.0]}  # zeros: no logarithm
    study, groups = _groups_for(tmp_path, jcts, waits)
    (fcfs_stats,) = [g for g in groups if dict(g.key)["scheduler"] == "fcfs"]
    mean, half = {m: (a, b) for m, a, b in fcfs_stats.stats}["avg_jct_s"]
    assert mean - half < -100_000  # the arithmetic interval aggregate.csv reports goes below zero
    by_metric = {f.metric: f for f in figures(study, groups)}
    jct, wait = by_metric["avg_jct_s"], by_metric["avg_wait_s"]
    assert jct.log_scale and not wait.log_scale
    for fig in (jct, wait):
        for curve in fig.curves:
            assert all(0 <= low <= centre <= high for _, centre, low, high in curve.points), fig.metric
    assert jct.x_col == "scheduler" and jct.x_ticks == ("fcfs", "easy")
    ((x, centre, low, high), _) = jct.curves[0].points  # fcfs at x = 0
    expected = math.exp(sum(math.log(v) for v in jcts["fcfs"]) / 3)
    assert (x, centre) == (0.0, pytest.approx(expected)) and low > 0  # the geometric mean and its interval
    assert wait.curves[0].points[0][2] == 0.0  # the arithmetic interval, cut at zero
    assert {p.name for p in plot_groups(study, groups, tmp_path)} == {"avg_jct_s.png", "avg_wait_s.png"}


# ---------------------------------------------------------------- a 2-node Ray cluster on this machine


def _free_ports(n: int) -> list[int]:
    import socket

    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _stop_group(pgid: int) -> None:
    """Every process of one `ray start` (its own session: nothing else of this machine's Ray is touched)."""
    import os
    import signal
    import time

    for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
        until = time.monotonic() + wait_s
        while time.monotonic() < until:
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


@pytest.mark.ray
@pytest.mark.slow
def test_a_two_node_ray_cluster_without_a_shared_study_folder(tiny_study, tmp_path):
    """A head node that runs nothing (0 CPUs) and a worker node with 2 CPUs, started with `ray start` in their own
    working folders; the driver names its study folder by a relative path, so the node writes into a folder of its
    own that the driver never sees: everything the driver has came back through Ray, and equals a local run."""
    pytest.importorskip("ray", reason="Ray absent: pip install -r requirements-ray.txt")
    import os
    import subprocess
    import sys
    import tempfile

    study, local = tiny_study
    root = Path(__file__).resolve().parents[1]
    ray_cli = [sys.executable, "-m", "ray.scripts.scripts", "start", "--disable-usage-stats"]
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    gcs, client, agent_head, agent_node = _free_ports(4)
    ray_tmp = Path(tempfile.mkdtemp(prefix="ray", dir="/tmp"))  # short: Ray's socket paths live under it
    head, node, driver = (tmp_path / d for d in ("head", "node", "driver"))
    groups: list[int] = []
    try:
        for cwd, args in (
            (head, ["--head", f"--port={gcs}", "--num-cpus=0", "--include-dashboard=false", f"--temp-dir={ray_tmp}",
                    f"--ray-client-server-port={client}", f"--dashboard-agent-listen-port={agent_head}"]),
            (node, [f"--address=127.0.0.1:{gcs}", "--num-cpus=2", f"--dashboard-agent-listen-port={agent_node}"]),
        ):  # fmt: skip
            cwd.mkdir()
            proc = subprocess.Popen(
                [*ray_cli, *args],
                cwd=cwd,
                env=env,
                start_new_session=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            groups.append(proc.pid)
            out, _ = proc.communicate(timeout=120)
            assert proc.returncode == 0, out[-2000:]
        driver.mkdir()
        shutil.copy(study, driver / "study.toml")
        sweep = [
            sys.executable,
            str(root / "main.py"),
            "--mode",
            "sweep",
            "--backend",
            "ray",
            "--no_progress",
        ]
        where = ["--address", f"127.0.0.1:{gcs}"]

        # a study asking for a GPU that no node has: refused before anything is written
        (driver / "gpu.toml").write_text(TINY + "[resources]\nnum_gpus = 1\n")
        refused = subprocess.run(
            [*sweep, *where, "--study", "gpu.toml", "--log_dir", "gpu"],
            cwd=driver,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert refused.returncode == 2 and "no node of the Ray cluster has that much" in refused.stderr
        assert refused.stderr.count("\n") == 1 and not (driver / "gpu").exists()

        done = subprocess.run(
            [*sweep, *where, "--study", "study.toml", "--log_dir", "study"],
            cwd=driver,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        assert "(2 nodes, 2 CPUs, 0 GPUs)" in done.stdout
    finally:
        for pgid in reversed(groups):
            _stop_group(pgid)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    # the node worked in its own copy of the study folder, which it emptied after sending each run back
    copy = node / "study"
    assert (copy / ".sweep_replica").is_file() and not any((copy / "runs").iterdir())
    assert not (copy / ".sweep_token").exists()
    # the driver's folder is complete and byte-identical to the same study run locally
    ours, theirs = _tree(driver / "study"), _tree(local)
    assert ours.keys() == theirs.keys() and [k for k in ours if ours[k] != theirs[k]] == []


@pytest.mark.ray
def test_a_ray_address_that_answers_but_is_no_ray_head_is_an_error_at_once(tmp_path, capsys):
    pytest.importorskip("ray", reason="Ray absent: pip install -r requirements-ray.txt")
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    accepted: list[socket.socket] = []

    def serve() -> None:  # accepts, never answers (a wrong port of some other service)
        with contextlib.suppress(OSError):
            while True:
                accepted.append(listener.accept()[0])

    threading.Thread(target=serve, daemon=True).start()
    port = listener.getsockname()[1]
    study = _write(tmp_path, TINY)
    try:
        args = ["--backend", "ray", "--address", f"127.0.0.1:{port}"]
        assert _sweep(study, tmp_path / "out", *args) == 2
    finally:
        listener.close()
        for conn in accepted:
            conn.close()
    err = capsys.readouterr().err
    assert f"--address 127.0.0.1:{port}: something answers there, but not a Ray head" in err
    assert err.count("\n") == 1 and not (tmp_path / "out").exists()
