"""The plain jobs CSV loader: round trip, fractional GPUs, and a located ValueError for each bad input."""

from __future__ import annotations

import numpy as np
import pytest

from sim.cluster_spec import parse_cluster_spec
from sim.job import Job
from workloads.csv_jobs import load_jobs_csv
from workloads.synthetic import generate_synthetic

HEADER = "job_id,arrival_time,runtime,gpus,priority,gpu_mem_gb,gpu_types,estimate"


def _write(tmp_path, text: str, name: str = "jobs.csv"):
    path = tmp_path / name
    path.write_text(text)
    return path


def _to_csv(jobs: tuple[Job, ...]) -> str:
    lines = [HEADER]
    for j in jobs:
        estimate = "" if j.estimate_s is None else repr(j.estimate_s)
        gpus = j.gpu_demand if j.gpu_milli < 1000 else j.num_gpus
        lines.append(
            f"{j.job_id},{j.arrival_s!r},{j.runtime_s!r},{gpus},{j.priority},{j.gpu_mem_gb!r},"
            f"{'|'.join(j.gpu_types)},{estimate}"
        )
    return "\n".join(lines) + "\n"


def test_round_trip_of_a_generated_workload(tmp_path):
    cluster = parse_cluster_spec("2xA100-80GB:8,2xV100-32GB:4,2xT4:4")
    original = generate_synthetic(cluster, 500, 0.8, np.random.default_rng(0)).jobs
    loaded = load_jobs_csv(_write(tmp_path, _to_csv(original)))
    assert loaded.jobs == original
    assert loaded.name == "jobs.csv"
    assert loaded.report["rows_read"] == 500


def test_minimal_columns_sorting_rebasing_and_defaults(tmp_path):
    path = _write(tmp_path, "arrival_time,runtime,gpus\n500,10,2\n100,20,1\n500,30,4\n")
    w = load_jobs_csv(path)
    assert [j.job_id for j in w.jobs] == ["1", "0", "2"]  # stable sort by arrival; ids are file row indices
    assert [j.arrival_s for j in w.jobs] == [0.0, 400.0, 400.0]
    assert w.report["arrival_offset_s"] == 100.0
    assert w.jobs[0] == Job("1", 0.0, 20.0, 1)


def test_fractional_gpus_types_aliases_and_estimate(tmp_path):
    text = f"{HEADER}\na,0,100,0.5,1,8,T4|v100,150\nb,5,100,0.25,0,,,\nc,7,100,1.0,,,,\n"
    a, b, c = load_jobs_csv(_write(tmp_path, text)).jobs
    assert (a.num_gpus, a.gpu_milli, a.gpu_demand) == (1, 500, 0.5)
    assert a.gpu_types == ("T4", "V100-16GB")
    assert (a.priority, a.gpu_mem_gb, a.estimate_s) == (1, 8.0, 150.0)
    assert (b.num_gpus, b.gpu_milli, b.gpu_types, b.estimate_s) == (1, 250, (), None)
    assert (c.num_gpus, c.gpu_milli, c.priority) == (1, 1000, 0)


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("", 1, "empty file"),
        ("arrival_time,runtime,gpus\n", 2, "no job rows"),
        ("arrival_time,gpus\n0,1\n", 1, "missing required column.*runtime"),
        ("arrival_time,runtime,gpus\n0,10,1\n5,abc,1\n", 3, "non-numeric runtime 'abc'"),
        ("arrival_time,runtime,gpus\n0,10,1\nsoon,10,1\n", 3, "non-numeric arrival_time"),
        ("arrival_time,runtime,gpus\n0,10,1\n1,10,1\n2,-5,1\n", 4, "runtime must be > 0"),
        ("arrival_time,runtime,gpus\n0,10,0\n", 2, "gpus must be > 0"),
        ("arrival_time,runtime,gpus\n0,10,-2\n", 2, "gpus must be > 0"),
        ("arrival_time,runtime,gpus\n0,10,1.5\n", 2, "whole number"),
        ("arrival_time,runtime,gpus\n0,10,\n", 2, "missing value in column 'gpus'"),
        ("arrival_time,runtime,gpus,gpu_types\n0,10,1,A100\n0,10,1,B200\n", 3, "unknown GPU type 'B200'"),
        ("arrival_time,runtime,gpus,priority\n0,10,1,high\n", 2, "non-numeric priority"),
        ("arrival_time,runtime,gpus,priority\n0,10,1,1.5\n", 2, "priority must be an integer"),
        ("arrival_time,runtime,gpus,gpu_mem_gb\n0,10,1,-1\n", 2, "gpu_mem_gb must be >= 0"),
        ("arrival_time,runtime,gpus,estimate\n0,10,1,0\n", 2, "estimate must be > 0"),
        ("arrival_time,runtime,gpus\n0,nan,1\n", 2, "non-finite runtime"),
        ("job_id,arrival_time,runtime,gpus\nx,0,10,1\nx,1,10,1\n", 3, "duplicate job_id 'x'"),
        ("arrival_time,runtime,gpus\n0,10,1,7\n", 2, "more fields"),
    ],
)
def test_bad_input_names_file_line_and_problem(tmp_path, text, line, problem):
    path = _write(tmp_path, text, name="bad_jobs.csv")
    with pytest.raises(ValueError, match=rf"bad_jobs\.csv:{line}: .*{problem}"):
        load_jobs_csv(path)


def test_line_numbers_skip_blank_lines(tmp_path):
    path = _write(tmp_path, "arrival_time,runtime,gpus\n0,10,1\n\n\n1,x,1\n", name="gaps.csv")
    with pytest.raises(ValueError, match=r"gaps\.csv:5: non-numeric runtime"):
        load_jobs_csv(path)


def test_hundred_thousand_rows(tmp_path):
    rng = np.random.default_rng(0)
    arrival_s = np.sort(rng.uniform(0, 1e6, 100_000))
    lines = ["arrival_time,runtime,gpus,gpu_types"]
    lines += [f"{a:.3f},{100 + i % 997},{1 + i % 4},A100|V100" for i, a in enumerate(arrival_s)]
    path = _write(tmp_path, "\n".join(lines) + "\n")
    w = load_jobs_csv(path)  # speed is measured by bench/, not here
    assert len(w.jobs) == 100_000
    assert w.jobs[1].gpu_types == ("A100-80GB", "V100-16GB") and w.jobs[-1].num_gpus == 1 + 99_999 % 4
