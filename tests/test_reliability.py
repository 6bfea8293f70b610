"""Reliability as a batch system, a full disk or an unusual number meets the program: every case checks the exit
status, the one line the user reads (one `error:` line, or one `interrupted (SIGNAL)` line), that no traceback is
printed, and what is left on disk.

- stop signals (SIGINT, SIGTERM, SIGHUP, SIGUSR1; interrupts.py): a real `python main.py` per mode gets a real
  signal while its work is under way (tests/signal_hook pauses it at a named function), and in-process runs get
  every signal at the same points;
- checkpoints of another task or observation are refused by eval, compare, report and resume (agents/fit.py);
- numbers at the edges of sim/limits.py's ranges, in jobs CSV rows, trace rows and options;
- a full disk (a failing writer) in every mode;
- the messages and options added with them (--progress, --keep_checkpoints, a value starting with '-', gzip'd
  jobs CSV, a single Google shard) and the example files the docs run.
"""

from __future__ import annotations

import builtins
import errno
import gzip
import io
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import cli.run_folder
import metrics.writers
from agents.checkpoint import load_checkpoint, save_checkpoint
from cli.run_folder import LOCK, RUN_CONFIG, RunFolder
from env.gym_env import GPUClusterEnv
from main import main
from sim.limits import MAX_ARRIVAL_S, MAX_GPUS, MAX_JOBS, MAX_RUNTIME_S, size_notice

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[1]
HOOK = Path(__file__).resolve().parent / "signal_hook"
TINY = ["--difficulty", "easy", "--num_jobs", "12", "--progress", "never"]
STOP = {
    "SIGINT": signal.SIGINT,
    "SIGTERM": signal.SIGTERM,
    "SIGHUP": signal.SIGHUP,
    "SIGUSR1": signal.SIGUSR1,
}
SHOWN = {"SIGINT": "Ctrl-C", "SIGTERM": "SIGTERM", "SIGHUP": "SIGHUP", "SIGUSR1": "SIGUSR1"}


def no_traceback(err: str) -> None:
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err


def one_error(err: str) -> str:
    """The one `error:` line of `err` (which holds nothing else but warnings and notes)."""
    no_traceback(err)
    errors = [line for line in err.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, err
    assert all(line.startswith(("error: ", "warning: ", "note: ")) for line in err.splitlines() if line), err
    return errors[0]


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (hidden ones included) -> its bytes; {} when it does not exist."""
    if not folder.exists():
        return {}
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()
    }


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """models/ with a tiny d3qn seed 0 scheduling agent and models/power/ with a power-task one (real trainings)."""
    root = tmp_path_factory.mktemp("reliability_models")
    common = [
        *TINY,
        "--demo_policy",
        "none",
        "--validation_seeds",
        "none",
        "--models_dir",
        str(root / "models"),
    ]
    assert main(["--mode", "train", "--algo", "d3qn", "--seed", "0", "--total_steps", "40",
                 "--log_dir", str(root / "train"), *common]) == 0  # fmt: skip
    assert main(["--mode", "train", "--task", "power", "--algo", "d3qn", "--seed", "0", "--total_steps", "30",
                 "--log_dir", str(root / "train_power"), *common]) == 0  # fmt: skip
    return root / "models"


# ==== stop signals: a real process, a real signal ================================================================


def run_until_paused(
    argv: list[str], hook: str, tmp_path: Path, signame: str, group: bool = False
) -> subprocess.CompletedProcess:
    """Start `python main.py argv` (cwd tmp_path), wait until `hook` pauses it, send `signame` (to its whole process
    group with `group`, as a terminal's Ctrl-C, Slurm and `timeout` do), let it finish."""
    ready, sent = tmp_path / "hook.ready", tmp_path / "hook.sent"
    env = dict(os.environ)
    env.update(
        PYTHONPATH=os.pathsep.join([str(HOOK), str(ROOT)]),
        SIGNAL_HOOK=hook,
        SIGNAL_HOOK_READY=str(ready),
        SIGNAL_HOOK_SENT=str(sent),
    )
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "main.py"), *argv],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=group,
    )
    try:
        deadline = time.monotonic() + 240  # a busy machine starts slowly
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert ready.exists(), f"the run never reached {hook}: {proc.communicate()}"
        under_way = files_of(tmp_path / "out")
        if group:
            os.killpg(proc.pid, STOP[signame])
        else:
            proc.send_signal(STOP[signame])
        sent.touch()
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
    result = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    result.under_way = under_way  # the run folder when the signal was sent
    return result


REPORT = [
    "--mode",
    "report",
    "--report_sets",
    "medium",
    "--seeds",
    "900",
    "--num_jobs",
    "12",
    "--progress",
    "never",
]
PROCESS_CASES = [
    # (mode, argv, hook where the signal arrives, a file the run had written by then)
    ("eval", ["--mode", "eval", "--algo", "sjf", *TINY], "metrics.writers:write_runs_csv", "jobs.csv"),
    (
        "compare",
        ["--mode", "compare", "--algos", "fcfs,sjf", *TINY],
        "metrics.writers:write_jobs_csv@2",
        "fcfs_seed0/summary.csv",
    ),
    ("report", REPORT, "evaluation.report:write_csv@2", "evaluations.csv"),
]


def _process_case_params():
    for mode, argv, hook, written in PROCESS_CASES:
        for signame in STOP:
            marks = () if signame == "SIGTERM" else (pytest.mark.slow,)
            yield pytest.param(mode, argv, hook, written, signame, marks=marks, id=f"{mode}-{signame}")


