"""One run of a study in a worker process: the same parsing, validation and run as `python main.py ARGV`."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import time
import traceback
from dataclasses import dataclass


@dataclass(frozen=True)
class RunOutcome:
    name: str
    status: str
    """ok | failed"""
    error: str
    """'' when ok; the error line a user would see (UserError text, or ExceptionType: message)"""
    output: str
    """what the run printed (stdout and stderr), with the traceback of an unexpected exception"""
    wall_s: float


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


def _limit_threads() -> None:
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ.setdefault(var, "1")


def execute(name: str, argv: list[str], cwd: str | None = None) -> RunOutcome:
    """Run one study run here (a fresh worker process); never raises except on Ctrl-C."""
    _limit_threads()
    if cwd is not None:
        os.chdir(
            cwd
        )  # Ray: relative paths of the study mean what they mean on the driver (shared filesystem)
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
            if rc != 0:
                errors = [line for line in buf.getvalue().splitlines() if line.startswith("error:")]
                status, error = "failed", errors[-1] if errors else f"exit status {rc}"
        except UserError as err:
            status, error = "failed", f"error: {err}"
            print(error)
        except Exception as err:  # noqa: BLE001 - a crashing run is recorded, the study goes on
            status, error = "failed", f"{type(err).__name__}: {err}"
            traceback.print_exc()
    return RunOutcome(name, status, " ".join(error.split()), buf.getvalue(), time.perf_counter() - t0)


_POOL = None
"""Ray: this worker process's pool of one fresh process per run (created on its first run)"""


def execute_isolated(name: str, argv: list[str], cwd: str | None = None) -> RunOutcome:
    """execute() in a fresh child process of this long-lived (Ray) worker: forked from a fork server that has
    imported the code, so a run costs a fork rather than a new Ray worker, and nothing leaks between runs."""
    global _POOL
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    if _POOL is None:
        method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
        ctx = multiprocessing.get_context(method)
        if method == "forkserver":
            ctx.set_forkserver_preload(["sweep.forkserver_guard", "sweep.worker", "cli.runner"])
        _POOL = ProcessPoolExecutor(1, mp_context=ctx, max_tasks_per_child=1, initializer=preload)
    try:
        return _POOL.submit(execute, name, argv, cwd).result()
    except Exception:
        _POOL.shutdown(wait=False, cancel_futures=True)
        _POOL = (
            None  # a child that died (killed, out of memory) fails its run only; the next run gets a new pool
        )
        raise


def preload() -> None:
    """Imports shared by every run, done once in the fork server so each fresh run process starts fast."""
    _limit_threads()
    import cli.runner  # noqa: F401
