"""Philly loader: the shared machine lists, and a cluster_job_log we write following the release's documented
schema (the real job log is not obtainable here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from config import WorkloadConfig
from workloads.traces import load_trace, load_trace_cluster

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
PHILLY = TRACES / "philly-partial"
needs_philly = pytest.mark.skipif(not PHILLY.is_dir(), reason=f"shared trace copy absent: {PHILLY}")


def _attempt(start, end, *machines):
    return {
        "start_time": start,
        "end_time": end,
        "detail": [{"ip": m, "gpus": [f"gpu{i}" for i in range(n)]} for m, n in machines],
    }


LOG = [
    {  # the README's example entry: two attempts on 8 GPUs
        "status": "Pass", "vc": "ee9e8c", "jobid": "application_1506638472019_14199",
        "attempts": [_attempt("2017-10-07 01:12:09", "2017-10-07 01:13:23", ("m47", 8)),
                     _attempt("2017-10-07 01:13:30", "2017-10-09 06:53:12", ("m412", 8))],
        "submitted_time": "2017-10-07 01:11:39", "user": "ce2f4c",
    },
    {  # killed, two machines
        "status": "Killed", "vc": "vc2", "jobid": "app_2",
        "attempts": [_attempt("2017-10-07 02:00:00", "2017-10-07 03:00:00", ("m1", 8), ("m2", 8))],
        "submitted_time": "2017-10-07 01:59:00", "user": "u2",
    },
    {"status": "Failed", "vc": "vc2", "jobid": "app_3", "attempts": [], "submitted_time": "2017-10-07 01:00:00",
     "user": "u3"},  # no attempts: never started
    {  # an attempt with a missing start (logging error) then a running one
        "status": "Pass", "vc": "vc3", "jobid": "app_4",
        "attempts": [_attempt(None, "2017-10-08 00:00:00", ("m3", 1)), _attempt("2017-10-09 00:00:00", None, ("m3", 2))],
        "submitted_time": "2017-10-07 23:00:00", "user": "u4",
    },
    {"status": "Failed", "vc": "vc3", "jobid": "app_5", "submitted_time": "2017-10-07 05:00:00", "user": "u5",
     "attempts": [_attempt("2017-10-07 05:00:10", "2017-10-07 05:00:20")]},  # no GPUs in detail
]  # fmt: skip


def _write(folder: Path, log=LOG) -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / "cluster_job_log"
    path.write_text(json.dumps(log, indent=4))
    return path


def _load(path, **kw):
    return load_trace(WorkloadConfig(workload_type="philly", workload_path=str(path), **kw))


@needs_philly
def test_original_machine_list():
    spec = load_trace_cluster(PHILLY / "cluster_machine_list")
    assert len(spec.nodes) == 552 and spec.num_gpus == 2490
    two = [n for n in spec.nodes if n.num_gpus == 2]
    eight = [n for n in spec.nodes if n.num_gpus == 8]
    assert len(two) == 321 and {n.gpu_mem_gb for n in two} == {12.0}
    assert len(eight) == 231 and {n.gpu_mem_gb for n in eight} == {24.0}


@needs_philly
def test_revised_machine_list():
    spec = load_trace_cluster(PHILLY / "revised_machine_list.csv")
    assert spec.num_gpus == 3205 and len(spec.nodes) == 552 - 13  # 13 machines with 0 GPUs


def test_job_log_mapping(tmp_path):
    t = _load(_write(tmp_path / "philly"))
    jobs = {j.job_id: j for j in t.workload.jobs}
    assert set(jobs) == {"application_1506638472019_14199", "app_2", "app_4"}
    first = jobs["application_1506638472019_14199"]
    assert first.num_gpus == 8 and first.trace_status == "Pass"
    assert first.runtime_s == 74 + (2 * 86400 + 5 * 3600 + 39 * 60 + 42)  # two attempts, the 7 s gap excluded
    assert (
        jobs["app_2"].num_gpus == 16
        and jobs["app_2"].runtime_s == 3600
        and jobs["app_2"].trace_status == "Killed"
    )
    # app_4: first attempt skipped (no start); the running one goes to the latest time in the log
    assert jobs["app_4"].trace_status == "Running" and jobs["app_4"].num_gpus == 2
    assert jobs["app_4"].runtime_s == 6 * 3600 + 53 * 60 + 12  # 2017-10-09 00:00:00 to 06:53:12
    r = t.workload.report
    assert r["arrival_offset_s"] == 11 * 60 + 39  # trace time origin: earliest submission (app_3, 01:00:00)
    assert first.arrival_s == 0.0 and jobs["app_2"].arrival_s == 47 * 60 + 21
    assert r["filtered"]["never started"] == 1 and r["filtered"]["zero GPUs"] == 1
    assert r["attempts_skipped_missing_time"] == 1 and r["censored_at_trace_end"] == 1
    assert t.cluster is None
    failed_out = _load(tmp_path / "philly" / "cluster_job_log", exclude_failed=True).workload
    assert "app_2" not in {j.job_id for j in failed_out.jobs}


@needs_philly
def test_machine_list_beside_the_log_is_the_cluster(tmp_path):
    folder = tmp_path / "philly"
    _write(folder)
    (folder / "cluster_machine_list").write_text((PHILLY / "cluster_machine_list").read_text())
    t = _load(folder)
    assert t.cluster is not None and t.cluster.num_gpus == 2490
    (folder / "revised_machine_list.csv").write_text((PHILLY / "revised_machine_list.csv").read_text())
    assert _load(folder).cluster.num_gpus == 3205


def test_malformed_logs(tmp_path):
    path = _write(tmp_path / "a")
    path.write_text(json.dumps(LOG, indent=4)[:-30])
    with pytest.raises(ValueError, match=r"cluster_job_log:\d+: invalid JSON"):
        _load(path)
    broken = [dict(LOG[0]), {k: v for k, v in LOG[1].items() if k != "submitted_time"}]
    path = _write(tmp_path / "b", broken)
    line = path.read_text().splitlines().index('        "jobid": "app_2",') + 1
    with pytest.raises(
        ValueError, match=rf"cluster_job_log:{line}: job #1 \(app_2\): missing key\(s\) submitted_time"
    ):
        _load(path)
    bad_time = [dict(LOG[1], submitted_time="07/10/2017 01:59")]
    with pytest.raises(ValueError, match=r"job #0 \(app_2\): bad submitted_time"):
        _load(_write(tmp_path / "c", bad_time))


def test_machine_list_errors(tmp_path):
    path = tmp_path / "cluster_machine_list"
    path.write_text("machineId, number of GPUs, single GPU mem\nm0,2, 12GB\nm1,8, 40GB\n")
    with pytest.raises(ValueError, match=r"cluster_machine_list:3: unknown Philly GPU memory 40 GB"):
        load_trace_cluster(path)
    path.write_text("machineId, number of GPUs, single GPU mem\nm0,two, 12GB\n")
    with pytest.raises(ValueError, match=r"cluster_machine_list:2: column 'number of GPUs'"):
        load_trace_cluster(path)