@pytest.mark.parametrize(("mode", "argv", "hook", "written", "signame"), _process_case_params())
def test_a_stop_signal_to_a_real_process_leaves_no_run(mode, argv, hook, written, signame, trained, tmp_path):
    """eval, compare and report: stopped while writing their files, they leave nothing (no lock, no half
    run_config.json), print one line and exit 128 + the signal's number."""
    args = [*argv, "--log_dir", str(tmp_path / "out")]
    if mode == "report":
        args += ["--models_dir", str(trained)]
    proc = run_until_paused(args, hook, tmp_path, signame)
    assert written in proc.under_way and LOCK in proc.under_way  # work was under way
    assert proc.returncode == 128 + STOP[signame], proc.stderr
    no_traceback(proc.stderr)
    assert proc.stderr.strip().splitlines() == [
        f"interrupted ({SHOWN[signame]}): no half-written run was left"
    ]
    assert not (tmp_path / "out").exists()  # nothing: the folder did not exist before


@pytest.mark.parametrize(
    "signame", [pytest.param(s, marks=() if s == "SIGTERM" else (pytest.mark.slow,)) for s in STOP]
)
def test_a_stop_signal_to_a_real_training_writes_a_checkpoint_and_its_resume_command_works(
    signame, tmp_path, capsys
):
    models = tmp_path / "models"
    args = ["--mode", "train", "--algo", "d3qn", "--seed", "5", *TINY, "--demo_policy", "none",
            "--validation_seeds", "none", "--total_steps", "90", "--models_dir", str(models), "--log_dir",
            str(tmp_path / "out")]  # fmt: skip
    proc = run_until_paused(args, "env.gym_env:GPUClusterEnv.step@40", tmp_path, signame)
    assert proc.returncode == 128 + STOP[signame], proc.stderr
    no_traceback(proc.stderr)
    lines = proc.stderr.strip().splitlines()
    name = SHOWN[signame]
    assert (
        lines[0] == f"{name}: stopping after this step to write a checkpoint ({name} again to stop at once)"
    )
    assert lines[1].startswith(f"interrupted at step 40 of 90: wrote {models / 'd3qn_seed5_interrupted.pt'}")
    assert lines[2].startswith("resume with: ") and len(lines) == 3
    checkpoint = load_checkpoint(models / "d3qn_seed5_interrupted.pt")
    assert checkpoint["global_step"] == 40 and not (models / "d3qn_seed5_final.pt").exists()
    assert LOCK not in files_of(tmp_path / "out")  # the run folder is left unfinished, not locked
    command = shlex.split(lines[2].removeprefix("resume with: "))
    assert command[:2] == ["python", "main.py"]
    assert main(command[2:]) == 0  # exactly what the user would type
    final = load_checkpoint(models / "d3qn_seed5_final.pt")
    assert final["global_step"] == 90 and final["run_id"] == checkpoint["run_id"]
    assert not (models / "d3qn_seed5_interrupted.pt").exists()
    capsys.readouterr()


@pytest.mark.slow
@pytest.mark.parametrize("signame", ["SIGTERM", "SIGINT"])
def test_a_signal_to_the_process_group_stops_ppo_with_subprocess_envs_cleanly(signame, tmp_path):
    """The env workers ignore the signal: the trainer finishes its step, checkpoints and closes them."""
    models = tmp_path / "models"
    args = ["--mode", "train", "--algo", "ppo", "--seed", "1", *TINY, "--validation_seeds", "none", "--num_envs",
            "2", "--vec_env", "subproc", "--total_steps", "4096", "--models_dir", str(models), "--log_dir",
            str(tmp_path / "out")]  # fmt: skip
    proc = run_until_paused(args, "env.gym_env:GPUClusterEnv.step@40", tmp_path, signame, group=True)
    assert proc.returncode == 128 + STOP[signame], proc.stderr
    no_traceback(proc.stderr)
    assert (
        "resume with: " in proc.stderr
        and load_checkpoint(models / "ppo_seed1_interrupted.pt")["global_step"] > 0
    )


@pytest.mark.slow
def test_a_signal_stops_a_report_with_worker_processes_at_once(trained, tmp_path, monkeypatch, capsys):
    """--report_workers 2: after the first evaluation returns, SIGTERM; the workers are ended, nothing is left."""
    import concurrent.futures

    real = concurrent.futures.as_completed

    def first_then_signal(futures):
        for i, future in enumerate(real(futures)):
            if i == 0:  # the other evaluation is still under way in its worker
                os.kill(os.getpid(), signal.SIGTERM)
            yield future

    monkeypatch.setattr(concurrent.futures, "as_completed", first_then_signal)
    out = tmp_path / "out"
    started = time.monotonic()
    code = main([*REPORT, "--models_dir", str(trained), "--report_workers", "2", "--log_dir", str(out)])
    err = capsys.readouterr().err
    assert code == 143 and err.strip().splitlines() == ["interrupted (SIGTERM): no half-written run was left"]
    assert not out.exists() and time.monotonic() - started < 120


# ==== stop signals in-process: every signal at the same points ===================================================


def signal_during(monkeypatch, owner, name: str, sig: int, nth: int = 1) -> None:
    """The nth call of owner.name sends `sig` to this process first (it arrives before the call runs)."""
    real, calls = getattr(owner, name), [0]

    def send_then_run(*args, **kwargs):
        calls[0] += 1
        if calls[0] == nth:
            os.kill(os.getpid(), sig)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, send_then_run)


def _patch_writer(monkeypatch, name: str, sig: int, nth: int = 1) -> None:
    """metrics.writers.<name>, wherever the run modes hold it."""
    signal_during(monkeypatch, metrics.writers, name, sig, nth)
    import cli.runner

    if hasattr(cli.runner, name):
        monkeypatch.setattr(cli.runner, name, getattr(metrics.writers, name))


