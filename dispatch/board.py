"""What a dispatcher prints: a live status board on a terminal (progress bar, running/queued/finished, per-GPU
memory), plain status lines elsewhere, and one line per event (a job's start, its completion with peak VRAM per
GPU, declared vs actual and utilization, warnings)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import TextIO

BAR_WIDTH = 24
REDRAW_S = 0.5


def gib(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB"


def duration(s: float) -> str:
    s = int(round(s))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}h{m:02d}m{sec:02d}s" if h else f"{m}m{sec:02d}s" if m else f"{sec}s"


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    filled = int(round(max(0.0, min(1.0, fraction)) * width))
    return "#" * filled + "-" * (width - filled)


@dataclass(frozen=True)
class GpuLine:
    index: int
    gpu_type: str
    used_mib: int
    total_mib: int
    committed_mib: int
    """what the dispatcher counts as taken: its jobs' budgets (whole GPUs: all) and external memory"""
    util_pct: float | None
    jobs: tuple[str, ...]


@dataclass(frozen=True)
class Status:
    now_s: float
    finished: int
    failed: int
    total: int
    running: tuple[tuple[str, tuple[int, ...], float, str], ...]
    """(job, devices, seconds running, command) of each running job"""
    queued: int
    gpus: tuple[GpuLine, ...]


class Board:
    """The live board (redrawn in place on a terminal) and the event lines printed around it."""

    def __init__(
        self, live: bool, status_every_s: float, out: TextIO | None = None, err: TextIO | None = None
    ):
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.live = live
        self.status_every_s = status_every_s
        self._drawn = 0
        self._last_draw_s = -1e18
        self._last_status_s = 0.0
        self._status: Status | None = None

    def line(self, text: str, warning: bool = False) -> None:
        """One event line (stdout; warnings on stderr), printed above the board."""
        self._clear()
        print(f"warning: {text}" if warning else text, file=self.err if warning else self.out, flush=True)
        self._draw()

    def update(self, status: Status, wall_s: float) -> None:
        self._status = status
        if self.live:
            if wall_s - self._last_draw_s >= REDRAW_S:
                self._clear()
                self._draw()
                self._last_draw_s = wall_s
        elif status.now_s - self._last_status_s >= self.status_every_s:
            self._last_status_s = status.now_s
            print(f"status {duration(status.now_s)}: {summary(status)}", file=self.err, flush=True)

    def close(self) -> None:
        self._clear()

    def _clear(self) -> None:
        if self.live and self._drawn:
            self.err.write(f"\x1b[{self._drawn}F\x1b[J")
            self.err.flush()
            self._drawn = 0

    def _draw(self) -> None:
        if not self.live or self._status is None:
            return
        lines = render(self._status)
        self.err.write("\n".join(lines) + "\n")
        self.err.flush()
        self._drawn = len(lines)


def summary(s: Status) -> str:
    gpus = ", ".join(
        f"GPU{g.index} {gib(g.used_mib)}/{gib(g.total_mib)}"
        + (f" {g.util_pct:.0f}%" if g.util_pct is not None else "")
        for g in s.gpus
    )
    failed = f" ({s.failed} failed)" if s.failed else ""
    return f"{s.finished}/{s.total} finished{failed}, {len(s.running)} running, {s.queued} queued | {gpus}"


def render(s: Status, max_running: int = 8) -> list[str]:
    """The board's lines."""
    lines = [
        f"[{bar(s.finished / s.total if s.total else 0.0)}] {s.finished}/{s.total} finished"
        + (f" ({s.failed} failed)" if s.failed else "")
        + f" | {len(s.running)} running | {s.queued} queued | {duration(s.now_s)}"
    ]
    for g in s.gpus:
        util = f" util {g.util_pct:3.0f}%" if g.util_pct is not None else ""
        jobs = f"  {', '.join(g.jobs)}" if g.jobs else ""
        lines.append(
            f"GPU{g.index} {g.gpu_type:<10} [{bar(g.used_mib / g.total_mib if g.total_mib else 0.0, 16)}] "
            f"{gib(g.used_mib)}/{gib(g.total_mib)} used, {gib(g.committed_mib)} committed{util}{jobs}"
        )
    for job, devices, running_s, command in s.running[:max_running]:
        where = ",".join(map(str, devices))
        lines.append(f"  {job} on GPU {where} for {duration(running_s)}: {command[:60]}")
    if len(s.running) > max_running:
        lines.append(f"  ... and {len(s.running) - max_running} more")
    return lines
