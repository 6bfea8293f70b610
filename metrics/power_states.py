"""Each node's power state over a run as contiguous intervals, and power_states.csv (runs with a power model).

A node is `off`, `booting`, `shutting_down` (sim/power.py's states) or, while ON, `busy` when some execution
interval of a job (RunResult.runs) holds one of its GPUs and `idle` when none does. Every node's intervals are
contiguous, ordered, of positive length, and cover [0, end of run] (RunResult.end_of_run_s; a run of length 0
gives each node one empty interval in its initial state); two adjacent intervals never share a state.

power_states.csv columns: node_id, state, start_s, end_s; rows by node (cluster.csv's order), then time.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from metrics.csv_table import Table, float_cells, value_cells
from metrics.energy import execution_intervals
from sim.power import BOOTING, OFF, ON, SHUTTING_DOWN
from sim.records import RunResult

OFF_STATE, BOOTING_STATE, IDLE, BUSY, SHUTTING_DOWN_STATE = "off", "booting", "idle", "busy", "shutting_down"
NODE_STATES = (OFF_STATE, BOOTING_STATE, IDLE, BUSY, SHUTTING_DOWN_STATE)
"""power_states.csv's states"""
_NAME_OF = {OFF: OFF_STATE, BOOTING: BOOTING_STATE, SHUTTING_DOWN: SHUTTING_DOWN_STATE}
POWER_STATE_COLUMNS = ("node_id", "state", "start_s", "end_s")


@dataclass(frozen=True)
class NodeStateIntervals:
    """Aligned arrays, one entry per interval (module docstring): node index into RunResult.nodes, state name
    (NODE_STATES), start and end in seconds of simulated time."""

    node: np.ndarray  # int64
    state: tuple[str, ...]
    start_s: np.ndarray
    end_s: np.ndarray


def _busy_spans(result: RunResult, end_s: float) -> list[list[tuple[float, float]]]:
    """Per node, the union of the execution intervals holding one of its GPUs, as sorted disjoint spans (a run
    still going at the end is open up to `end_s`)."""
    node_index = {n.node_id: k for k, n in enumerate(result.nodes)}
    spans: list[list[tuple[float, float]]] = [[] for _ in result.nodes]
    _, start, stop, placement, _ = execution_intervals(result)
    for a, b, labels in zip(start.tolist(), stop.tolist(), placement, strict=True):
        b = end_s if b != b else b
        if b > a:
            for k in {node_index[g.rsplit("/", 1)[0]] for g in labels.split(";")}:
                spans[k].append((a, b))
    merged: list[list[tuple[float, float]]] = []
    for node_spans in spans:
        out: list[tuple[float, float]] = []
        for a, b in sorted(node_spans):
            if out and a <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], b))
            else:
                out.append((a, b))
        merged.append(out)
    return merged


def _split_on(a: float, b: float, busy: list[tuple[float, float]]) -> list[tuple[str, float, float]]:
    """[a, b) of an ON node cut into idle and busy pieces by its busy spans."""
    pieces = []
    t = a
    for s, e in busy:
        s, e = max(s, a), min(e, b)
        if e <= s:
            continue
        if s > t:
            pieces.append((IDLE, t, s))
        pieces.append((BUSY, s, e))
        t = e
    if b > t:
        pieces.append((IDLE, t, b))
    return pieces


def node_state_intervals(result: RunResult) -> NodeStateIntervals:
    """Every node's state intervals over [0, end of run] (module docstring). The run must have had a power model."""
    if result.power_model is None or result.power_initial is None:
        raise ValueError("the run had no power model (run it with --power)")
    end_s = float(result.end_of_run_s if result.end_of_run_s is not None else 0.0)
    changes: list[list[tuple[float, int]]] = [[(0.0, s)] for s in result.power_initial]
    for t, k, s in zip(
        result.power_log_t_s.tolist(),
        result.power_log_node.tolist(),
        result.power_log_state.tolist(),
        strict=True,
    ):
        changes[k].append((t, s))
    busy = _busy_spans(result, end_s)
    node, state, start, stop = [], [], [], []
    for k, node_changes in enumerate(changes):
        rows: list[tuple[str, float, float]] = []
        bounds = [t for t, _ in node_changes[1:]] + [end_s]
        for (a, s), b in zip(node_changes, bounds, strict=True):
            if b <= a:
                continue  # a state left at the instant it was entered
            pieces = _split_on(a, b, busy[k]) if s == ON else [(_NAME_OF[s], a, b)]
            for name, x, y in pieces:
                if rows and rows[-1][0] == name:
                    rows[-1] = (name, rows[-1][1], y)
                else:
                    rows.append((name, x, y))
        if not rows:  # a run of length 0
            s0 = node_changes[0][1]
            rows = [(IDLE if s0 == ON else _NAME_OF[s0], 0.0, end_s)]
        for name, x, y in rows:
            node.append(k)
            state.append(name)
            start.append(x)
            stop.append(y)
    return NodeStateIntervals(
        node=np.asarray(node, dtype=np.int64),
        state=tuple(state),
        start_s=np.asarray(start, dtype=float),
        end_s=np.asarray(stop, dtype=float),
    )


def write_power_states_csv(result: RunResult, path: str | Path) -> Path:
    """Write power_states.csv (module docstring); returns the path."""
    iv = node_state_intervals(result)
    ids = [n.node_id for n in result.nodes]
    columns = {
        "node_id": value_cells([ids[k] for k in iv.node.tolist()]),
        "state": np.asarray(iv.state, dtype=object),
        "start_s": float_cells(iv.start_s),
        "end_s": float_cells(iv.end_s),
    }
    return Table(list(POWER_STATE_COLUMNS), columns).write(path)
