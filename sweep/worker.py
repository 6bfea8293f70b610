"""One run of a study: the same parsing, validation and run as `python main.py ARGV`, in a fresh process of its own
(RunChild) that can be given a time limit, interrupted like Ctrl-C in its terminal, or killed."""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import io
import math
import multiprocessing
import os
import signal
import sys
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection

from interrupts import STOP_SIGNALS

PR_SET_PDEATHSIG = 1
FORKSERVER_PRELOAD = ["sweep.forkserver_guard", "sweep.worker", "cli.runner"]
"""imported once by the fork server, so each fresh run process starts with the code already loaded"""
STARTED = "started"
"""the first message of a run's process: its time limit starts"""
TIMEOUT_GRACE_S = 5.0
"""a run past its time limit gets Ctrl-C, then SIGKILL after this long"""


@dataclass(frozen=True)
class RunOutcome:
    name: str
    status: str
    """ok | failed | interrupted (stopped by the sweep's stop request: neither ok nor failed, rerun by --resume)"""
    error: str
    """'' when ok; the error line a user would see (UserError text, or ExceptionType: message)"""
    output: str
    """what the run printed (stdout and stderr), with the traceback of an unexpected exception"""
    wall_s: float
    files: tuple[tuple[str, bytes], ...] = ()
    """Ray: every file the run wrote, as (path relative to the study folder, contents), so that the driver's study
    folder is complete without a filesystem shared with the node; () on the local backend"""


def parse_run(argv: list[str]):
    """argv -> validated RunConfig through the command line's own parser, config_from_args and validate (UserError
    on a mistake, as `python main.py ARGV` would report it), to check every run of a study before any starts. The
    run itself goes through the command line's run_command (execute), so its files are exactly the command
    line's."""
    from dataclasses import replace

    from cli.checks import check_command_line, given_options
    from cli.parser import build_parser, config_from_args, validate
    from config import UserError

    parser = build_parser()
    parser.exit_on_error = False
    parser.error = _raise_user_error
    try:
        args = parser.parse_args(argv)
    except argparse.ArgumentError as err:
        raise UserError(str(err)) from None
    cfg = config_from_args(args)
    given = given_options(build_parser(), argv)
    cfg = replace(cfg, explicit_options=tuple(sorted(given)))
    validate(cfg)
    check_command_line(cfg, given)  # warnings are printed by the run itself
    return cfg


def _raise_user_error(message: str):
    from config import UserError

    raise UserError(message)


