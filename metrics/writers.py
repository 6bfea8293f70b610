"""CSV files of a run: jobs.csv (one row per job), runs.csv (one row per execution interval), cluster.csv (one
row per node) and summary.csv (one per run).

Output is deterministic: the same inputs give byte-identical files (fixed column order, `\\n` line ends, floats
written with csv_table.FLOAT_FORMAT, NaN and not-applicable fields written as empty cells).

jobs.csv columns: job_id, submit_time, start_time, end_time, num_gpus, gpu_type, placement, wait_s, jct_s,
runtime_s, bounded_slowdown, status, priority, gpu_milli, gpu_mem_gb, trace_status, reject_reason. Times are
seconds of simulated time. `num_gpus` is the GPU demand with a fractional share written as its fraction (a job
asking 500 milli-GPU has num_gpus 0.5; `gpu_milli` keeps the raw request). `runtime_s` is the actual run time on
the GPU type the job got (empty if it never started). `wait_s` is filled for every job that started (unfinished
ones too); `jct_s` and `bounded_slowdown` only for completed jobs. A run whose jobs have job types (--job_types) has one more column, `job_type`, right after
those. A run of a preemptive policy (or one in which a job was preempted) adds PREEMPTION_COLUMNS at the end: `preemptions` (times suspended), `overhead_s` (seconds
spent restoring after preemptions, holding GPUs without doing work) and `overhead_gpu_s` (the same x its GPU
demand: GPU-seconds lost); its `gpu_type` lists the types of its runs in order (`;`-joined, no repeats),
`placement` is its last run's, `runtime_s` the time it held GPUs over all runs. Other runs' files are unchanged.

runs.csv columns: job_id, start_time, end_time, placement, gpu_type: one row per execution interval (a job never
preempted has one), ordered by start time then job order; end_time is empty for a run still going when the
simulation ended. Enough to check independently that no GPU was ever over-committed. With a power model (--power) two
columns follow: energy_kwh and energy_cost_eur, the facility energy and its cost attributed to the job
(metrics/energy.py); summary.csv then ends with the columns of metrics/energy.py's ENERGY_FIELDS.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Sequence
from operator import attrgetter
from pathlib import Path

import numpy as np

from metrics.csv_table import Table, float_cells, value_cells
from metrics.energy import ENERGY_FIELDS, EnergyReport
from metrics.summary import (
    PREEMPTION_SUMMARY,
    EnergySummaryRow,
    PreemptiveSummaryRow,
    SummaryRow,
    energy_of,
    per_job,
)
from sim.records import RunResult

JOB_COLUMNS = (
    "job_id",
    "submit_time",
    "start_time",
    "end_time",
    "num_gpus",
    "gpu_type",
    "placement",
    "wait_s",
    "jct_s",
    "runtime_s",
    "bounded_slowdown",
    "status",
    "priority",
    "gpu_milli",
    "gpu_mem_gb",
    "trace_status",
    "reject_reason",
)
ENERGY_JOB_COLUMNS = ("energy_kwh", "energy_cost_eur")  # with a power model only (metrics/energy.py)
PREEMPTION_COLUMNS = ("preemptions", "overhead_s", "overhead_gpu_s")
RUN_COLUMNS = ("job_id", "start_time", "end_time", "placement", "gpu_type")
JOB_TYPE_COLUMN = "job_type"  # appended after JOB_COLUMNS when the run's jobs have job types (--job_types)
CLUSTER_COLUMNS = ("node_id", "gpu_type", "num_gpus", "gpu_mem_gb", "speed")
PRIORITY_COLUMN = "avg_jct_s_prio{}"


def _jobs_table(result: RunResult, energy: EnergyReport | None = None) -> Table:
    """The jobs.csv table: columns JOB_COLUMNS (+ ENERGY_JOB_COLUMNS with a power model), one row per job (rejected
    ones included), float columns already formatted as strings ("" for NaN). Use `summary.per_job` for the
    numbers themselves."""
    m = per_job(result)
    jobs = result.jobs
    n = len(jobs)
    columns = {
        "job_id": np.asarray(list(map(attrgetter("job_id"), jobs)), dtype=object),
        "submit_time": m.submit_s,
        "start_time": np.asarray(result.start_s, dtype=float),
        "end_time": np.asarray(result.end_s, dtype=float),
        "num_gpus": m.gpu_demand,
        "gpu_type": np.asarray(result.gpu_type, dtype=object),
        "placement": np.asarray(result.placement, dtype=object),
        "wait_s": m.wait_s,
        "jct_s": m.jct_s,
        "runtime_s": np.asarray(result.runtime_actual_s, dtype=float),
        "bounded_slowdown": m.bounded_slowdown,
        "status": np.asarray(result.status, dtype=object),
        "priority": m.priority,
        "gpu_milli": np.fromiter(map(attrgetter("gpu_milli"), jobs), dtype=np.int64, count=n),
        "gpu_mem_gb": np.fromiter(map(attrgetter("gpu_mem_gb"), jobs), dtype=float, count=n),
        "trace_status": np.asarray(list(map(attrgetter("trace_status"), jobs)), dtype=object),
        "reject_reason": np.asarray(result.reject_reason, dtype=object),
    }
    names = list(JOB_COLUMNS)
    if result.preemptive:
        overhead_s = np.asarray(result.overhead_s, dtype=float)
        columns["preemptions"] = np.asarray(result.preemptions, dtype=np.int64)
        columns["overhead_s"] = overhead_s
        columns["overhead_gpu_s"] = overhead_s * m.gpu_demand
        names += PREEMPTION_COLUMNS
    if energy is not None:
        columns["energy_kwh"] = energy.job_energy_kwh
        columns["energy_cost_eur"] = energy.job_cost_eur
        names += ENERGY_JOB_COLUMNS
    # runs with --job_types only: every other jobs.csv keeps its bytes
    if any(map(attrgetter("job_type"), jobs)):
        columns[JOB_TYPE_COLUMN] = np.asarray([j.job_type for j in jobs], dtype=object)
        names.insert(len(JOB_COLUMNS), JOB_TYPE_COLUMN)
    return Table(names, columns)


def write_jobs_csv(result: RunResult, path: str | Path, energy: EnergyReport | None = None) -> Path:
    """Write jobs.csv (see the module docstring for the columns); returns the path."""
    return _jobs_table(result, energy).write(path)


def write_runs_csv(result: RunResult, path: str | Path) -> Path:
    """Write runs.csv (see the module docstring for the columns); returns the path."""
    runs = result.runs
    if runs is None:
        raise ValueError("this result records no runs (RunResult.runs is None)")
    ids = list(map(attrgetter("job_id"), result.jobs))
    columns = {
        "job_id": np.asarray([ids[i] for i in runs.job.tolist()], dtype=object),
        "start_time": float_cells(runs.start_s),
        "end_time": float_cells(runs.end_s),
        "placement": np.asarray(runs.placement, dtype=object),
        "gpu_type": np.asarray(runs.gpu_type, dtype=object),
    }
    return Table(list(RUN_COLUMNS), columns).write(path)


def write_cluster_csv(result: RunResult, path: str | Path) -> Path:
    """Write cluster.csv: node_id, gpu_type, num_gpus, gpu_mem_gb, speed (one row per node), and kind when some node
    has a node kind (sim/node_kinds.py), so the file reads back as a cluster CSV with the same power figures."""
    nodes = result.nodes
    columns = {
        "node_id": value_cells([n.node_id for n in nodes]),
        "gpu_type": value_cells([n.gpu_type for n in nodes]),
        "num_gpus": np.asarray([n.num_gpus for n in nodes], dtype=np.int64),
        "gpu_mem_gb": np.asarray([n.gpu_mem_gb for n in nodes], dtype=float),
        "speed": np.asarray([n.speed for n in nodes], dtype=float),
    }
    if any(n.kind for n in nodes):
        columns["kind"] = value_cells([n.kind for n in nodes])
    return Table(list(columns), columns).write(path)


def summary_table(rows: Sequence[SummaryRow]) -> Table:
    """SummaryRows as a table: the scalar fields in declaration order, then one avg_jct_s_prio{p} column per
    priority class present in any row (sorted; empty where a row lacks that class), then, when some row is a
    PreemptiveSummaryRow, its PREEMPTION_SUMMARY columns (empty for the other rows)."""
    scalar = [f.name for f in dataclasses.fields(SummaryRow) if f.name != "avg_jct_s_by_priority"]
    priorities = sorted({p for r in rows for p, _ in r.avg_jct_s_by_priority})
    prio_cols = [PRIORITY_COLUMN.format(p) for p in priorities]
    # energy columns only when some run had a power model, so runs without one keep their exact columns
    energy_cols = list(dict.fromkeys(name for r in rows for name, _ in energy_of(r)))
    columns: dict[str, np.ndarray | list[str]] = {
        name: value_cells([getattr(r, name) for r in rows]) for name in scalar
    }
    by_prio = [dict(r.avg_jct_s_by_priority) for r in rows]
    for p, name in zip(priorities, prio_cols, strict=True):
        columns[name] = np.asarray([prio.get(p, np.nan) for prio in by_prio], dtype=float)
    names = scalar + prio_cols
    if any(
        isinstance(r, PreemptiveSummaryRow) for r in rows
    ):  # else no column: non-preemptive files unchanged
        for name in PREEMPTION_SUMMARY:
            values = [getattr(r, name) if isinstance(r, PreemptiveSummaryRow) else np.nan for r in rows]
            columns[name] = np.asarray(values, dtype=float)
            names.append(name)
    for name in energy_cols:  # only when some run had a power model
        columns[name] = np.asarray([dict(energy_of(r)).get(name, np.nan) for r in rows], dtype=float)
        names.append(name)
    return Table(names, columns)


def write_summary_csv(rows: Sequence[SummaryRow], path: str | Path) -> Path:
    """Write summary.csv, one row per run in the given order; raises ValueError on a repeated
    (scheduler, workload, seed)."""
    counts = Counter((r.scheduler, r.workload, r.seed) for r in rows)
    repeated = sorted(k for k, c in counts.items() if c > 1)
    if repeated:
        raise ValueError(f"summary rows repeat (scheduler, workload, seed): {repeated}")
    return summary_table(rows).write(path)


def summary_row_of(line: dict[str, str]) -> SummaryRow:
    """The SummaryRow one summary.csv line holds (csv.DictReader's dict; the inverse of summary_table's row, but
    for the preemption totals, which no reader needs): priority columns back into avg_jct_s_by_priority, energy
    columns (metrics/energy.py's ENERGY_FIELDS) into an EnergySummaryRow. An empty cell reads as NaN."""
    values: dict = {}
    for f in dataclasses.fields(SummaryRow):
        if f.name == "avg_jct_s_by_priority":
            continue
        text = line[f.name]
        if f.type in ("str", str):
            values[f.name] = text
        elif f.type in ("int", int):
            values[f.name] = int(text)
        else:
            values[f.name] = float(text) if text else np.nan
    prefix = PRIORITY_COLUMN.format("")
    values["avg_jct_s_by_priority"] = tuple(
        sorted(
            (int(k[len(prefix) :]), float(v) if v else np.nan)
            for k, v in line.items()
            if k.startswith(prefix)
        )
    )
    row = SummaryRow(**values)
    energy = tuple((k, float(line[k]) if line[k] else np.nan) for k in ENERGY_FIELDS if k in line)
    return EnergySummaryRow.of(row, energy) if energy else row
