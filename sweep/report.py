"""A study's tables and figures: results.csv (one row per run and summary row), aggregate.csv (mean and 95 % CI
over seeds per group, Student's t) and one plot per main metric."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from evaluation.paired import t975
from sweep.study import SEED_KEYS, Study, cell

MAIN_METRICS = ("avg_jct_s", "avg_wait_s", "avg_bounded_slowdown", "gpu_utilization_arrival_window")


def mean_ci95(values: Sequence[float]) -> tuple[float, float]:
    """(mean, half-width of the 95 % confidence interval of the mean: t_{0.975,n-1} * s / sqrt(n)); the half-width
    is NaN for one value. Plain, not NaN-skipping: a NaN value makes both NaN."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return math.nan, math.nan
    mean = float(x.mean())
    if len(x) < 2:
        return mean, math.nan
    return mean, float(t975(len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))


@dataclass(frozen=True)
class ResultRow:
    run: str
    phase: str
    status: str
    error: str
    params: tuple[str, ...]
    """one cell per Study.params"""
    metrics: tuple[tuple[str, str], ...]
    """summary.csv column -> its text, as the run wrote it; a column named like a parameter (seed, num_jobs,
    load_factor) is renamed summary_<name>: the parameter is what the run was given, the metric what it found"""


def read_summary(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def result_rows(study: Study, run_dir: Path, status: dict[str, tuple[str, str]]) -> list[ResultRow]:
    """One row per summary row of each run (eval: 1, compare: algorithms x seeds), one row for a training or
    failed run; metrics read back from each run's summary.csv, so a resumed study tabulates the same bytes."""
    rows: list[ResultRow] = []
    for spec in study.runs:
        state, error = status.get(spec.name, ("not run", ""))
        params = tuple(cell(spec.value(k)) for k in study.params)
        summary = run_dir / spec.name / "summary.csv"
        lines = read_summary(summary) if state == "ok" and summary.is_file() else []
        for line in lines or [{}]:
            metrics = tuple((f"summary_{k}" if k in study.params else k, v) for k, v in line.items())
            rows.append(ResultRow(spec.name, spec.phase, state, error, params, metrics))
    return rows


def write_results(study: Study, rows: Sequence[ResultRow], path: Path) -> None:
    metric_cols = _metric_columns(rows)
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["run", "phase", "status", "error", *study.params, *metric_cols])
        for r in rows:
            m = dict(r.metrics)
            w.writerow([r.run, r.phase, r.status, r.error, *r.params, *(m.get(c, "") for c in metric_cols)])


def _metric_columns(rows: Sequence[ResultRow]) -> list[str]:
    cols: list[str] = []
    for r in rows:
        cols += [k for k, _ in r.metrics if k not in cols]
    return cols


def geometric_ci95(values: Sequence[float]) -> tuple[float, float, float]:
    """(geometric mean, low, high): the 95 % confidence interval of mean_ci95 taken over log(values) and
    exponentiated, so it is asymmetric, never below zero, and symmetric on a log axis; NaN where a value is not
    > 0 (no logarithm), and low, high NaN for one value."""
    x = np.asarray(values, dtype=float)
    if len(x) == 0 or not np.all(x > 0) or not np.all(np.isfinite(x)):
        return math.nan, math.nan, math.nan
    mean, half = mean_ci95(np.log(x))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


@dataclass(frozen=True)
class Group:
    key: tuple[tuple[str, str], ...]
    """(column, value) of every grouping column: the parameters except seeds, and the scheduler"""
    n: int
    stats: tuple[tuple[str, float, float], ...]
    """(metric, mean, 95 % CI half-width)"""
    log_stats: tuple[tuple[str, float, float, float], ...] = ()
    """(main metric, geometric mean, 95 % CI low, high) for the plots: geometric_ci95"""
    values: tuple[tuple[str, tuple[float, ...]], ...] = ()
    """(main metric, each member's value in results.csv's order): the plots' per-seed dots"""


def group_columns(study: Study) -> list[str]:
    """Parameters that define a group: the varied ones but the seeds (averaged over) and algo/algos (the
    scheduler column names the policy of each summary row); fixed options are the same in every group."""
    return [p for p in study.varying if p not in SEED_KEYS and p not in ("algo", "algos")] + ["scheduler"]


