"""Heuristic scheduling policies: pure functions from a View to a list of Decisions, by name."""

from __future__ import annotations

import functools
from collections.abc import Callable

from env.simulator import Decision, View
from schedulers.easy import easy_backfill
from schedulers.ect import ect
from schedulers.fcfs import fcfs
from schedulers.sjf import sjf
from schedulers.sjf_gate import DEFAULT_GATE_S, sjf_gate

Policy = Callable[[View], list[Decision]]

POLICIES: dict[str, Policy] = {
    "fcfs": fcfs,
    "sjf": sjf,
    "easy": easy_backfill,
    "sjf_gate": sjf_gate,
    "ect": ect,
}


def get_policy(name: str) -> Policy:
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown scheduler {name!r}; known: {', '.join(POLICIES)}") from None


def make_policy(name: str, gate_s: float = DEFAULT_GATE_S) -> Policy:
    """The policy `name` with its parameters (only sjf_gate has one: `gate_s`, --gate_s)."""
    policy = get_policy(name)
    if policy is sjf_gate and gate_s != DEFAULT_GATE_S:
        return functools.partial(sjf_gate, gate_s=gate_s)
    return policy
