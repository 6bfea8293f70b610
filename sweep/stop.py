"""Stop requests of a sweep: the signals a terminal, `kill`, `timeout`, Slurm or Kubernetes send are noted by a
handler and acted on by the sweep's loops between steps, so a run is never half recorded and the tables of what
finished are always written. The exit status is 128 + the first signal's number (130 for Ctrl-C, 143 for
SIGTERM)."""

from __future__ import annotations

import signal
import sys
import threading
from types import FrameType
from typing import Any

STOP_SIGNALS = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGUSR1") if hasattr(signal, name)
)
"""Ctrl-C; what `kill`, `timeout`, `docker stop`, Kubernetes and Slurm send at the end; a closed terminal; Slurm's
usual warning signal before a time limit (`--signal=USR1@60`)"""


class StopRequests:
    """While entered (main thread only), each stop signal is counted instead of acting at once: the first asks
    the sweep to stop its runs gracefully (each gets Ctrl-C, as if typed in its terminal), a second to kill them
    at once. The handler only records (printing from a handler can collide with the program's own output)."""

    def __init__(self) -> None:
        self.signals: list[int] = []
        self._announced = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> StopRequests:
        self.install()
        return self

    def install(self) -> None:
        """(Re)install the handlers: also after a library (Ray) replaced them with its own."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in STOP_SIGNALS:
            previous = signal.signal(sig, self._note)
            self._previous.setdefault(sig, previous)

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _note(self, signum: int, frame: FrameType | None) -> None:
        self.signals.append(signum)

    def announce(self, in_flight: int, grace_s: float) -> None:
        """Say (once, from the sweep's loop, not the handler) what the stop does to the runs in flight."""
        if self._announced:
            return
        self._announced = True
        print(
            f"\n{self.name}: stopping; {in_flight} run{'s' if in_flight != 1 else ''} in flight {'get' if in_flight != 1 else 'gets'} Ctrl-C and up "
            f"to {grace_s:g} s to end (a second signal stops them at once); finished runs are kept",
            file=sys.stderr,
            flush=True,
        )

    @property
    def requested(self) -> bool:
        return bool(self.signals)

    @property
    def urgent(self) -> bool:
        """A second stop signal: stop the runs at once rather than waiting for them to wind down."""
        return len(self.signals) > 1

    @property
    def name(self) -> str:
        return signal.Signals(self.signals[0]).name if self.signals else ""

    @property
    def exit_status(self) -> int:
        """128 + the first signal's number, the shell's convention for a process ended by that signal."""
        return 128 + self.signals[0]