def aggregate(study: Study, rows: Sequence[ResultRow]) -> list[Group]:
    """Mean and 95 % CI of each numeric metric over the ok evaluation rows of each group (first-seen order)."""
    cols = group_columns(study)
    skip = ("scheduler", "workload", "seed", "summary_seed")
    metric_cols = [c for c in _metric_columns(rows) if c not in skip]
    members: dict[tuple[tuple[str, str], ...], list[dict[str, str]]] = {}
    for r in rows:
        if r.status != "ok" or r.phase != "eval" or not r.metrics:
            continue
        line = dict(zip(study.params, r.params, strict=True)) | dict(r.metrics)
        members.setdefault(tuple((c, line.get(c, "")) for c in cols), []).append(line)
    groups = []
    for key, lines in members.items():
        stats, log_stats, values_of = [], [], []
        for m in metric_cols:
            vals = [_float(line.get(m, "")) for line in lines]
            if all(v is None for v in vals):
                continue
            values = [math.nan if v is None else v for v in vals]
            stats.append((m, *mean_ci95(values)))
            if m in MAIN_METRICS:
                log_stats.append((m, *geometric_ci95(values)))
                values_of.append((m, tuple(values)))
        groups.append(Group(key, len(lines), tuple(stats), tuple(log_stats), tuple(values_of)))
    return groups


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def write_aggregate(groups: Sequence[Group], path: Path) -> None:
    metrics: list[str] = []
    for g in groups:
        metrics += [m for m, _, _ in g.stats if m not in metrics]
    plotted = [m for m in MAIN_METRICS if any(m == s[0] for g in groups for s in g.log_stats)]
    key_cols = [c for c, _ in groups[0].key] if groups else ["scheduler"]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(
            [*key_cols, "n", *(f"{m}_{s}" for m in metrics for s in ("mean", "ci95"))]
            + [f"{m}_{s}" for m in plotted for s in ("gmean", "gci95_low", "gci95_high")]
        )
        for g in groups:
            s = {m: (mean, ci) for m, mean, ci in g.stats}
            cells = [_num(x) for m in metrics for x in s.get(m, (math.nan, math.nan))]
            logs = {m: rest for m, *rest in g.log_stats}
            cells += [_num(x) for m in plotted for x in logs.get(m, (math.nan,) * 3)]
            w.writerow([v for _, v in g.key] + [g.n] + cells)


def _num(x: float) -> str:
    return "" if math.isnan(x) else repr(round(x, 6))


