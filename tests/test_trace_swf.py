"""SWF loader: header facts and job counts of the shared PWA logs, the -1 conventions, located errors."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from config import WorkloadConfig
from workloads.traces import load_trace

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
SWF = TRACES / "swf-pwa"
NASA = SWF / "NASA-iPSC-1993-3.1-cln.swf.gz"
RICC = SWF / "RICC-2010-2.swf.gz"
needs_swf = pytest.mark.skipif(not SWF.is_dir(), reason=f"shared trace copy absent: {SWF}")


def _load(path, **kw):
    return load_trace(WorkloadConfig(workload_type="swf", workload_path=str(path), **kw))


@needs_swf
def test_nasa_facts_and_header_cluster():
    t = _load(NASA)
    r = t.workload.report
    assert r["rows_read"] == int(r["swf_header"]["MaxJobs"]) == 18_239
    assert r["swf_header"]["MaxProcs"] == "128" and r["swf_header"]["MaxNodes"] == "128"
    assert r["jobs_loaded"] + sum(r["filtered"].values()) == 18_239
    assert r["filtered"]["zero runtime"] > 0  # run time 0 lines exist in the cleaned log
    assert max(j.num_gpus for j in t.workload.jobs) == 128
    assert all(j.estimate_s is None and j.trace_status == "" for j in t.workload.jobs)  # fields 9, 11 are -1
    assert r["time_span_s"] / 86400 == pytest.approx(92.0, abs=0.1)
    assert t.cluster is None
    assert len(t.default_cluster.nodes) == 128 and t.default_cluster.num_gpus == 128
    assert "MaxNodes=128" in t.cluster_note


@needs_swf
def test_ricc_full_load_matches_header():
    t = _load(RICC)  # load time: bench/bench_traces.py
    r = t.workload.report
    assert r["rows_read"] == int(r["swf_header"]["MaxJobs"]) == 447_794
    assert r["jobs_loaded"] + sum(r["filtered"].values()) == 447_794
    statuses = r["status_counts"]
    assert statuses["Completed"] <= 431_549 and statuses["Cancelled"] <= 16_245
    assert statuses["Completed"] + statuses["Cancelled"] == r["jobs_loaded"]
    assert max(j.num_gpus for j in t.workload.jobs) == 8192
    assert len(t.default_cluster.nodes) == 1024 and t.default_cluster.num_gpus == 8192
    failed_free = _load(RICC, exclude_failed=True, max_jobs=1000).workload
    assert all(j.trace_status == "Completed" for j in failed_free.jobs)


HEADER = "; Version: 2.2\n; MaxJobs: 5\n; MaxNodes: 4\n; MaxProcs: 16\n; UnixStartTime: 1000\n;\n"


def _line(job, submit, run, procs, req_procs=-1, req_time=-1, status=1):
    fields = [job, submit, 0, run, procs, -1, -1, req_procs, req_time, -1, status, 1, 1, -1, 1, -1, -1, -1]
    return " ".join(f"{v:>6}" for v in fields) + "\n"


def test_field_mapping_and_counted_unknowns(tmp_path):
    path = tmp_path / "small.swf"
    path.write_text(
        HEADER
        + _line(1, 100, 50, 4, req_time=120)
        + _line(2, 110, 60, -1, req_procs=2, status=0)  # allocated unknown -> requested
        + _line(3, 120, -1, 2)  # unknown run time
        + _line(4, 130, 70, -1)  # unknown processors
        + _line(5, 140, 80, 1, status=5)
        + _line(5, 140, 30, 1, status=2)  # partial-execution record of job 5
    )
    t = _load(path, cpu_job_gpus=2)
    jobs = {j.job_id: j for j in t.workload.jobs}
    assert set(jobs) == {"1", "2", "5"}
    assert (jobs["1"].num_gpus, jobs["1"].runtime_s, jobs["1"].estimate_s, jobs["1"].arrival_s) == (
        8,
        50.0,
        120.0,
        0.0,
    )
    assert (jobs["2"].num_gpus, jobs["2"].trace_status, jobs["2"].estimate_s) == (4, "Failed", None)
    assert jobs["5"].trace_status == "Cancelled" and jobs["5"].runtime_s == 80.0
    f = t.workload.report["filtered"]
    assert f["unknown run time"] == 1 and f["unknown processors"] == 1 and f["partial-execution record"] == 1
    assert t.default_cluster.num_gpus == 32 and len(t.default_cluster.nodes) == 4  # 16 procs x 2 GPUs
    assert t.workload.report["mapping"]["gpus"].endswith("cpu_job_gpus=2")


def test_gzip_and_header_free_logs(tmp_path):
    path = tmp_path / "bare.swf.gz"
    with gzip.open(path, "wt") as f:
        f.write(_line(1, 0, 10, 16) + _line(2, 5, 10, 40))
    t = _load(path)
    assert len(t.workload.jobs) == 2
    assert t.default_cluster.num_gpus >= 40 and "default cluster" in t.cluster_note


@pytest.mark.parametrize(
    ("bad", "pattern"),
    [
        (" 9 10 0 5 1\n", r":9: expected 18 fields, found 5"),
        (_line(9, 10, 5, 1).replace(" 5 ", " x5 ", 1), r":9: field \d+: non-numeric value 'x5'"),
        (_line(9, 10, 5, 1, status=7), r":9: status field 11"),
    ],
)
def test_bad_lines_are_located(tmp_path, bad, pattern):
    path = tmp_path / "bad.swf"
    path.write_text(HEADER + _line(1, 0, 10, 1) + _line(2, 1, 10, 1) + bad)
    with pytest.raises(ValueError, match=r"bad\.swf" + pattern):
        _load(path)


def test_truncated_gzip(tmp_path):
    data = gzip.compress((HEADER + "".join(_line(i, i, 10, 1) for i in range(1, 20_000))).encode())
    path = tmp_path / "cut.swf.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"cut\.swf\.gz.*(truncated|corrupt)"):
        _load(path)


def test_reused_job_numbers_stay_separate_jobs(tmp_path):
    path = tmp_path / "reuse.swf"
    path.write_text(HEADER + _line(1, 0, 10, 1) + _line(1, 5, 20, 2))
    t = _load(path)
    assert [j.job_id for j in t.workload.jobs] == ["1", "1#1"]
    assert t.workload.report["reused_job_numbers"] == 1


def test_job_numbers_are_their_integer_digits_whatever_their_size(tmp_path):
    """Ids are str(int(number)): job numbers below 2**53 go through one array (a fast path), larger ones one by
    one; a reuse is found either way (2**53 + 1 reads as 2**53)."""
    path = tmp_path / "numbers.swf"
    path.write_text(HEADER + _line(7, 0, 10, 1) + _line(2**53, 1, 10, 1) + _line(2**53 + 1, 2, 10, 1))
    t = _load(path)
    assert [j.job_id for j in t.workload.jobs] == ["7", str(2**53), f"{2**53}#1"]
    path.write_text(HEADER + _line(3, 0, 10, 1) + _line(12, 1, 10, 1) + _line(3, 2, 10, 1))
    assert [j.job_id for j in _load(path).workload.jobs] == ["3", "12", "3#1"]
