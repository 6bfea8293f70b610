"""Hand-computed checks of metrics/: summary numbers, CSV contents and determinism, plots, comparisons."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from metrics.compare import (
    AggregateRow,
    aggregate,
    assert_same_jobs,
    format_table,
    write_compare_csv,
)
from metrics.plots import plot_compare, plot_compare_cdf
from metrics.run_figures import draw_run_figures
from metrics.summary import METRIC_FIELDS, SummaryRow, per_job, summarize
from metrics.timeline import step_bin_means, step_integral
from metrics.writers import JOB_COLUMNS, write_cluster_csv, write_jobs_csv, write_runs_csv, write_summary_csv
from schedulers import POLICIES
from sim.cluster import ClusterLayout
from sim.cluster_spec import parse_cluster_spec
from sim.job import Job, Workload
from sim.records import COMPLETED, REJECTED, UNFINISHED, NodeInfo, RunResult, Runs
from sim.simulator import Simulator
from tests.helpers import job

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NAN = float("nan")

NODES = (
    NodeInfo("n0", "A100-80GB", 4, 80.0, 1.0, 312.0),
    NodeInfo("n1", "V100-32GB", 2, 32.0, 0.5, 125.0),
)
JOBS = (
    Job("j0", arrival_s=0.0, runtime_s=100.0, num_gpus=2, priority=0),
    # fractional (half a GPU), short: its actual 4 s run on the V100 is below the 10 s slowdown bound
    Job("j1", arrival_s=10.0, runtime_s=2.0, num_gpus=1, gpu_milli=500, gpu_mem_gb=8.0, priority=1),
    Job("j2", arrival_s=30.0, runtime_s=50.0, num_gpus=4, priority=1, trace_status="Failed"),
    Job("j3", arrival_s=40.0, runtime_s=10.0, num_gpus=8, priority=2),  # rejected: larger than any node
    Job("j4", arrival_s=50.0, runtime_s=1000.0, num_gpus=2, priority=0),  # still running at the end
)


def make_result(scheduler: str = "fcfs", seed: int = 0, jobs: tuple[Job, ...] = JOBS) -> RunResult:
    """The hand-simulated run of JOBS: j0 0-100 on n0, j1 20-24 on n1 (half GPU), j2 100-150 on n0,
    j3 rejected, j4 from 60 on n1 until the run stops at 200."""
    #                 t    busy_gpus  busy_tflops              queue
    timeline = [
        (0.0, 2.0, 2 * 312.0, 0),  # j0 starts
        (10.0, 2.0, 2 * 312.0, 1),  # j1 arrives
        (20.0, 2.5, 2 * 312.0 + 0.5 * 125.0, 0),  # j1 starts
        (24.0, 2.0, 2 * 312.0, 0),  # j1 ends
        (30.0, 2.0, 2 * 312.0, 1),  # j2 arrives
        (40.0, 2.0, 2 * 312.0, 1),  # j3 arrives and is rejected
        (50.0, 2.0, 2 * 312.0, 2),  # j4 arrives
        (60.0, 4.0, 2 * 312.0 + 2 * 125.0, 1),  # j4 starts
        (100.0, 6.0, 4 * 312.0 + 2 * 125.0, 0),  # j0 ends, j2 starts
        (150.0, 2.0, 2 * 125.0, 0),  # j2 ends
        (200.0, 2.0, 2 * 125.0, 0),  # run stops
    ]
    t, busy, tflops, queue = (np.array(c, dtype=float) for c in zip(*timeline, strict=True))
    return RunResult(
        scheduler=scheduler,
        workload="hand",
        seed=seed,
        jobs=jobs,
        nodes=NODES,
        start_s=np.array([0.0, 20.0, 100.0, NAN, 60.0]),
        end_s=np.array([100.0, 24.0, 150.0, NAN, NAN]),
        runtime_actual_s=np.array([100.0, 4.0, 50.0, NAN, 2000.0]),
        gpu_type=("A100-80GB", "V100-32GB", "A100-80GB", "", "V100-32GB"),
        placement=("n0/0;n0/1", "n1/0", "n0/0;n0/1;n0/2;n0/3", "", "n1/0;n1/1"),
        status=(COMPLETED, COMPLETED, COMPLETED, REJECTED, UNFINISHED),
        reject_reason=("", "", "", "needs 8 GPUs, largest node has 4", ""),
        timeline_t_s=t,
        timeline_busy_gpus=busy,
        timeline_busy_tflops=tflops,
        timeline_queue_len=queue.astype(np.int64),
        load_factor=0.7,
    )


def empty_result(jobs: tuple[Job, ...] = ()) -> RunResult:
    n = len(jobs)
    nan_n = np.full(n, NAN)
    return RunResult(
        scheduler="fcfs",
        workload="empty",
        seed=0,
        jobs=jobs,
        nodes=NODES,
        start_s=nan_n,
        end_s=nan_n,
        runtime_actual_s=nan_n,
        gpu_type=("",) * n,
        placement=("",) * n,
        status=(REJECTED,) * n,
        reject_reason=("too big",) * n,
        timeline_t_s=np.zeros(0),
        timeline_busy_gpus=np.zeros(0),
        timeline_busy_tflops=np.zeros(0),
        timeline_queue_len=np.zeros(0, dtype=np.int64),
        load_factor=0.0,
    )


# ---------------------------------------------------------------- summary


def test_summary_hand_computed():
    row = summarize(make_result())
    assert (row.scheduler, row.workload, row.seed) == ("fcfs", "hand", 0)
    assert (row.num_jobs, row.completed, row.rejected, row.unfinished) == (5, 3, 1, 1)
    assert row.load_factor == 0.7
    # completed JCTs: j0 100-0, j1 24-10, j2 150-30
    assert row.avg_jct_s == pytest.approx((100 + 14 + 120) / 3)
    assert row.p50_jct_s == pytest.approx(100.0)
    assert row.p95_jct_s == pytest.approx(100 + 0.9 * 20)  # rank 0.95 * 2 = 1.9 between 100 and 120
    assert row.p99_jct_s == pytest.approx(100 + 0.98 * 20)
    assert row.avg_wait_s == pytest.approx((0 + 10 + 70) / 3)
    # slowdowns: 100/100 = 1; 14/max(4, 10) = 1.4 (not 14/4 = 3.5); 120/50 = 2.4
    assert row.avg_bounded_slowdown == pytest.approx((1 + 1.4 + 2.4) / 3)
    assert row.makespan_s == 150.0
    # busy GPU-s in [0, 150]: j0 2x100 + j1 0.5x4 + j2 4x50 + unfinished j4 2x(150-60)
    assert row.gpu_utilization == pytest.approx((200 + 2 + 200 + 180) / (6 * 150))
    busy_tflop = 2 * 312 * 100 + 0.5 * 125 * 4 + 4 * 312 * 50 + 2 * 125 * 90
    assert row.flops_utilization == pytest.approx(busy_tflop / ((4 * 312 + 2 * 125) * 150))
    prio = dict(row.avg_jct_s_by_priority)
    assert list(prio) == [0, 1, 2]
    assert prio[0] == pytest.approx(100.0)  # j4 (unfinished) is not averaged in
    assert prio[1] == pytest.approx((14 + 120) / 2)
    assert math.isnan(prio[2])  # only the rejected j3
    # arrival window [0, 50] (j4 arrives last): busy 2 on [0, 20), 2.5 on [20, 24) (j1's half GPU), 2 on [24, 50)
    assert row.gpu_utilization_arrival_window == pytest.approx((2 * 20 + 2.5 * 4 + 2 * 26) / (6 * 50))
    # reference runtimes 100, 2 (bound 10), 50: JCT 100, 14, 120 -> 1, 1.4, 2.4 (j1 ran on the V100)
    assert row.avg_reference_slowdown == pytest.approx((1 + 1.4 + 2.4) / 3)
    # 6 GPUs at load 0.7 = 4.2 A100-GPUs of work; capacity 4 x 1.0 + 2 x 0.5 = 5 A100-equivalent GPUs
    assert row.load_factor_capacity == pytest.approx(4.2 / 5)


def _tiny_run(uniform_speed: bool = False, arrivals=(0.0, 10.0, 20.0)) -> RunResult:
    """FCFS on one 2-GPU A100 node and one 2-GPU T4 node (speed 0.2) of
    a: 2 GPUs, 100 s; b: 2 GPUs, 50 s; c: 1 GPU, 5 s (reference runtimes), arriving at `arrivals`."""
    jobs = [
        job("a", arrivals[0], 100.0, 2),
        job("b", arrivals[1], 50.0, 2),
        job("c", arrivals[2], 5.0, 1),
    ]
    layout = ClusterLayout(parse_cluster_spec("1xA100-80GB:2,1xT4:2"), uniform_speed=uniform_speed)
    sim = Simulator(Workload("tiny", tuple(jobs)), layout, None, 1.2)
    sim.run(POLICIES["fcfs"])
    return sim.result("fcfs", 0)


def test_new_metrics_hand_computed_through_the_simulator():
    """a takes the A100 node 0-100; b gets the T4 node at 10 and runs 50 / 0.2 = 250 s (ends 260); c waits for
    the A100 node, 100-105."""
    result = _tiny_run()
    np.testing.assert_allclose(result.start_s, [0, 10, 100])
    np.testing.assert_allclose(result.end_s, [100, 260, 105])
    row = summarize(result)
    # JCT / max(reference runtime, 10 s): 100 / 100, 250 / 50, 85 / 10
    assert row.avg_reference_slowdown == pytest.approx((1.0 + 5.0 + 8.5) / 3)
    # bounded slowdown uses the T4 run time and cannot see b's loss: 1, 250 / 250, 85 / 10
    assert row.avg_bounded_slowdown == pytest.approx((1.0 + 1.0 + 8.5) / 3)
    # arrival window [0, 20]: 2 GPUs busy on [0, 10), 4 on [10, 20)
    assert row.gpu_utilization_arrival_window == pytest.approx((2 * 10 + 4 * 10) / (4 * 20))
    # over the makespan [0, 260]: 2 x 100 + 2 x 250 + 1 x 5 busy GPU-s
    assert row.gpu_utilization == pytest.approx(705 / (4 * 260))
    # work 2 x 100 + 2 x 50 + 1 x 5 = 305 A100-GPU-s over a 20 s window: per GPU and per A100-equivalent GPU
    assert row.load_factor == pytest.approx(305 / (4 * 20))
    assert row.load_factor_capacity == pytest.approx(305 / ((2 * 1.0 + 2 * 0.2) * 20))


def test_new_metrics_uniform_speed_and_zero_length_arrival_window():
    row = summarize(_tiny_run(uniform_speed=True))
    assert row.load_factor_capacity == pytest.approx(row.load_factor)
    # b now runs 50 s on the T4 node (10-60): reference slowdown 1 like a; c starts there at 60 (JCT 65 - 20)
    assert row.avg_reference_slowdown == pytest.approx((1.0 + 1.0 + 45 / 10) / 3)
    # every job arrives at 0: no arrival window, so no utilization within it (NaN, not 0 or inf)
    row = summarize(_tiny_run(arrivals=(0.0, 0.0, 0.0)))
    assert math.isnan(row.gpu_utilization_arrival_window)
    assert row.completed == 3 and row.gpu_utilization > 0


def test_per_job_values():
    m = per_job(make_result())
    np.testing.assert_allclose(m.wait_s, [0, 10, 70, NAN, 10])  # unfinished j4 started: its wait is known
    np.testing.assert_allclose(m.jct_s, [100, 14, 120, NAN, NAN])
    np.testing.assert_allclose(m.bounded_slowdown, [1, 1.4, 2.4, NAN, NAN])
    np.testing.assert_allclose(m.gpu_demand, [2, 0.5, 4, 8, 2])


def test_slowdown_never_below_one():
    # finishes faster than its runtime would suggest is impossible, but a JCT under the 10 s bound gives 1, not < 1
    result = make_result()
    result = dataclasses.replace(result, runtime_actual_s=np.array([100.0, 4.0, 500.0, NAN, 2000.0]))
    assert per_job(result).bounded_slowdown[2] == 1.0


def test_empty_and_all_rejected_runs():
    row = summarize(empty_result())
    assert (row.num_jobs, row.completed, row.rejected, row.unfinished) == (0, 0, 0, 0)
    assert row.avg_jct_s_by_priority == ()
    for name in METRIC_FIELDS:
        if not name.startswith("load_factor"):  # the result's load (0.0 here), not computed from jobs
            assert math.isnan(getattr(row, name)), name

    row = summarize(empty_result(JOBS[:3]))
    assert (row.num_jobs, row.completed, row.rejected, row.unfinished) == (3, 0, 3, 0)
    assert math.isnan(row.avg_jct_s) and math.isnan(row.makespan_s) and math.isnan(row.gpu_utilization)
    assert [p for p, _ in row.avg_jct_s_by_priority] == [0, 1]


def test_bad_records_raise():
    with pytest.raises(ValueError, match="status"):
        summarize(dataclasses.replace(make_result(), status=(COMPLETED,) * 4 + ("done",)))
    with pytest.raises(ValueError, match="start_s"):
        summarize(dataclasses.replace(make_result(), start_s=np.zeros(3)))
    with pytest.raises(ValueError, match="non-decreasing"):
        summarize(dataclasses.replace(make_result(), timeline_t_s=make_result().timeline_t_s[::-1].copy()))


# ---------------------------------------------------------------- timeline


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 50), st.integers(0, 9)), min_size=1, max_size=20),
    st.integers(-5, 60),
    st.integers(0, 70),
)
def test_step_integral_matches_unit_sum(samples, lo, width):
    """On integer times the integral is the sum over unit intervals of the value holding on each."""
    samples.sort(key=lambda s: s[0])  # stable: equal times keep order, the last one wins
    t = np.array([s[0] for s in samples], dtype=float)
    v = np.array([s[1] for s in samples], dtype=float)

    def value_at(x: float) -> float:
        k = np.searchsorted(t, x, side="right") - 1
        return 0.0 if k < 0 else v[k]

    expected = sum(value_at(x + 0.5) for x in range(lo, lo + width))
    assert step_integral(t, v, lo, lo + width) == pytest.approx(expected)


def test_step_bin_means():
    t = np.array([0.0, 1.0, 3.0])
    v = np.array([2.0, 4.0, 0.0])
    edges, means = step_bin_means(t, v, 0.0, 4.0, 2)
    np.testing.assert_allclose(edges, [0, 2, 4])
    np.testing.assert_allclose(means, [(2 + 4) / 2, (4 + 0) / 2])


# ---------------------------------------------------------------- CSVs


def test_jobs_csv(tmp_path):
    path = write_jobs_csv(make_result(), tmp_path / "jobs.csv")
    frame = pd.read_csv(path, keep_default_na=False, na_values=[""])
    assert tuple(frame.columns) == JOB_COLUMNS
    assert list(frame["job_id"]) == ["j0", "j1", "j2", "j3", "j4"]
    assert list(frame["status"]) == ["completed", "completed", "completed", "rejected", "unfinished"]
    np.testing.assert_allclose(frame["num_gpus"], [2, 0.5, 4, 8, 2])
    np.testing.assert_allclose(frame["jct_s"], [100, 14, 120, NAN, NAN])
    np.testing.assert_allclose(frame["wait_s"], [0, 10, 70, NAN, 10])
    np.testing.assert_allclose(frame["bounded_slowdown"], [1, 1.4, 2.4, NAN, NAN])
    np.testing.assert_allclose(frame["runtime_s"], [100, 4, 50, NAN, 2000])
    np.testing.assert_allclose(frame["end_time"], [100, 24, 150, NAN, NAN])
    assert frame["reject_reason"].isna().tolist() == [True, True, True, False, True]
    assert frame.loc[3, "reject_reason"] == "needs 8 GPUs, largest node has 4"
    assert frame.loc[2, "trace_status"] == "Failed"
    assert list(frame["priority"]) == [0, 1, 1, 2, 0]
    assert list(frame["gpu_milli"]) == [1000, 500, 1000, 1000, 1000]
    lines = path.read_text().splitlines()
    assert lines[1] == "j0,0,0,100,2,A100-80GB,n0/0;n0/1,0,100,100,1,completed,0,1000,0,,"
    assert lines[2].startswith("j1,10,20,24,0.5,V100-32GB,n1/0,10,14,4,1.4,completed,1,500,8,,")
    assert lines[4] == 'j3,40,,,8,,,,,,,rejected,2,1000,0,,"needs 8 GPUs, largest node has 4"'


def test_jobs_csv_of_empty_and_all_rejected_runs(tmp_path):
    header = ",".join(JOB_COLUMNS) + "\n"
    assert write_jobs_csv(empty_result(), tmp_path / "empty.csv").read_text() == header
    frame = pd.read_csv(write_jobs_csv(empty_result(JOBS[:2]), tmp_path / "rejected.csv"))
    assert list(frame["status"]) == ["rejected", "rejected"] and frame["jct_s"].isna().all()


def test_cluster_and_summary_csv(tmp_path):
    cluster = write_cluster_csv(make_result(), tmp_path / "cluster.csv").read_text()
    assert (
        cluster == "node_id,gpu_type,num_gpus,gpu_mem_gb,speed\nn0,A100-80GB,4,80,1\nn1,V100-32GB,2,32,0.5\n"
    )

    a = summarize(make_result("fcfs"))
    b = dataclasses.replace(summarize(make_result("sjf")), avg_jct_s_by_priority=((1, 50.0), (3, 7.0)))
    path = write_summary_csv([a, b], tmp_path / "summary.csv")
    frame = pd.read_csv(path)
    fields = [f.name for f in dataclasses.fields(SummaryRow)][:-1]
    prio_cols = ["avg_jct_s_prio0", "avg_jct_s_prio1", "avg_jct_s_prio2", "avg_jct_s_prio3"]
    assert list(frame.columns) == fields + prio_cols
    assert fields[:17] == [
        "scheduler", "workload", "seed", "num_jobs", "completed", "rejected", "unfinished", "load_factor",
        "avg_jct_s", "p50_jct_s", "p95_jct_s", "p99_jct_s", "avg_wait_s", "avg_bounded_slowdown",
        "makespan_s", "gpu_utilization", "flops_utilization",
    ]  # fmt: skip
    np.testing.assert_allclose(frame.loc[0, prio_cols].astype(float), [100, 67, NAN, NAN])
    np.testing.assert_allclose(frame.loc[1, prio_cols].astype(float), [NAN, 50, NAN, 7])
    assert frame.loc[0, "avg_jct_s"] == pytest.approx(78.0)
    with pytest.raises(ValueError, match="repeat"):
        write_summary_csv([a, a], tmp_path / "dup.csv")


def test_csvs_are_byte_identical(tmp_path):
    for name, write in (("jobs.csv", write_jobs_csv), ("cluster.csv", write_cluster_csv)):
        first = write(make_result(), tmp_path / "a" / name).read_bytes()
        assert write(make_result(), tmp_path / "b" / name).read_bytes() == first
    rows = [summarize(make_result("fcfs", s)) for s in (0, 1)]
    assert (
        write_summary_csv(rows, tmp_path / "a.csv").read_bytes()
        == write_summary_csv(rows, tmp_path / "b.csv").read_bytes()
    )
    agg = aggregate(rows)
    assert (
        write_compare_csv(agg, tmp_path / "ca.csv").read_bytes()
        == write_compare_csv(agg, tmp_path / "cb.csv").read_bytes()
    )


# ---------------------------------------------------------------- compare


def _row(scheduler: str, seed: int, avg_jct_s: float, util: float, prio=()) -> SummaryRow:
    base = summarize(make_result(scheduler, seed))
    return dataclasses.replace(base, avg_jct_s=avg_jct_s, gpu_utilization=util, avg_jct_s_by_priority=prio)


def test_aggregate_mean_std():
    rows = [
        _row("fcfs", 0, 10.0, 0.5, ((0, 1.0),)),
        _row("sjf", 0, 5.0, 0.7),
        _row("fcfs", 1, 20.0, 0.6, ((0, 3.0),)),
        _row("fcfs", 2, 30.0, 0.7, ((0, 5.0), (1, 8.0))),
    ]
    fcfs, sjf = aggregate(rows)
    assert isinstance(fcfs, AggregateRow)
    assert (fcfs.scheduler, fcfs.n_seeds, sjf.scheduler, sjf.n_seeds) == ("fcfs", 3, "sjf", 1)
    assert fcfs.avg_jct_s.mean == pytest.approx(20.0)
    assert fcfs.avg_jct_s.std == pytest.approx(10.0)  # sample std of 10, 20, 30
    assert fcfs.gpu_utilization.mean == pytest.approx(0.6)
    assert fcfs.gpu_utilization.std == pytest.approx(0.1)
    assert (fcfs.total_jobs, fcfs.total_completed, fcfs.total_unfinished, fcfs.total_rejected) == (
        15,
        9,
        3,
        3,
    )
    prio = dict(fcfs.avg_jct_s_by_priority)
    assert prio[0].mean == pytest.approx(3.0) and prio[0].std == pytest.approx(2.0)
    assert prio[1].mean == 8.0 and math.isnan(prio[1].std)
    assert sjf.avg_jct_s.mean == 5.0 and math.isnan(sjf.avg_jct_s.std)
    table = format_table([fcfs, sjf])
    lines = table.splitlines()
    assert len(lines) == 4 and len({len(line) for line in lines}) == 1  # fixed width
    assert "20.0±10.0" in lines[2] and "9/3/3" in lines[2]
    assert "5.0" in lines[3] and "±" not in lines[3].split()[2]
    with pytest.raises(ValueError, match="repeated seeds"):
        aggregate([rows[0], rows[0]])


def test_compare_csv(tmp_path):
    agg = aggregate([_row("fcfs", 0, 10.0, 0.5), _row("fcfs", 1, 20.0, 0.6)])
    frame = pd.read_csv(write_compare_csv(agg, tmp_path / "compare.csv"))
    assert frame.loc[0, "avg_jct_s_mean"] == pytest.approx(15.0)
    assert frame.loc[0, "avg_jct_s_std"] == pytest.approx(math.sqrt(50.0))
    assert frame.loc[0, "n_seeds"] == 2


def test_assert_same_jobs():
    a, b = make_result("fcfs"), make_result("sjf")
    assert_same_jobs([a, b])
    assert_same_jobs([])
    with pytest.raises(ValueError, match="job ids"):
        assert_same_jobs([a, make_result("sjf", jobs=JOBS[::-1])])
    with pytest.raises(ValueError, match="4 jobs vs 5"):
        assert_same_jobs([a, make_result("sjf", jobs=JOBS[:4])])
    moved = (dataclasses.replace(JOBS[0], arrival_s=5.0),) + JOBS[1:]
    with pytest.raises(ValueError, match="different jobs"):
        assert_same_jobs([a, make_result("sjf", jobs=moved)])


# ---------------------------------------------------------------- plots


def _assert_png(path):
    data = path.read_bytes()
    assert len(data) > 1000 and data[:8] == PNG_MAGIC


def _plot_run(result, folder):
    """The run's figures drawn from its CSV files, as a run writes them (one run per started job)."""
    start_s = np.asarray(result.start_s, dtype=float)
    started = np.flatnonzero(~np.isnan(start_s))
    started = started[np.lexsort((started, start_s[started]))]
    runs = Runs(
        started,
        start_s[started],
        np.asarray(result.end_s, dtype=float)[started],
        tuple(result.placement[i] for i in started),
        tuple(result.gpu_type[i] for i in started),
    )
    result = dataclasses.replace(result, runs=runs)
    write_jobs_csv(result, folder / "jobs.csv")
    write_runs_csv(result, folder / "runs.csv")
    write_cluster_csv(result, folder / "cluster.csv")
    return [p for f in draw_run_figures(folder, "test") for p in f.paths]


