"""Per-job and per-run scheduling metrics of one RunResult: JCT, wait, slowdowns, makespan, utilization, load.

Definitions (all times in seconds of simulated time):

- JCT = end - submit (arrival); wait = start - submit. Run-level averages and percentiles use COMPLETED jobs
  only; unfinished and rejected jobs are counted in their own columns (`unfinished`, `rejected`), never dropped
  silently. Percentiles use numpy's default (linear interpolation).
- bounded slowdown = max(1, JCT / max(runtime_actual, 10 s)) (Feitelson's bound, 10 s threshold), where
  runtime_actual is the run time on the GPU type the job got; averaged over completed jobs.
- reference slowdown = JCT / max(reference runtime, 10 s), where the reference runtime is the job's `runtime_s`
  (its duration on one A100, speed 1.0, without the multi-node factor); averaged over completed jobs as
  avg_reference_slowdown. Unlike bounded slowdown it charges a job for the slow GPU it was given (a job started
  at once on a T4, speed 0.2, has 5.0) and is not clamped at 1 (the same job on an H100 has 0.5).
- makespan = last completion - first arrival (first arrival over all jobs, rejected included); NaN if nothing
  completed.
- gpu_utilization = integral of `timeline_busy_gpus` over the window [first arrival, last completion] divided by
  (total GPUs x window length). The timeline is a step function (busy_gpus[i] holds on [t[i], t[i+1]), 0 before
  the first sample), fractional shares count as their fraction, and jobs that started but never finished count
  for the time they were running inside the window. NaN if nothing completed or the window has zero length.
- flops_utilization = integral of `timeline_busy_tflops` (busy share x peak TFLOPS of the GPU type it runs on)
  over the same window divided by (sum over all GPUs of peak TFLOPS x window length).
- gpu_utilization_arrival_window = the same integral of `timeline_busy_gpus` over [first arrival, last arrival]
  (all jobs, rejected included) divided by (total GPUs x (last arrival - first arrival)): utilization while work
  still arrives, without the drain tail after the last arrival. NaN when that window has zero length (a single
  arrival instant) or the run has no jobs.
- load_factor (offered, from the simulator) = sum(GPU demand x reference runtime) / (total GPUs x arrival
  window): load by GPU count at A100 speed. load_factor_capacity = the same work divided by the cluster's
  capacity in A100-equivalent GPUs (sum over GPUs of their speed) instead of its GPU count, i.e. load_factor x
  total GPUs / sum of speeds; on a one-type cluster it equals the load by GPU count at that type's durations
  (ITP on V100s, speed 0.5: twice load_factor). With --uniform_speed both are equal.
- avg_jct_s by priority: mean JCT of the completed jobs of each priority class present among all jobs of the
  run (NaN for a class with no completed job).
- preemptions, overhead_gpu_s (runs of a preemptive policy only, PreemptiveSummaryRow; no column otherwise): the total number of
  preemptions, and the GPU-seconds lost to restore overheads (per job: seconds spent restoring x GPU demand),
  over all jobs. For a preempted job, JCT still runs from its arrival to its final completion, wait is until its
  first start, and bounded slowdown divides by the time it held GPUs over all its runs.

Per-job values (`per_job`): wait_s is defined for every job that started (unfinished ones included); jct_s and
bounded_slowdown only for completed jobs; everything not applicable is NaN.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, fields
from operator import attrgetter
from weakref import ref

import numpy as np

from metrics.timeline import check_timeline, step_integral
from sim.job import FULL_GPU_MILLI
from sim.records import COMPLETED, REJECTED, UNFINISHED, RunResult

SLOWDOWN_BOUND_S = 10.0  # Feitelson's interactive threshold: short jobs do not inflate slowdown
STATUSES = (COMPLETED, UNFINISHED, REJECTED)

# numeric per-run metrics that compare.aggregate averages over seeds (SummaryRow field names, in order)
METRIC_FIELDS = (
    "load_factor",
    "load_factor_capacity",
    "avg_jct_s",
    "p50_jct_s",
    "p95_jct_s",
    "p99_jct_s",
    "avg_wait_s",
    "avg_bounded_slowdown",
    "makespan_s",
    "gpu_utilization",
    "flops_utilization",
    "gpu_utilization_arrival_window",
    "avg_reference_slowdown",
)


@dataclass(frozen=True)
class JobMetrics:
    """Per-job arrays aligned with `RunResult.jobs` (NaN where not applicable)."""

    submit_s: np.ndarray
    wait_s: np.ndarray
    jct_s: np.ndarray
    bounded_slowdown: np.ndarray
    reference_slowdown: np.ndarray  # JCT / max(reference runtime, 10 s); completed jobs only
    gpu_demand: np.ndarray  # GPUs requested, a fractional share counted as its fraction
    priority: np.ndarray  # int64
    completed: np.ndarray  # bool
    unfinished: np.ndarray  # bool
    rejected: np.ndarray  # bool


@dataclass(frozen=True)
class SummaryRow:
    """One (scheduler, workload, seed) run reduced to numbers; see the module docstring for definitions."""

    scheduler: str
    workload: str
    seed: int
    num_jobs: int
    completed: int
    rejected: int
    unfinished: int
    load_factor: float
    avg_jct_s: float
    p50_jct_s: float
    p95_jct_s: float
    p99_jct_s: float
    avg_wait_s: float
    avg_bounded_slowdown: float
    makespan_s: float
    gpu_utilization: float
    flops_utilization: float
    gpu_utilization_arrival_window: float
    avg_reference_slowdown: float
    load_factor_capacity: float
    avg_jct_s_by_priority: tuple[tuple[int, float], ...] = ()
    """(priority, mean JCT of its completed jobs), sorted by priority; written as columns avg_jct_s_prio{p}"""


@dataclass(frozen=True)
class PreemptiveSummaryRow(SummaryRow):
    """The summary of a run of a preemptive policy: a SummaryRow plus its preemption totals (written as the
    columns PREEMPTION_SUMMARY after the priority columns, only in files holding such a row)."""

    preemptions: int = 0
    """total preemptions over all jobs"""
    overhead_gpu_s: float = 0.0
    """GPU-seconds lost to restore overheads over all jobs"""


PREEMPTION_SUMMARY = ("preemptions", "overhead_gpu_s")


@dataclass(frozen=True)
class EnergySummaryRow(SummaryRow):
    """The SummaryRow of a run with a power model (--power): also its energy figures."""

    energy: tuple[tuple[str, float], ...] = ()
    """(name, value) of metrics/energy.py's ENERGY_FIELDS, written as columns of those names after every other
    column (a plain SummaryRow has none, so runs without a power model keep their exact columns)"""

    @classmethod
    def of(cls, row: SummaryRow, energy: tuple[tuple[str, float], ...]) -> SummaryRow:
        """`row` with `energy` (a PreemptiveSummaryRow keeps its preemption totals)."""
        if isinstance(row, PreemptiveSummaryRow):
            return PreemptiveEnergySummaryRow(**_field_values(row), energy=energy)
        return cls(**_field_values(row), energy=energy)


@dataclass(frozen=True)
class PreemptiveEnergySummaryRow(PreemptiveSummaryRow):
    """A PreemptiveSummaryRow with energy figures (a preemptive policy run with --power)."""

    energy: tuple[tuple[str, float], ...] = ()


def _field_values(row: SummaryRow) -> dict:
    return {f.name: getattr(row, f.name) for f in dataclasses.fields(row)}


def energy_of(row: SummaryRow) -> tuple[tuple[str, float], ...]:
    """A row's energy figures; () for a run without a power model."""
    return getattr(row, "energy", ())


