"""Comparison of schedulers over seeds: per-scheduler mean and std of every summary metric, as rows, CSV and table.

std is the sample standard deviation over seeds (ddof=1), NaN when there is a single seed. Means and stds are
plain (not NaN-skipping): a seed whose metric is NaN (e.g. nothing completed) makes that aggregate NaN rather
than silently averaging over fewer seeds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from metrics.csv_table import Table, value_cells
from metrics.summary import METRIC_FIELDS, SummaryRow, energy_of
from metrics.t_quantile import t975
from metrics.writers import PRIORITY_COLUMN
from sim.records import RunResult


@dataclass(frozen=True, slots=True)
class MeanStd:
    mean: float
    std: float  # sample std over seeds (ddof=1); NaN for one seed


@dataclass(frozen=True)
class AggregateRow:
    """One scheduler on one workload, aggregated over its seeds (field names match SummaryRow's)."""

    scheduler: str
    workload: str
    n_seeds: int
    total_jobs: int
    total_completed: int
    total_unfinished: int
    total_rejected: int
    load_factor: MeanStd
    avg_jct_s: MeanStd
    p50_jct_s: MeanStd
    p95_jct_s: MeanStd
    p99_jct_s: MeanStd
    avg_wait_s: MeanStd
    avg_bounded_slowdown: MeanStd
    makespan_s: MeanStd
    gpu_utilization: MeanStd
    flops_utilization: MeanStd
    gpu_utilization_arrival_window: MeanStd
    avg_reference_slowdown: MeanStd
    load_factor_capacity: MeanStd
    avg_jct_s_by_priority: tuple[tuple[int, MeanStd], ...] = ()
    energy: tuple[tuple[str, MeanStd], ...] = ()
    """(name, mean/std) of each energy metric its runs have (SummaryRow.energy); () without a power model"""


def _mean_std(values: Sequence[float]) -> MeanStd:
    x = np.asarray(values, dtype=float)
    std = float(np.std(x, ddof=1)) if len(x) > 1 else float("nan")
    return MeanStd(float(np.mean(x)), std)


def aggregate(rows: Sequence[SummaryRow]) -> list[AggregateRow]:
    """Group rows by (scheduler, workload) in order of first appearance and reduce each group over its seeds.

    A priority class is aggregated over the seeds that contain it (NaN for seeds where it had no completed job).
    Raises ValueError if a (scheduler, workload) repeats a seed.
    """
    groups: dict[tuple[str, str], list[SummaryRow]] = {}
    for r in rows:
        groups.setdefault((r.scheduler, r.workload), []).append(r)
    out = []
    for (scheduler, workload), group in groups.items():
        seeds = [r.seed for r in group]
        if len(set(seeds)) != len(seeds):
            raise ValueError(f"{scheduler} on {workload}: repeated seeds {sorted(seeds)}")
        priorities = sorted({p for r in group for p, _ in r.avg_jct_s_by_priority})
        by_prio = tuple(
            (p, _mean_std([v for r in group for q, v in r.avg_jct_s_by_priority if q == p]))
            for p in priorities
        )
        out.append(
            AggregateRow(
                scheduler=scheduler,
                workload=workload,
                n_seeds=len(group),
                total_jobs=sum(r.num_jobs for r in group),
                total_completed=sum(r.completed for r in group),
                total_unfinished=sum(r.unfinished for r in group),
                total_rejected=sum(r.rejected for r in group),
                avg_jct_s_by_priority=by_prio,
                energy=tuple(
                    (name, _mean_std([dict(energy_of(r)).get(name, np.nan) for r in group]))
                    for name in dict.fromkeys(n for r in group for n, _ in energy_of(r))
                ),
                **{name: _mean_std([getattr(r, name) for r in group]) for name in METRIC_FIELDS},
            )
        )
    return out


def compare_table(agg: Sequence[AggregateRow]) -> Table:
    """Aggregates as a table: counts, then {metric}_mean, {metric}_std per metric, then per-priority JCT."""
    priorities = sorted({p for a in agg for p, _ in a.avg_jct_s_by_priority})
    head = [
        "scheduler",
        "workload",
        "n_seeds",
        "total_jobs",
        "total_completed",
        "total_unfinished",
        "total_rejected",
    ]
    columns: dict[str, np.ndarray | list[str]] = {c: value_cells([getattr(a, c) for a in agg]) for c in head}

    def add(name: str, values: list[MeanStd]) -> None:
        columns[f"{name}_mean"] = np.asarray([ms.mean for ms in values], dtype=float)
        columns[f"{name}_std"] = np.asarray([ms.std for ms in values], dtype=float)

    missing = MeanStd(np.nan, np.nan)
    for name in METRIC_FIELDS:
        add(name, [getattr(a, name) for a in agg])
    for p in priorities:
        add(PRIORITY_COLUMN.format(p), [dict(a.avg_jct_s_by_priority).get(p, missing) for a in agg])
    for name in dict.fromkeys(n for a in agg for n, _ in a.energy):  # only with a power model
        add(name, [dict(a.energy).get(name, missing) for a in agg])
    return Table(list(columns), columns)


def write_compare_csv(agg: Sequence[AggregateRow], path: str | Path) -> Path:
    """Write compare.csv (columns of `compare_table`); returns the path."""
    return compare_table(agg).write(path)


def _fmt(ms: MeanStd, digits: int, width: int) -> str:
    if np.isnan(ms.mean):
        return "-".rjust(width)
    text = f"{ms.mean:.{digits}f}"
    if not np.isnan(ms.std):
        text += f"±{ms.std:.{digits}f}"
    return text.rjust(width)


def format_table(agg: Sequence[AggregateRow]) -> str:
    """A fixed-width text table, one line per (scheduler, workload): mean±std over seeds ('-' for NaN).

    Columns: avg/p95 JCT, avg wait, bounded and reference slowdown, GPU utilization within the arrival window
    ("util arr win") and over the makespan ("GPU util"), job counts."""
    workloads = {a.workload for a in agg}
    names = [a.scheduler if len(workloads) <= 1 else f"{a.scheduler} [{a.workload}]" for a in agg]
    name_w = max([len("scheduler"), *map(len, names)])
    header = (
        f"{'scheduler':<{name_w}}  {'seeds':>5}  {'avg JCT (s)':>21}  {'p95 JCT (s)':>21}  {'avg wait (s)':>21}"
        f"  {'bnd slowdown':>15}  {'ref slowdown':>15}  {'util arr win':>13}  {'GPU util':>13}  {'done/unfin/rej':>20}"
    )
    with_energy = any(a.energy for a in agg)  # power model runs add facility kWh and cost
    if with_energy:
        header += f"  {'facility kWh':>21}  {'cost (EUR)':>21}"
    lines = [header, "-" * len(header)]
    for name, a in zip(names, agg, strict=True):
        counts = f"{a.total_completed}/{a.total_unfinished}/{a.total_rejected}"
        lines.append(
            f"{name:<{name_w}}  {a.n_seeds:>5}  {_fmt(a.avg_jct_s, 1, 21)}  {_fmt(a.p95_jct_s, 1, 21)}"
            f"  {_fmt(a.avg_wait_s, 1, 21)}  {_fmt(a.avg_bounded_slowdown, 2, 15)}"
            f"  {_fmt(a.avg_reference_slowdown, 2, 15)}  {_fmt(a.gpu_utilization_arrival_window, 3, 13)}"
            f"  {_fmt(a.gpu_utilization, 3, 13)}  {counts:>20}"
            + (
                f"  {_fmt(dict(a.energy).get('facility_energy_kwh', MeanStd(np.nan, np.nan)), 1, 21)}"
                f"  {_fmt(dict(a.energy).get('cost_eur', MeanStd(np.nan, np.nan)), 2, 21)}"
                if with_energy
                else ""
            )
        )
    return "\n".join(lines)


def assert_same_jobs(results: Sequence[RunResult]) -> None:
    """Raise ValueError unless every result scored the same jobs in the same order.

    Same job ids in the same order, and the same arrival, reference runtime and GPU demand for each, so a
    comparison never mixes job sets (e.g. two seeds of a generator that both number jobs 0..N-1).
    """
    if not results:
        return
    ref = results[0]
    ref_ids = [j.job_id for j in ref.jobs]
    ref_keys = [(j.arrival_s, j.runtime_s, j.gpu_demand) for j in ref.jobs]
    for other in results[1:]:
        ids = [j.job_id for j in other.jobs]
        label = f"{other.scheduler} (seed {other.seed}) vs {ref.scheduler} (seed {ref.seed})"
        if ids != ref_ids:
            if len(ids) != len(ref_ids):
                raise ValueError(f"different job sets: {label}: {len(ids)} jobs vs {len(ref_ids)}")
            i = next(k for k, (a, b) in enumerate(zip(ids, ref_ids, strict=True)) if a != b)
            raise ValueError(f"different job ids: {label}: job #{i} is {ids[i]!r} vs {ref_ids[i]!r}")
        keys = [(j.arrival_s, j.runtime_s, j.gpu_demand) for j in other.jobs]
        if keys != ref_keys:
            i = next(k for k, (a, b) in enumerate(zip(keys, ref_keys, strict=True)) if a != b)
            raise ValueError(
                f"same ids but different jobs: {label}: job {ids[i]!r} (arrival_s, runtime_s, gpu_demand) "
                f"{keys[i]} vs {ref_keys[i]}"
            )


@dataclass(frozen=True)
class PairedDiff:
    """One policy's difference from the baseline policy on one metric and workload, seed by seed (policy -
    baseline on the same workload and seed), with the mean and the half-width of its 95 % t-interval (NaN for
    one seed)."""

    scheduler: str
    baseline: str
    metric: str
    seeds: tuple[int, ...]
    diff: np.ndarray
    mean: float
    ci95: float
    workload: str = ""


def paired_differences(
    rows: Sequence[SummaryRow], metric: str, baseline: str | None = None
) -> list[PairedDiff]:
    """Per scheduler other than `baseline` (default: the first scheduler of `rows`) and per workload, its `metric`
    minus the baseline's on each seed both ran on that workload, in the order (scheduler, workload) first
    appear (one workload, as in a compare: one PairedDiff per scheduler)."""
    if not rows:
        return []
    baseline = rows[0].scheduler if baseline is None else baseline
    base = {(r.workload, r.seed): float(getattr(r, metric)) for r in rows if r.scheduler == baseline}
    out = []
    for name, workload in dict.fromkeys((r.scheduler, r.workload) for r in rows if r.scheduler != baseline):
        pairs = [(r.seed, float(getattr(r, metric)) - base[r.workload, r.seed]) for r in rows
                 if (r.scheduler, r.workload) == (name, workload) and (r.workload, r.seed) in base]  # fmt: skip
        if not pairs:
            continue  # the baseline never ran this workload
        diff = np.array([d for _, d in pairs], dtype=float)
        n = len(diff)
        mean = float(diff.mean())
        ci95 = float(t975(n - 1) * diff.std(ddof=1) / np.sqrt(n)) if n > 1 else np.nan
        out.append(PairedDiff(name, baseline, metric, tuple(s for s, _ in pairs), diff, mean, ci95, workload))
    return out