def test_plots_are_written(tmp_path):
    paths = _plot_run(make_result(), tmp_path / "run")
    assert [p.name for p in paths] == ["jct_cdf.png", "utilization.png", "queue_length.png", "gantt.png"]
    for p in paths:
        _assert_png(p)
    for p in _plot_run(empty_result(JOBS[:2]), tmp_path / "empty"):
        _assert_png(p)
    rows = [summarize(make_result(s, seed)) for s in ("fcfs", "sjf") for seed in (0, 1)]
    (compare_png,) = plot_compare(rows, tmp_path)
    _assert_png(compare_png)
    (cdf_png,) = plot_compare_cdf([make_result("fcfs"), make_result("sjf")], tmp_path / "cdf")
    _assert_png(cdf_png)


def _big_result(num_jobs: int, rng: np.random.Generator) -> RunResult:
    """A synthetic but consistent-looking run: random arrivals and runtimes, every job completes."""
    arrival = np.sort(rng.uniform(0, 1e6, num_jobs))
    runtime = rng.lognormal(6, 2, num_jobs)
    start = arrival + rng.exponential(100, num_jobs)
    end = start + runtime
    jobs = tuple(
        Job(f"job{i}", float(a), float(r), 1, gpu_milli=500 if i % 7 == 0 else 1000, priority=i % 3)
        for i, (a, r) in enumerate(zip(arrival, runtime, strict=True))
    )
    t = np.sort(np.concatenate([arrival, start, end]))
    return RunResult(
        scheduler="fcfs",
        workload="big",
        seed=0,
        jobs=jobs,
        nodes=NODES,
        start_s=start,
        end_s=end,
        runtime_actual_s=runtime,
        gpu_type=("A100-80GB",) * num_jobs,
        placement=("n0/0",) * num_jobs,
        status=(COMPLETED,) * num_jobs,
        reject_reason=("",) * num_jobs,
        timeline_t_s=t,
        timeline_busy_gpus=rng.uniform(0, 6, len(t)),
        timeline_busy_tflops=rng.uniform(0, 1498, len(t)),
        timeline_queue_len=rng.integers(0, 100, len(t)),
        load_factor=1.0,
    )


