"""`--mode dispatch` end to end on simulated GPUs with real subprocesses (dispatch/fake_job.py jobs of a fraction of
a second): backfilling, out-of-memory retries, timeouts, live edits of the jobs file, kill -9, Ctrl-C and the other
stop signals (SIGTERM, SIGHUP, SIGUSR1: interrupts.py) then resume, the replay's schedule against the dispatched one,
and the mistakes refused before anything runs."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import main
from dispatch import fake_job, runner
from dispatch.board import Board

ROOT = Path(__file__).resolve().parents[1]
FAKE = Path(fake_job.__file__)
POLL_S = "0.05"
START_LATENCY_S = 2.0
"""the most a fake job's measured run time may exceed its ramp + hold: the wrapper and Python start-up, and the
round in which its end is noticed (a poll interval). Measured here: about 0.1 to 0.3 s on an idle machine."""


def fake(vram: str = "0", ramp: float = 0.05, hold: float = 0.3, code: int = 0, extra: str = "") -> str:
    return f"{sys.executable} {FAKE} --vram {vram} --ramp {ramp} --hold {hold} --exit {code} {extra}".strip()


def argv(jobs: Path, folder: Path, sim: str = "1xA100-80GB", algo: str = "fcfs", *more: str) -> list[str]:
    return [
        "--mode", "dispatch", "--jobs", str(jobs), "--sim", sim, "--algo", algo, "--log_dir", str(folder),
        "--poll_s", POLL_S, "--on_interrupt", "stop", "--plots", "none", *more,
    ]  # fmt: skip


def dispatch(
    tmp_path: Path, text: str, sim: str = "1xA100-80GB", algo: str = "fcfs", *more: str
) -> tuple[int, Path]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    jobs = tmp_path / "jobs.txt"
    jobs.write_text(text)
    folder = tmp_path / "run"
    return main.main(argv(jobs, folder, sim, algo, *more)), folder


def events(folder: Path, kind: str | None = None) -> list[dict]:
    records = [json.loads(line) for line in (folder / "journal.jsonl").read_text().splitlines()]
    return [r for r in records if kind is None or r["event"] == kind]


def by_command(folder: Path, kind: str) -> dict[str, list[dict]]:
    """command -> the journal records of that kind for its job, in order."""
    command = {r["job"]: r["attrs"]["command"] for r in events(folder, "seen")}
    out: dict[str, list[dict]] = {}
    for r in events(folder, kind):
        out.setdefault(command[r["job"]], []).append(r)
    return out


def table(path: Path) -> dict[str, dict]:
    with open(path) as f:
        return {row["job_id"]: row for row in csv.DictReader(f)}


def test_easy_backfills_a_short_job_that_fcfs_keeps_waiting(tmp_path):
    # 2 GPUs. `first` holds GPU 0 (estimated to end at 10 s); `head` needs both GPUs; `short` (est 1 s) ends
    # before the reservation and starts at once on GPU 1 under EASY; `long` (est 60 s) would delay the head.
    first, head, short, long = fake(hold=1.0), fake(hold=0.2), fake(hold=0.15), fake(hold=0.25)
    text = f"[est=10s] {first}\n[gpus=2 est=5s] {head}\n[est=1s] {short}\n[est=60s] {long}\n"
    for algo in ("easy", "fcfs"):
        rc, folder = dispatch(tmp_path / algo, text, "2xA100-80GB", algo)
        assert rc == 0
        start = {c: r[0]["t"] for c, r in by_command(folder, "start").items()}
        end = {c: r[0]["t"] for c, r in by_command(folder, "end").items()}
        devices = {c: r[0]["devices"] for c, r in by_command(folder, "start").items()}
        assert devices[first] == [0] and devices[head] == [0, 1]
        assert start[head] == end[first]
        if algo == "easy":
            assert start[short] == start[first] and devices[short] == [1]
            assert start[long] == end[head]
        else:
            assert start[short] == start[long] == end[head]


def test_an_out_of_memory_exit_is_retried_with_its_declaration_raised(tmp_path):
    # One A100 (81920 MiB). `big` declares and takes 60 GiB; `grow` declares 10 GiB but needs 30: it runs out of
    # memory at 20 GiB (81920 - 61440), and is queued again declaring 20480 x 1.25 = 25600 MiB, which no longer
    # fits beside `big` (61440 + 25600 > 80896 usable): it waits for `big` to end, then succeeds alone. The order
    # is fixed by files, not timing: `grow` ramps only once `big` holds its 60 GiB, `big` ends only once `grow`
    # has run out of memory.
    held, oomed = tmp_path / "big.held", tmp_path / "grow.oom"
    big, grow = (
        fake("60G", ramp=0.05, hold=0.05, extra=f"--ready {held} --end_after {oomed}"),
        fake("30G", ramp=0.6, hold=0.05, extra=f"--start_after {held} --oom_marker {oomed}"),
    )  # grow's ramp takes 30 steps of 1 GiB
    rc, folder = dispatch(tmp_path, f"[vram=60G est=2s] {big}\n[vram=10G retries=1 est=1s] {grow}\n")
    assert rc == 0
    starts, ends = by_command(folder, "start"), by_command(folder, "end")
    first, second = ends[grow]
    assert (first["outcome"], first["final"], first["peak_mib"], first["next_vram_mib"]) == (
        "oom",
        False,
        [20480],
        25600,
    )
    assert "CUDA out of memory" in Path(starts[grow][0]["stderr"]).read_text()
    assert starts[grow][1]["vram_mib"] == 25600 and starts[grow][1]["t"] >= ends[big][0]["t"]
    assert (second["outcome"], second["peak_mib"]) == ("ok", [30720])
    # warned at once, in each attempt: the first declared 10 GiB, the second 25 GiB, and it used 30 GiB
    assert [(r["job"], r["attempt"]) for r in events(folder, "overuse")] == [
        (starts[grow][0]["job"], 1),
        (starts[grow][0]["job"], 2),
    ]
    rows = table(folder / "jobs.csv")
    assert {r["trace_status"] for r in rows.values()} == {"", "oom"} and len(rows) == 3


def test_a_timeout_sends_sigterm_then_sigkill(tmp_path):
    polite, stubborn = fake(hold=5.0), fake(hold=5.0, extra="--ignore_term")
    text = f"[timeout=0.5s] {polite}\n[timeout=0.5s] {stubborn}\n"
    rc, folder = dispatch(tmp_path, text, "1xA100-80GB", "fcfs", "--kill_grace", "0.3s")
    assert rc == 1
    starts, ends = by_command(folder, "start"), by_command(folder, "end")
    assert (ends[polite][0]["outcome"], ends[polite][0]["exit_code"]) == (
        "timeout",
        143,
    )  # its SIGTERM handler
    assert (ends[stubborn][0]["outcome"], ends[stubborn][0]["exit_code"]) == ("timeout", -9)  # killed
    ran = ends[stubborn][0]["t"] - starts[stubborn][0]["t"]
    assert 0.8 <= ran < 0.8 + 1.0  # 0.5 s to SIGTERM, 0.3 s more to SIGKILL, then one round


def _started(folder: Path) -> bool:
    """Whether the journal records a started process (a record being written at this instant is not one yet)."""
    try:
        return bool(events(folder, "pid"))
    except (ValueError, FileNotFoundError):
        return False


def test_live_edits_append_delete_reorder_and_a_bad_save_keeps_the_queue(tmp_path, capsys, monkeypatch):
    # `first` holds the only GPU until the edits are done, so the order is fixed by events, not timing: the bad
    # save is followed by the good one only once the dispatcher warned about it, and `first` ends only once the
    # good one was applied (c removed).
    release = tmp_path / "edits.done"
    first = fake(hold=0.0, extra=f"--end_after {release}")
    b, c, d, e = fake(hold=0.1), fake(hold=0.11), fake(hold=0.12), fake(hold=0.13)
    jobs = tmp_path / "jobs.txt"
    jobs.write_text(f"{first}\n{b}\n{c}\n{d}\n")
    folder = tmp_path / "run"
    warned = threading.Event()
    board_line = Board.line

    def line(self, text: str, warning: bool = False) -> None:
        board_line(self, text, warning)
        if warning and "keeping the last good queue" in text:
            warned.set()

    monkeypatch.setattr(Board, "line", line)

    def removed() -> bool:
        try:
            return bool(events(folder, "removed"))
        except (ValueError, FileNotFoundError):
            return False

    def edit():
        try:
            _wait_for(lambda: (folder / "journal.jsonl").is_file() and _started(folder))
            jobs.write_text(f"{first}\n[vram=lots] {b}\n{c}\n{d}\n")  # a bad save: the queue stays b, c, d
            assert warned.wait(30), "the bad save was not reported"
            jobs.write_text(f"{first}\n{d}\n{b}\n{e}\n")  # c deleted, d moved before b, e appended
            _wait_for(removed)
        finally:
            release.touch()

    editor = threading.Thread(target=edit)
    editor.start()
    rc = main.main(argv(jobs, folder))
    editor.join()
    assert rc == 0
    order = [r["attrs"]["command"] for r in events(folder, "seen")]
    command = {r["job"]: r["attrs"]["command"] for r in events(folder, "seen")}
    started = [command[r["job"]] for r in events(folder, "start")]
    assert started == [first, d, b, e] and order == [first, b, c, d, e]
    assert [command[r["job"]] for r in events(folder, "removed")] == [c]
    err = capsys.readouterr().err
    assert f"warning: {jobs}:2: vram: 'lots' is not a size" in err and "keeping the last good queue" in err
    assert set(table(folder / "jobs.csv")) == {r["job"] for r in events(folder, "start")}  # c left out
    # one GPU, each job started in the round that noticed the previous one's end: busy from first arrival to last end
    with open(folder / "summary.csv") as f:
        assert float(next(csv.DictReader(f))["gpu_utilization"]) == 1.0


def _wait_for(predicate, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.parametrize("how", ["kill -9", "kill -9, then the job ends", "ctrl-c"])
def test_a_dispatcher_killed_or_interrupted_resumes_without_running_a_job_twice(tmp_path, how):
    marker = tmp_path / "ran.txt"
    cmds = [fake(hold=0.8 + k / 100, extra=f"--marker {marker}") for k in range(3)]
    jobs = tmp_path / "jobs.txt"
    jobs.write_text("".join(f"{c}\n" for c in cmds))
    folder = tmp_path / "run"
    args = argv(jobs, folder)
    proc = subprocess.Popen([sys.executable, "main.py", *args], cwd=ROOT, stdout=subprocess.DEVNULL)
    _wait_for(lambda: marker.is_file() and len(marker.read_text().splitlines()) >= 2)  # the second job runs
    if how.startswith("kill -9"):
        os.kill(proc.pid, signal.SIGKILL)
        assert proc.wait(30) == -signal.SIGKILL
        if how.endswith(
            "ends"
        ):  # the second job ends while no dispatcher runs: its wrapper writes its status
            _wait_for(lambda: len(list((folder / "jobs").glob("*.rc"))) == 2)
    else:
        os.kill(proc.pid, signal.SIGINT)  # --on_interrupt stop: SIGTERM to the running job, then exit 130
        assert proc.wait(30) == 130
    assert main.main(args) == 0  # the same command again
    starts = events(folder, "start")
    ends = events(folder, "end")
    if how.startswith("kill -9"):  # the second job was adopted (or found ended), not started again
        assert sorted(marker.read_text().splitlines()) == sorted(f"{r['job']} start" for r in starts)
        assert len(starts) == 3 and [e["outcome"] for e in ends] == ["ok"] * 3
    else:  # the second job was stopped, and ran again after the resume
        assert [e["outcome"] for e in ends].count("stopped") == 1 and len(starts) == 4
        assert len(marker.read_text().splitlines()) == 4
    # never two at once on the one GPU: every start after the previous end
    timeline = sorted(
        [(r["t"], 1) for r in starts] + [(r["t"], -1) for r in ends], key=lambda x: (x[0], x[1])
    )
    level = 0
    for _, step in timeline:
        level += step
        assert level <= 1
    rows = table(folder / "jobs.csv")
    assert sum(r["status"] == "completed" for r in rows.values()) == len(starts)
    if how.endswith("ends"):  # recorded at the time its status file was written, before the resume
        second = sorted(starts, key=lambda r: r["t"])[1]
        status = Path(second["rc_file"])
        (header,) = events(folder, "run")
        end = next(e for e in ends if e["job"] == second["job"])
        assert abs(end["t"] - (status.stat().st_mtime - header["epoch_s"])) < 0.01
        assert end["t"] < events(folder, "resume")[0]["t"]


def _signal_once_a_job_runs(command: list[str], folder: Path, sig: int) -> tuple[int, str, str]:
    """Start a real dispatcher process, send it `sig` once its first job's process exists, let it end: its exit
    status, stdout and stderr."""
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(lambda: _started(folder) or proc.poll() is not None)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, out, err


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP", "SIGUSR1"])
def test_a_stop_signal_other_than_ctrl_c_detaches_and_the_same_command_adopts_the_job(tmp_path, signame):
    """SIGTERM, SIGHUP (the terminal closed) and SIGUSR1 (Slurm's --signal) to a real dispatcher, even with
    --on_interrupt stop: the running job is left running (neither waited for nor stopped), nothing new starts, one
    `interrupted` line, 128 + the signal's number; the same command then adopts the job instead of starting it."""
    sig = getattr(signal, signame)
    marker = tmp_path / "ran.txt"
    first, second = fake(hold=1.0, extra=f"--marker {marker}"), fake(hold=0.1, extra=f"--marker {marker}")
    jobs = tmp_path / "jobs.txt"
    jobs.write_text(f"{first}\n{second}\n")  # one GPU, fcfs: the second waits for the first
    folder = tmp_path / "run"
    args = argv(jobs, folder)
    rc, out, err = _signal_once_a_job_runs([sys.executable, "main.py", *args], folder, sig)
    assert rc == 128 + sig, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err
    assert err.strip().splitlines() == [
        f"interrupted ({signame}): 1 job(s) left running; the journal keeps what happened; the same command "
        "adopts them and goes on"
    ]
    # the journal as the dispatcher left it: the first job started, not ended (left running), the second never
    # started, and the last record says why the dispatcher stopped
    records = events(folder)
    assert [r["event"] for r in records if r["event"] in ("start", "pid", "end")] == ["start", "pid"]
    assert records[-1]["event"] == "stop" and records[-1]["reason"] == "interrupted"
    command = {r["job"]: r["attrs"]["command"] for r in events(folder, "seen")}
    assert command[events(folder, "start")[0]["job"]] == first
    assert (
        f"wrote {folder}/" in out and (folder / "jobs.csv").is_file()
    )  # the result files of what ran so far
    assert main.main(args) == 0  # the same command: adopts the first job, then runs the second
    assert len(events(folder, "resume")) == 1
    starts, ends = events(folder, "start"), events(folder, "end")
    assert sorted(command[r["job"]] for r in starts) == sorted([first, second])  # each started once
    assert [e["outcome"] for e in ends] == ["ok", "ok"]  # the first was never sent a signal
    assert len(marker.read_text().splitlines()) == 2


def test_a_stop_signal_the_dispatcher_was_started_ignoring_stays_ignored(tmp_path):
    """`nohup` starts a dispatcher with SIGHUP ignored: closing the terminal must not stop it."""
    jobs = tmp_path / "jobs.txt"
    jobs.write_text(f"{fake(hold=0.6)}\n{fake(hold=0.05)}\n")
    folder = tmp_path / "run"
    rc, _, err = _signal_once_a_job_runs(
        ["nohup", sys.executable, "main.py", *argv(jobs, folder)], folder, signal.SIGHUP
    )
    assert rc == 0 and "Traceback" not in err and "interrupted" not in err, err
    assert [e["outcome"] for e in events(folder, "end")] == ["ok", "ok"]
    assert events(folder)[-1]["reason"] == "finished"


class _Terminal:
    """A stdin on a terminal whose user, instead of answering, sends `sig` to the dispatcher."""

    def __init__(self, sig: int):
        self.sig = sig

    def isatty(self) -> bool:
        return True

    def readline(self) -> str:
        os.kill(os.getpid(), self.sig)
        time.sleep(5)  # the handler raises into this sleep
        return "w\n"


@pytest.mark.parametrize(
    ("signame", "choice"), [("SIGINT", "stop"), ("SIGHUP", "detach"), ("SIGTERM", "detach")]
)
def test_a_stop_signal_at_the_ctrl_c_question_answers_it(signame, choice, monkeypatch, capsys):
    """Ctrl-C at the question stops the running jobs; any other stop signal detaches, as it would alone; the
    handlers from before the question come back."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM)}
    monkeypatch.setattr(sys, "stdin", _Terminal(getattr(signal, signame)))
    started = time.monotonic()
    assert runner.ask_interrupt(2, Board(False, 60.0)) == choice
    assert time.monotonic() - started < 4  # answered by the signal, not by the line read after it
    assert {s: signal.getsignal(s) for s in before} == before
    assert "[w]ait for them, [s]top them, or [d]etach" in capsys.readouterr().out


def test_the_replay_reproduces_the_dispatched_schedule(tmp_path):
    # EASY on 2 GPUs with shared and whole-GPU jobs: replayed in the simulator with the measured run times and the
    # estimates the dispatcher's policy saw, every job starts and ends at the same instant on the same GPUs
    text = "".join(
        [
            f"[vram=30G est=3s] {fake('20G', hold=0.6)}\n",
            f"[vram=40G est=2s] {fake('40G', hold=0.3)}\n",
            f"[gpus=2 est=1s] {fake('8G', hold=0.2)}\n",
            f"[vram=50G est=1s] {fake('45G', hold=0.2)}\n",
            f"[est=2s] {fake('5G', hold=0.4)}\n",
            f"[vram=20G est=5s] {fake('18G', hold=0.3)}\n",
        ]
    )
    rc, folder = dispatch(tmp_path, text, "2xA100-80GB", "easy", "--plots", "png")
    assert rc == 0 and all((folder / f).is_file() for f in ("jct_cdf.png", "utilization.png", "summary.csv"))
    replay = tmp_path / "replay"
    assert (
        main.main(
            [
                "--mode",
                "eval",
                "--workload_type",
                "dispatch",
                "--workload_path",
                str(folder),
                "--algo",
                "easy",
                "--runtime_info",
                "estimate",
                "--log_dir",
                str(replay),
                "--no_progress",
            ]
        )  # fmt: skip
        == 0
    )
    dispatched, replayed = table(folder / "jobs.csv"), table(replay / "jobs.csv")
    assert set(dispatched) == set(replayed) and len(dispatched) == 6
    for job, row in dispatched.items():
        for column in ("submit_time", "start_time", "end_time", "placement", "gpu_milli", "gpu_mem_gb"):
            assert row[column] == replayed[job][column], (job, column)
    # the measured run time includes the process's start-up and the round that noticed its end
    nominal = {r["job"]: r["attrs"]["command"] for r in events(folder, "seen")}
    for job, row in dispatched.items():
        args = nominal[job].split()
        ramp_hold = float(args[args.index("--ramp") + 1]) + float(args[args.index("--hold") + 1])
        assert ramp_hold <= float(row["runtime_s"]) <= ramp_hold + START_LATENCY_S


def test_an_infeasible_job_fails_at_once_and_the_others_run(tmp_path, capsys):
    rc, folder = dispatch(tmp_path, f"[vram=100G] {fake()}\n{fake(hold=0.1)}\n")
    assert rc == 1
    rows = list(table(folder / "jobs.csv").values())
    assert sorted(r["status"] for r in rows) == ["completed", "rejected"]
    assert "declares 102400 MiB per GPU; the largest GPU has 80896 MiB usable" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--algo", "srtf"], "argument --algo: invalid choice: 'srtf'"),
        (["--sim", "4xB200"], "--sim 4xB200: unknown GPU type 'B200'"),
        (["--seed", "3"], "--mode dispatch does not take --seed 3"),
        (["--gate_s", "60"], "--gate_s is sjf_gate's gate"),
    ],
)
def test_mistakes_are_one_error_line_and_nothing_runs(tmp_path, capsys, args, message):
    jobs = tmp_path / "jobs.txt"
    jobs.write_text("echo hi\n")
    base = ["--mode", "dispatch", "--jobs", str(jobs), "--sim", "1xT4", "--log_dir", str(tmp_path / "run")]
    assert main.main([*base, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists()


def test_a_bad_jobs_file_line_is_refused_with_file_and_line(tmp_path, capsys):
    rc, folder = dispatch(tmp_path, "echo fine\n[gpus=two] echo no\n")
    assert rc == 2 and not folder.exists()
    assert f"error: {tmp_path / 'jobs.txt'}:2: gpus: 'two' is not an integer" in capsys.readouterr().err


def test_dispatch_options_are_refused_by_the_other_modes_and_the_replay_needs_a_run_folder(tmp_path, capsys):
    assert main.main(["--mode", "eval", "--jobs", "jobs.txt"]) == 2
    assert "error: --jobs: options of --mode dispatch" in capsys.readouterr().err
    assert main.main(["--mode", "compare", "--watch", "--sim", "1xT4"]) == 2
    assert "error: --sim, --watch: options of --mode dispatch" in capsys.readouterr().err
    assert main.main(["--mode", "eval", "--workload_type", "dispatch", "--workload_path", str(tmp_path)]) == 2
    assert "no journal.jsonl (not a --mode dispatch run folder)" in capsys.readouterr().err


def test_a_run_folder_resumes_only_the_same_dispatch(tmp_path, capsys):
    rc, folder = dispatch(tmp_path, f"{fake(hold=0.05)}\n")
    assert rc == 0
    assert main.main(argv(tmp_path / "jobs.txt", folder)) == 0  # the same command: nothing left to run
    assert len(events(folder, "start")) == 1 and len(events(folder, "resume")) == 1
    assert main.main(argv(tmp_path / "jobs.txt", folder, "1xA100-80GB", "sjf")) == 2
    assert (
        "was dispatched with --algo fcfs on sim:1xA100-80GB; resume it with the same options"
        in capsys.readouterr().err
    )
