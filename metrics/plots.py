"""Figure helpers shared by every plot (canvas, titles, deterministic saving in png/svg/pdf) and the figures of
scheduler comparisons; a run's own figures are in metrics/run_figures.py.

Figures are drawn on matplotlib's Agg canvas directly (no pyplot, no display, no global state). Long timelines
are downsampled to MAX_PLOT_POINTS time bins holding each bin's exact time-weighted mean, so a 200,000-sample
timeline plots as fast as a short one; CDFs are drawn through at most MAX_PLOT_POINTS order statistics.
Titles are wrapped to the figure's width, never cut. compare.png names the workload and shows, per scheduler, the mean over seeds (bar), the min-max
range over seeds (whisker) and every seed (dot), so whiskers never go below 0 for metrics that cannot.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import matplotlib
import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from metrics.compare import aggregate, assert_same_jobs, paired_differences
from metrics.summary import SummaryRow, per_job
from metrics.timeline import step_bin_means
from sim.records import RunResult

MAX_PLOT_POINTS = 2000
DPI = 100
TITLE_FONTSIZE = 10
DECADES_FOR_LOG = 1.5
"""compare panels whose positive values span this many decades (a ratio of about 32) get a log axis"""
PAIRED_METRICS = (
    ("avg_jct_s", "avg JCT (s)"),
    ("avg_wait_s", "avg wait (s)"),
    ("avg_bounded_slowdown", "avg bounded slowdown"),
    ("gpu_utilization_arrival_window", "GPU util, arrival window"),
)
"""the metrics of compare_paired.png"""


def new_figure(width_in: float = 6.4, height_in: float = 4.0, nrows: int = 1, ncols: int = 1):
    fig = Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, squeeze=False)


SAVE_METADATA = {"png": {"Software": None}, "svg": {"Date": None}, "pdf": {"CreationDate": None}}
"""per file format, the metadata left out so the same figure gives the same bytes (no date, no version stamp)"""
SVG_HASHSALT = "gpu-cluster-scheduling"
"""salt of the ids inside an SVG (matplotlib draws random ids without one, so two saves would differ)"""


def _save(fig: Figure, path: Path) -> Path:
    """Save `fig` in the format its suffix names (png, svg or pdf), the same bytes for the same figure."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fmt = path.suffix[1:]
    # rc_context: the salt is read from rcParams when saving; set only for this call, then restored
    with matplotlib.rc_context({"svg.hashsalt": SVG_HASHSALT}):
        fig.savefig(path, format=fmt, metadata=SAVE_METADATA[fmt])
    return path


def save_formats(fig: Figure, stem: Path, formats: Sequence[str] = ("png",)) -> list[Path]:
    """Save `fig` as `stem`.<format> for each of `formats`; returns the paths."""
    return [_save(fig, stem.with_name(f"{stem.name}.{fmt}")) for fmt in formats]


def _wrap(text: str, width_in: float, fontsize: float = TITLE_FONTSIZE) -> str:
    """`text` broken into lines that fit `width_in` inches at `fontsize` points (about 0.6 em per character)."""
    chars = max(20, int(width_in * 72 / (0.6 * fontsize)))
    return "\n".join(textwrap.wrap(text, chars, break_long_words=True, break_on_hyphens=False))


def _set_title(ax: Axes, text: str) -> None:
    width_in = ax.figure.get_figwidth() * ax.get_position().width
    ax.set_title(_wrap(text, width_in), fontsize=TITLE_FONTSIZE)


def _no_data(ax: Axes, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes)


