"""Plots of runs with a power model: power and price over time, node power states over time, JCT vs cost."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from metrics.energy import EnergyReport, node_states_over_time
from metrics.plots import _draw_step, _no_data, _set_title, new_figure, save_formats
from metrics.summary import SummaryRow, energy_of
from sim.power import STATE_NAMES
from sim.prices import PriceCurve
from sim.records import RunResult

MAX_PRICE_SLOTS = 5000  # price slots drawn at most (a longer window draws the first ones)


def plot_power(
    result: RunResult,
    energy: EnergyReport,
    prices: PriceCurve,
    out_dir: str | Path,
    formats: Sequence[str] = ("png",),
) -> list[Path]:
    """Write power.<format> (facility power and the price over the energy window) and power_states.<format> (nodes
    per power state over time) into `out_dir` for each of `formats`; returns their paths."""
    out_dir = Path(out_dir)
    title = f"{result.scheduler} on {result.workload} (seed {result.seed})"
    t0, t1 = energy.window_start_s, energy.window_end_s
    fig, axes = new_figure()
    ax = axes[0, 0]
    pue = result.power_model.pue
    if len(energy.power_t_s) and t1 > t0:
        inside = energy.power_t_s < t1  # the level at t1 itself holds for no time
        t = np.append(energy.power_t_s[inside], t1)
        w = np.append(energy.it_power_w[inside], energy.it_power_w[inside][-1]) * pue / 1000.0
        _draw_step(ax, t, w)
        price_ax = ax.twinx()
        first = prices.next_change_s(t0) - prices.step_s
        edges = np.arange(first, t1 + prices.step_s, prices.step_s)[: MAX_PRICE_SLOTS + 1]
        edges = np.clip(edges, t0, t1)
        values = [prices.price_at(a) for a in edges[:-1]]
        price_ax.stairs(values, edges / 3600.0, color="C1", alpha=0.7, baseline=None)
        price_ax.set_ylabel("price (EUR/MWh)", color="C1")
    else:
        _no_data(ax, "empty energy window")
    ax.set(xlabel="time (h)", ylabel="facility power (kW)")
    _set_title(ax, f"Power and price: {title}")
    ax.grid(True, alpha=0.3)
    paths = save_formats(fig, out_dir / "power", formats)

    fig, axes = new_figure()
    ax = axes[0, 0]
    ts, counts = node_states_over_time(result)
    end = max(float(result.end_of_run_s or 0.0), float(ts[-1]))
    edges = np.append(ts, end if end > ts[-1] else ts[-1] + 1.0) / 3600.0
    bottom = np.zeros(len(ts))
    for s, name in enumerate(STATE_NAMES):
        ax.stairs(bottom + counts[:, s], edges, baseline=bottom, fill=True, label=name, alpha=0.8)
        bottom = bottom + counts[:, s]
    ax.set(xlabel="time (h)", ylabel="nodes", ylim=(0, len(result.nodes) * 1.05))
    ax.legend(fontsize=8, loc="lower right")
    _set_title(ax, f"Node power states: {title}")
    paths += save_formats(fig, out_dir / "power_states", formats)
    return paths


def plot_jct_vs_cost(
    rows: Sequence[SummaryRow], stem: str | Path, formats: Sequence[str] = ("png",)
) -> list[Path]:
    """Write a scatter of avg JCT against energy cost, one dot per run, one colour per scheduler (compare mode), as
    `stem`.<format> for each of `formats`; returns the paths."""
    fig, axes = new_figure()
    ax = axes[0, 0]
    names = list(dict.fromkeys(r.scheduler for r in rows))
    for i, name in enumerate(names):
        mine = [r for r in rows if r.scheduler == name and energy_of(r)]
        cost = [dict(energy_of(r))["cost_eur"] for r in mine]
        jct = [r.avg_jct_s for r in mine]
        ax.plot(cost, jct, "o", color=f"C{i % 10}", label=name, alpha=0.8)
    ax.set(xlabel="energy cost (EUR)", ylabel="avg JCT (s)")
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    _set_title(ax, "avg JCT vs energy cost, one dot per run (seed)")
    return save_formats(fig, Path(stem), formats)