def limit_threads() -> None:
    """One BLAS/OpenMP thread per run (runs are the parallelism), unless the user's environment says otherwise."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, "1")


def execute(name: str, argv: list[str]) -> RunOutcome:
    """Run one study run in this process (RunChild's fresh process, or a benchmark's); never raises. Ctrl-C (the
    sweep's stop request) makes it `interrupted`."""
    limit_threads()
    from config import UserError

    t0 = time.perf_counter()
    buf = io.StringIO()
    status, error = "ok", ""
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        try:
            cfg = parse_run(argv)
            from cli.parser import AGENTS

            if cfg.mode in ("train", "report") or cfg.algo in AGENTS or set(AGENTS) & set(cfg.algos):
                import torch

                torch.set_num_threads(1)
            from cli.command import one_line_warnings, run_command

            with one_line_warnings():
                rc = run_command(list(argv))  # exactly `python main.py ARGV`
            if rc - 128 in STOP_SIGNALS:  # stopped by a signal (interrupts.exit_status), as by Ctrl-C
                status, error = "interrupted", "interrupted"
            elif rc != 0:
                errors = [line for line in buf.getvalue().splitlines() if line.startswith("error:")]
                status, error = "failed", errors[-1] if errors else f"exit status {rc}"
        except UserError as err:
            status, error = "failed", f"error: {err}"
            print(error)
        except KeyboardInterrupt:
            status, error = "interrupted", "interrupted"
        except Exception as err:  # noqa: BLE001 - a crashing run is recorded, the study goes on
            status, error = "failed", f"{type(err).__name__}: {err}"
            traceback.print_exc()
    return RunOutcome(name, status, " ".join(error.split()), buf.getvalue(), time.perf_counter() - t0)


def die_with_parent() -> None:
    """Linux: this process gets SIGKILL when the process that started it dies (prctl), so a driver killed outright
    leaves no fork server or run behind. Elsewhere nothing (a fork server still exits when its pipe closes)."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    if os.getppid() == 1:  # the parent died before the guard was set
        os._exit(0)


def _context() -> multiprocessing.context.BaseContext:
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(FORKSERVER_PRELOAD)
    return ctx


def _child_main(conn: Connection, name: str, argv: list[str], cwd: str, env: dict[str, str | None]) -> None:
    """The body of a run's fresh process: its own process group (a terminal's Ctrl-C reaches the sweep only, which
    passes it on once), dies with its parent, the default signal handlers (the fork server ignores the stop
    signals), then the run; its outcome goes back through `conn`."""
    os.setpgid(0, 0)
    die_with_parent()
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    # relative paths mean what they mean where the run was asked for (the fork server may have started elsewhere)
    os.chdir(cwd)
    for key, value in env.items():  # e.g. CUDA_VISIBLE_DEVICES of a Ray task, which the fork server predates
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    conn.send(STARTED)  # the time limit counts from here, not from a fork server still importing the code
    try:
        outcome = execute(name, argv)
    except BaseException as err:  # noqa: BLE001 - Ctrl-C outside the run's own handling
        status = "interrupted" if isinstance(err, KeyboardInterrupt) else "failed"
        outcome = RunOutcome(name, status, status if status == "interrupted" else repr(err), "", 0.0)
    conn.send(outcome)
    conn.close()


class RunChild:
    """One run in a fresh process (forked from a fork server that has imported the code, spawned where there is
    none), supervised by its owner's loop through poll(): past `timeout_s` it gets Ctrl-C, then SIGKILL after
    TIMEOUT_GRACE_S, and is recorded as failed; interrupt() and kill() reach the run's whole process group."""

    def __init__(
        self,
        name: str,
        argv: list[str],
        timeout_s: float | None = None,
        env: dict[str, str | None] | None = None,
    ):
        ctx = _context()
        self.name = name
        self.timeout_s = timeout_s
        self.conn, send = ctx.Pipe(duplex=False)
        self.process = ctx.Process(
            target=_child_main, args=(send, name, argv, os.getcwd(), env or {}), name=f"run {name}"
        )
        self.process.start()
        send.close()
        self.started = time.monotonic()
        """when the run's process started running it (STARTED), until then when it was asked for"""
        self.running = False
        self.timed_out = False
        self._outcome: RunOutcome | None = None
        self._kill_at: float | None = None

    @property
    def waitables(self) -> list:
        """What multiprocessing.connection.wait can block on until this run may have news."""
        return [self.conn, self.process.sentinel]

    def poll(self) -> RunOutcome | None:
        """The run's outcome once it has ended (ok, failed, interrupted, timed out, or its process died), else None
        after enforcing its time limit."""
        now = time.monotonic()
        self._read(now)
        if self._outcome is None:
            if self.running and not self.timed_out and now - self.started > (self.timeout_s or math.inf):
                self.timed_out = True
                self.interrupt()
                self._kill_at = now + TIMEOUT_GRACE_S
            if self._kill_at is not None and now > self._kill_at:
                self.kill()
            if self.process.is_alive():
                return None
            self.process.join()
            self._read(now)  # what it sent just before it ended, if anything
        outcome = self._outcome or RunOutcome(
            self.name,
            "failed",
            f"run process died (exit code {self.process.exitcode})",
            "",
            now - self.started,
        )
        self.conn.close()
        if self.timed_out:
            error = f"timed out after {self.timeout_s:g} s (timeout_s of the study)"
            return RunOutcome(self.name, "failed", error, outcome.output + f"\n{error}\n", outcome.wall_s)
        return outcome

    def _read(self, now: float) -> None:
        """The messages the run's process has sent: STARTED (its time limit starts), then its outcome."""
        while self._outcome is None and not self.conn.closed and self.conn.poll():
            try:
                message = self.conn.recv()
            except (EOFError, OSError):
                return
            if message == STARTED:
                self.started, self.running = now, True
                continue
            self._outcome = message
            self.process.join(TIMEOUT_GRACE_S)
            self.kill()  # a process that does not exit after sending its outcome

    def _signal_group(self, sig: int) -> None:
        pid = self.process.pid
        if pid is None or self.process.exitcode is not None:
            return
        try:
            os.killpg(pid, sig)  # the run and any process it started (report workers, vector envs)
        except (ProcessLookupError, PermissionError):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)  # not yet in its own group

    def interrupt(self) -> None:
        """Ctrl-C, as if typed in the run's terminal: a run stops as it does by hand (training writes its
        checkpoint). A process that has not started the run yet (its Ctrl-C handling is not in place) is
        killed."""
        self._read(time.monotonic())
        self._signal_group(signal.SIGINT if self.running else signal.SIGKILL)

    def kill(self) -> None:
        self._signal_group(signal.SIGKILL)