# ---------------------------------------------------------------- printed line and workload report


def test_printed_summary_leads_with_arrival_window_utilization_and_names_both_loads(capsys):
    from cli.runner import _print_summary

    _print_summary(summarize(_tiny_run()))
    line = capsys.readouterr().out.strip()
    assert line.startswith(
        "fcfs on tiny seed 0: GPU util 0.750 within the arrival window (0.678 over the makespan)"
    )
    assert "load by GPU count at A100 speed 3.812, by capacity (A100-equivalent GPUs) 6.354" in line
    assert "reference slowdown 4.83" in line


def test_workload_report_histogram_sorts_gpu_counts_numerically(tmp_path):
    from main import main

    jobs = tmp_path / "jobs.csv"
    jobs.write_text("arrival_time,runtime,gpus\n0,10,16\n1,10,2\n2,10,1\n3,10,0.5\n4,10,2\n")
    out = tmp_path / "run"
    argv = ["--mode", "eval", "--algo", "fcfs", "--workload_type", "csv", "--workload_path", str(jobs),
            "--cluster", "1xA100-80GB:16", "--log_dir", str(out), "--no_progress"]  # fmt: skip
    assert main(argv) == 0
    report = json.loads((out / "workload_report.json").read_text())
    assert list(report["gpu_count_histogram"].items()) == [("0.5", 1), ("1", 1), ("2", 2), ("16", 1)]


