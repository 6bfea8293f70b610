"""Run folders: outputs never overwrite an input or mix with another run; run_config.json; which checkpoint is used."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from config import UserError
from main import main

TINY = ["--difficulty", "easy", "--num_jobs", "12", "--no_progress"]
JOBS_CSV = "arrival_time,runtime,gpus\n0,100,1\n5,50,2\n"


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (relative path -> bytes)."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---- outputs never overwrite an input -------------------------------------------------------------------------


def _inputs_in(folder: Path) -> dict[str, list[str]]:
    """A case per kind of input, each with the input placed in (or around) `folder`."""
    folder.mkdir()
    (folder / "jobs.csv").write_text(JOBS_CSV)
    (folder / "cluster.csv").write_text("node_id,gpu_type,num_gpus\nn0,A100,8\n")
    (folder / "model.pt").write_bytes(b"not read: refused before loading")
    (folder / "trace").mkdir()
    return {
        "workload": ["--mode", "eval", "--algo", "fcfs", "--workload_type", "csv",
                     "--workload_path", str(folder / "jobs.csv"), "--log_dir", str(folder)],
        "cluster": ["--mode", "eval", "--algo", "fcfs", "--cluster_path", str(folder / "cluster.csv"),
                    "--log_dir", str(folder)],
        "checkpoint": ["--mode", "eval", "--algo", "d3qn", "--checkpoint", str(folder / "model.pt"),
                       "--log_dir", str(folder)],
        "compare checkpoint": ["--mode", "compare", "--algos", "fcfs,sac", "--checkpoint",
                               f"sac={folder / 'model.pt'}", "--log_dir", str(folder)],
        "resume": ["--mode", "train", "--algo", "sac", "--resume", str(folder / "model.pt"),
                   "--log_dir", str(folder)],
        "log_dir inside an input folder": ["--mode", "eval", "--algo", "fcfs", "--workload_type", "google",
                                           "--workload_path", str(folder / "trace"),
                                           "--log_dir", str(folder / "trace" / "out")],
        "log_dir is the input": ["--mode", "eval", "--algo", "fcfs", "--workload_type", "csv",
                                 "--workload_path", str(folder / "jobs.csv"),
                                 "--log_dir", str(folder / "jobs.csv")],
    }  # fmt: skip


@pytest.mark.parametrize(
    "case",
    [
        "workload",
        "cluster",
        "checkpoint",
        "compare checkpoint",
        "resume",
        "log_dir inside an input folder",
        "log_dir is the input",
    ],
)
@pytest.mark.parametrize("overwrite", [False, True])
def test_a_run_folder_holding_an_input_is_refused_before_any_work(tmp_path, capsys, case, overwrite):
    folder = tmp_path / "exp"
    args = _inputs_in(folder)[case]
    before = snapshot(folder)
    tiny = TINY if "--workload_type" not in args else TINY[-1:]  # file workloads refuse synthetic options
    code = main([*args, *tiny, *(["--overwrite"] if overwrite else [])])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and "Traceback" not in err
    assert "--log_dir" in err and (
        "holds the input" in err or "inside the input folder" in err or "is a file" in err
    )
    assert snapshot(folder) == before  # nothing replaced, nothing added


def test_the_issue_reproduction_keeps_the_users_jobs_csv(tmp_path):
    exp = tmp_path / "exp"
    exp.mkdir()
    (exp / "jobs.csv").write_text(JOBS_CSV)
    args = [
        "--mode",
        "eval",
        "--algo",
        "easy",
        "--workload_type",
        "csv",
        "--workload_path",
        str(exp / "jobs.csv"),
    ]
    assert main([*args, "--log_dir", str(exp), "--no_progress"]) == 2
    assert (exp / "jobs.csv").read_text() == JOBS_CSV
    assert main([*args, "--log_dir", str(exp / "run"), "--no_progress"]) == 0  # a subfolder is fine
    assert (exp / "jobs.csv").read_text() == JOBS_CSV and (exp / "run" / "jobs.csv").exists()


# ---- a folder holds one run: refusal, --overwrite, no stale mixing ------------------------------------------


def test_reusing_a_folder_for_another_run_is_refused_and_overwrite_leaves_no_stale_files(tmp_path, capsys):
    exp = tmp_path / "exp"
    first = ["--mode", "compare", "--algos", "fcfs,sjf", "--seeds", "0,1", *TINY, "--log_dir", str(exp)]
    assert main(first) == 0
    before = snapshot(exp)
    assert "fcfs_seed1/jobs.csv" in before and "jct_cdf_seed1.png" in before
    second = ["--mode", "compare", "--algos", "easy", "--seeds", "5", *TINY, "--log_dir", str(exp)]
    capsys.readouterr()
    assert main(second) == 2
    err = capsys.readouterr().err
    assert "holds another run" in err and "--overwrite" in err and "options.seeds [0, 1] -> [5]" in err
    assert snapshot(exp) == before
    assert main([*second, "--overwrite"]) == 0
    names = sorted(p.relative_to(exp).as_posix() for p in exp.rglob("*"))
    assert names == sorted(
        ["compare.csv", "compare.png", "fairness.csv", "jct_cdf_seed5.png", "report.html", "run_config.json"]
        + ["summary.csv"]
        + ["easy_seed5"]
        + [f"easy_seed5/{n}" for n in snapshot(exp / "easy_seed5")]
    )
    assert pd.read_csv(exp / "summary.csv")["scheduler"].tolist() == ["easy"]


def test_files_no_run_writes_are_never_removed_even_with_overwrite(tmp_path, capsys):
    exp = tmp_path / "exp"
    assert main(["--mode", "eval", "--algo", "fcfs", *TINY, "--log_dir", str(exp)]) == 0
    (exp / "notes.txt").write_text("mine")
    (exp / "data").mkdir()
    (exp / ".hidden").write_text("editor state")
    capsys.readouterr()
    for extra in ([], ["--overwrite"]):
        assert main(["--mode", "eval", "--algo", "sjf", *TINY, "--log_dir", str(exp), *extra]) == 2
        err = capsys.readouterr().err
        assert "holds files that no run writes (data/, notes.txt)" in err
    (exp / "notes.txt").unlink()
    (exp / "data").rmdir()
    assert main(["--mode", "eval", "--algo", "sjf", *TINY, "--log_dir", str(exp), "--overwrite"]) == 0
    assert (exp / ".hidden").read_text() == "editor state"  # hidden entries are neither ours nor in the way
    assert pd.read_csv(exp / "summary.csv")["scheduler"].tolist() == ["sjf"]


def test_a_folder_without_run_config_is_replaced_only_with_overwrite(tmp_path, capsys):
    """An interrupted run or one written before run_config.json existed: its files are recognised by name."""
    exp = tmp_path / "exp"
    (exp / "fcfs_seed3").mkdir(parents=True)
    for name in ("summary.csv", "jct_cdf_seed3.png", "fcfs_seed3/jobs.csv", "fcfs_seed3/utilization.png"):
        (exp / name).write_text("old")
    assert main(["--mode", "eval", "--algo", "easy", *TINY, "--log_dir", str(exp)]) == 2
    assert "without run_config.json" in capsys.readouterr().err and (exp / "fcfs_seed3" / "jobs.csv").exists()
    assert main(["--mode", "eval", "--algo", "easy", *TINY, "--log_dir", str(exp), "--overwrite"]) == 0
    assert not (exp / "fcfs_seed3").exists() and not (exp / "jct_cdf_seed3.png").exists()
    assert (exp / "summary.csv").read_text() != "old"


def test_rerunning_the_same_run_into_its_folder_rewrites_the_same_bytes(tmp_path):
    args = ["--mode", "compare", "--algos", "fcfs,easy", "--seeds", "1", *TINY]
    assert main([*args, "--log_dir", str(tmp_path / "a")]) == 0
    first = snapshot(tmp_path / "a")
    assert (
        main([*args, "--log_dir", str(tmp_path / "a")]) == 0
    )  # allowed: same identity, no --overwrite needed
    assert snapshot(tmp_path / "a") == first
    # run_config.json holds nothing about where or when: a run elsewhere records the same bytes
    assert main([*args, "--log_dir", str(tmp_path / "b")]) == 0
    assert snapshot(tmp_path / "b") == first


def test_typing_a_default_or_overwrite_records_the_same_run(tmp_path):
    """Which options were typed (rather than defaulted) and --overwrite do not change what a run computes: the same
    bytes, the same default folder name."""
    args = ["--mode", "compare", "--algos", "fcfs,easy", "--seeds", "1", *TINY]
    assert main([*args, "--log_dir", str(tmp_path / "a")]) == 0
    typed = ["--runtime_info", "oracle", "--multi_node_factor", "1.2", "--overwrite"]
    assert main([*args, *typed, "--log_dir", str(tmp_path / "b")]) == 0
    assert snapshot(tmp_path / "b") == snapshot(tmp_path / "a")


def test_a_folder_another_live_run_writes_into_is_refused_and_a_stale_lock_is_taken_over(tmp_path, capsys):
    exp = tmp_path / "exp"
    exp.mkdir()
    host = socket.gethostname()
    (exp / ".run.lock").write_text(f"{os.getppid()} {host}")  # a live process that is not this one
    args = ["--mode", "eval", "--algo", "fcfs", *TINY, "--log_dir", str(exp)]
    assert main([*args, "--overwrite"]) == 2
    assert f"is being written by another run (pid {os.getppid()} on {host})" in capsys.readouterr().err
    assert [p.name for p in exp.iterdir()] == [".run.lock"]
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    (exp / ".run.lock").write_text(f"{int(finished.stdout)} {host}")  # left by a run that was killed
    assert main(args) == 0
    assert not (exp / ".run.lock").exists() and (exp / "summary.csv").exists()


def test_a_failed_run_leaves_no_folder_behind(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival_time,runtime,gpus\n0,abc,1\n")
    out = tmp_path / "out"
    args = ["--mode", "eval", "--algo", "fcfs", "--workload_type", "csv", "--workload_path", str(bad)]
    assert main([*args, "--log_dir", str(out), "--no_progress"]) == 2
    assert not out.exists()


# ---- default folders --------------------------------------------------------------------------------------


def test_default_folders_differ_when_anything_that_changes_results_differs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "jobs.csv").write_text(JOBS_CSV)
    csv = ["--workload_type", "csv", "--workload_path", "jobs.csv", "--no_progress"]
    runs = {
        "base": ["--mode", "eval", "--algo", "easy", *TINY],
        "jobs and cluster": ["--mode", "eval", "--algo", "easy", *TINY[:2], "--num_jobs", "20", "--cluster",
                             "2xA100:8", "--no_progress"],
        "runtime info": ["--mode", "eval", "--algo", "easy", *TINY, "--runtime_info", "estimate"],
        "csv": ["--mode", "eval", "--algo", "easy", *csv],
    }  # fmt: skip
    folders = {}
    for name, args in runs.items():
        before = set(Path("logs").iterdir()) if Path("logs").exists() else set()
        assert main(args) == 0
        (new,) = set(Path("logs").iterdir()) - before
        folders[name] = new
    assert folders["base"].name.startswith("eval_easy_synthetic-philly-easy_seed0_")
    assert folders["csv"].name.startswith("eval_easy_csv-jobs_seed0_")
    assert main(runs["base"]) == 0  # the same run again lands in its own folder
    # the same options over an edited input file are another run: another folder
    (tmp_path / "jobs.csv").write_text(JOBS_CSV + "9,10,1\n")
    assert main(runs["csv"]) == 0
    assert len(set(Path("logs").iterdir())) == len(runs) + 1
    assert len(pd.read_csv(folders["csv"] / "jobs.csv")) == 2  # the first csv run's results are untouched


# ---- run_config.json --------------------------------------------------------------------------------------


def test_run_config_records_options_inputs_resolved_scenario_versions_and_outputs(tmp_path):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(JOBS_CSV)
    out = tmp_path / "run"
    args = ["--mode", "eval", "--algo", "sjf", "--seed", "4", "--workload_type", "csv", "--workload_path",
            str(jobs), "--cluster", "2xA100-80GB:8", "--multi_node_factor", "1.5", "--log_dir", str(out),
            "--no_progress"]  # fmt: skip
    assert main(args) == 0
    rc = json.loads((out / "run_config.json").read_text())
    options = rc["run"]["options"]
    assert options["mode"] == "eval" and options["algo"] == "sjf" and options["seed"] == 4
    assert options["cluster"] == {"spec": "2xA100-80GB:8", "path": None, "uniform_speed": False,
                                  "multi_node_runtime_factor": 1.5}  # fmt: skip
    assert options["workload"]["workload_path"] == str(jobs) and options["sim"]["runtime_info"] == "oracle"
    assert "log_dir" not in options and "progress" not in options and "overwrite" not in options
    assert rc["run"]["inputs"] == {
        "--workload_path": {"path": str(jobs), "size_bytes": len(JOBS_CSV), "sha256": sha256(jobs)}
    }
    assert rc["run"]["checkpoints"] == {}
    versions = rc["run"]["versions"]
    assert versions["numpy"] == np.__version__ and versions["python"].count(".") == 2
    assert {"simpy", "torch", "gymnasium", "git_commit"} <= versions.keys()
    (resolved,) = rc["resolved"]
    assert resolved["seed"] == 4 and resolved["num_jobs"] == 2 and resolved["cluster_gpus"] == 16
    assert resolved["cluster"] == "2xA100-80GB:8"
    written = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert rc["outputs"] == [n for n in written if n != "run_config.json"]


# ---- which checkpoint eval/compare use ------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """models/ holding only d3qn_seed0_final.pt (a few hundred steps: enough to be loadable)."""
    root = tmp_path_factory.mktemp("trained")
    models = root / "models"
    code = main(["--mode", "train", "--algo", "d3qn", "--seed", "0", "--total_steps", "100", "--demo_policy",
                 "none", "--validation_seeds", "none", "--checkpoint_every", "1000", *TINY, "--models_dir",
                 str(models), "--log_dir", str(root / "train")])  # fmt: skip
    assert code == 0
    return models


def test_eval_of_another_seed_never_loads_seed_0s_model(trained, tmp_path, capsys):
    out = tmp_path / "out"
    for mode in (["--mode", "eval", "--algo", "d3qn"], ["--mode", "compare", "--algos", "fcfs,d3qn"]):
        args = [*mode, "--seed", "5", *TINY, "--models_dir", str(trained), "--log_dir", str(out)]
        assert main(args) == 2
        err = capsys.readouterr().err
        assert "no d3qn_seed5_final.pt" in err and "there is d3qn_seed0_final.pt." in err
        assert f"--checkpoint {trained / 'd3qn_seed0_final.pt'} (or --seed 0)" in err and "--seed 5" in err
        assert not out.exists()


@pytest.mark.parametrize("form", ["path", "algo=path"])
def test_compare_uses_and_records_the_given_checkpoint(trained, tmp_path, capsys, form):
    ckpt = trained / "d3qn_seed0_final.pt"
    given = str(ckpt) if form == "path" else f"d3qn={ckpt}"
    out = tmp_path / "cmp"
    args = ["--mode", "compare", "--algos", "fcfs,d3qn", "--seeds", "7", "--seed", "5", "--checkpoint", given]
    assert main([*args, *TINY, "--models_dir", str(tmp_path / "empty"), "--log_dir", str(out)]) == 0
    assert f"d3qn: evaluating checkpoint {ckpt} " in capsys.readouterr().out
    recorded = json.loads((out / "run_config.json").read_text())["run"]["checkpoints"]
    assert recorded == {
        "d3qn": {"path": str(ckpt), "size_bytes": ckpt.stat().st_size, "sha256": sha256(ckpt)}
    }
    assert sorted(set(pd.read_csv(out / "summary.csv")["scheduler"])) == ["d3qn", "fcfs"]


def test_eval_records_the_default_checkpoint_of_its_seed(trained, tmp_path, capsys):
    out = tmp_path / "ev"
    assert (
        main(["--mode", "eval", "--algo", "d3qn", *TINY, "--models_dir", str(trained), "--log_dir", str(out)])
        == 0
    )
    ckpt = trained / "d3qn_seed0_final.pt"
    assert f"d3qn: evaluating checkpoint {ckpt} " in capsys.readouterr().out
    recorded = json.loads((out / "run_config.json").read_text())["run"]["checkpoints"]
    assert recorded["d3qn"]["sha256"] == sha256(ckpt)


@pytest.mark.parametrize(
    ("algos", "given", "message"),
    [
        ("d3qn,sac", "{ckpt}", "--algos has several agents (d3qn, sac); name each one's file"),
        ("fcfs,d3qn", "sac={ckpt}", "'sac' is not an agent of this run (d3qn)"),
        ("d3qn,sac", "d3qn={ckpt},d3qn={ckpt}", "'d3qn' is given twice"),
        ("fcfs,d3qn", "d3qn=", "'d3qn=' names no file"),
        ("fcfs,d3qn", "d3qn=missing.pt", "--checkpoint missing.pt: no such file"),
        ("fcfs,sac", "sac={ckpt}", "holds a d3qn agent, not sac"),  # found before any file is written
    ],
)
def test_ambiguous_or_wrong_compare_checkpoints_are_errors(trained, tmp_path, capsys, algos, given, message):
    ckpt = trained / "d3qn_seed0_final.pt"
    args = ["--mode", "compare", "--algos", algos, "--checkpoint", given.format(ckpt=ckpt)]
    assert main([*args, *TINY, "--models_dir", str(trained), "--log_dir", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and not (tmp_path / "o").exists()


def test_a_fresh_training_into_a_folder_holding_a_training_run_is_refused(trained, capsys):
    train_dir = trained.parent / "train"
    before = snapshot(train_dir)
    assert json.loads((train_dir / "run_config.json").read_text())["outputs"]  # its TensorBoard files
    code = main(["--mode", "train", "--algo", "d3qn", "--seed", "0", "--total_steps", "100", "--demo_policy",
                 "none", "--validation_seeds", "none", "--checkpoint_every", "1000", *TINY, "--models_dir",
                 str(trained), "--log_dir", str(train_dir)])  # fmt: skip
    assert code == 2 and "continue it with --resume" in capsys.readouterr().err
    assert snapshot(train_dir) == before


def test_a_resumed_training_continues_in_the_folder_its_checkpoint_records(trained, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a default folder would appear under ./logs
    train_dir = trained.parent / "train"
    events_before = {p.name for p in train_dir.glob("events.out.tfevents.*")}
    code = main(["--mode", "train", "--algo", "d3qn", "--seed", "0", "--total_steps", "150", "--demo_policy",
                 "none", "--validation_seeds", "none", "--checkpoint_every", "1000", *TINY, "--models_dir",
                 str(trained), "--resume", str(trained / "d3qn_seed0_final.pt")])  # fmt: skip
    assert code == 0 and not (tmp_path / "logs").exists()
    events_after = {p.name for p in train_dir.glob("events.out.tfevents.*")}
    assert events_before < events_after  # appended beside the first part's curves (TensorBoard's convention)
    recorded = json.loads((train_dir / "run_config.json").read_text())
    assert recorded["run"]["options"]["resume"] == str(trained / "d3qn_seed0_final.pt")
    assert sorted(recorded["outputs"]) == sorted(events_after)


# ---- a run that fails part-way gives its folder back as it was ---------------------------------------------


def _fail_on_seed(monkeypatch, seed: int, error: BaseException) -> None:
    """Make loading scenario `seed` fail (as a bad input or Ctrl-C would, after earlier seeds ran)."""
    import cli.runner as runner

    real = runner.build_scenario

    def build(cfg, s):
        if s == seed:
            raise error
        return real(cfg, s)

    monkeypatch.setattr(runner, "build_scenario", build)


@pytest.mark.parametrize("error", [UserError("seed 2's input is bad"), KeyboardInterrupt()])
def test_an_overwrite_that_fails_after_its_first_seed_puts_the_replaced_run_back(
    tmp_path, capsys, monkeypatch, error
):
    exp = tmp_path / "exp"
    assert main(["--mode", "eval", "--algo", "fcfs", *TINY, "--log_dir", str(exp)]) == 0
    before = snapshot(exp)
    _fail_on_seed(monkeypatch, 2, error)
    args = [
        "--mode",
        "compare",
        "--algos",
        "sjf",
        "--seeds",
        "1,2",
        *TINY,
        "--log_dir",
        str(exp),
        "--overwrite",
    ]
    if isinstance(error, KeyboardInterrupt):
        assert main(args) == 130
    else:
        assert main(args) == 2 and "seed 2's input is bad" in capsys.readouterr().err
    assert snapshot(exp) == before  # the old run, byte for byte; no sjf_seed1/ and no hidden leftovers
    assert sorted(p.name for p in exp.iterdir() if p.name.startswith(".")) == []


def test_a_run_that_fails_after_its_first_seed_leaves_no_partial_run_or_empty_folder(tmp_path, monkeypatch):
    out = tmp_path / "new" / "cmp"
    _fail_on_seed(monkeypatch, 1, UserError("bad"))
    assert main(["--mode", "compare", "--algos", "fcfs", "--seeds", "0,1", *TINY, "--log_dir", str(out)]) == 2
    assert not out.exists()
    out.mkdir()  # an empty folder the user made stays, empty
    assert main(["--mode", "compare", "--algos", "fcfs", "--seeds", "0,1", *TINY, "--log_dir", str(out)]) == 2
    assert out.is_dir() and list(out.iterdir()) == []


def test_an_all_rejected_compare_leaves_no_folder(tmp_path, capsys):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("arrival_time,runtime,gpus\n0,100,4\n5,50,2\n")
    out = tmp_path / "cmp"
    args = ["--mode", "compare", "--algos", "fcfs,sjf", "--seeds", "0,1", "--workload_type", "csv"]
    code = main(
        [*args, "--workload_path", str(jobs), "--cluster", "1xT4:1", "--no_progress", "--log_dir", str(out)]
    )
    assert code == 2 and "all 2 jobs are rejected" in capsys.readouterr().err
    assert not out.exists()


def test_a_failed_resume_keeps_the_training_folders_run_config(trained, capsys):
    train_dir = trained.parent / "train"
    before = snapshot(train_dir)
    code = main(["--mode", "train", "--algo", "d3qn", "--resume", str(trained / "d3qn_seed0_final.pt"),
                 "--window", "8", "--no_progress", "--models_dir", str(trained)])  # fmt: skip
    assert code == 2 and "--window 8 (the checkpoint's run has 16)" in capsys.readouterr().err
    assert snapshot(train_dir) == before


def test_a_checkpoint_folder_is_refused_without_claiming_to_evaluate_it(tmp_path, capsys):
    folder = tmp_path / "model.pt"
    folder.mkdir()
    args = [
        "--mode",
        "eval",
        "--algo",
        "d3qn",
        "--checkpoint",
        str(folder),
        *TINY,
        "--log_dir",
        str(tmp_path / "o"),
    ]
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert (
        "evaluating checkpoint" not in out and f"error: {folder} is a directory, not a checkpoint file" in err
    )


def test_a_run_killed_while_replacing_another_is_refused_until_overwrite(tmp_path, capsys):
    """A kill -9 during an --overwrite run leaves the replaced run in .replaced/: never deleted silently."""
    exp = tmp_path / "exp"
    args = ["--mode", "eval", "--algo", "fcfs", *TINY, "--log_dir", str(exp)]
    assert main(args) == 0
    (exp / ".replaced").mkdir()
    (exp / "summary.csv").rename(exp / ".replaced" / "summary.csv")  # as a killed --overwrite run leaves it
    capsys.readouterr()
    assert main(args) == 2  # even the same run again
    err = capsys.readouterr().err
    assert (
        f"holds an unfinished run that was replacing another, whose files are in {exp / '.replaced'}/" in err
    )
    assert (exp / ".replaced" / "summary.csv").exists()
    assert main([*args, "--overwrite"]) == 0
    assert not (exp / ".replaced").exists() and (exp / "summary.csv").exists()


def test_default_folder_names_the_synthetic_profile(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for profile in ("legacy", "helios"):
        assert main(["--mode", "eval", "--algo", "fcfs", *TINY, "--synthetic_profile", profile]) == 0
    names = sorted(p.name.rsplit("_", 1)[0] for p in Path("logs").iterdir())
    assert names == ["eval_fcfs_synthetic-easy_seed0", "eval_fcfs_synthetic-helios-easy_seed0"]
