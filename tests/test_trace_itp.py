"""ITP (ElasticFlow) loader: jobs, GPU-count histograms and GPU-hours per cluster as the README states them."""

from __future__ import annotations

from pathlib import Path

import pytest

from config import WorkloadConfig
from workloads.traces import load_trace

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
ITP = TRACES / "microsoft-itp-elasticflow-2021"
needs_itp = pytest.mark.skipif(not ITP.is_dir(), reason=f"shared trace copy absent: {ITP}")

FACTS = {  # file: (jobs, GPU-count histogram, median duration s, GPU-hours) from the README
    "cluster01": (1595, {1: 1530, 2: 11, 4: 6, 8: 5, 16: 6, 32: 11, 64: 26}, 8287, 22_740.1),
    "cluster02": (5778, {1: 4937, 2: 102, 4: 301, 8: 352, 16: 36, 32: 36, 64: 14}, 6181.5, 123_748.4),
    "cluster03": (3011, {1: 1014, 2: 85, 8: 1777, 16: 94, 32: 24, 64: 17}, 9856, 165_442.5),
    "cluster04": (15_802, {1: 11924, 2: 125, 4: 532, 8: 2779, 16: 182, 32: 254, 64: 6}, 7949, 705_682.9),
    "cluster05": (3629, {1: 3465, 2: 50, 4: 37, 8: 77}, 7699, 14_303.1),
    "cluster07": (12_699, {1: 9854, 2: 836, 4: 1071, 8: 936, 16: 2}, 7399, 366_799.8),
    "cluster08": (13_047, {1: 12558, 2: 217, 4: 262, 8: 1, 32: 9}, 13_677, 67_100.0),
    "cluster09": (11_134, {1: 11134}, 11_764, 39_000.8),
}


def _load(path, **kw):
    return load_trace(WorkloadConfig(workload_type="itp", workload_path=str(path), **kw))


@needs_itp
@pytest.mark.parametrize("name", sorted(FACTS))
def test_cluster_facts(name):
    jobs_n, histogram, median_s, gpu_hours = FACTS[name]
    t = _load(ITP / f"{name}.csv")
    r = t.workload.report
    assert r["rows_read"] == r["jobs_loaded"] == jobs_n
    assert r["gpu_count_histogram"] == histogram
    durations = sorted(j.runtime_s for j in t.workload.jobs)
    mid = len(durations) // 2
    median = durations[mid] if len(durations) % 2 else (durations[mid - 1] + durations[mid]) / 2
    assert median == median_s
    assert r["gpu_seconds"] / 3600 == pytest.approx(gpu_hours, abs=0.05)
    assert (
        min(durations) >= 600
    )  # upstream 10-minute cut (the README says "exactly 600"; 4 files start higher)
    assert t.cluster is None and t.default_cluster.num_gpus >= max(histogram)


@needs_itp
def test_directory_concatenates_the_clusters():
    r = _load(ITP).workload.report
    assert r["jobs_loaded"] == 66_695
    assert r["gpu_seconds"] / 3600 == pytest.approx(1_504_817.6, abs=0.5)
    assert r["files"]["cluster01.csv"] == 1595


@needs_itp
def test_cluster01_time_origin_is_collection_start():
    t = _load(ITP / "cluster01.csv", trace_start_s=1_932_025, trace_end_s=1_932_026)
    assert len(t.workload.jobs) == 1 and t.workload.report["arrival_offset_s"] == 1_932_025


def test_malformed_rows(tmp_path):
    header = "job_id,submission_time,duration,num_gpu\n"
    cases = {
        "missing column": ("job_id,submission_time,num_gpu\nj,1,1\n", r":1: missing column\(s\) duration"),
        "bad number": (header + "a,1,600,1\nb,2,six hundred,1\n", r":3: column 'duration'"),
        "fraction": (header + "a,1,600,1.5\n", r":2: column 'num_gpu': non-integer"),
        "negative": (header + "a,1,-5,1\n", r":2: duration must be >= 0"),
    }
    for name, (text, pattern) in cases.items():
        path = tmp_path / f"{name.replace(' ', '_')}.csv"
        path.write_text(text)
        with pytest.raises(ValueError, match=path.name + pattern):
            _load(path)
