"""The profiles' published values recomputed from the trace files under ../shared/traces (read-only).

bench/fit_profiles.py fits the generator to them and tests/test_synthetic_profiles.py checks that the values
written in workloads/profiles.py are these. Each function takes the traces folder and reads only what it needs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from workloads.profile_stats import (
    count_stats,
    day_counts,
    interarrival_cv,
    runtime_stats,
    same_instant_share,
    size_stats,
)

ITP_FILES = tuple(f"cluster0{i}.csv" for i in (1, 2, 3, 4, 5, 7, 8, 9))
"""the 8 ITP clusters of the README's 'these 8' (06 and 10 are held out)"""
ARRIVAL_ROWS = (
    "burstiness",
    "count_var_over_mean",
    "daily_count_cv",
    "interarrival_cv",
    "same_instant_share",
)


def philly_runtimes_s(traces: Path) -> np.ndarray:
    return pd.read_csv(traces / "philly-partial" / "philly_runtime.csv")["runtime"].to_numpy(float)


def itp_jobs(traces: Path) -> list[pd.DataFrame]:
    """One frame per ITP cluster file (columns submission_time, duration, num_gpu)."""
    folder = traces / "microsoft-itp-elasticflow-2021"
    return [pd.read_csv(folder / f, usecols=["submission_time", "duration", "num_gpu"]) for f in ITP_FILES]


def venus_day_counts(traces: Path) -> np.ndarray:
    """Venus GPU-job submissions per 10-minute bin as (181 days, 144)."""
    path = traces / "helios-aggregates" / "Venus_cluster_throughput_10min.csv"
    return pd.read_csv(path)["submit_gpu_job"].to_numpy(float).reshape(-1, 144)


def summary_rows(traces: Path) -> dict[str, dict[str, float]]:
    """From the Acme summary (Philly) and the Helios summary (total of 4 clusters): GPUs x runtime over runtime
    and the failed and cancelled shares of jobs and of GPU time."""
    acme = pd.read_csv(traces / "published-stats" / "acmetrace_cluster_summary.csv", index_col="id")
    helios = pd.read_csv(traces / "helios-aggregates" / "helios_cluster_summary.csv", index_col="id")
    out = {}
    for name, row in (("philly", acme.loc["Philly"]), ("helios", helios.loc["total"])):
        gpu_time = row.complete_gpu_time + row.cancel_gpu_time + row.fail_gpu_time
        out[name] = {
            "runtime_weighted_mean_gpus": gpu_time / row.gpu_job_num / row.avg_run_time_gpu,
            "failed_share": row.fail_rate_gpu,
            "cancelled_share": row.cancel_rate_gpu,
            "failed_gpu_time_share": row.fail_gpu_time / gpu_time,
            "cancelled_gpu_time_share": row.cancel_gpu_time / gpu_time,
        }
    return out


def itp_arrival_rows(frames: list[pd.DataFrame]) -> dict[str, float]:
    """ARRIVAL_ROWS for ITP: the median over the clusters of each cluster's value."""
    per_cluster = []
    for f in frames:
        t_s = f["submission_time"].to_numpy(float)
        c = count_stats(day_counts(t_s))
        per_cluster.append(
            (
                c.burstiness,
                c.count_var_over_mean,
                c.daily_count_cv,
                interarrival_cv(t_s),
                same_instant_share(t_s),
            )
        )
    return dict(zip(ARRIVAL_ROWS, np.median(np.array(per_cluster), axis=0).tolist(), strict=True))


def itp_hourly_rate(frames: list[pd.DataFrame]) -> np.ndarray:
    """Submissions of all clusters by hour of submission_time mod 24 h, divided by their mean."""
    t_s = np.concatenate([f["submission_time"].to_numpy(float) for f in frames])
    counts = np.bincount(((t_s % 86_400.0) // 3600.0).astype(np.int64), minlength=24).astype(float)
    return counts / counts.mean()


def published_values(traces: Path) -> dict[str, dict[str, float]]:
    """Every value of the profiles' tables that is computed from a file here, by profile and row."""
    summaries = summary_rows(traces)
    venus = vars(count_stats(venus_day_counts(traces)))
    philly = dict(vars(runtime_stats(philly_runtimes_s(traces))), **summaries["philly"], **venus)
    helios = dict(summaries["helios"], **venus)
    frames = itp_jobs(traces)
    jobs = pd.concat(frames)
    runtime_s, gpus = jobs["duration"].to_numpy(float), jobs["num_gpu"].to_numpy(float)
    rate = itp_hourly_rate(frames)
    itp = dict(
        vars(runtime_stats(runtime_s)),
        **vars(size_stats(runtime_s, gpus)),
        **itp_arrival_rows(frames),
        peak_to_trough=float(rate.max() / rate.min()),
    )
    itp.update({k: v for k, v in summaries["philly"].items() if k.endswith("_share")})  # borrowed outcomes
    return {"philly": philly, "helios": helios, "itp": itp}
