"""Per-run memory for the policies that replay another simulator's bookkeeping (`tiresias_original`, Gavel's
original round mechanism): one state object per simulated run, found by the run's job table.

Every other policy is a pure function of the View. These cannot be: the original simulators keep queue lists,
per-type time counters and allocations that no snapshot holds. A state belongs to one run (one `JobTable`
object, compared by identity) and is started afresh when a run starts or when the same table is seen at an
earlier time than before (a run replayed from the start). A few runs may interleave in one process (the most
recent `MAX_RUNS` are kept), so two simulators stepped side by side each keep their own state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

S = TypeVar("S")

MAX_RUNS = 8


class RunStates(Generic[S]):
    """`get(view, make)`: the state of the view's run, `make(view)` for a run not seen (or restarted)."""

    def __init__(self) -> None:
        self._runs: dict[int, tuple[object, float, S]] = {}

    def get(self, view, make: Callable[[object], S]) -> S:
        key = id(view.jobs)
        hit = self._runs.get(key)
        if hit is not None and hit[0] is view.jobs and view.now_s >= hit[1]:
            state = hit[2]
        else:
            state = make(view)
            if len(self._runs) >= MAX_RUNS:
                del self._runs[next(iter(self._runs))]
        self._runs.pop(key, None)
        self._runs[key] = (view.jobs, view.now_s, state)  # most recent last
        return state