@pytest.mark.parametrize("signame", STOP)
@pytest.mark.parametrize(
    ("argv", "writer", "nth"),
    [
        (["--mode", "eval", "--algo", "fcfs"], "write_cluster_csv", 1),
        (["--mode", "compare", "--algos", "fcfs,easy"], "write_summary_csv", 2),
    ],
    ids=["eval", "compare"],
)
def test_every_stop_signal_gives_the_folder_back_as_it_was(
    argv, writer, nth, signame, tmp_path, monkeypatch, capsys
):
    """The folder held another run (--overwrite replaces it): a signal mid-run puts it back byte for byte."""
    out = tmp_path / "out"
    assert main(["--mode", "eval", "--algo", "sjf", *TINY, "--log_dir", str(out)]) == 0
    before = files_of(out)
    capsys.readouterr()
    handlers = {s: signal.getsignal(s) for s in STOP.values()}
    _patch_writer(monkeypatch, writer, STOP[signame], nth)
    code = main([*argv, *TINY, "--log_dir", str(out), "--overwrite"])
    err = capsys.readouterr().err
    assert code == 128 + STOP[signame]
    no_traceback(err)
    assert err.strip().splitlines() == [f"interrupted ({SHOWN[signame]}): no half-written run was left"]
    assert files_of(out) == before
    assert {s: signal.getsignal(s) for s in STOP.values()} == handlers  # restored


@pytest.mark.parametrize("signame", STOP)
def test_every_stop_signal_stops_a_report_leaving_nothing(signame, trained, tmp_path, monkeypatch, capsys):
    import evaluation.report

    signal_during(monkeypatch, evaluation.report, "markdown", STOP[signame])
    import cli.report

    monkeypatch.setattr(cli.report, "markdown", evaluation.report.markdown)
    out = tmp_path / "out"
    code = main([*REPORT, "--models_dir", str(trained), "--log_dir", str(out)])
    err = capsys.readouterr().err
    assert code == 128 + STOP[signame]
    no_traceback(err)
    assert err.strip().splitlines() == [f"interrupted ({SHOWN[signame]}): no half-written run was left"]
    assert not out.exists()


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP", "SIGUSR1"])
def test_every_stop_signal_stops_training_at_a_step_with_a_checkpoint(signame, tmp_path, monkeypatch, capsys):
    real_step, calls = GPUClusterEnv.step, [0]

    def step_then_signal(self, action):
        calls[0] += 1
        result = real_step(self, action)
        if calls[0] == 25:
            os.kill(os.getpid(), STOP[signame])
        return result

    monkeypatch.setattr(GPUClusterEnv, "step", step_then_signal)
    models = tmp_path / "models"
    code = main(["--mode", "train", "--algo", "d3qn", "--seed", "4", *TINY, "--demo_policy", "none",
                 "--validation_seeds", "none", "--total_steps", "80", "--models_dir", str(models), "--log_dir",
                 str(tmp_path / "out")])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 128 + STOP[signame]
    no_traceback(err)
    assert f"{signame}: stopping after this step" in err and "resume with: " in err
    assert load_checkpoint(models / "d3qn_seed4_interrupted.pt")["global_step"] == 25
    assert not (models / "d3qn_seed4_final.pt").exists()


