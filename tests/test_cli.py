"""The command line as a user runs it: outputs, determinism, and clear errors instead of tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from main import main

ROOT = Path(__file__).resolve().parents[1]
JOB_COLUMNS = [
    "job_id",
    "submit_time",
    "start_time",
    "end_time",
    "num_gpus",
    "gpu_type",
    "placement",
    "wait_s",
    "jct_s",
    "runtime_s",
    "bounded_slowdown",
    "status",
]


def test_eval_writes_every_output_file(tmp_path):
    out = tmp_path / "run"
    assert (
        main(
            [
                "--mode",
                "eval",
                "--algo",
                "easy",
                "--difficulty",
                "easy",
                "--log_dir",
                str(out),
                "--no_progress",
            ]
        )
        == 0
    )
    for name in (
        "jobs.csv",
        "cluster.csv",
        "summary.csv",
        "jct_cdf.png",
        "utilization.png",
        "queue_length.png",
        "workload_report.json",
    ):
        assert (out / name).stat().st_size > 0, name
    jobs = pd.read_csv(out / "jobs.csv")
    assert list(jobs.columns[: len(JOB_COLUMNS)]) == JOB_COLUMNS
    summary = pd.read_csv(out / "summary.csv")
    assert summary.loc[0, "completed"] + summary.loc[0, "rejected"] + summary.loc[0, "unfinished"] == len(
        jobs
    )
    assert list(pd.read_csv(out / "cluster.csv").columns) == [
        "node_id",
        "gpu_type",
        "num_gpus",
        "gpu_mem_gb",
        "speed",
    ]


def test_same_seed_gives_byte_identical_files(tmp_path):
    args = ["--mode", "eval", "--algo", "sjf", "--difficulty", "easy", "--seed", "3", "--no_progress"]
    main([*args, "--log_dir", str(tmp_path / "a")])
    main([*args, "--log_dir", str(tmp_path / "b")])
    for name in ("jobs.csv", "summary.csv", "cluster.csv", "workload_report.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    main([*args[:-3], "--seed", "4", "--no_progress", "--log_dir", str(tmp_path / "c")])
    assert (tmp_path / "a" / "jobs.csv").read_bytes() != (tmp_path / "c" / "jobs.csv").read_bytes()


def test_compare_scores_every_policy_on_the_same_jobs(tmp_path, capsys):
    out = tmp_path / "cmp"
    code = main(
        [
            "--mode",
            "compare",
            "--algos",
            "fcfs,sjf,easy",
            "--seeds",
            "0,1",
            "--difficulty",
            "easy",
            "--log_dir",
            str(out),
            "--no_progress",
        ]
    )
    assert code == 0
    summary = pd.read_csv(out / "summary.csv")
    assert len(summary) == 6
    assert summary.groupby("seed")["num_jobs"].nunique().eq(1).all()
    assert (out / "compare.png").stat().st_size > 0 and (out / "compare.csv").exists()
    for algo in ("fcfs", "sjf", "easy"):
        ids = pd.read_csv(out / f"{algo}_seed0" / "jobs.csv")["job_id"].tolist()
        assert ids == pd.read_csv(out / "fcfs_seed0" / "jobs.csv")["job_id"].tolist()
    assert "easy" in capsys.readouterr().out


def test_csv_workload_and_cluster_spec(tmp_path):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text(
        "arrival_time,runtime,gpus,gpu_types\n0,100,8,A100\n10,50,4,V100\n20,30,0.5,\n30,10,64,\n"
    )
    out = tmp_path / "run"
    code = main(
        [
            "--mode",
            "eval",
            "--algo",
            "easy",
            "--workload_type",
            "csv",
            "--workload_path",
            str(jobs),
            "--cluster",
            "2xA100-80GB:8,4xV100:4",
            "--log_dir",
            str(out),
            "--no_progress",
        ]
    )
    assert code == 0
    df = pd.read_csv(out / "jobs.csv")
    assert df["status"].tolist() == ["completed", "completed", "completed", "rejected"]
    assert df.loc[0, "gpu_type"] == "A100-80GB" and df.loc[1, "gpu_type"] == "V100-16GB"
    assert df.loc[1, "runtime_s"] == 100.0  # 50 s on A100 -> 100 s on V100 (speed 0.5)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cluster", "2xA100"], "expected COUNTxTYPE:GPUS_PER_NODE"),
        (["--cluster", "2xB200:8"], "unknown GPU type 'B200'; known types:"),
        (["--cluster", "1xA100:8", "--cluster_path", "x.csv"], "either --cluster or --cluster_path"),
        (["--workload_path", "jobs.csv"], "--workload_path needs --workload_type"),
        (["--workload_type", "csv"], "needs --workload_path"),
        (["--workload_type", "csv", "--workload_path", "/nonexistent.csv"], "no such file"),
        (["--algo", "magic"], "unknown --algo"),
        (["--mode", "train", "--algo", "fcfs"], "needs an RL --algo"),
        (["--mode", "train", "--algo", "d3qn", "--demo_policy", "magic"], "--demo_policy 'magic'"),
        (["--mode", "train", "--algo", "sac", "--demo_policy", "easy"], "only sjf (or none) can act"),
        (
            ["--mode", "train", "--algo", "sac", "--validation_seeds", "1000000001"],
            "--validation_seeds must be",
        ),
        (
            ["--workload_type", "swf", "--workload_path", "x.swf", "--num_jobs", "5"],
            "synthetic generator only",
        ),
    ],
)
def test_user_mistakes_give_clear_errors(args, message, tmp_path, capsys):
    code = main(
        ["--mode", "eval", "--algo", "easy", "--log_dir", str(tmp_path / "x"), "--no_progress", *args]
    )
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err


def test_malformed_jobs_csv_names_file_and_line(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("arrival_time,runtime,gpus\n0,100,1\n5,abc,1\n")
    code = main(
        [
            "--mode",
            "eval",
            "--algo",
            "fcfs",
            "--workload_type",
            "csv",
            "--workload_path",
            str(bad),
            "--log_dir",
            str(tmp_path / "o"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "bad.csv:3" in err


def test_readme_default_command_runs_as_a_subprocess(tmp_path):
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "main.py"),
            "--mode",
            "eval",
            "--algo",
            "easy",
            "--difficulty",
            "easy",
            "--log_dir",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "completed" in proc.stdout


def test_train_then_eval_and_compare_an_agent_write_the_same_files(tmp_path):
    models = tmp_path / "models"
    common = ["--difficulty", "easy", "--num_jobs", "40", "--models_dir", str(models), "--no_progress"]
    # no demonstrations: their 5,000 pre-training updates would be most of this test's time (tests/test_agents.py
    # covers them)
    code = main(["--mode", "train", "--algo", "d3qn", "--seed", "5", "--total_steps", "600", *common,
                 "--checkpoint_every", "2", "--demo_policy", "none", "--log_dir", str(tmp_path / "train")])  # fmt: skip
    assert code == 0 and (models / "d3qn_seed5_final.pt").exists()
    # the best checkpoint on the validation seeds is kept, and its recorded score is what eval measures
    best = json.loads((models / "d3qn_seed5_best.json").read_text())
    assert (models / "d3qn_seed5_best.pt").exists() and best["validation_seeds"] == [200, 201, 202, 203, 204]
    val_scores = {}
    for model in ("best", "final"):
        val = tmp_path / f"val_{model}"
        args = ["--mode", "compare", "--algos", "d3qn", "--seeds", "200,201,202,203,204", "--seed", "5", "--plots",
                "none"]  # (numbers only: the PNGs of 5 runs would be most of this test's time)  # fmt: skip
        assert main([*args, "--model", model, *common, "--log_dir", str(val)]) == 0
        val_scores[model] = pd.read_csv(val / "summary.csv")["avg_jct_s"].mean()
    assert val_scores["best"] == pytest.approx(best["val_avg_jct_s"], rel=1e-6)
    assert val_scores["best"] <= val_scores["final"] * (1 + 1e-9)
    out = tmp_path / "eval"
    assert main(["--mode", "eval", "--algo", "d3qn", "--seed", "5", *common, "--log_dir", str(out)]) == 0
    heur = tmp_path / "heur"
    assert main(["--mode", "eval", "--algo", "fcfs", "--seed", "5", *common, "--log_dir", str(heur)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in heur.iterdir())
    agent_jobs, fcfs_jobs = pd.read_csv(out / "jobs.csv"), pd.read_csv(heur / "jobs.csv")
    assert agent_jobs["job_id"].tolist() == fcfs_jobs["job_id"].tolist()
    assert set(agent_jobs["status"]) <= {"completed", "rejected"}
    cmp_dir = tmp_path / "cmp"
    assert (
        main(
            [
                "--mode",
                "compare",
                "--algos",
                "fcfs,d3qn",
                "--seeds",
                "11,12",
                "--seed",
                "5",  # the model of training seed 5 (no other seed's model is ever substituted)
                *common,
                "--plots",
                "none",
                "--log_dir",
                str(cmp_dir),
            ]
        )
        == 0
    )
    summary = pd.read_csv(cmp_dir / "summary.csv")
    assert sorted(set(summary["scheduler"])) == ["d3qn", "fcfs"] and len(summary) == 4


def test_fresh_training_keeps_an_earlier_best_model_and_old_checkpoints_resume_as_pure_rl(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    (models / "sac_seed2_best.pt").write_text("an earlier run's model")
    (models / "sac_seed2_best.json").write_text("{}")
    common = ["--difficulty", "easy", "--num_jobs", "30", "--models_dir", str(models), "--no_progress"]
    args = ["--mode", "train", "--algo", "sac", "--seed", "2", "--validation_seeds", "none", *common]
    # no demonstrations in the first run (their pre-training would be most of this test's time); the resume below
    # names none, so it must take the checkpoint's (absent) demonstration settings as pure RL
    assert (
        main([*args, "--total_steps", "300", "--demo_policy", "none", "--log_dir", str(tmp_path / "a")]) == 0
    )
    # a run without validation has no best model of its own: the earlier one is kept (eval warns about it)
    assert (models / "sac_seed2_best.pt").read_text() == "an earlier run's model"
    # a checkpoint from before demonstrations existed (no demo_* keys) resumes as the pure RL run it was
    final = models / "sac_seed2_final.pt"
    ckpt = torch.load(final, weights_only=True)
    ckpt["config"] = {k: v for k, v in ckpt["config"].items() if not k.startswith("demo_")}
    torch.save(ckpt, final)
    assert (
        main([*args, "--total_steps", "400", "--resume", str(final), "--log_dir", str(tmp_path / "b")]) == 0
    )
    assert torch.load(final, weights_only=True)["config"]["demo_policy"] == ""


def test_eval_of_an_untrained_agent_says_how_to_train(tmp_path, capsys):
    code = main(
        ["--mode", "eval", "--algo", "sac", "--models_dir", str(tmp_path), "--log_dir", str(tmp_path / "o")]
    )
    err = capsys.readouterr().err
    assert code == 2 and "python main.py --mode train --algo sac" in err


def test_output_does_not_depend_on_python_hash_seed(tmp_path):
    """Equal-speed GPU types (A100-40GB/A100-80GB) must be ordered the same in every process."""
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("arrival_time,runtime,gpus\n0,100,6\n0,50,2\n0,20,0.5\n")
    outs = []
    for hash_seed in ("0", "2", "7"):
        out = tmp_path / f"out{hash_seed}"
        subprocess.run(
            [sys.executable, str(ROOT / "main.py"), "--mode", "eval", "--algo", "fcfs", "--workload_type", "csv",
             "--workload_path", str(jobs), "--cluster", "2xA100-40GB:4,2xA100-80GB:4", "--log_dir", str(out),
             "--no_progress"],
            check=True, capture_output=True, env={**__import__("os").environ, "PYTHONHASHSEED": hash_seed},
        )  # fmt: skip
        outs.append((out / "jobs.csv").read_bytes())
    assert outs[0] == outs[1] == outs[2]


@pytest.mark.parametrize(
    "argv, status, ends",
    [
        (["--mode", "eval"], 0, True),
        (["--algo", "sjf", "--mode=compare"], 0, True),
        (["--mode", "eval"], 2, False),  # a failed run exits as usual
        (["--mode", "train"], 0, False),  # other modes (checkpoints, TensorBoard writers) exit as usual
        ([], 0, False),
    ],
)
def test_quick_exit_ends_only_a_successful_eval_or_compare_after_the_exit_handlers(argv, status, ends):
    """main.quick_exit skips the interpreter's teardown, never the exit handlers or buffered output."""
    script = (
        "import atexit, sys, main\n"
        "atexit.register(print, 'handler ran')\n"
        "print('buffered', end=' ')\n"
        f"main.quick_exit({argv!r}, {status})\n"
        "print('returned', end=' ')\n"
        "sys.exit(5)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=60, check=False
    )
    if ends:
        assert (proc.returncode, proc.stdout) == (status, "buffered handler ran\n")
    else:
        assert (proc.returncode, proc.stdout) == (5, "buffered returned handler ran\n")
