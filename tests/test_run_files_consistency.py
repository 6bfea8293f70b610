"""A preemptive run's files checked the way a user would, from the CSVs of its folder alone (no simulator objects).

runs.csv lets anyone check that no GPU was ever over-committed; jobs.csv carries each job's
preemptions, restore overhead and the GPU types it ran on; summary.csv the totals. Each policy that may preempt
runs through `main` on one overloaded jobs CSV (long jobs of 1 to 16 GPUs and fractions of a GPU on three GPU
types), and its folder must agree with itself.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from main import main

OVERHEAD_S = 30.0


def _jobs_csv(path: Path) -> None:
    """80 jobs: arrivals 150 s apart on average, 1,000-40,000 s of work, 0.5-16 GPUs (fixed seed)."""
    rng = np.random.default_rng(7)
    arrivals = np.cumsum(rng.exponential(150.0, 80)).round()
    runtimes = np.exp(rng.uniform(np.log(1_000), np.log(40_000), 80)).round()
    gpus = rng.choice(["0.5", "1", "1", "2", "4", "8", "16"], 80)
    rows = [f"{a:.0f},{r:.0f},{g}" for a, r, g in zip(arrivals, runtimes, gpus, strict=True)]
    path.write_text("arrival_time,runtime,gpus\n" + "\n".join(rows) + "\n")


def _read(path: Path) -> list[dict]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("policy", ["srtf", "tiresias", "themis", "gavel", "las_speed"])
def test_a_preemptive_runs_files_agree_with_each_other(policy, tmp_path):
    _jobs_csv(tmp_path / "jobs_in.csv")
    out = tmp_path / "out"
    argv = ["--mode", "eval", "--algo", policy, "--workload_type", "csv", "--workload_path"]
    argv += [str(tmp_path / "jobs_in.csv"), "--cluster", "2xV100:8,1xA100:8,1xT4:4"]
    argv += ["--preempt_overhead_s", str(OVERHEAD_S), "--log_dir", str(out), "--no_progress"]
    assert main(argv) == 0
    jobs = {r["job_id"]: r for r in _read(out / "jobs.csv")}
    runs = _read(out / "runs.csv")
    gpus = {f"{n['node_id']}/{g}" for n in _read(out / "cluster.csv") for g in range(int(n["num_gpus"]))}
    (summary,) = _read(out / "summary.csv")

    # no GPU over-committed: per GPU, the shares held (jobs.csv's gpu_milli) never exceed 1,000 at any instant
    events = defaultdict(list)
    by_job = defaultdict(list)
    for r in runs:
        start, end = float(r["start_time"]), float(r["end_time"])
        assert end >= start
        by_job[r["job_id"]].append((start, end, r["gpu_type"]))
        labels = r["placement"].split(";")
        assert len(set(labels)) == len(labels) and set(labels) <= gpus
        for g in labels:
            events[g] += [
                (start, 1, int(jobs[r["job_id"]]["gpu_milli"])),
                (end, 0, -int(jobs[r["job_id"]]["gpu_milli"])),
            ]
    for g, evs in events.items():
        held = 0
        for _, _, delta in sorted(evs):  # at one instant, releases (0) before acquisitions (1)
            held += delta
            assert held <= 1000, f"{policy}: GPU {g} over-committed ({held})"

    # per job: runs back to back in time, their lengths sum to runtime_s, one run more than preemptions, the
    # overhead is what each restart paid (30 s, or less when the run was suspended before its restore ended)
    for job_id, j in jobs.items():
        assert j["status"] == "completed"
        rs = sorted(by_job[job_id])
        assert all(a[1] <= b[0] for a, b in zip(rs, rs[1:], strict=False))
        assert float(j["start_time"]) == rs[0][0] and float(j["end_time"]) == rs[-1][1]
        assert math.isclose(sum(e - s for s, e, _ in rs), float(j["runtime_s"]), rel_tol=1e-9, abs_tol=1e-3)
        assert len(rs) == int(j["preemptions"]) + 1
        paid = sum(min(e - s, OVERHEAD_S) for s, e, _ in rs[1:])
        assert math.isclose(float(j["overhead_s"]), paid, abs_tol=1e-3)
        assert math.isclose(float(j["overhead_gpu_s"]), paid * float(j["num_gpus"]), abs_tol=1e-3)
        assert j["gpu_type"] == ";".join(dict.fromkeys(t for _, _, t in rs))

    # summary totals
    total = sum(int(j["preemptions"]) for j in jobs.values())
    assert total > 0, f"{policy} never preempted: the scenario no longer tests anything"
    assert int(summary["preemptions"]) == total
    lost = sum(float(j["overhead_gpu_s"]) for j in jobs.values())
    assert math.isclose(float(summary["overhead_gpu_s"]), lost, rel_tol=1e-9, abs_tol=1e-3)