def format_table(groups: Sequence[Group]) -> str:
    """The printed table: each group's parameters, n and mean ± 95 % CI of the main metrics."""
    if not groups:
        return "(no successful evaluation runs to aggregate)"
    key_cols = [c for c, _ in groups[0].key]
    metrics = [m for m in MAIN_METRICS if any(m == s[0] for g in groups for s in g.stats)]
    header = [*key_cols, "n", *metrics]
    body = []
    for g in groups:
        s = {m: (mean, ci) for m, mean, ci in g.stats}
        body.append(
            [v for _, v in g.key] + [str(g.n)] + [_pm(*s.get(m, (math.nan, math.nan))) for m in metrics]
        )
    widths = [max(len(x) for x in col) for col in zip(header, *body, strict=True)]
    lines = ["  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)).rstrip() for r in [header, *body]]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


def _pm(mean: float, ci: float) -> str:
    digits = 3 if abs(mean) < 100 else 1
    return f"{mean:.{digits}f}" + ("" if math.isnan(ci) else f" ± {ci:.{digits}f}")


@dataclass(frozen=True)
class Curve:
    label: str
    points: tuple[tuple[float, float, float, float], ...]
    """(x, centre, low, high) per group, by x"""
    dots: tuple[tuple[float, float], ...] = ()
    """(x, value) of every seed of every group of the curve"""


@dataclass(frozen=True)
class Figure:
    """What one metric's plot shows (plot_groups draws it)."""

    metric: str
    x_col: str
    x_ticks: tuple[str, ...]
    """the x values as text; () when x is numeric (the values themselves)"""
    log_scale: bool
    """every group's values are > 0: geometric means with their 95 % CI (geometric_ci95) on a log axis; else
    arithmetic means with the 95 % t-interval cut at 0 (the main metrics are never negative)"""
    curves: tuple[Curve, ...]


def figures(study: Study, groups: Sequence[Group]) -> list[Figure]:
    """One Figure per main metric that some group has: x = the first varied parameter (not a seed or the
    algorithm), one curve per policy (and combination of the other parameters)."""
    if not groups:
        return []
    key_cols = [c for c, _ in groups[0].key]
    candidates = [p for p in study.varying if p in key_cols and len({dict(g.key)[p] for g in groups}) > 1]
    x_col = candidates[0] if candidates else "scheduler"
    xs = list(dict.fromkeys(dict(g.key)[x_col] for g in groups))
    numeric = all(_float(x) is not None for x in xs)
    if numeric:
        xs = sorted(xs, key=float)
    out = []
    for metric in MAIN_METRICS:
        members = [g for g in groups if any(m == metric for m, _, _ in g.stats)]
        if not members:
            continue
        logs = [{m: rest for m, *rest in g.log_stats}.get(metric, (math.nan,) * 3) for g in members]
        log_scale = all(not math.isnan(centre) for centre, _, _ in logs)
        curves: dict[str, list[tuple[float, float, float, float]]] = {}
        dots: dict[str, list[tuple[float, float]]] = {}
        for g, log in zip(members, logs, strict=True):
            k = dict(g.key)
            label = (
                ", ".join(f"{c}={v}" if c != "scheduler" else v for c, v in g.key if c != x_col and v)
                or metric
            )
            x = float(k[x_col]) if numeric else float(xs.index(k[x_col]))
            if log_scale:
                centre, low, high = log
            else:
                centre, half = {m: (mean, ci) for m, mean, ci in g.stats}[metric]
                low, high = max(centre - half, 0.0), centre + half
            if math.isnan(low):  # one value: no interval
                low = high = centre
            curves.setdefault(label, []).append((x, centre, low, high))
            seeds = dict(g.values).get(metric, ())
            dots.setdefault(label, []).extend((x, v) for v in seeds if math.isfinite(v))
        out.append(
            Figure(
                metric,
                x_col,
                () if numeric else tuple(xs),
                log_scale,
                tuple(Curve(label, tuple(sorted(pts)), tuple(dots[label])) for label, pts in curves.items()),
            )
        )
    return out


def plot_groups(
    study: Study, groups: Sequence[Group], out_dir: Path, formats: Sequence[str] = ("png",)
) -> list[Path]:
    """One figure per Figure, in each of `formats`: error bars = 95 % CI (see Figure.log_scale), a dot per seed
    (a value of 0 on a log axis is not drawn). Nothing when no group exists."""
    if not groups:
        return []
    # lazy: matplotlib takes 0.4 s to import (a sweep with --plots none never needs it)
    from metrics.plots import new_figure, save_formats

    paths = []
    for fig_data in figures(study, groups):
        metric = fig_data.metric
        fig, axes = new_figure(7.0, 4.2)
        ax = axes[0, 0]
        for i, curve in enumerate(fig_data.curves):
            x, centre, low, high = (np.array(col) for col in zip(*curve.points, strict=True))
            colour = f"C{i % 10}"
            ax.errorbar(
                x,
                centre,
                yerr=[centre - low, high - centre],
                label=curve.label,
                marker="o",
                capsize=3,
                color=colour,
            )
            if curve.dots:
                dx, dy = (np.array(col) for col in zip(*curve.dots, strict=True))
                keep = dy > 0 if fig_data.log_scale else np.ones(len(dy), dtype=bool)
                ax.plot(dx[keep], dy[keep], ".", color=colour, ms=4, alpha=0.45)
        if fig_data.x_ticks:
            ticks = fig_data.x_ticks
            ax.set_xticks(range(len(ticks)), ticks, rotation=30 if len(ticks) > 4 else 0)
        if fig_data.log_scale:
            ax.set_yscale("log")
        what = (
            "geometric mean, 95 % CI over seeds, log scale"
            if fig_data.log_scale
            else "mean, 95 % CI over seeds"
        )
        ax.set_xlabel(fig_data.x_col)
        ax.set_ylabel(metric)
        ax.set_title(f"{study.name}: {metric} ({what}; dots: seeds)", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        paths += save_formats(fig, out_dir / metric, formats)
    return paths
