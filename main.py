"""Command line entry point: `--mode serve`, `--mode sweep` and `--mode dispatch` go to the server, the sweep runner
and the dispatcher, every other mode to cli/ (parse the options into a RunConfig, then train, evaluate, compare or
report)."""

from __future__ import annotations

import argparse
import sys

from cli.command import one_line_warnings, run_command
from cli.parser import SERVE_OPTIONS

DISPATCH_OPTIONS = (
    "jobs", "sim", "gpus", "poll_s", "vram_margin", "default_est", "kill_grace", "watch", "on_interrupt", "status_every",
)  # fmt: skip
"""the options only --mode dispatch takes (dispatch/cli.py's parser), refused by the other modes"""


def _own_mode(
    argv: list[str], mode: str, options: tuple[str, ...], pre: argparse.ArgumentParser, run
) -> int | None:
    """A mode with its own parser (`run(argv)` imports it lazily: the other modes never load it): its exit status
    when --mode is `mode`; else None, after refusing that mode's own `options` (pre-parsed by `pre`)."""
    known = pre.parse_known_args(argv)[0]
    if known.mode == mode:
        return run(argv)
    given = [f"--{k}" for k in options if getattr(known, k) is not None]
    if given:
        print(f"error: {', '.join(given)}: options of --mode {mode}", file=sys.stderr)
        return 2
    return None


def _dispatch(argv: list[str]) -> int | None:
    """--mode dispatch runs here (its own parser): its exit status. None for the other modes, after refusing the
    dispatcher's own options there."""
    pre = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    pre.add_argument("--mode")
    for option in DISPATCH_OPTIONS:
        pre.add_argument(f"--{option}", nargs="?", const="")  # a flag (--watch) counts too

    def run(argv: list[str]) -> int:
        from dispatch.cli import dispatch_main  # lazy: the other modes never load the dispatcher

        return dispatch_main(argv)

    return _own_mode(argv, "dispatch", DISPATCH_OPTIONS, pre, run)


def _serve(argv: list[str]) -> int | None:
    """--mode serve runs here (its own options only): its exit status. None for the other modes, after refusing
    the server's options there."""
    pre = argparse.ArgumentParser(add_help=False)
    for option in ("--mode", *(f"--{k}" for k in SERVE_OPTIONS)):
        pre.add_argument(option)

    def run(argv: list[str]) -> int:
        from server.cli import serve_main  # lazy: the other modes never load the server

        return serve_main(argv)

    return _own_mode(argv, "serve", SERVE_OPTIONS, pre, run)


SWEEP_OPTIONS = ("study", "workers", "backend", "address")
"""the options only --mode sweep takes (sweep/cli.py's parser: there --resume is a flag), refused by the other modes"""


def _sweep(argv: list[str]) -> int | None:
    """--mode sweep runs here (its own parser): its exit status. None for the other modes, after refusing the
    sweep's own options there."""
    pre = argparse.ArgumentParser(add_help=False)
    for option in ("--mode", *(f"--{k}" for k in SWEEP_OPTIONS)):
        pre.add_argument(option)

    def run(argv: list[str]) -> int:
        from sweep.cli import sweep_main  # lazy: the other modes never load the sweep runner

        return sweep_main(argv)

    return _own_mode(argv, "sweep", SWEEP_OPTIONS, pre, run)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    with one_line_warnings():
        dispatched = _dispatch(argv)
        if dispatched is not None:
            return dispatched
        swept = _sweep(argv)
        if swept is not None:
            return swept
        served = _serve(argv)
        if served is not None:
            return served
        return run_command(argv)


if __name__ == "__main__":
    sys.exit(main())