def _cdf_points(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted values and their empirical CDF, thinned to at most MAX_PLOT_POINTS order statistics."""
    x = np.sort(x)
    y = np.arange(1, len(x) + 1) / len(x)
    if len(x) > MAX_PLOT_POINTS:
        idx = np.unique(np.linspace(0, len(x) - 1, MAX_PLOT_POINTS).round().astype(np.int64))
        x, y = x[idx], y[idx]
    return x, y


def _draw_step(ax: Axes, t_s: np.ndarray, value: np.ndarray) -> str:
    """Plot a step function against hours; returns a note for the title when it was downsampled."""
    t_s = np.asarray(t_s, dtype=float)
    value = np.asarray(value, dtype=float)
    if len(t_s) <= MAX_PLOT_POINTS or t_s[-1] <= t_s[0]:
        ax.plot(t_s / 3600.0, value, drawstyle="steps-post")
        return ""
    edges_s, means = step_bin_means(t_s, value, float(t_s[0]), float(t_s[-1]), MAX_PLOT_POINTS)
    ax.stairs(means, edges_s / 3600.0)
    return f" (time-weighted mean over {MAX_PLOT_POINTS} bins)"


def _rows_by_scheduler(rows: Sequence[SummaryRow]) -> list[list[SummaryRow]]:
    """Rows grouped by (scheduler, workload) in the order `compare.aggregate` uses (first appearance)."""
    groups: dict[tuple[str, str], list[SummaryRow]] = {}
    for r in rows:
        groups.setdefault((r.scheduler, r.workload), []).append(r)
    return list(groups.values())


def plot_compare(
    rows: Sequence[SummaryRow], out_dir: str | Path, formats: Sequence[str] = ("png",)
) -> list[Path]:
    """Write compare.<format> (see `compare_figure`) for each of `formats`; returns the paths."""
    return save_formats(compare_figure(rows), Path(out_dir) / "compare", formats)


def spans_decades(values: np.ndarray) -> bool:
    """Whether positive `values` span DECADES_FOR_LOG decades or more (a linear axis would flatten the small
    ones); never for values with zeros or negatives, which a log axis cannot show."""
    values = values[np.isfinite(values)]
    if not len(values) or values.min() <= 0:
        return False
    return bool(values.max() / values.min() >= 10.0**DECADES_FOR_LOG)


def compare_figure(rows: Sequence[SummaryRow]) -> Figure:
    """Per scheduler, the mean over seeds (bar), the min-max range over seeds (whisker) and each seed (dot) of
    avg JCT, avg wait, bounded and reference slowdown, and GPU utilization within the arrival window and over
    the makespan; a panel whose values span decades (spans_decades) has a log axis. The title names the
    workload(s) and the seeds."""
    agg = aggregate(rows)
    groups = _rows_by_scheduler(rows)
    workloads = list(dict.fromkeys(a.workload for a in agg))
    labels = [a.scheduler if len(workloads) <= 1 else f"{a.scheduler}\n[{a.workload}]" for a in agg]
    panels = (
        ("avg_jct_s", "avg JCT (s)"),
        ("avg_wait_s", "avg wait (s)"),
        ("avg_bounded_slowdown", "avg bounded slowdown"),
        ("avg_reference_slowdown", "avg reference slowdown"),
        ("gpu_utilization_arrival_window", "GPU util, arrival window"),
        ("gpu_utilization", "GPU util, makespan"),
    )
    width_in = max(9.0, 1.2 * len(agg) * 3 / 2 + 3)
    fig, axes = new_figure(width_in, 6.5, 2, 3)
    x = np.arange(len(agg))
    colors = [f"C{i % 10}" for i in range(len(agg))]
    for ax, (name, ylabel) in zip(axes.ravel(), panels, strict=True):
        mean = np.array([getattr(a, name).mean for a in agg], dtype=float)
        ax.bar(x, np.nan_to_num(mean), color=colors, alpha=0.8)
        for i, group in enumerate(groups):
            values = np.array([getattr(r, name) for r in group], dtype=float)
            values = values[np.isfinite(values)]
            if len(values) > 1:
                ax.vlines(i, values.min(), values.max(), color="black", lw=1.2)
                ax.hlines([values.min(), values.max()], i - 0.12, i + 0.12, color="black", lw=1.2)
            ax.plot(np.full(len(values), i), values, "o", color="black", ms=2.5, alpha=0.6)
        ax.set_xticks(x, labels, fontsize=8)
        values = np.array([getattr(r, name) for r in rows], dtype=float)
        if spans_decades(values):
            ax.set_yscale("log")  # bars start at the axis' bottom; a linear axis would flatten the small ones
            ax.set_ylabel(f"{ylabel}, log scale", fontsize=9)
        else:
            ax.set_ylabel(ylabel, fontsize=9)
            ax.set_ylim(bottom=0)
        ax.grid(True, axis="y", which="both", alpha=0.3)
    seeds = sorted({r.seed for r in rows})
    seed_text = ", ".join(map(str, seeds[:12])) + (f", … ({len(seeds)} seeds)" if len(seeds) > 12 else "")
    title = f"{', '.join(workloads)}: bar = mean over seeds {seed_text}; whisker = min-max over seeds; dot = one seed"
    fig.suptitle(_wrap(title, width_in, 11), fontsize=11)
    return fig


def plot_compare_cdf(
    results: Sequence[RunResult], stem: str | Path, formats: Sequence[str] = ("png",)
) -> list[Path]:
    """Write the JCT CDFs of several runs of the same jobs (e.g. one seed, several schedulers) on one axes, as
    `stem`.<format> for each of `formats`; returns the paths."""
    assert_same_jobs(results)
    curves = []
    for r in results:
        m = per_job(r)
        curves.append((r.scheduler, m.jct_s[m.completed]))
    title = f"JCT CDF on {results[0].workload} (seed {results[0].seed})" if results else "JCT CDF"
    return save_formats(cdf_overlay_figure(curves, title), Path(stem), formats)


def cdf_overlay_figure(curves: Sequence[tuple[str, np.ndarray]], title: str) -> Figure:
    """The empirical CDFs of several sets of completed jobs' JCTs (label, JCTs in s) on one log axis."""
    fig, axes = new_figure()
    ax = axes[0, 0]
    drawn = False
    for label, jct_s in curves:
        jct_s = jct_s[jct_s > 0]  # a log axis cannot show zero-length JCTs
        if len(jct_s):
            x, y = _cdf_points(jct_s)
            ax.step(x, y, where="post", label=label)
            drawn = True
    if drawn:
        ax.set_xscale("log")
        ax.legend(fontsize=8)
    else:
        _no_data(ax, "no completed jobs")
    ax.set(xlabel="JCT (s)", ylabel="fraction of completed jobs", ylim=(0, 1.02))
    _set_title(ax, title)
    ax.grid(True, which="both", alpha=0.3)
    return fig


def plot_compare_paired(
    rows: Sequence[SummaryRow],
    out_dir: str | Path,
    formats: Sequence[str] = ("png",),
    baseline: str | None = None,
    stem: str = "compare_paired",
) -> list[Path]:
    """Write `stem`.<format> (see `paired_figure`) for each of `formats` when `rows` hold two or more schedulers
    (the baseline among them); returns the paths (none otherwise)."""
    names = {r.scheduler for r in rows}
    if len(names) < 2 or (baseline is not None and baseline not in names):
        return []
    return save_formats(paired_figure(rows, baseline), Path(out_dir) / stem, formats)


def paired_figure(rows: Sequence[SummaryRow], baseline: str | None = None) -> Figure:
    """Per PAIRED_METRICS panel and per scheduler other than `baseline` (default: the first), its difference from
    the baseline on each seed (dot) and the mean over seeds with its 95 % t-interval (diamond and bar); one entry
    per (scheduler, workload) where the rows hold several workloads (a sweep's cases)."""
    names = list(dict.fromkeys(r.scheduler for r in rows))
    baseline = names[0] if baseline is None else baseline
    several = len({r.workload for r in rows}) > 1
    n_entries = len(dict.fromkeys((r.scheduler, r.workload) for r in rows if r.scheduler != baseline))
    width_in = max(8.0, 1.0 * (n_entries + 1) * 2 + 3) if several else max(8.0, 1.0 * len(names) * 2 + 3)
    fig, axes = new_figure(min(width_in, 30.0), 6.0, 2, 2)
    for ax, (metric, label) in zip(axes.ravel(), PAIRED_METRICS, strict=True):
        diffs = paired_differences(rows, metric, baseline)
        colour = {
            name: f"C{(i + 1) % 10}" for i, name in enumerate(dict.fromkeys(d.scheduler for d in diffs))
        }
        for i, d in enumerate(diffs):
            ax.plot(np.full(len(d.diff), i), d.diff, "o", color=colour[d.scheduler], ms=3, alpha=0.6)
            ax.errorbar(
                [i], [d.mean], yerr=[[np.nan_to_num(d.ci95)]], fmt="D", color="black", ms=5, capsize=4
            )
        ax.axhline(0.0, color="0.3", lw=1)
        ticks = [f"{d.scheduler}\n[{d.workload}]" if several else d.scheduler for d in diffs]
        ax.set_xticks(range(len(diffs)), ticks, fontsize=8 if len(diffs) <= 8 else 6)
        ax.set_xlim(-0.6, len(diffs) - 0.4)
        ax.set_ylabel(f"{label}: minus {baseline}", fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
    seeds = sorted({r.seed for r in rows})
    title = (
        f"Difference from {baseline} on the same seed ({len(seeds)} seeds): dot = one seed, diamond = mean, bar = "
        "95 % t-interval of the mean"
    )
    fig.suptitle(_wrap(title, fig.get_figwidth(), 11), fontsize=11)
    return fig