def test_a_signal_while_the_folder_is_claimed_waits_then_gives_it_back(tmp_path, monkeypatch, capsys):
    """The claim is not cut in half: the signal is delivered once it is complete, and the run then abandons it."""
    real_claim = RunFolder._claim

    def claim_with_signal(self):
        os.kill(os.getpid(), signal.SIGTERM)  # held back until the claim is complete
        real_claim(self)
        assert (self.path / LOCK).exists() and (self.path / RUN_CONFIG).exists()

    monkeypatch.setattr(RunFolder, "_claim", claim_with_signal)
    code = main(["--mode", "eval", "--algo", "fcfs", *TINY, "--log_dir", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 143 and err.strip().splitlines() == ["interrupted (SIGTERM): no half-written run was left"]
    assert not (tmp_path / "out").exists()


def test_a_signal_while_the_run_finishes_leaves_the_complete_run(tmp_path, monkeypatch, capsys):
    real_finish = RunFolder._finish

    def finish_with_signal(self):
        os.kill(os.getpid(), signal.SIGTERM)
        real_finish(self)

    monkeypatch.setattr(RunFolder, "_finish", finish_with_signal)
    out = tmp_path / "out"
    code = main(["--mode", "eval", "--algo", "fcfs", *TINY, "--log_dir", str(out)])
    err = capsys.readouterr().err
    assert code == 143 and err.strip().splitlines() == ["interrupted (SIGTERM): no half-written run was left"]
    record = cli.run_folder.read_run_config(out)
    assert record["outputs"] and "summary.csv" in record["outputs"] and not (out / LOCK).exists()


def test_a_second_signal_during_the_clean_up_is_ignored_with_a_message(tmp_path, monkeypatch, capsys):
    real_abandon = RunFolder._abandon

    def abandon_signalled_again(self):
        os.kill(os.getpid(), signal.SIGTERM)
        real_abandon(self)

    monkeypatch.setattr(RunFolder, "_abandon", abandon_signalled_again)
    _patch_writer(monkeypatch, "write_runs_csv", signal.SIGINT)
    out = tmp_path / "out"
    code = main(["--mode", "eval", "--algo", "fcfs", *TINY, "--log_dir", str(out)])
    err = capsys.readouterr().err
    no_traceback(err)
    assert code == 130  # the first signal decides
    assert err.strip().splitlines() == [
        "SIGTERM: still stopping (cleaning up); please wait",
        "interrupted (Ctrl-C): no half-written run was left",
    ]
    assert not out.exists()


# ==== checkpoints of another task or observation ================================================================


def variant(trained: Path, tmp_path: Path, name: str, **changes) -> Path:
    """A copy of the scheduling checkpoint with some recorded fields changed (obs_spec entries by key)."""
    checkpoint = load_checkpoint(trained / "d3qn_seed0_final.pt")
    for key, value in changes.items():
        if key in ("window", "job_feature_dim", "context_dim"):
            checkpoint["obs_spec"] = dict(checkpoint["obs_spec"], **{key: value})
        elif value is None:
            checkpoint.pop(key, None)
        else:
            checkpoint[key] = value
    path = tmp_path / name
    save_checkpoint(path, checkpoint)
    return path


CHECKPOINT_CASES = [
    # (argv, checkpoint, expected fragment) - {power}: the power agent, {feat}/{ctx}: other observation widths
    (
        ["--mode", "eval", "--algo", "d3qn", "--checkpoint", "{power}", *TINY],
        "holds a d3qn agent of --task power (window 4, 11 features per slot, 11 context features), but this run is "
        "--task scheduling (window 16, 8 features per slot, 59 context features): run it with --task power",
    ),
    (
        ["--mode", "compare", "--algos", "sjf,d3qn", "--checkpoint", "{power}", *TINY],
        "holds a d3qn agent of --task power",
    ),
    (
        ["--mode", "eval", "--task", "power", "--algo", "d3qn", "--checkpoint", "{sched}", *TINY],
        "holds a d3qn agent of --task scheduling (window 16, 8 features per slot, 59 context features), but this "
        "run is --task power (11 features per slot, 11 context features)",
    ),
    (
        ["--mode", "eval", "--task", "autoscaling", "--algo", "d3qn", "--checkpoint", "{power}"],
        "holds a d3qn agent of --task power",
    ),
    (
        ["--mode", "eval", "--algo", "d3qn", "--checkpoint", "{feat}", *TINY],
        "whose network reads window 16, 9 features per slot, 59 context features, but this run's --task "
        "scheduling env gives window 16, 8 features per slot",
    ),
    (
        ["--mode", "eval", "--algo", "d3qn", "--checkpoint", "{ctx}", *TINY],
        "reads window 16, 8 features per slot, 60 context features",
    ),
    (
        ["--mode", "eval", "--algo", "d3qn", "--checkpoint", "{tasked}", *TINY],
        "holds a d3qn agent of --task autoscaling",
    ),
]


@pytest.mark.parametrize(("argv", "fragment"), CHECKPOINT_CASES)
def test_a_checkpoint_of_another_task_or_observation_is_refused_naming_both(
    argv, fragment, trained, tmp_path, capsys
):
    paths = {
        "power": str(trained / "power" / "d3qn_seed0_final.pt"),
        "sched": str(trained / "d3qn_seed0_final.pt"),
        "feat": str(variant(trained, tmp_path, "feat.pt", job_feature_dim=9)),
        "ctx": str(variant(trained, tmp_path, "ctx.pt", context_dim=60)),
        "tasked": str(variant(trained, tmp_path, "tasked.pt", task="autoscaling")),
    }
    args = [a.format(**paths) for a in argv]
    code = main([*args, "--progress", "never", "--log_dir", str(tmp_path / "out")])
    line = one_error(capsys.readouterr().err)
    assert code == 2 and fragment in line
    assert not (tmp_path / "out").exists()


def test_report_refuses_a_checkpoint_of_another_task_in_models_dir(trained, tmp_path, capsys):
    models = tmp_path / "models"
    models.mkdir()
    (models / "d3qn_seed1_final.pt").write_bytes((trained / "power" / "d3qn_seed0_final.pt").read_bytes())
    code = main([*REPORT, "--models_dir", str(models), "--log_dir", str(tmp_path / "out")])
    line = one_error(capsys.readouterr().err)
    assert code == 2 and "d3qn_seed1_final.pt holds a d3qn agent of --task power" in line
    assert not (tmp_path / "out").exists()


def test_a_slot_agent_whose_weights_do_not_load_is_one_error_line_before_any_work(trained, tmp_path, capsys):
    """A damaged network (weights of another shape, or none) in --mode report or eval: one error line naming the
    file, no traceback, no folder (the report checks every model before the heuristics run)."""
    models = tmp_path / "models"
    models.mkdir()
    checkpoint = load_checkpoint(trained / "d3qn_seed0_final.pt")
    weights = checkpoint["agent"]["networks"]["q_network"]
    weights[next(iter(weights))] = torch.zeros(3, 3)
    save_checkpoint(models / "d3qn_seed0_final.pt", checkpoint)
    del checkpoint["agent"]["networks"]["q_network"]
    save_checkpoint(tmp_path / "none.pt", checkpoint)
    code = main([*REPORT, "--models_dir", str(models), "--log_dir", str(tmp_path / "out")])
    line = one_error(capsys.readouterr().err)
    assert code == 2 and line.startswith(f"error: {models / 'd3qn_seed0_final.pt'}: unusable d3qn network (")
    assert "size mismatch" in line
    code = main(["--mode", "eval", "--algo", "d3qn", "--checkpoint", str(tmp_path / "none.pt"), *TINY,
                 "--log_dir", str(tmp_path / "out")])  # fmt: skip
    line = one_error(capsys.readouterr().err)
    assert code == 2 and line == f"error: {tmp_path / 'none.pt'}: unusable d3qn network ('q_network')"
    assert not (tmp_path / "out").exists()


def test_resume_refuses_a_checkpoint_whose_observation_differs(trained, tmp_path, capsys):
    path = variant(trained, tmp_path, "d3qn_seed0_ep1.pt", context_dim=58, total_steps=10**6)
    code = main(["--mode", "train", "--algo", "d3qn", "--seed", "0", "--resume", str(path), "--models_dir",
                 str(tmp_path), "--log_dir", str(tmp_path / "out"), "--progress", "never"])  # fmt: skip
    line = one_error(capsys.readouterr().err)
    assert code == 2 and f"--resume {path} holds a d3qn agent whose network reads" in line
    assert "58 context features" in line and "59 context features" in line
    assert not (tmp_path / "out").exists() and not (tmp_path / "d3qn_seed0_final.pt").exists()


@pytest.mark.parametrize(
    ("changes", "extra"),
    [
        ({"task": None, "action_space": None}, []),  # written before task and action space were recorded
        ({}, ["--window", "8"]),  # one per-slot network scores any window
    ],
    ids=["older-file", "other-window"],
)
def test_a_fitting_checkpoint_still_runs(changes, extra, trained, tmp_path, capsys):
    path = variant(trained, tmp_path, "ok.pt", **changes)
    out = tmp_path / "out"
    code = main(
        ["--mode", "eval", "--algo", "d3qn", "--checkpoint", str(path), *extra, *TINY, "--log_dir", str(out)]
    )
    err = capsys.readouterr().err
    assert code == 0 and "error" not in err
    assert cli.run_folder.read_run_config(out)["outputs"]


def test_checkpoints_record_task_observation_and_action_space(trained):
    scheduling = load_checkpoint(trained / "d3qn_seed0_final.pt")
    power = load_checkpoint(trained / "power" / "d3qn_seed0_final.pt")
    assert (scheduling["task"], scheduling["action_space"]) == ("scheduling", {"type": "Discrete", "n": 17})
    assert scheduling["obs_spec"] == {"window": 16, "job_feature_dim": 8, "context_dim": 59}
    assert (power["task"], power["action_space"]["n"]) == ("power", power["obs_spec"]["window"] + 1)


# ==== numbers at the edges =====================================================================================

CSV = ["--mode", "eval", "--algo", "fcfs", "--workload_type", "csv", "--workload_path", "{tmp}/jobs.csv"]
CL = ["--cluster", "1xA100:8"]


def swf(*rows: tuple[int, float, float, int]) -> str:
    """An SWF log: (job, submit s, run time s, processors) rows."""
    lines = ["; MaxNodes: 8\n; MaxProcs: 8\n"]
    for job, submit, run, procs in rows:
        fields = [job, submit, 0, run, procs, -1, -1, -1, -1, -1, 1, 1, 1, -1, 1, -1, -1, -1]
        lines.append(" ".join(f"{v:g}" if isinstance(v, float) else str(v) for v in fields) + "\n")
    return "".join(lines)


TRACE = ["--mode", "eval", "--algo", "fcfs", "--workload_type", "swf", "--workload_path", "{tmp}/t.swf"]


def jobs(*rows: str, header: str = "arrival_time,runtime,gpus") -> dict[str, str]:
    """{"jobs.csv": a jobs CSV with these rows}."""
    return {"jobs.csv": "\n".join([header, *rows]) + "\n"}


NUMBER_CASES = [
    # (argv, files, expected fragment of the error line)
    (
        [*CSV, *CL],
        jobs("0,100,1", "1e18,50,1"),
        "jobs.csv:3: arrival_time (after the first job's, line 2) 1e+18 s is beyond 1e+12 s, the range the "
        "simulator keeps exact to below a millisecond",
    ),
    (
        [*CSV, *CL],
        jobs("5,100,1", f"{5 + MAX_ARRIVAL_S * 1.001:.17g},50,1"),
        "jobs.csv:3: arrival_time (after the first job's, line 2) 1.001e+12 s is beyond",
    ),
    (
        [*CSV, *CL],
        jobs("-1e308,100,1", "1e308,50,1"),
        "jobs.csv:3: arrival_time (after the first job's, line 2) inf is not a finite number of seconds",
    ),
    (
        [*CSV, *CL],
        jobs("0,1e308,1"),
        "jobs.csv:2: runtime 1e+308 s is beyond 1e+09 s",
    ),
    (
        [*CSV, *CL],
        jobs("0,100,1", f"1,{MAX_RUNTIME_S * 1.0001:.17g},1"),
        "jobs.csv:3: runtime 1.0001e+09 s is beyond 1e+09 s",
    ),
    (
        [*CSV, *CL],
        jobs("0,100,1,1e13", header="arrival_time,runtime,gpus,estimate"),
        "jobs.csv:2: estimate 1e+13 s is beyond 1e+12 s",
    ),
    (
        [*TRACE],
        {"t.swf": swf((1, 0, 100, 1), (2, 10, 2e9, 1))},
        "t.swf: job 2: runtime 2e+09 s is beyond 1e+09 s",
    ),
    (
        [*TRACE],
        {"t.swf": swf((1, 0, 100, 1), (2, 2e12, 100, 1))},
        "t.swf: job 2: arrival, after the first kept job's, 2e+12 s is beyond 1e+12 s",
    ),
    (
        [*TRACE, "--time_scale", "1e-6"],
        {"t.swf": swf((1, 0, 100, 1), (2, 2e6, 100, 1))},
        "t.swf: job 2: arrival (after --time_scale 1e-06), after the first kept job's, 2e+12 s is beyond",
    ),
    (
        [*TRACE, "--time_scale", "1e300"],
        {"t.swf": swf((1, 0, 100, 1))},
        "--time_scale must be between 1e-06 and 1e+06",
    ),
    ([*TRACE, "--time_scale", "1e-7"], {"t.swf": swf((1, 0, 100, 1))}, "got 1e-07"),
    (
        ["--num_jobs", str(MAX_JOBS + 1)],
        {},
        f"--num_jobs must be at most {MAX_JOBS:,} (sim/limits.py), got 10,000,001",
    ),
    (["--num_jobs", "10000000000000000000000"], {}, "--num_jobs must be at most 10,000,000"),
    (
        ["--cluster=1000000xA100:8", *TINY[:2]],
        {},
        "cluster spec '1000000xA100:8' has at least 8,000,000 GPUs; a cluster has at most 1,000,000",
    ),
    (
        ["--cluster", "2xA100:2000", *TINY[:2]],
        {},
        "bad cluster spec item '2xA100:2000': 2,000 GPUs per node; at most 1,024",
    ),
    (["--cluster", "-1xA100:8", *TINY[:2]], {}, "bad cluster spec item '-1xA100:8': counts must be positive"),
    (["--cluster", "2xA100:-8", *TINY[:2]], {}, "bad cluster spec item '2xA100:-8': counts must be positive"),
    (
        [*CSV, "--cluster_path", "{tmp}/c.csv"],
        {
            "jobs.csv": "arrival_time,runtime,gpus\n0,100,1\n",
            "c.csv": "node_id,gpu_type,num_gpus\na,A100,8\nb,A100,2.5\n",
        },
        "c.csv:3: column num_gpus: expected a whole number of GPUs from 0 to 1,024, got '2.5'",
    ),
    (
        [*CSV, "--cluster_path", "{tmp}/c.csv"],
        {
            "jobs.csv": "arrival_time,runtime,gpus\n0,100,1\n",
            "c.csv": "node_id,gpu_type,num_gpus\na,A100,-1\n",
        },
        "c.csv:2: column num_gpus: expected a whole number of GPUs from 0 to 1,024, got '-1'",
    ),
    (
        [*CSV, "--cluster_path", "{tmp}/c.csv"],
        {
            "jobs.csv": "arrival_time,runtime,gpus\n0,100,1\n",
            "c.csv": "node_id,gpu_type,num_gpus\na,A100,eight\n",
        },
        "c.csv:2: column num_gpus: expected a whole number of GPUs from 0 to 1,024, got 'eight'",
    ),
    (
        [*CSV, "--cluster_path", "{tmp}/c.csv"],
        {
            "jobs.csv": "arrival_time,runtime,gpus\n0,100,1\n",
            "c.csv": "node_id,gpu_type,num_gpus\n"
            + "".join(f"n{i},A100,1024\n" for i in range(MAX_GPUS // 1024 + 1)),
        },
        "c.csv: 1,000,448 GPUs in all; at most 1,000,000",
    ),
]


@pytest.mark.parametrize(("argv", "files", "fragment"), NUMBER_CASES)
def test_a_number_beyond_its_range_is_one_error_line(argv, files, fragment, tmp_path, capsys):
    for name, content in files.items():
        (tmp_path / name).write_text(content)
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code = main([*args, "--progress", "never", "--log_dir", str(tmp_path / "out")])
    line = one_error(capsys.readouterr().err)
    assert code == 2 and fragment in line, line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("rows", "expected_jct_s"),
    [
        ("0,100,1\n" + f"{MAX_ARRIVAL_S:.17g},50,1\n", (100 + 50) / 2),  # the latest arrival allowed: exact
        (
            "0,100,1\n" + f"1,{MAX_RUNTIME_S:.17g},1\n",
            (100 + MAX_RUNTIME_S) / 2,
        ),  # the longest runtime allowed
    ],
    ids=["arrival-at-the-edge", "runtime-at-the-edge"],
)
def test_numbers_at_the_edge_of_the_range_give_exact_results(rows, expected_jct_s, tmp_path, capsys):
    (tmp_path / "jobs.csv").write_text("arrival_time,runtime,gpus\n" + rows)
    out = tmp_path / "out"
    code = main(
        [*[a.replace("{tmp}", str(tmp_path)) for a in CSV], "--cluster", "1xA100:8", "--log_dir", str(out)]
    )
    captured = capsys.readouterr()
    assert code == 0 and "error" not in captured.err
    import csv

    with open(out / "summary.csv", newline="") as fh:
        [row] = list(csv.DictReader(fh))
    assert float(row["avg_jct_s"]) == expected_jct_s  # every JCT exact to the bit


def test_a_large_run_says_how_much_memory_it_needs_before_any_work(tmp_path, capsys):
    """--num_jobs 2,000,000 is noted at once (the check that follows here stops the run before any work)."""
    (tmp_path / "file").write_text("")
    code = main(["--num_jobs", "2000000", "--log_dir", str(tmp_path / "file" / "out")])
    err = capsys.readouterr().err
    assert code == 2 and one_error(err)
    [note] = [line for line in err.splitlines() if line.startswith("note: ")]
    assert note.startswith("note: 2,000,000 jobs on 96 GPUs: expect about 4.9 GB of memory per simulated run")
    assert size_notice(1000, 48) is None and size_notice(100_001, 48) is not None


# ==== a full disk ===============================================================================================


class FullDisk:
    """Files opened for writing under `folder` fail as on a full disk: the open succeeds, writes raise ENOSPC
    (as write(2) does), so the program meets the error where it really would."""

    def __init__(self, monkeypatch, folder: Path, after: str = "", err: int = errno.ENOSPC):
        self.folder, self.after, self.errno = folder.resolve(), after, err
        self.real_open, self.armed = builtins.open, not after
        monkeypatch.setattr(builtins, "open", self.open)
        monkeypatch.setattr(io, "open", self.open)

    def open(self, file, mode="r", *args, **kwargs):
        handle = self.real_open(file, mode, *args, **kwargs)
        if isinstance(file, int) or not any(c in mode for c in "wax+"):
            return handle
        path = Path(os.fsdecode(file)).resolve()
        if not path.is_relative_to(self.folder):
            return handle
        if not self.armed:
            self.armed = self.after in path.name  # the disk fills up after this file (or its temp file)
            return handle
        return _Failing(handle, self.errno)


class _Failing:
    def __init__(self, handle, err: int):
        self._handle, self._errno = handle, err

    def write(self, data):
        raise OSError(self._errno, os.strerror(self._errno))

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._handle.close()

    def __iter__(self):
        return iter(self._handle)


DISK_CASES = [
    # (argv, file after which the disk is full, expected fragment)
    (
        ["--mode", "eval", "--algo", "fcfs"],
        "",
        "cannot write {out}: the disk is full; nothing was written: free space",
    ),
    (
        ["--mode", "eval", "--algo", "fcfs"],
        RUN_CONFIG,
        "cannot write {out}: the disk is full; {out}/ is as it was",
    ),
    (
        ["--mode", "eval", "--algo", "fcfs"],
        "summary.csv",
        "the disk is full; {out}/ is as it was before the run",
    ),
    (
        ["--mode", "eval", "--algo", "fcfs"],
        "jct_cdf.png",
        "the disk is full; {out}/ is as it was before the run",
    ),
    (["--mode", "compare", "--algos", "fcfs,sjf"], "compare.csv", "the disk is full; {out}/ is as it was"),
]


@pytest.mark.parametrize(("argv", "after", "fragment"), DISK_CASES)
@pytest.mark.parametrize("previous", [False, True], ids=["new-folder", "replacing-a-run"])
def test_a_full_disk_is_one_error_line_and_the_folder_is_as_before(
    argv, after, fragment, previous, tmp_path, monkeypatch, capsys
):
    out = tmp_path / "out"
    if previous:  # --overwrite replaces this run; on failure it must come back byte for byte
        assert main(["--mode", "eval", "--algo", "sjf", *TINY, "--log_dir", str(out)]) == 0
    before = files_of(out)
    capsys.readouterr()
    FullDisk(monkeypatch, out, after)
    code = main([*argv, *TINY, "--log_dir", str(out), "--overwrite"])
    line = one_error(capsys.readouterr().err)
    assert code == 2 and fragment.format(out=out) in line and "run again" in line, line
    monkeypatch.undo()
    assert files_of(out) == before


def test_a_signal_the_process_ignores_stays_ignored(tmp_path):
    """`nohup` starts a run with SIGHUP ignored: closing the terminal must not stop it."""
    ready, sent = tmp_path / "hook.ready", tmp_path / "hook.sent"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HOOK), str(ROOT)]), SIGNAL_HOOK="metrics.writers:write_runs_csv",
               SIGNAL_HOOK_READY=str(ready), SIGNAL_HOOK_SENT=str(sent))  # fmt: skip
    proc = subprocess.Popen(
        ["nohup", sys.executable, str(ROOT / "main.py"), "--algo", "sjf", *TINY, "--log_dir", str(tmp_path / "out")],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    deadline = time.monotonic() + 240
    while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGHUP)
    sent.touch()
    out, err = proc.communicate(timeout=240)
    assert proc.returncode == 0 and "Traceback" not in err and "interrupted" not in err
    assert cli.run_folder.read_run_config(tmp_path / "out")["outputs"]


