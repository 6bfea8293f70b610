"""One command line of the run modes: parse it, check it, run the mode, and turn user mistakes into one
`error:` line."""

from __future__ import annotations

import argparse
import contextlib
import gc
import sys
import warnings
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

from cli.checks import check_command_line, dash_values, given_options, usage_error
from cli.parser import build_parser, config_from_args, validate
from cli.run_folder import OUTPUT_ERRNOS
from config import UserError
from interrupts import exit_status, signal_name, stop_on_signals

ROOT = Path(__file__).resolve().parents[1]
"""the project's folder: warnings raised by code under it are this program's own"""


def _one_line_warning(python_form, message, category, filename, lineno, file=None, line=None) -> None:
    """This program's warnings are one `warning:` line on stderr (Python's form adds the file, line and source
    line); other packages' warnings keep Python's form."""
    if issubclass(category, UserWarning) and Path(filename).resolve().is_relative_to(ROOT):
        print(f"warning: {message}", file=sys.stderr)
    else:
        python_form(message, category, filename, lineno, file, line)


@contextlib.contextmanager
def one_line_warnings() -> Iterator[None]:
    """Within it, this program's warnings print as one `warning:` line (see _one_line_warning)."""
    with warnings.catch_warnings():
        python_form = warnings.showwarning
        warnings.showwarning = lambda *args, **kwargs: _one_line_warning(python_form, *args, **kwargs)
        yield


YOUNG_COLLECTION_EVERY = 100_000
"""net container allocations between two collections of the cyclic garbage collector's youngest generation while
a command runs (Python's default: 700)"""


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """Within it, the cyclic garbage collector collects its youngest generation every YOUNG_COLLECTION_EVERY net
    allocations of containers instead of every 700 (the thresholds are restored after). A run builds millions
    of containers that live to its end (jobs, the job table, queue entries, placements, result rows), and none of
    them is garbage: at the default threshold each was scanned by a young collection, again by a middle one,
    and again by every full collection that their growing number triggered (17 in a RICC-2010 replay, 2.3 s
    of its 35 s of CPU; with this threshold 0.8 s and none). Cyclic garbage waits longer for its collection:
    at most this many containers' worth."""
    old = gc.get_threshold()
    gc.set_threshold(YOUNG_COLLECTION_EVERY, *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)


UNSHOWN = frozenset({"log_dir", "overwrite", "progress", "no_progress", "report_workers"})
"""options left out of reproducing_command: where and how visibly a run writes, not what it computes"""


def reproducing_command(
    parser: argparse.ArgumentParser,
    argv: list[str],
    args: argparse.Namespace,
    unshown: frozenset[str] = UNSHOWN,
) -> tuple[str, ...]:
    """`python main.py` and the options of `argv` whose values differ from their defaults (and --mode), in --help's order, each
    as typed (its last occurrence), less UNSHOWN: the command that reruns the run, the same wherever it was
    written and whether or not defaults were typed (report.html shows it)."""
    words = ["python", "main.py"]
    for action in parser._actions:
        if not action.option_strings or action.dest in unshown or action.dest == "help":
            continue
        if getattr(args, action.dest, None) == action.default and action.dest != "mode":
            continue
        at = [
            i
            for i, w in enumerate(argv)
            if w in action.option_strings or any(w.startswith(o + "=") for o in action.option_strings)
        ]
        if not at:
            continue
        i = at[-1]
        end = i + 1
        if "=" not in argv[i] and action.nargs != 0:
            while end < len(argv) and not argv[end].startswith("--"):
                end += 1
        words += argv[i:end]
    return tuple(words)


def run_command(argv: list[str]) -> int:
    """One command line of the run modes (eval, compare, train, report) -> its exit status: 0, 2 for a user
    error (one `error:` line), 128 + the signal's number when a stop signal (Ctrl-C: 130, SIGTERM: 143, SIGHUP,
    SIGUSR1; interrupts.py) stopped it."""
    parser = build_parser()
    parser.error = usage_error  # argparse's own mistakes (bad int, missing value) also get one `error:` line
    argv = dash_values(parser, argv)
    args = parser.parse_args(argv)
    with stop_on_signals(), fewer_collections():
        try:
            given = given_options(build_parser(), argv)  # the options typed, whatever their values
            cfg = replace(
                config_from_args(args),
                explicit_options=tuple(sorted(given)),
                command=reproducing_command(parser, argv, args),
            )
            validate(cfg)
            for warning in check_command_line(cfg, given):
                print(f"warning: {warning}", file=sys.stderr)
            from cli.runner import (
                run_mode,
            )  # lazy: `main.py --help` and the checks need none of the run modes

            run_mode(cfg)
        except UserError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        except OSError as err:  # a full disk, a read-only folder, ... that no mode turned into a UserError
            if err.errno not in OUTPUT_ERRNOS:
                raise
            print(
                f"error: {err.filename or 'a file'}: {err.strerror}; free space or fix the permissions",
                file=sys.stderr,
            )
            return 2
        except KeyboardInterrupt as err:
            if not getattr(err, "checkpoint", None):  # training says itself what it saved and how to resume
                print(
                    f"interrupted ({signal_name(exit_status(err) - 128)}): no half-written run was left",
                    file=sys.stderr,
                )
            return exit_status(err)
    return 0
