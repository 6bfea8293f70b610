"""Helios loader, on cluster_log.csv files we write following the HeliosData README schema (the real job logs are
not obtainable here: only aggregates are shared)."""

from __future__ import annotations

import pytest

from config import WorkloadConfig
from workloads.traces import load_trace

HEADER = "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
ROWS = (
    # the README's three example rows
    "1425511,uXBbc,vcJkd,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-10 04:55:09,36848,0\n"
    "1425512,uVMrF,vchbv,4,16,1,FAILED,2020-06-09 18:41:27,2020-06-09 18:41:27,2020-06-09 18:45:36,249,0\n"
    "1425513,uzqls,vcpDC,1,1,1,CANCELLED,2020-06-09 18:41:28,2020-06-09 18:41:28,2020-06-17 14:15:21,675233,0\n"
    # a CPU job, a job cancelled before it started, a 16-GPU multi-node job that queued 60 s
    "1425514,uA,vcA,0,8,1,COMPLETED,2020-06-09 18:42:00,2020-06-09 18:42:00,2020-06-09 18:43:00,60,0\n"
    "1425515,uB,vcA,2,8,1,CANCELLED,2020-06-09 18:43:00,,2020-06-09 18:50:00,0,0\n"
    "1425516,uC,vcB,16,64,2,TIMEOUT,2020-06-09 18:44:00,2020-06-09 18:45:00,2020-06-09 19:45:00,3600,60\n"
)


def _load(path, **kw):
    return load_trace(WorkloadConfig(workload_type="helios", workload_path=str(path), **kw))


def test_mapping(tmp_path):
    path = tmp_path / "cluster_log.csv"
    path.write_text(HEADER + ROWS)
    t = _load(tmp_path)  # a directory holding cluster_log.csv
    jobs = {j.job_id: j for j in t.workload.jobs}
    assert set(jobs) == {"1425511", "1425512", "1425513", "1425516"}
    assert (jobs["1425511"].runtime_s, jobs["1425511"].num_gpus, jobs["1425511"].arrival_s) == (
        36848.0,
        1,
        0.0,
    )
    assert (jobs["1425512"].runtime_s, jobs["1425512"].trace_status) == (249.0, "FAILED")
    assert jobs["1425513"].runtime_s == 675233.0
    assert (jobs["1425516"].num_gpus, jobs["1425516"].runtime_s, jobs["1425516"].arrival_s) == (
        16,
        3600.0,
        179.0,
    )
    r = t.workload.report
    assert r["filtered"]["zero GPUs"] == 1 and r["filtered"]["never started"] == 1
    assert {j.job_id for j in _load(path, exclude_failed=True).workload.jobs} == {"1425511"}
    assert t.default_cluster.num_gpus >= 16


def test_extra_columns_are_ignored_and_running_jobs_censored(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text(
        "job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
        "1,u,vc,train,8,8,1,COMPLETED,2020-01-01 00:00:00,2020-01-01 00:00:10,2020-01-01 01:00:00,3590,10\n"
        "2,u,vc,serve,1,8,1,RUNNING,2020-01-01 00:30:00,2020-01-01 00:30:00,,,0\n"
    )
    jobs = {j.job_id: j for j in _load(path).workload.jobs}
    assert jobs["2"].trace_status == "Running" and jobs["2"].runtime_s == 1800.0


@pytest.mark.parametrize(
    ("row", "pattern"),
    [
        ("9,u,vc,1,1,1,COMPLETED,2020/06/09 18:41,2020-06-09 18:41:01,2020-06-09 18:42:01,60,0\n",
         r":3: column 'submit_time': bad time"),
        ("9,u,vc,one,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-09 18:42:01,60,0\n",
         r":3: column 'gpu_num'"),
        ("9,u,vc,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-09 18:40:01,60,0\n",
         r":3: end_time before start_time"),
    ],
)  # fmt: skip
def test_bad_rows_are_located(tmp_path, row, pattern):
    path = tmp_path / "cluster_log.csv"
    path.write_text(HEADER + ROWS.splitlines(keepends=True)[0] + row)
    with pytest.raises(ValueError, match=r"cluster_log\.csv" + pattern):
        _load(path)


def test_missing_column(tmp_path):
    path = tmp_path / "cluster_log.csv"
    path.write_text(HEADER.replace("state,", "") + "1,u,vc,1,1,1,2020-06-09 18:41:01,,,0,0\n")
    with pytest.raises(ValueError, match=r"cluster_log\.csv:1: missing column\(s\) state"):
        _load(path)
