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


@dataclass(frozen=True)
class Group:
    key: tuple[tuple[str, str], ...]
    """(column, value) of every grouping column: the parameters except seeds, and the scheduler"""
    n: int
    stats: tuple[tuple[str, float, float], ...]
    """(metric, mean, 95 % CI half-width)"""


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
        stats = []
        for m in metric_cols:
            vals = [_float(line.get(m, "")) for line in lines]
            if all(v is None for v in vals):
                continue
            stats.append((m, *mean_ci95([math.nan if v is None else v for v in vals])))
        groups.append(Group(key, len(lines), tuple(stats)))
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
    key_cols = [c for c, _ in groups[0].key] if groups else ["scheduler"]
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow([*key_cols, "n", *(f"{m}_{s}" for m in metrics for s in ("mean", "ci95"))])
        for g in groups:
            s = {m: (mean, ci) for m, mean, ci in g.stats}
            cells = [_num(x) for m in metrics for x in s.get(m, (math.nan, math.nan))]
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


def plot_groups(study: Study, groups: Sequence[Group], out_dir: Path) -> list[Path]:
    """One PNG per main metric: x = the first varied parameter (not a seed or the algorithm), one line per
    policy (and combination of the other parameters), error bars = 95 % CI. Nothing when no group exists."""
    if not groups:
        return []
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    key_cols = [c for c, _ in groups[0].key]
    candidates = [p for p in study.varying if p in key_cols and len({dict(g.key)[p] for g in groups}) > 1]
    x_col = candidates[0] if candidates else "scheduler"
    xs = list(dict.fromkeys(dict(g.key)[x_col] for g in groups))
    numeric = all(_float(x) is not None for x in xs)
    if numeric:
        xs = sorted(xs, key=float)
    paths = []
    for metric in MAIN_METRICS:
        if not any(m == metric for g in groups for m, _, _ in g.stats):
            continue
        fig, ax = plt.subplots(figsize=(7, 4.2))
        lines: dict[str, list[tuple[float, float, float]]] = {}
        for g in groups:
            k = dict(g.key)
            label = (
                ", ".join(f"{c}={v}" if c != "scheduler" else v for c, v in g.key if c != x_col and v)
                or metric
            )
            s = {m: (mean, ci) for m, mean, ci in g.stats}.get(metric)
            if s is None:
                continue
            x = float(k[x_col]) if numeric else float(xs.index(k[x_col]))
            lines.setdefault(label, []).append((x, s[0], 0.0 if math.isnan(s[1]) else s[1]))
        for label, pts in lines.items():
            pts.sort()
            ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], label=label,
                        marker="o", capsize=3)  # fmt: skip
        if not numeric:
            ax.set_xticks(range(len(xs)), xs, rotation=30 if len(xs) > 4 else 0)
        ax.set_xlabel(x_col)
        ax.set_ylabel(metric)
        ax.set_title(f"{study.name}: {metric} (mean, 95 % CI over seeds)", fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = out_dir / f"{metric}.png"
        fig.savefig(path, format="png", metadata={"Software": None})
        plt.close(fig)
        paths.append(path)
    return paths
