"""Stop signals: SIGINT (Ctrl-C), SIGTERM (`kill`, `timeout`, `docker stop`, systemd, Slurm at the time limit),
SIGHUP (the terminal closed) and SIGUSR1 (Slurm's `--signal`, a preemptible VM's notice) all stop a run the way
Ctrl-C does, and the process exits with 128 + the signal number (130 for Ctrl-C, 143 for SIGTERM).

Two ways to listen, both main-thread only (elsewhere they do nothing, and the signal keeps its handler):

- `stop_on_signals()`: within it, the first stop signal raises `Stopped` (a KeyboardInterrupt) in the main
  thread, so every `except BaseException: clean up; raise` leaves its run folder as Ctrl-C would; later signals
  are ignored with a message while that clean-up runs. The run modes (eval, compare, train, report) run inside it.
- `deferred_signals()`: a few lines that must not be cut in half (a run folder's claim, finish or clean-up): a
  stop signal arriving within them is delivered when they end.
- `StopRequest`: within it, the first stop signal only sets `signum` (a loop stops at its next safe point, e.g.
  training after the current env step, to write a checkpoint); a second one raises `Stopped` at once; while
  `saving(what)` every signal is ignored with a message, so the file being written is always complete.

Worker processes (PPO's subprocess envs, the report's evaluation pool) call `ignore_stop_signals()` first: a
signal sent to the whole process group (Ctrl-C in a terminal, Slurm, `timeout`) then stops only the parent, which
finishes its step, writes what it must and ends its workers itself.

A sweep is a loop that drains work at a safe point: a `StopRequest(again_stops_at_once=False)`, whose second
signal only sets `again` (the loop then stops its runs at once but still writes its tables), re-installed with
`install()` after a library (Ray) replaced the handlers. A server whose library has its own way to stop (uvicorn's
`handle_exit`) gets the stop signals with `on_stop_signals(handler)`. Each returns `exit_status(...)` of the error
or the request that stopped it.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

STOP_SIGNALS: tuple[signal.Signals, ...] = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1") if hasattr(signal, name)
)
"""the signals that stop a run (SIGHUP and SIGUSR1 do not exist on Windows)"""


class Stopped(KeyboardInterrupt):
    """A stop signal arrived: raised in the main thread as Ctrl-C raises KeyboardInterrupt."""

    def __init__(self, signum: int):
        super().__init__(signal_name(signum))
        self.signum = signum


def signal_name(signum: int) -> str:
    """'Ctrl-C' for SIGINT, else the signal's name ('SIGTERM')."""
    return "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name


def exit_status(err: BaseException | StopRequest) -> int:
    """128 + the number of the signal that stopped the run (a KeyboardInterrupt without one: Ctrl-C, 130)."""
    return 128 + int(getattr(err, "signum", signal.SIGINT))


class _Process:
    """Whether this process is already stopping (one per process, as signals are): after the first stop signal,
    the outer handler must not raise into the clean-up a StopRequest or an `except` block is doing."""

    stopping_signum: int | None = None


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _install(handler) -> dict[int, Any]:
    """Set `handler` for every stop signal this process does not ignore (`nohup` ignores SIGHUP, a shell's
    background job SIGINT: they stay ignored); returns the previous handlers."""
    return {s: signal.signal(s, handler) for s in STOP_SIGNALS if signal.getsignal(s) is not signal.SIG_IGN}


def _restore(previous: dict[int, Any]) -> None:
    for s, handler in previous.items():
        signal.signal(s, handler)


def _still(what: str, signum: int) -> None:
    print(f"\n{signal_name(signum)}: still {what}; please wait", file=sys.stderr, flush=True)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within it, the first stop signal raises Stopped(signum) in the main thread (see the module docstring)."""
    if not _in_main_thread():
        yield
        return
    _Process.stopping_signum = None

    def on_signal(signum, frame) -> None:
        if _Process.stopping_signum is not None:
            _still("stopping (cleaning up)", signum)
            return
        _Process.stopping_signum = signum
        raise Stopped(signum)

    previous = _install(on_signal)
    try:
        yield
    finally:
        _restore(previous)
        _Process.stopping_signum = None


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Within it, a stop signal is held back and delivered (to the handler in place before) when it ends."""
    if not _in_main_thread():
        yield
        return
    held: list[int] = []
    previous = _install(lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        _restore(previous)
        if held:
            signal.raise_signal(held[0])


@contextlib.contextmanager
def on_stop_signals(handler) -> Iterator[None]:
    """Within it, every stop signal this process does not ignore calls handler(signum, frame) (main thread only):
    for a library's loop that has its own way to stop, such as uvicorn's server."""
    if not _in_main_thread():
        yield
        return
    previous = _install(handler)
    try:
        yield
    finally:
        _restore(previous)


def ignore_stop_signals() -> None:
    """In a worker process: ignore every stop signal (its parent decides when to stop, and ends it)."""
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_IGN)


class StopRequest:
    """A loop's stop request (see the module docstring): `signum` is None until a stop signal arrives."""

    def __init__(
        self, action: str = "stopping after this step to write a checkpoint", again_stops_at_once: bool = True
    ) -> None:
        self.signum: int | None = None
        self.again = False
        """a second stop signal came (with again_stops_at_once=False; otherwise it raised Stopped)"""
        self.action = action
        self.again_stops_at_once = again_stops_at_once
        self._previous: dict[int, Any] = {}

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @requested.setter
    def requested(self, value: bool) -> None:
        """Set by a loop that caught a KeyboardInterrupt of its own (a second signal, or one in a thread)."""
        if value and self.signum is None:
            self.signum = _Process.stopping_signum or signal.SIGINT
        elif not value:
            self.signum = None

    def __enter__(self) -> StopRequest:
        self.install()
        return self

    def install(self) -> None:
        """(Re)install the handlers, e.g. after a library (ray.init) replaced some with its own; on exit the
        handlers from before the first install come back."""
        if _in_main_thread():
            for s, handler in _install(self._on_signal).items():
                self._previous.setdefault(s, handler)

    def __exit__(self, *exc) -> None:
        _restore(self._previous)
        self._previous = {}

    def _on_signal(self, signum, frame) -> None:
        if self.signum is not None:
            if not self.again_stops_at_once:
                self.again = True
                return
            _Process.stopping_signum = self.signum
            raise Stopped(self.signum)
        self.signum = signum
        _Process.stopping_signum = (
            signum  # the outer handler, restored later, must not raise into the clean-up
        )
        again = "Ctrl-C again" if signum == signal.SIGINT else f"{signal_name(signum)} again"
        print(
            f"\n{signal_name(signum)}: {self.action} ({again} to stop at once)",
            file=sys.stderr,
            flush=True,
        )

    def saving(self, what: str) -> None:
        """From now until the context exits, stop signals are ignored with a message: `what` is being written."""

        def ignore(signum, frame) -> None:
            _still(f"writing {what}; {signal_name(signum)} is ignored until it is complete", signum)

        for s in self._previous:
            signal.signal(s, ignore)
