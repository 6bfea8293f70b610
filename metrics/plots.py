"""PNG plots of runs (JCT CDF, GPU utilization and queue length over time) and of scheduler comparisons.

Figures are drawn on matplotlib's Agg canvas directly (no pyplot, no display, no global state). Long timelines
are downsampled to MAX_PLOT_POINTS time bins holding each bin's exact time-weighted mean, so a 200,000-sample
timeline plots as fast as a short one; CDFs are drawn through at most MAX_PLOT_POINTS order statistics.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from env.records import RunResult
from metrics.compare import aggregate, assert_same_jobs
from metrics.summary import SummaryRow, per_job
from metrics.timeline import step_bin_means

MAX_PLOT_POINTS = 2000
DPI = 100


def _figure(width_in: float = 6.4, height_in: float = 4.0, nrows: int = 1, ncols: int = 1):
    fig = Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(nrows, ncols, squeeze=False)


def _save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", metadata={"Software": None})
    return path


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


def _draw_jct_cdf(ax: Axes, result: RunResult, label: str | None = None) -> bool:
    m = per_job(result)
    jct_s = m.jct_s[m.completed]
    jct_s = jct_s[jct_s > 0]  # a log axis cannot show zero-length JCTs
    if not len(jct_s):
        return False
    x, y = _cdf_points(jct_s)
    ax.step(x, y, where="post", label=label)
    return True


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


def plot_run(result: RunResult, out_dir: str | Path) -> tuple[Path, Path, Path]:
    """Write jct_cdf.png, utilization.png and queue_length.png for one run into `out_dir`; returns their paths."""
    out_dir = Path(out_dir)
    title = f"{result.scheduler} on {result.workload} (seed {result.seed})"

    fig, axes = _figure()
    ax = axes[0, 0]
    if _draw_jct_cdf(ax, result):
        ax.set_xscale("log")
    else:
        _no_data(ax, "no completed jobs")
    ax.set(xlabel="JCT (s)", ylabel="fraction of completed jobs", ylim=(0, 1.02), title=f"JCT CDF: {title}")
    ax.grid(True, which="both", alpha=0.3)
    cdf_path = _save(fig, out_dir / "jct_cdf.png")

    t_s = np.asarray(result.timeline_t_s, dtype=float)
    paths = [cdf_path]
    for name, series, ylabel in (
        (
            "utilization.png",
            np.asarray(result.timeline_busy_gpus, dtype=float) / max(result.total_gpus, 1),
            "busy GPUs / total GPUs",
        ),
        ("queue_length.png", np.asarray(result.timeline_queue_len, dtype=float), "queued jobs"),
    ):
        fig, axes = _figure()
        ax = axes[0, 0]
        note = _draw_step(ax, t_s, series) if len(t_s) else ""
        if not len(t_s):
            _no_data(ax, "empty timeline")
        ax.set(xlabel="time (h)", ylabel=ylabel, title=f"{title}{note}")
        ax.title.set_fontsize(9)
        ax.grid(True, alpha=0.3)
        if name == "utilization.png":
            ax.set_ylim(0, 1.05)
        paths.append(_save(fig, out_dir / name))
    return paths[0], paths[1], paths[2]


def plot_compare(rows: Sequence[SummaryRow], out_dir: str | Path) -> Path:
    """Write compare.png: one bar per scheduler (mean over seeds, error bar = std) for avg JCT, avg wait,
    avg bounded slowdown and GPU utilization."""
    agg = aggregate(rows)
    workloads = {a.workload for a in agg}
    labels = [a.scheduler if len(workloads) <= 1 else f"{a.scheduler}\n[{a.workload}]" for a in agg]
    panels = (
        ("avg_jct_s", "avg JCT (s)"),
        ("avg_wait_s", "avg wait (s)"),
        ("avg_bounded_slowdown", "avg bounded slowdown"),
        ("gpu_utilization", "GPU utilization"),
    )
    fig, axes = _figure(max(6.4, 1.2 * len(agg) + 3), 6.0, 2, 2)
    x = np.arange(len(agg))
    for ax, (name, ylabel) in zip(axes.ravel(), panels, strict=True):
        mean = np.array([getattr(a, name).mean for a in agg], dtype=float)
        std = np.nan_to_num(np.array([getattr(a, name).std for a in agg], dtype=float))  # one seed: no bar
        ax.bar(x, np.nan_to_num(mean), yerr=std, capsize=4, color=[f"C{i % 10}" for i in range(len(agg))])
        ax.set_xticks(x, labels, fontsize=8)
        ax.set_ylabel(ylabel)
        ax.grid(True, axis="y", alpha=0.3)
    n_seeds = sorted({a.n_seeds for a in agg})
    fig.suptitle(f"mean ± std over seeds (n = {', '.join(map(str, n_seeds))})")
    return _save(fig, Path(out_dir) / "compare.png")


def plot_compare_cdf(results: Sequence[RunResult], out_path: str | Path) -> Path:
    """Write the JCT CDFs of several runs of the same jobs (e.g. one seed, several schedulers) on one axes."""
    assert_same_jobs(results)
    fig, axes = _figure()
    ax = axes[0, 0]
    drawn = [_draw_jct_cdf(ax, r, label=r.scheduler) for r in results]
    if any(drawn):
        ax.set_xscale("log")
        ax.legend(fontsize=8)
    else:
        _no_data(ax, "no completed jobs")
    title = f"JCT CDF on {results[0].workload} (seed {results[0].seed})" if results else "JCT CDF"
    ax.set(xlabel="JCT (s)", ylabel="fraction of completed jobs", ylim=(0, 1.02), title=title)
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig, Path(out_path))
