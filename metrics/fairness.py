"""Fairness metrics of one RunResult (Jain's index of slowdown, max slowdown, Themis' finish-time fairness rho),
written to each run's `fairness.csv` beside summary.csv (whose columns and bytes stay as they were).

Definitions (completed jobs only; unfinished and rejected jobs have no JCT and are counted in `completed`'s
complement, as in summary.csv):

- slowdown = bounded slowdown, max(1, JCT / max(run time on the GPUs it got, 10 s)) (metrics/summary.py).
- jain_slowdown = Jain's fairness index of the jobs' slowdowns, (sum x)^2 / (n sum x^2) (Jain, Chiu and Hawe,
  "A Quantitative Measure of Fairness and Discrimination for Resource Allocation in Shared Computer Systems",
  DEC-TR-301, 1984, eq. 1): 1 when every job is slowed down equally, 1/n when one job takes all the slowdown.
- max_slowdown = the largest slowdown.
- Finish-time fairness (Mahajan et al., "Themis: Fair and Efficient GPU Cluster Scheduling", NSDI 2020, §3:
  rho = T_shared / T_independent, where T_independent is the finish time the job would have on its own 1/N share
  of the cluster, N the number of jobs contending): here T_shared = JCT and, with G the cluster's GPUs, N the
  jobs in the system when the job arrived (queued or running, itself included) and d its GPU demand (fractional
  shares as their fraction), T_independent = (its run time on the GPUs it got) x max(1, N x d / G): a 1/N share
  of G/N GPUs runs a job of d > G/N GPUs at the fraction (G/N)/d of its speed, and a smaller job at full speed.
  Its speed is the one it had (GPU type and spread as placed), so the ratio isolates the waiting and sharing, not
  the hardware. rho <= 1: the job did at least as well as on its fair share; Themis' goal is max rho small.
  Undefined (not counted) for jobs that did not complete or ran 0 s.
- avg_ftf_rho, max_ftf_rho, frac_ftf_rho_above_1 (rho > 1 + 1e-9, so float rounding of a job run at once on its
  share does not count) over the jobs where rho is defined (ftf_jobs of them).
Every value is NaN when no job completed.
"""

from __future__ import annotations

from dataclasses import astuple, dataclass, fields
from pathlib import Path

import numpy as np

from metrics.summary import per_job
from sim.records import COMPLETED, REJECTED, RunResult

RHO_TOLERANCE = 1e-9  # end - arrival in floats: a job run at once has rho 1 +- a few ulps, not above 1
FAIRNESS_COLUMNS = (
    "scheduler",
    "workload",
    "seed",
    "completed",
    "jain_slowdown",
    "max_slowdown",
    "ftf_jobs",
    "avg_ftf_rho",
    "max_ftf_rho",
    "frac_ftf_rho_above_1",
)


@dataclass(frozen=True)
class FairnessRow:
    """One run's fairness metrics (see the module docstring); fields in FAIRNESS_COLUMNS order."""

    scheduler: str
    workload: str
    seed: int
    completed: int
    jain_slowdown: float
    max_slowdown: float
    ftf_jobs: int
    avg_ftf_rho: float
    max_ftf_rho: float
    frac_ftf_rho_above_1: float


assert tuple(f.name for f in fields(FairnessRow)) == FAIRNESS_COLUMNS


def jain_index(x: np.ndarray) -> float:
    """(sum x)^2 / (n sum x^2); NaN for no values or all zeros."""
    x = np.asarray(x, dtype=float)
    square_sum = float(np.sum(x * x))
    if not len(x) or square_sum == 0.0:
        return float("nan")
    return float(np.sum(x)) ** 2 / (len(x) * square_sum)


def jobs_in_system_at_arrival(result: RunResult) -> np.ndarray:
    """Per job: accepted jobs that had arrived by its arrival and had not finished then (itself included).

    A job finishing exactly at another's arrival instant is no longer in the system (completions and arrivals
    of one instant: the finished one has left). Rejected jobs never enter; jobs never finished stay in."""
    arrival = per_job(result).submit_s
    accepted = np.asarray(result.status, dtype=object) != REJECTED
    end = np.where(np.isnan(result.end_s), np.inf, np.asarray(result.end_s, dtype=float))
    arr_sorted = np.sort(arrival[accepted])
    end_sorted = np.sort(end[accepted])
    arrived = np.searchsorted(arr_sorted, arrival, side="right")
    left = np.searchsorted(end_sorted, arrival, side="right")
    return (
        arrived - left + np.where(accepted, 0, 1)
    )  # a rejected job counts itself (its rho is undefined anyway)


def ftf_rho(result: RunResult) -> np.ndarray:
    """Per job: Themis' finish-time fairness rho (see the module docstring); NaN where undefined."""
    m = per_job(result)
    runtime_s = np.asarray(result.runtime_actual_s, dtype=float)
    n_sys = jobs_in_system_at_arrival(result)
    share = np.maximum(1.0, n_sys * m.gpu_demand / result.total_gpus) if result.total_gpus else np.nan
    t_independent_s = runtime_s * share
    ok = m.completed & (runtime_s > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(ok, m.jct_s / t_independent_s, np.nan)


def fairness(result: RunResult) -> FairnessRow:
    """The run's FairnessRow."""
    m = per_job(result)
    slow = m.bounded_slowdown[m.completed]
    rho = ftf_rho(result)
    rho = rho[~np.isnan(rho)]
    nan = float("nan")
    return FairnessRow(
        scheduler=result.scheduler,
        workload=result.workload,
        seed=int(result.seed),
        completed=int(np.sum(np.asarray(result.status, dtype=object) == COMPLETED)),
        jain_slowdown=jain_index(slow),
        max_slowdown=float(slow.max()) if slow.size else nan,
        ftf_jobs=int(rho.size),
        avg_ftf_rho=float(rho.mean()) if rho.size else nan,
        max_ftf_rho=float(rho.max()) if rho.size else nan,
        frac_ftf_rho_above_1=float(np.mean(rho > 1.0 + RHO_TOLERANCE)) if rho.size else nan,
    )


def write_fairness_csv(rows: list[FairnessRow], path: str | Path) -> Path:
    """fairness.csv: a header of FAIRNESS_COLUMNS and one line per row (floats with repr precision)."""
    lines = [",".join(FAIRNESS_COLUMNS)]
    for row in rows:
        lines.append(",".join(_cell(v) for v in astuple(row)))
    path = Path(path)
    path.write_text("\n".join(lines) + "\n")
    return path


def _cell(v) -> str:
    if isinstance(v, float):
        return "" if np.isnan(v) else repr(v)
    return str(v)