def check_result(result: RunResult) -> None:
    """Raise ValueError if the per-job arrays are not aligned with the jobs or a status is unknown."""
    n = len(result.jobs)
    for name in ("start_s", "end_s", "runtime_actual_s", "gpu_type", "placement", "status", "reject_reason"):
        if len(getattr(result, name)) != n:
            raise ValueError(f"RunResult.{name} has {len(getattr(result, name))} entries for {n} jobs")
    unknown = sorted(set(result.status) - set(STATUSES))
    if unknown:
        raise ValueError(f"unknown job status {unknown}; expected one of {STATUSES}")
    for name in ("timeline_busy_gpus", "timeline_busy_tflops", "timeline_queue_len"):
        check_timeline(np.asarray(result.timeline_t_s), np.asarray(getattr(result, name)), name)


def per_job(result: RunResult) -> JobMetrics:
    """Wait, JCT and bounded slowdown of every job (see the module docstring). Read-only arrays, computed once
    per result: a run's summary, jobs.csv and fairness each ask (its last result is remembered, `_last_per_job`;
    a RunResult never changes)."""
    last_result, last = _last_per_job
    if last_result is not None and last_result() is result:
        return last
    m = _per_job(result)
    for a in dataclasses.astuple(m):
        a.flags.writeable = False
    _last_per_job[:] = [ref(result), m]
    return m


_last_per_job: list = [None, None]
"""(weak reference to the last result per_job was asked about, its JobMetrics)"""


