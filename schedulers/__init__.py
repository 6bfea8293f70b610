"""Heuristic scheduling policies (pure functions from a View to a list of Decisions, by name) and the node power
managers. Imports config and sim only."""

from __future__ import annotations

import functools
from collections.abc import Callable

from schedulers.cbf import cbf
from schedulers.easy import easy_backfill
from schedulers.ect import ect
from schedulers.fcfs import fcfs
from schedulers.gavel import gavel, gavel_agnostic
from schedulers.score_rounds import LAS_SPEED_WEIGHTS, ROUND_S, LinearScorer, las_speed, make_score_policy
from schedulers.sjf import sjf
from schedulers.sjf_gate import DEFAULT_GATE_S, sjf_gate
from schedulers.srtf import srtf
from schedulers.themis import themis
from schedulers.tiresias import tiresias
from sim.simulator import Decision, Preempt, View, WakeUp

Policy = Callable[[View], list[Decision | Preempt | WakeUp]]
"""view -> decisions (sim/simulator.py's Decision, Preempt, WakeUp), applied in order by Simulator.apply"""

POLICIES: dict[str, Policy] = {
    "fcfs": fcfs,
    "sjf": sjf,
    "easy": easy_backfill,
    "cbf": cbf,
    "srtf": srtf,
    "tiresias": tiresias,
    "gavel": gavel,
    "gavel_agnostic": gavel_agnostic,
    "themis": themis,
    "sjf_gate": sjf_gate,
    "ect": ect,
    "las_speed": las_speed,
}
PREEMPTIVE = frozenset({"srtf", "tiresias", "gavel", "gavel_agnostic", "themis", "las_speed"})
"""policies that may preempt: their runs write the preemption columns (docs/schedulers.md, Preemption)"""


def get_policy(name: str) -> Policy:
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown scheduler {name!r}; known: {', '.join(POLICIES)}") from None


def make_policy(name: str, gate_s: float = DEFAULT_GATE_S, round_s: float = ROUND_S) -> Policy:
    """The policy `name` with its parameters: sjf_gate's `gate_s` (--gate_s), las_speed's `round_s` (--round_s)."""
    policy = get_policy(name)
    if policy is sjf_gate and gate_s != DEFAULT_GATE_S:
        return functools.partial(sjf_gate, gate_s=gate_s)
    if policy is las_speed and round_s != ROUND_S:
        return make_score_policy(LinearScorer.from_named(LAS_SPEED_WEIGHTS), round_s)
    return policy
