"""A run's figures, drawn from its CSV files (metrics/figure_data.py): utilization and queue stacked by GPU type,
a node/GPU timeline with preemptions and migrations, and the JCT CDF per priority class.

The time axes of utilization and queue length are cut to the arrival window by default (`span="full"` shows the
whole run, drain tail included), with the window shaded; the per-type layers are exact (downsampled, when long, to
MAX_PLOT_POINTS bins holding each bin's exact time-weighted mean, so their areas are the busy GPU-seconds of
runs.csv). The timeline is drawn for runs of at most GANTT_MAX_JOBS jobs (beyond that it is unreadable).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.collections import PolyCollection
from matplotlib.colors import to_rgba_array
from matplotlib.figure import Figure

from metrics.figure_data import (
    Gantt,
    RunTables,
    StackedSteps,
    arrival_window,
    busy_by_type,
    gantt,
    gantt_window,
    jct_by_priority,
    queue_by_type,
    read_run_tables,
)
from metrics.plots import MAX_PLOT_POINTS, _cdf_points, _no_data, _set_title, new_figure, save_formats
from metrics.timeline import step_bin_means

ZOOM_BELOW = 0.25  # peak utilization under which the utilization plot's y axis is zoomed to the peak
GANTT_MAX_JOBS = 2000
"""runs with more jobs get no gantt figure (its blocks would be thinner than a pixel)"""
GANTT_MAX_GPU_LANES = 128
"""clusters with more GPUs get one timeline lane per node instead of one per GPU"""
SPANS = ("window", "full")
STATE_STYLE = {  # power state -> (legend label, face colour, hatch): drawn behind the job blocks
    "off": ("node off", "0.88", "///"),
    "booting": ("booting", "#fdd9a0", ""),
    "shutting_down": ("shutting down", "#d5c8ec", ""),
    "idle": ("idle (on, no job)", "#fdf8dc", ""),
}
"""the shaded states of metrics/figure_data.py's SHADED_STATES"""


@dataclass(frozen=True)
class RunFigure:
    """One figure of a run: its file stem, a one-line caption, and the files written (one per format)."""

    stem: str
    caption: str
    paths: tuple[Path, ...]


def draw_run_figures(
    folder: str | Path,
    title: str,
    formats: Sequence[str] = ("png",),
    span: str = "window",
    timeline_window_s: tuple[float, float] | None = None,
) -> list[RunFigure]:
    """Draw the figures of the run whose CSVs are in `folder` into it, in each of `formats`; `title` names the
    run (scheduler, workload, seed). The timeline covers `timeline_window_s` (start, end) when given, whatever
    the run's size, else the whole run when it has at most GANTT_MAX_JOBS jobs."""
    folder = Path(folder)
    tables = read_run_tables(folder)
    figures = [
        ("jct_cdf", jct_cdf_figure(tables, title)),
        ("utilization", utilization_figure(tables, title, span)),
        ("queue_length", queue_figure(tables, title, span)),
    ]
    if timeline_window_s is not None or len(tables.job_id) <= GANTT_MAX_JOBS:
        figures.append(("gantt", gantt_figure(tables, title, timeline_window_s)))
    return [
        RunFigure(stem, fig.get_label(), tuple(save_formats(fig, folder / stem, formats)))
        for stem, fig in figures
    ]


def _window_axis(ax: Axes, tables: RunTables, span: str) -> str:
    """Shade the arrival window and, with span "window", cut the time axis to it; returns a note for the title."""
    first_s, last_s = arrival_window(tables)
    if not last_s > first_s:
        return ""
    ax.axvspan(first_s / 3600.0, last_s / 3600.0, color="0.5", alpha=0.12, lw=0, label="arrival window")
    if span == "window":
        ax.set_xlim(first_s / 3600.0, last_s / 3600.0)
        return " (arrival window)"
    ax.set_xlim(first_s / 3600.0, max(tables.horizon_s, last_s) / 3600.0)
    return ""