def test_long_titles_wrap_instead_of_being_cut():
    from metrics.plots import _wrap

    text = "easy on alibaba-openb:openb_pod_list_default_with_a_much_longer_name.csv (seed 0) (y axis zoomed)"
    wrapped = _wrap(text, width_in=3.0, fontsize=10)
    lines = wrapped.splitlines()
    assert len(lines) > 1 and all(len(line) <= 36 for line in lines)  # 3 in x 72 pt / (0.6 x 10 pt)
    assert "".join(wrapped.split()) == "".join(text.split())  # every character kept


def test_compare_figure_names_the_workload_and_whiskers_stay_at_or_above_zero():
    from metrics.plots import compare_figure

    # avg wait over three seeds 0, 0, 300: mean 100, sample std 173 would reach -73; min-max whiskers stay >= 0
    rows = [
        dataclasses.replace(summarize(make_result("fcfs", seed)), avg_wait_s=wait)
        for seed, wait in ((0, 0.0), (1, 0.0), (2, 300.0))
    ]
    fig = compare_figure(rows)
    assert fig.get_suptitle().startswith("hand: ")
    assert "seeds 0, 1, 2" in fig.get_suptitle()
    wait_ax = fig.axes[1]
    assert wait_ax.get_ylabel() == "avg wait (s)" and wait_ax.get_ylim()[0] == 0
    whisker = wait_ax.collections[0].get_segments()[0]
    np.testing.assert_allclose(whisker[:, 1], [0.0, 300.0])