def test_a_read_only_folder_names_the_problem(tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    FullDisk(monkeypatch, out, "summary.csv", errno.EROFS)
    code = main(["--mode", "eval", "--algo", "fcfs", *TINY, "--log_dir", str(out)])
    line = one_error(capsys.readouterr().err)
    assert (
        code == 2 and "Read-only file system" in line and "make it writable, or choose another folder" in line
    )
    monkeypatch.undo()
    assert not out.exists()


def test_a_full_disk_during_a_report_leaves_nothing(trained, tmp_path, monkeypatch, capsys):
    out = tmp_path / "out"
    FullDisk(monkeypatch, out, "evaluations.csv")
    code = main([*REPORT, "--models_dir", str(trained), "--log_dir", str(out)])
    line = one_error(capsys.readouterr().err)
    assert code == 2 and "the disk is full" in line and "is as it was before the run" in line
    monkeypatch.undo()
    assert not out.exists()


def test_a_full_disk_while_training_names_the_checkpoint_to_resume_from(tmp_path, monkeypatch, capsys):
    """The disk fills up after the first periodic checkpoint: the error says to resume from it, and that works."""
    models = tmp_path / "models"
    args = ["--mode", "train", "--algo", "d3qn", "--seed", "6", *TINY, "--demo_policy", "none",
            "--validation_seeds", "none", "--total_steps", "60", "--checkpoint_every", "1", "--models_dir",
            str(models), "--log_dir", str(tmp_path / "out")]  # fmt: skip
    FullDisk(monkeypatch, models, "d3qn_seed6_ep1.pt")
    code = main(args)
    line = one_error(capsys.readouterr().err)
    assert code == 2 and "the disk is full; the training stopped; resume it later with --resume" in line
    monkeypatch.undo()
    resume_from = line.split("--resume ")[1].split(":")[0]
    assert Path(resume_from).name == "d3qn_seed6_ep1.pt" and load_checkpoint(resume_from)["episode"] == 1
    assert not (models / "d3qn_seed6_final.pt").exists()
    assert not any(p.name.endswith(".tmp") for p in models.iterdir())  # no half-written file
    assert main([*args[:-2], "--log_dir", str(tmp_path / "out"), "--resume", resume_from]) == 0
    assert load_checkpoint(models / "d3qn_seed6_final.pt")["global_step"] == 60


# ==== messages, options and examples ============================================================================

MESSAGE_CASES = [
    (
        ["--workload_type", "google", "--workload_path", "{tmp}/g/task_events/part-00000-of-00500.csv.gz"],
        "a single file; --workload_type google reads the clusterdata-2011-2 folder that holds task_events/ (and "
        "job_events/) shards, all of them in name order: --workload_path {tmp}/g",
    ),
    (["--progress", "always", "--no_progress"], "--no_progress and --progress always contradict each other"),
    (["--mode", "train", "--algo", "d3qn", "--keep_checkpoints", "-1"], "--keep_checkpoints must be >= 0"),
    (["--keep_checkpoints", "2"], "--keep_checkpoints has no effect on this run (training options"),
    (
        ["--workload_type", "csv", "--workload_path", "{tmp}/bad.csv.gz", "--cluster", "1xA100:8"],
        "bad.csv.gz: truncated or corrupt gzip file",
    ),
    (
        ["--workload_type", "csv", "--workload_path", "{tmp}/latin1.csv.gz", "--cluster", "1xA100:8"],
        "latin1.csv.gz: gzip-compressed, but what it holds is not UTF-8 text",
    ),
    (
        ["--workload_type", "csv", "--workload_path", "{tmp}/rows.csv.gz", "--cluster", "1xA100:8"],
        "rows.csv.gz:3: gpus above 1 must be a whole number, got '2.5'",
    ),
]


@pytest.mark.parametrize(("argv", "fragment"), MESSAGE_CASES)
def test_unclear_messages_now_name_the_file_and_what_to_do(argv, fragment, tmp_path, capsys):
    shard = tmp_path / "g" / "task_events" / "part-00000-of-00500.csv.gz"
    shard.parent.mkdir(parents=True)
    shard.write_bytes(gzip.compress(b"0,,1,0,,0,u,0,0,0.1,0.1,0,0\n"))
    (tmp_path / "bad.csv.gz").write_bytes(gzip.compress(b"arrival_time,runtime,gpus\n0,1,1\n")[:20])
    (tmp_path / "latin1.csv.gz").write_bytes(
        gzip.compress("arrival_time,runtime,gpus\n0,1,1 é\n".encode("latin-1"))
    )
    (tmp_path / "rows.csv.gz").write_bytes(gzip.compress(b"arrival_time,runtime,gpus\n0,1,1\n5,1,2.5\n"))
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code = main([*args, "--log_dir", str(tmp_path / "out")])
    line = one_error(capsys.readouterr().err)
    assert code == 2 and fragment.replace("{tmp}", str(tmp_path)) in line, line
    assert not (tmp_path / "out").exists()


def test_a_gzipped_jobs_csv_is_read_like_the_plain_one(tmp_path, capsys):
    text = "arrival_time,runtime,gpus\n0,100,1\n5,50,2\n"
    (tmp_path / "jobs.csv").write_text(text)
    (tmp_path / "jobs.csv.gz").write_bytes(gzip.compress(text.encode()))
    for name in ("jobs.csv", "jobs.csv.gz"):
        argv = ["--algo", "sjf", "--workload_type", "csv", "--workload_path", str(tmp_path / name), "--cluster",
                "1xA100:8", "--log_dir", str(tmp_path / name.replace(".", "_"))]  # fmt: skip
        assert main(argv) == 0
    capsys.readouterr()
    plain, packed = (
        (tmp_path / "jobs_csv" / "jobs.csv").read_text(),
        (tmp_path / "jobs_csv_gz" / "jobs.csv").read_text(),
    )
    assert plain == packed


def test_a_cluster_value_starting_with_a_dash_reaches_the_cluster_check(tmp_path, capsys):
    assert main(["--cluster", "-1xA100:8", "--log_dir", str(tmp_path / "out")]) == 2
    line = one_error(capsys.readouterr().err)
    assert "expected one argument" not in line and "counts must be positive" in line


def test_keep_checkpoints_keeps_the_newest_periodic_files(tmp_path, capsys):
    models = tmp_path / "models"
    args = ["--mode", "train", "--algo", "d3qn", "--seed", "7", *TINY, "--demo_policy", "none",
            "--validation_seeds", "none", "--total_steps", "70", "--checkpoint_every", "1", "--models_dir",
            str(models), "--log_dir", str(tmp_path / "out"), "--keep_checkpoints", "2"]  # fmt: skip
    assert main(args) == 0
    periodic = sorted(p.name for p in models.glob("d3qn_seed7_ep*.pt"))
    episodes = load_checkpoint(models / "d3qn_seed7_final.pt")["episode"]
    assert episodes >= 3 and periodic == sorted(f"d3qn_seed7_ep{n}.pt" for n in (episodes - 1, episodes))
    capsys.readouterr()


def test_progress_bars_are_off_in_a_redirected_log_unless_asked(tmp_path, capsys):
    """auto (the default): stderr is not a terminal here (captured, as in a redirected log), so no bar;
    --progress always draws one there too."""
    base = ["--algo", "sjf", "--difficulty", "easy", "--num_jobs", "50"]
    assert main([*base, "--log_dir", str(tmp_path / "a")]) == 0
    assert capsys.readouterr().err == ""
    assert main([*base, "--log_dir", str(tmp_path / "b"), "--progress", "always"]) == 0
    assert re.search(r"sjf: +\d+%", capsys.readouterr().err)


def documented_example_commands() -> list[str]:
    """Every `python main.py ...` line of the docs that reads examples/."""
    commands = []
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for line in doc.read_text().splitlines():
            if line.startswith("python main.py") and "examples/" in line:
                commands.append(line.strip())
    return list(dict.fromkeys(commands))


@pytest.mark.parametrize("command", documented_example_commands())
def test_the_documented_example_commands_run_as_written(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    argv = shlex.split(command)[2:]
    out = tmp_path / "out"
    assert main([*argv, "--log_dir", str(out), "--progress", "never"]) == 0, capsys.readouterr().err
    assert cli.run_folder.read_run_config(out)["outputs"]
    capsys.readouterr()


def test_the_docs_run_both_example_files():
    commands = " ".join(documented_example_commands())
    assert "examples/jobs.csv" in commands and "examples/cluster.csv" in commands
    assert re.search(r"--workload_path examples/jobs\.csv", commands)