def _draw_stacked(ax: Axes, steps: StackedSteps, end_s: float, scale: float) -> tuple[np.ndarray, str]:
    """Draw the keys of `steps` (x `scale`) as stacked filled stairs against hours; returns the stacked total
    per drawn step and a note for the title when downsampled."""
    t_s = steps.t_s
    end_s = max(end_s, float(t_s[-1]))
    if len(t_s) > MAX_PLOT_POINTS and end_s > t_s[0]:
        edges_s = None
        means = []
        for i in range(len(steps.keys)):
            edges_s, m = step_bin_means(t_s, steps.value_TK[:, i], float(t_s[0]), end_s, MAX_PLOT_POINTS)
            means.append(m)
        values_TK = np.stack(means, axis=1)
        note = f" (time-weighted mean over {MAX_PLOT_POINTS} bins)"
    else:
        edges_s = np.append(t_s, end_s if end_s > t_s[-1] else t_s[-1] + 1.0)
        values_TK = steps.value_TK
        note = ""
    bottom = np.zeros(len(values_TK))
    for i, key in enumerate(steps.keys):
        top = bottom + values_TK[:, i] * scale
        ax.stairs(
            top, edges_s / 3600.0, baseline=bottom, fill=True, alpha=0.85, label=key, color=f"C{i % 10}"
        )
        bottom = top
    return bottom, note


def utilization_figure(tables: RunTables, title: str, span: str = "window") -> Figure:
    """Busy GPUs of each type as a share of all GPUs, stacked (the top is the cluster's utilization)."""
    fig, axes = new_figure()
    fig.set_label("GPU utilization stacked by GPU type (busy GPUs of the type / all GPUs)")
    ax = axes[0, 0]
    steps = busy_by_type(tables)
    total = max(tables.total_gpus, 1)
    note = ""
    if len(steps.t_s):
        top, note = _draw_stacked(ax, steps, tables.horizon_s, 1.0 / total)
        note += _window_axis(ax, tables, span)
        peak = float(top.max()) if len(top) else 0.0
        if 0.0 < peak < ZOOM_BELOW:
            ax.set_ylim(0, peak * 1.15)
            note += f" (y axis zoomed: peak utilization {peak:.3g})"
        else:
            ax.set_ylim(0, 1.05)
        ax.legend(fontsize=7, loc="upper right")
    else:
        _no_data(ax, "no job ever ran")
    ax.set(xlabel="time (h)", ylabel="busy GPUs / all GPUs")
    _set_title(ax, f"Utilization by GPU type: {title}{note}")
    ax.grid(True, alpha=0.3)
    return fig


def queue_figure(tables: RunTables, title: str, span: str = "window") -> Figure:
    """Queued jobs stacked by the GPU type they wait for (metrics/figure_data.py, queue_by_type)."""
    fig, axes = new_figure()
    fig.set_label("Queued jobs stacked by the GPU type each waits for (the type it then got)")
    ax = axes[0, 0]
    steps = queue_by_type(tables)
    note = ""
    if len(steps.t_s):
        _, note = _draw_stacked(ax, steps, tables.horizon_s, 1.0)
        note += _window_axis(ax, tables, span)
        ax.legend(fontsize=7, loc="upper right")
        ax.set_ylim(bottom=0)
    else:
        _no_data(ax, "no job ever waited")
    ax.set(xlabel="time (h)", ylabel="queued jobs")
    _set_title(ax, f"Queue by GPU type waited for: {title}{note}")
    ax.grid(True, alpha=0.3)
    return fig


def jct_cdf_figure(tables: RunTables, title: str) -> Figure:
    """The CDF of completed jobs' JCT, and one per priority class when there are several."""
    fig, axes = new_figure()
    fig.set_label("CDF of job completion time (completed jobs; one curve per priority class when several)")
    ax = axes[0, 0]
    by_class = jct_by_priority(tables)
    curves = [("all jobs", np.concatenate(list(by_class.values())) if by_class else np.zeros(0))]
    if len(by_class) > 1:
        curves += [(f"priority {p} ({len(v)} jobs)", v) for p, v in by_class.items()]
    drawn = False
    for label, jct_s in curves:
        jct_s = jct_s[jct_s > 0]  # a log axis cannot show zero-length JCTs
        if len(jct_s):
            x, y = _cdf_points(jct_s)
            ax.step(x, y, where="post", label=label, lw=2.0 if label == "all jobs" else 1.2)
            drawn = True
    if drawn:
        ax.set_xscale("log")
        if len(curves) > 1:
            ax.legend(fontsize=7)
    else:
        _no_data(ax, "no completed jobs")
    ax.set(xlabel="JCT (s)", ylabel="fraction of completed jobs", ylim=(0, 1.02))
    _set_title(ax, f"JCT CDF: {title}")
    ax.grid(True, which="both", alpha=0.3)
    return fig


