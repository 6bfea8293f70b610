"""Alibaba 2017 batch_task loader: the README's counts, the CPU->GPU mapping, detection and located errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from config import WorkloadConfig
from workloads.traces import load_trace

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
BATCH = TRACES / "alibaba-v2017-batch-task" / "batch_task.csv.gz"
needs_batch = pytest.mark.skipif(not BATCH.is_file(), reason=f"shared trace copy absent: {BATCH}")


def _load(path, kind="alibaba", **kw):
    return load_trace(WorkloadConfig(workload_type=kind, workload_path=str(path), **kw))


@needs_batch
def test_facts_of_the_shared_table():
    t = _load(BATCH, cpu_job_gpus=2)
    r = t.workload.report
    assert r["format"] == "alibaba-2017"
    assert r["rows_read"] == 80_553 and r["distinct_jobs"] == 12_951
    assert r["status_counts_all_rows"] == {
        "Terminated": 67_013,
        "Failed": 1126,
        "Running": 3567,
        "Waiting": 8847,
    }
    assert r["filtered"]["never started"] == 8847
    assert r["jobs_loaded"] + sum(r["filtered"].values()) == 80_553
    assert r["gpu_count_histogram"] == {2: r["jobs_loaded"]}
    assert r["mapping"]["gpus"].startswith("cpu_job_gpus=2 per task")
    assert r["censored_at_trace_end"] > 0
    assert all(j.arrival_s >= 0 and j.runtime_s > 0 for j in t.workload.jobs)
    terminated = sorted(j.runtime_s for j in t.workload.jobs if j.trace_status == "Terminated")
    assert 20 <= terminated[len(terminated) // 2] <= 40  # README: median 28 s for create > 0


def test_small_table_mapping(tmp_path):
    path = tmp_path / "batch_task.csv"
    path.write_text(
        "100,160,1,11,2,Terminated,50,0.01\n"
        "110,0,1,12,1,Waiting,,\n"
        "-5,40,2,13,1,Terminated,100,0.02\n"  # created before the trace period
        "120,130,2,14,4,Failed,100,0.02\n"
        "150,155,3,15,1,Running,100,0.02\n"  # still running: replayed to the latest timestamp (160)
    )
    t = _load(tmp_path, kind="alibaba-2017")
    jobs = {j.job_id: j for j in t.workload.jobs}
    assert set(jobs) == {"11", "14", "15"}
    assert (jobs["11"].arrival_s, jobs["11"].runtime_s, jobs["11"].num_gpus) == (0.0, 60.0, 1)
    assert jobs["14"].trace_status == "Failed" and jobs["15"].runtime_s == 10.0
    assert jobs["15"].trace_status == "Running"
    failed_out = _load(path, kind="alibaba-2017", exclude_failed=True).workload
    assert {j.job_id for j in failed_out.jobs} == {"11", "15"}


def test_errors_are_located(tmp_path):
    path = tmp_path / "batch_task.csv"
    path.write_text("100,160,1,11,2,Terminated,50,0.01\n100,160,1,12,2,Exploded,50,0.01\n")
    with pytest.raises(ValueError, match=r"batch_task\.csv:2: unknown status"):
        _load(path, kind="alibaba-2017")
    path.write_text("100,160,1,11,2,Terminated,50,0.01\n100,1x0,1,12,2,Terminated,50,0.01\n")
    with pytest.raises(ValueError, match=r"batch_task\.csv:2: column 'modify_timestamp'"):
        _load(path, kind="alibaba-2017")
    path.write_text("100,160,1,11,2,Terminated,50\n")
    with pytest.raises(ValueError, match=r"batch_task\.csv:1: expected 8 columns"):
        _load(path, kind="alibaba-2017")
