"""Heuristic scheduling policies: pure functions from a View to a list of Decisions, by name."""

from __future__ import annotations

from collections.abc import Callable

from env.simulator import Decision, View
from schedulers.cbf import cbf
from schedulers.easy import easy_backfill
from schedulers.fcfs import fcfs
from schedulers.sjf import sjf

Policy = Callable[[View], list[Decision]]

POLICIES: dict[str, Policy] = {"fcfs": fcfs, "sjf": sjf, "easy": easy_backfill, "cbf": cbf}


def get_policy(name: str) -> Policy:
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown scheduler {name!r}; known: {', '.join(POLICIES)}") from None
