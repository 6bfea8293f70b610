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
from schedulers.gavel_original import AGNOSTIC, AWARE, FIFO, FIFO_PERF, make_gavel_original
from schedulers.score_rounds import LAS_SPEED_WEIGHTS, ROUND_S, LinearScorer, las_speed, make_score_policy
from schedulers.sjf import sjf
from schedulers.sjf_gate import DEFAULT_GATE_S, sjf_gate
from schedulers.srtf import srtf
from schedulers.themis import themis
from schedulers.tiresias import tiresias
from schedulers.tiresias_original import make_tiresias_original
from sim.simulator import Decision, Preempt, View, WakeUp
from sim.throughput import ThroughputMatrix

Policy = Callable[[View], list[Decision | Preempt | WakeUp]]
"""view -> decisions (sim/simulator.py's Decision, Preempt, WakeUp), applied in order by Simulator.apply"""

GAVEL_REPLAYS = {
    "gavel_original": AWARE,
    "gavel_original_agnostic": AGNOSTIC,
    "gavel_fifo": FIFO,
    "gavel_fifo_perf": FIFO_PERF,
}
"""name -> the policy of Gavel's own simulator it replays (schedulers/gavel_original.py)"""
REPLAYS = frozenset({*GAVEL_REPLAYS, "tiresias_original"})
"""the replays of the authors' own simulators (docs/schedulers.md, Side by side with the authors' simulators):
they keep their own queues between the calls of one run, so every decision they return must be applied"""

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
    # the replays with their defaults (Gavel's generators seeded 0, micro-tasks of ROUND_S); a run of the CLI
    # builds its own with make_policy (the scenario's seed and throughput matrix)
    **{name: make_gavel_original(gavel_policy) for name, gavel_policy in GAVEL_REPLAYS.items()},
    "tiresias_original": make_tiresias_original(),
}
PREEMPTIVE = frozenset({"srtf", "tiresias", "gavel", "gavel_agnostic", "themis", "las_speed", *REPLAYS})
"""policies that may preempt: their runs write the preemption columns (docs/schedulers.md, Preemption)"""


def get_policy(name: str) -> Policy:
    try:
        return POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown scheduler {name!r}; known: {', '.join(POLICIES)}") from None


def make_policy(
    name: str,
    gate_s: float = DEFAULT_GATE_S,
    round_s: float = ROUND_S,
    seed: int = 0,
    matrix: ThroughputMatrix | None = None,
    score_preempt: bool = True,
    round_on_arrival: bool = False,
) -> Policy:
    """The policy `name` with its parameters: sjf_gate's `gate_s` (--gate_s), las_speed's `round_s` (--round_s)
    and `score_preempt` (--score_preempt no: its non-preemptive ablation) and `round_on_arrival`
    (--round_on_arrival yes: every arrival instant is a round too);
    for the Gavel replays the seed of Gavel's own generators (its type shuffles and FIFO's draws; the CLI passes
    the scenario's seed) and the run's throughput matrix (--job_types; None: every micro-task lasts a whole
    round). A replay is built afresh on each call (its per-run state stays its own)."""
    policy = get_policy(name)
    if name in GAVEL_REPLAYS:
        return make_gavel_original(GAVEL_REPLAYS[name], seed, matrix)
    if name == "tiresias_original":
        return make_tiresias_original()
    if policy is sjf_gate and gate_s != DEFAULT_GATE_S:
        return functools.partial(sjf_gate, gate_s=gate_s)
    if policy is las_speed and (round_s != ROUND_S or not score_preempt or round_on_arrival):
        return make_score_policy(
            LinearScorer.from_named(LAS_SPEED_WEIGHTS), round_s, score_preempt, round_on_arrival
        )
    return policy
