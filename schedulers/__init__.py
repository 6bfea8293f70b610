"""Heuristic scheduling policies: pure functions from a View to a list of Decisions, by name."""

from __future__ import annotations

from collections.abc import Callable

from env.simulator import Decision, Preempt, View, WakeUp
from schedulers.easy import easy_backfill
from schedulers.fcfs import fcfs
from schedulers.sjf import sjf
from schedulers.srtf import srtf
from schedulers.tiresias import tiresias

Policy = Callable[[View], list[Decision | Preempt | WakeUp]]
"""view -> decisions (env/simulator.py's Decision, Preempt, WakeUp), applied in order by Simulator.apply"""

POLICIES: dict[str, Policy] = {
    "fcfs": fcfs,
    "sjf": sjf,
    "easy": easy_backfill,
    "srtf": srtf,
    "tiresias": tiresias,
}
PREEMPTIVE = frozenset({"srtf", "tiresias"})
"""policies that may preempt: their runs write the preemption columns (README, Preemption)"""


def get_policy(name: str) -> Policy:
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown scheduler {name!r}; known: {', '.join(POLICIES)}") from None