def _per_job(result: RunResult) -> JobMetrics:
    check_result(result)
    jobs = result.jobs
    n = len(jobs)
    submit_s = np.fromiter(map(attrgetter("arrival_s"), jobs), dtype=float, count=n)
    # Job.gpu_demand (num_gpus x milli / 1000) per array: both products are exact integers, so each quotient is
    # the same correctly rounded float as the property's
    gpu_demand = (
        np.fromiter(map(attrgetter("num_gpus"), jobs), dtype=np.int64, count=n)
        * np.fromiter(map(attrgetter("gpu_milli"), jobs), dtype=np.int64, count=n)
        / FULL_GPU_MILLI
    )
    priority = np.fromiter(map(attrgetter("priority"), jobs), dtype=np.int64, count=n)
    status = np.asarray(result.status, dtype=object)
    completed, unfinished, rejected = (status == s for s in STATUSES)
    start_s = np.asarray(result.start_s, dtype=float)
    end_s = np.asarray(result.end_s, dtype=float)
    runtime_s = np.asarray(result.runtime_actual_s, dtype=float)
    if not np.all(np.isfinite(start_s[completed]) & np.isfinite(end_s[completed])):
        raise ValueError("a completed job has a NaN start_s or end_s")

    wait_s = start_s - submit_s  # NaN where never started
    jct_s = np.where(completed, end_s - submit_s, np.nan)
    with np.errstate(invalid="ignore"):
        slowdown = np.maximum(1.0, jct_s / np.maximum(runtime_s, SLOWDOWN_BOUND_S))
    slowdown = np.where(completed, slowdown, np.nan)  # np.maximum(1, NaN) is NaN, kept explicit
    reference_s = np.fromiter(map(attrgetter("runtime_s"), jobs), dtype=float, count=n)
    reference_slowdown = jct_s / np.maximum(reference_s, SLOWDOWN_BOUND_S)  # NaN where not completed
    return JobMetrics(
        submit_s,
        wait_s,
        jct_s,
        slowdown,
        reference_slowdown,
        gpu_demand,
        priority,
        completed,
        unfinished,
        rejected,
    )


def _mean(x: np.ndarray) -> float:
    return float(np.mean(x)) if len(x) else float("nan")


def _percentile(x: np.ndarray, q: float) -> float:
    return float(np.percentile(x, q)) if len(x) else float("nan")


def capacity_load_factor(result: RunResult) -> float:
    """The offered load relative to the cluster's capacity in A100-equivalent GPUs (sum of GPU speeds):
    result.load_factor x total GPUs / sum of speeds (see the module docstring); NaN for a cluster of no GPUs."""
    capacity_gpus = sum(node.num_gpus * node.speed for node in result.nodes)
    if not capacity_gpus > 0:
        return float("nan")
    return float(result.load_factor) * result.total_gpus / capacity_gpus


def summarize(result: RunResult) -> SummaryRow:
    """Reduce one run to a SummaryRow (empty or all-rejected runs give NaN metrics and correct counts)."""
    m = per_job(result)
    jct_s = m.jct_s[m.completed]
    nan = float("nan")
    makespan_s = gpu_util = flops_util = nan
    if jct_s.size:
        first_arrival_s = float(m.submit_s.min())
        last_completion_s = float(np.asarray(result.end_s, dtype=float)[m.completed].max())
        makespan_s = last_completion_s - first_arrival_s
        if makespan_s > 0:
            t_s = np.asarray(result.timeline_t_s, dtype=float)
            busy_gpu_s = step_integral(t_s, result.timeline_busy_gpus, first_arrival_s, last_completion_s)
            busy_tflop = step_integral(t_s, result.timeline_busy_tflops, first_arrival_s, last_completion_s)
            gpu_util = busy_gpu_s / (result.total_gpus * makespan_s) if result.total_gpus else nan
            peak = result.total_peak_tflops
            flops_util = busy_tflop / (peak * makespan_s) if peak else nan

    arrival_util = nan
    if len(m.submit_s) and result.total_gpus:
        first_arrival_s, last_arrival_s = float(m.submit_s.min()), float(m.submit_s.max())
        if last_arrival_s > first_arrival_s:
            t_s = np.asarray(result.timeline_t_s, dtype=float)
            busy_gpu_s = step_integral(t_s, result.timeline_busy_gpus, first_arrival_s, last_arrival_s)
            arrival_util = busy_gpu_s / (result.total_gpus * (last_arrival_s - first_arrival_s))

    by_priority = tuple(
        (int(p), _mean(m.jct_s[m.completed & (m.priority == p)])) for p in np.unique(m.priority)
    )
    row = SummaryRow(
        scheduler=result.scheduler,
        workload=result.workload,
        seed=int(result.seed),
        num_jobs=len(result.jobs),
        completed=int(m.completed.sum()),
        rejected=int(m.rejected.sum()),
        unfinished=int(m.unfinished.sum()),
        load_factor=float(result.load_factor),
        avg_jct_s=_mean(jct_s),
        p50_jct_s=_percentile(jct_s, 50),
        p95_jct_s=_percentile(jct_s, 95),
        p99_jct_s=_percentile(jct_s, 99),
        avg_wait_s=_mean(m.wait_s[m.completed]),
        avg_bounded_slowdown=_mean(m.bounded_slowdown[m.completed]),
        makespan_s=makespan_s,
        gpu_utilization=gpu_util,
        flops_utilization=flops_util,
        gpu_utilization_arrival_window=arrival_util,
        avg_reference_slowdown=_mean(m.reference_slowdown[m.completed]),
        load_factor_capacity=capacity_load_factor(result),
        avg_jct_s_by_priority=by_priority,
    )
    if not result.preemptive:
        return row
    overhead_gpu_s = float(np.sum(np.asarray(result.overhead_s, dtype=float) * m.gpu_demand))
    return PreemptiveSummaryRow(
        **{f.name: getattr(row, f.name) for f in fields(SummaryRow)},
        preemptions=int(np.sum(result.preemptions)),
        overhead_gpu_s=overhead_gpu_s,
    )
