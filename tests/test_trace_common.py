"""The filters, report and cluster choices every trace format shares, driven through small files we write."""

from __future__ import annotations

import gzip
from dataclasses import replace

import pytest

from config import WorkloadConfig
from sim.catalog import REFERENCE_TYPE
from sim.load import offered_load_factor
from workloads.traces import TRACE_FORMATS, load_trace, load_trace_cluster
from workloads.traces.common import split_fraction

ITP_ROWS = [  # job_id, submission_time (s), duration (s), num_gpu
    ("a", 100, 50, 1),
    ("b", 200, 60, 2),
    ("c", 300, 0, 1),  # zero runtime
    ("d", 300, 70, 0),  # zero GPUs
    ("e", 400, 80, 8),
    ("f", 500, 90, 1),
]


def _itp(tmp_path, rows=ITP_ROWS, name="cluster01.csv"):
    path = tmp_path / name
    path.write_text(
        "job_id,submission_time,duration,num_gpu\n" + "".join(f"{r[0]},{r[1]},{r[2]},{r[3]}\n" for r in rows)
    )
    return path


def _cfg(path, **kw) -> WorkloadConfig:
    return WorkloadConfig(workload_type="itp", workload_path=str(path), **kw)


def test_rebasing_counts_and_report(tmp_path):
    t = load_trace(_cfg(_itp(tmp_path)))
    jobs = t.workload.jobs
    assert [j.job_id for j in jobs] == ["a", "b", "e", "f"]
    assert [j.arrival_s for j in jobs] == [0.0, 100.0, 300.0, 400.0]
    r = t.workload.report
    assert r["rows_read"] == 6 and r["jobs_loaded"] == 4
    assert r["filtered"]["zero GPUs"] == 1 and r["filtered"]["zero runtime"] == 1
    assert r["jobs_loaded"] + sum(r["filtered"].values()) == r["rows_read"]
    assert r["gpu_count_histogram"] == {1: 2, 2: 1, 8: 1}
    assert r["time_span_s"] == 400.0 and r["arrival_offset_s"] == 100.0
    assert r["format"] == "itp" and r["source"].endswith("cluster01.csv")
    assert t.cluster is None


def test_window_is_on_trace_time_before_rebasing_then_time_scale(tmp_path):
    t = load_trace(_cfg(_itp(tmp_path), trace_start_s=200, trace_end_s=500, time_scale=2.0))
    assert [j.job_id for j in t.workload.jobs] == ["b", "e"]
    assert [j.arrival_s for j in t.workload.jobs] == [0.0, 100.0]  # (400 - 200) / 2
    assert [j.runtime_s for j in t.workload.jobs] == [60.0, 80.0]  # runtimes are not scaled
    assert t.workload.report["filtered"]["outside window"] == 2


def test_max_jobs_keeps_the_first_by_arrival(tmp_path):
    rows = [("late", 900, 10, 1), ("early", 10, 10, 1), ("mid", 500, 10, 1)]
    t = load_trace(_cfg(_itp(tmp_path, rows), max_jobs=2))
    assert [j.job_id for j in t.workload.jobs] == ["early", "mid"]
    assert t.workload.report["filtered"]["beyond max_jobs"] == 1


def test_exclude_failed_and_status_kept(tmp_path):
    path = tmp_path / "cluster_log.csv"
    path.write_text(
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,duration,queue\n"
        "1,u,vc,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,2020-06-09 18:42:01,60,0\n"
        "2,u,vc,4,16,1,FAILED,2020-06-09 18:41:27,2020-06-09 18:41:30,2020-06-09 18:45:36,246,3\n"
        "3,u,vc,1,1,1,CANCELLED,2020-06-09 18:41:28,2020-06-09 18:41:28,2020-06-09 18:51:28,600,0\n"
    )
    kept = load_trace(WorkloadConfig(workload_type="helios", workload_path=str(path)))
    assert [j.trace_status for j in kept.workload.jobs] == ["COMPLETED", "FAILED", "CANCELLED"]
    cfg = WorkloadConfig(workload_type="helios", workload_path=str(path), exclude_failed=True)
    dropped = load_trace(cfg)
    assert [j.job_id for j in dropped.workload.jobs] == ["1"]
    assert dropped.workload.report["filtered"]["failed/killed excluded"] == 2