def _rectangles(x0_h: np.ndarray, x1_h: np.ndarray, y0: np.ndarray, y1: np.ndarray) -> np.ndarray:
    """Corners (N, 4, 2) of N axis-aligned rectangles for one PolyCollection."""
    return np.stack([np.stack(c, axis=1) for c in ((x0_h, y0), (x0_h, y1), (x1_h, y1), (x1_h, y0))], axis=1)


def _shade_power_states(ax: Axes, g: Gantt) -> bool:
    """Shade each node's lanes by power state (STATE_STYLE), one collection per state labelled with its legend
    label; returns whether anything was shaded."""
    for state, (label, colour, hatch) in STATE_STYLE.items():
        mine = g.shade_state == state
        if not mine.any():
            continue
        corners = _rectangles(
            g.shade_start_s[mine] / 3600.0,
            g.shade_end_s[mine] / 3600.0,
            g.shade_lane0[mine] - 0.5,
            g.shade_lane1[mine] + 0.5,
        )
        ax.add_collection(
            PolyCollection(
                corners,
                facecolors=colour,
                edgecolors="0.55" if hatch else "none",
                hatch=hatch or None,
                linewidths=0,
                zorder=0.5,
                label=label,
            )
        )
    return bool(len(g.shade_state))


def gantt_figure(tables: RunTables, title: str, window_s: tuple[float, float] | None = None) -> Figure:
    """One lane per GPU (per node on clusters of more than GANTT_MAX_GPU_LANES GPUs), a block per run coloured by
    job, an x where a job was preempted and a triangle where it restarted on other GPUs, and, when the run has
    power_states.csv, each node's lanes shaded by power state behind the blocks (STATE_STYLE); with `window_s`
    (start, end) only the runs and states overlapping that window, cut to it, on a time axis of exactly that
    window."""
    per_node = tables.total_gpus > GANTT_MAX_GPU_LANES
    g = gantt(tables, per_node)
    if window_s is not None:
        g = gantt_window(g, *window_s)
    lanes = len(g.lane_labels)
    fig, axes = new_figure(8.0, min(max(3.0, 0.14 * lanes + 1.6), 24.0))
    fig.set_label(
        f"Timeline of every {'node' if per_node else 'GPU'}: one block per run, coloured by job; x = preempted, "
        "triangle = restarted on other GPUs (migrated)"
        + ("; node power states shaded behind" if tables.power_states is not None else "")
    )
    ax = axes[0, 0]
    shaded = _shade_power_states(ax, g)
    if shaded:
        ax.autoscale_view()
    if len(g.block_lane):
        # one collection of rectangles (lane +- 0.4, run start to end): a patch per block cost ~7 ms each to
        # build and draw, 30 s for the 12,000 blocks of an 80-job preemptive run
        corners = _rectangles(
            g.block_start_s / 3600.0, g.block_end_s / 3600.0, g.block_lane - 0.4, g.block_lane + 0.4
        )
        blocks = PolyCollection(
            corners,
            facecolors=to_rgba_array([f"C{j % 10}" for j in g.block_job.tolist()]),
            alpha=0.6 if per_node else 0.85,
            linewidths=0,
            label="runs",
        )
        ax.add_collection(blocks)
        ax.autoscale_view()
        if len(g.preempt_s):
            ax.plot(g.preempt_s / 3600.0, g.preempt_lane, "x", color="red", ms=5, label="preempted")
        if len(g.migrate_s):
            ax.plot(g.migrate_s / 3600.0, g.migrate_lane, ">", color="black", ms=4, label="migrated")
        first_s, last_s = arrival_window(tables)
        if last_s > first_s:
            ax.axvspan(first_s / 3600.0, last_s / 3600.0, color="0.5", alpha=0.08, lw=0)
    else:
        _no_data(ax, "no job ran in this window" if window_s is not None else "no job ever ran")
    if shaded or len(g.preempt_s) or len(g.migrate_s):
        ax.legend(fontsize=7, loc="upper right", framealpha=0.9)
    if window_s is not None:
        ax.set_xlim(window_s[0] / 3600.0, window_s[1] / 3600.0)
        title += f", {window_s[0]:g} s to {window_s[1]:g} s"
    ax.set_ylim(lanes - 0.5, -0.5)
    step = max(1, lanes // 40)  # at most about 40 lane labels
    ax.set_yticks(range(0, lanes, step), g.lane_labels[::step], fontsize=6)
    ax.set(xlabel="time (h)", ylabel="node" if per_node else "GPU (node/index)")
    _set_title(ax, f"Timeline: {title}")
    ax.grid(True, axis="x", alpha=0.3)
    return fig
