"""Command line entry point: `--mode serve`, `--mode sweep` and `--mode dispatch` go to the server, the sweep runner
and the dispatcher, every other mode to cli/ (parse the options into a RunConfig, then train, evaluate, compare or
report)."""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import sys
import threading

from cli.command import one_line_warnings, run_command
from cli.parser import SERVE_OPTIONS

DISPATCH_OPTIONS = (
    "jobs", "sim", "gpus", "poll_s", "vram_margin", "default_est", "kill_grace", "watch", "on_interrupt", "status_every",
)  # fmt: skip
"""the options only --mode dispatch takes (dispatch/cli.py's parser), refused by the other modes"""


SWEEP_OPTIONS = ("study", "workers", "backend", "address", "baseline")
"""the options only --mode sweep takes (sweep/cli.py's parser: there --resume is a flag), refused by the other modes"""

OWN_MODES = (
    # mode, its own options, the module and function that run it (imported only for that mode), whether its
    # options are pre-parsed as flags without abbreviations (the dispatcher's --watch is a flag)
    ("dispatch", DISPATCH_OPTIONS, "dispatch.cli", "dispatch_main", True),
    ("sweep", SWEEP_OPTIONS, "sweep.cli", "sweep_main", False),
    ("serve", SERVE_OPTIONS, "server.cli", "serve_main", False),
)
"""the modes with their own parser, in the order they are tried"""


def _own_mode(
    argv: list[str], mode: str, options: tuple[str, ...], module: str, entry: str, flags: bool
) -> int | None:
    """A mode with its own parser: its exit status when --mode is `mode`; else None, after refusing that mode's own
    `options`."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=not flags)
    pre.add_argument("--mode")
    for option in options:
        if flags:
            pre.add_argument(f"--{option}", nargs="?", const="")  # a flag (--watch) counts too
        else:
            pre.add_argument(f"--{option}")
    known = pre.parse_known_args(argv)[0]
    if known.mode == mode:
        return getattr(importlib.import_module(module), entry)(argv)  # lazy: the other modes never load it
    given = [f"--{k}" for k in options if getattr(known, k) is not None]
    if given:
        print(f"error: {', '.join(given)}: options of --mode {mode}", file=sys.stderr)
        return 2
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    with one_line_warnings():
        for own in OWN_MODES:
            status = _own_mode(argv, *own)
            if status is not None:
                return status
        return run_command(argv)


QUICK_EXIT_MODES = ("eval", "compare")
"""modes whose process, once they succeeded, ends without the interpreter's teardown (`quick_exit`)"""


def quick_exit(argv: list[str], status: int) -> None:
    """End the process now with `status`, without the interpreter's teardown, after a mode of QUICK_EXIT_MODES
    that succeeded, when no other thread runs; else return (the caller exits as usual). The exit handlers run
    and the standard streams are flushed; what is skipped is freeing, one by one, the objects still alive: a big
    run's all are (matplotlib's mathtext parser caches exceptions whose frames reach the run's locals), and
    freeing them took 1.2 s of a RICC-2010 replay's 34 s of CPU. Those modes close every file they write."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--mode")
    mode = pre.parse_known_args(argv)[0].mode
    if status != 0 or mode not in QUICK_EXIT_MODES or threading.active_count() > 1:
        return
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe: the usual exit reports it
        return
    os._exit(status)


if __name__ == "__main__":
    code = main()
    quick_exit(sys.argv[1:], code)
    sys.exit(code)