def test_default_cluster_fits_the_largest_job_and_targets_the_load(tmp_path):
    rows = [(f"j{i}", i * 100, 1000, 1) for i in range(50)] + [("big", 5000, 10, 64)]
    t = load_trace(_cfg(_itp(tmp_path, rows)))
    spec = t.default_cluster
    assert {n.gpu_type for n in spec.nodes} == {REFERENCE_TYPE}
    assert all(n.num_gpus == 8 for n in spec.nodes)
    assert spec.num_gpus >= 2 * 64  # one gang never needs the whole default cluster
    assert offered_load_factor(t.workload.jobs, spec.num_gpus) <= 0.8
    assert "default cluster" in t.cluster_note
    busy = [(f"j{i}", i, 10_000, 4) for i in range(100)]
    t2 = load_trace(_cfg(_itp(tmp_path, busy, "cluster02.csv")))
    load = offered_load_factor(t2.workload.jobs, t2.default_cluster.num_gpus)
    assert 0.8 * 0.9 < load <= 0.8  # sized by load, within one node of the target


def test_round_fractional_is_opt_in(tmp_path):
    pods = tmp_path / "pods.csv"
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
        "p0,1000,1024,1,250,,LS,Succeeded,0,100,10\n"
        "p1,1000,1024,2,1000,,BE,Failed,5,200,20\n"
    )
    shared = load_trace(WorkloadConfig(workload_type="alibaba", workload_path=str(pods))).workload
    assert [(j.num_gpus, j.gpu_milli) for j in shared.jobs] == [(1, 250), (2, 1000)]
    cfg = WorkloadConfig(workload_type="alibaba", workload_path=str(pods), round_fractional=True)
    rounded = load_trace(cfg).workload
    assert [(j.num_gpus, j.gpu_milli) for j in rounded.jobs] == [(1, 1000), (2, 1000)]
    assert rounded.report["fractional_rounded_up"] == 1


def test_split_fraction():
    num, milli, rounded = split_fraction([0.5, 1.0, 1.5, 8.0, 0.0001])
    assert num.tolist() == [1, 1, 2, 8, 1]
    assert milli.tolist() == [500, 1000, 1000, 1000, 1]
    assert rounded == 1


def test_bad_options_and_paths(tmp_path):
    with pytest.raises(ValueError, match="unknown trace type"):
        load_trace(WorkloadConfig(workload_type="csv", workload_path=str(tmp_path)))
    with pytest.raises(ValueError, match="no such file"):
        load_trace(_cfg(tmp_path / "missing.csv"))
    assert "alibaba-2017" in TRACE_FORMATS and "swf" in TRACE_FORMATS


def test_truncated_gzip_names_the_file(tmp_path):
    data = gzip.compress(("job_id,submission_time,duration,num_gpu\n" + "x,1,2,1\n" * 5000).encode())
    path = tmp_path / "cluster03.csv.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"cluster03\.csv\.gz.*(truncated|corrupt)"):
        load_trace(_cfg(path))


def test_load_trace_cluster_plain_csv_and_unknown(tmp_path):
    plain = tmp_path / "nodes.csv"
    plain.write_text("node_id,gpu_type,num_gpus\nn0,A100,8\nn1,V100,4\n")
    assert load_trace_cluster(plain).num_gpus == 12
    junk = tmp_path / "junk.csv"
    junk.write_text("a,b,c\n1,2,3\n")
    with pytest.raises(ValueError, match=r"junk\.csv:1: not a recognised machine file"):
        load_trace_cluster(junk)


def test_time_scale_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="time_scale"):
        load_trace(replace(_cfg(_itp(tmp_path)), time_scale=0.0))


def test_time_scale_raises_the_load_on_the_same_default_cluster(tmp_path):
    rows = [(f"j{i}", i * 10, 5000, 2) for i in range(200)]
    path = _itp(tmp_path, rows)
    base = load_trace(_cfg(path))
    fast = load_trace(_cfg(path, time_scale=2.0))
    assert fast.default_cluster.num_gpus == base.default_cluster.num_gpus
    gpus = base.default_cluster.num_gpus
    assert offered_load_factor(fast.workload.jobs, gpus) == pytest.approx(
        2 * offered_load_factor(base.workload.jobs, gpus)
    )
