"""A run's figures and report.html: the figure data computed from the CSV files agree with hand-computed cases,
with a plain second implementation and with the simulator's own timeline; what is drawn is that data; the page is
self-contained, lists every file of its folder, and the same run gives the same bytes in every format."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.patches import StepPatch

import metrics.run_figures as run_figures
from cli.parser import build_parser, config_from_args
from cli.runner import run_one
from main import main
from metrics.compare import paired_differences
from metrics.figure_data import (
    NOT_STARTED,
    _stacked,
    busy_by_type,
    gantt,
    jct_by_priority,
    queue_by_type,
    read_run_tables,
)
from metrics.plots import compare_figure, paired_figure, spans_decades
from metrics.writers import write_cluster_csv, write_jobs_csv, write_runs_csv
from scenario.build import build_scenario
from tests.chromium_page import CHROMIUM, load_page

# ---- hand-computed case ---------------------------------------------------------------------------------------
# node a: 2 GPUs of type X, node b: 1 GPU of type Y. j0 runs on a/0, is preempted at 10 and resumes on b/0
# (migrated); j1 holds half of a/1; j2 is still running at the end; j3 never starts; j4 is rejected.
JOBS = """job_id,submit_time,start_time,end_time,num_gpus,gpu_type,placement,wait_s,jct_s,runtime_s,bounded_slowdown,status,priority,gpu_milli,gpu_mem_gb,trace_status,reject_reason
j0,0,0,20,1,X;Y,b/0,0,20,15,1.3,completed,0,1000,1,,
j1,2,5,25,0.5,X,a/1,3,23,20,1.15,completed,1,500,1,,
j2,3,12,,1,X,a/0,9,,,,unfinished,0,1000,1,,
j3,4,,,1,,,,,,,unfinished,0,1000,1,,
j4,6,,,8,,,,,,,rejected,0,8000,1,,cannot fit
"""
RUNS = """job_id,start_time,end_time,placement,gpu_type
j0,0,10,a/0,X
j1,5,25,a/1,X
j2,12,,a/0,X
j0,15,20,b/0,Y
"""
CLUSTER = """node_id,gpu_type,num_gpus,gpu_mem_gb,speed
a,X,2,80,1
b,Y,1,16,0.5
"""


@pytest.fixture
def hand(tmp_path):
    for name, text in (("jobs.csv", JOBS), ("runs.csv", RUNS), ("cluster.csv", CLUSTER)):
        (tmp_path / name).write_text(text)
    return read_run_tables(tmp_path)


def test_busy_by_type_hand_case(hand):
    steps = busy_by_type(hand)
    assert steps.keys == ("X", "Y")
    assert steps.t_s.tolist() == [0, 5, 10, 12, 15, 20, 25]
    assert steps.value_TK[:, 0].tolist() == [1, 1.5, 0.5, 1.5, 1.5, 1.5, 1]  # j2 still runs after j1 ends
    assert steps.value_TK[:, 1].tolist() == [0, 0, 0, 0, 1, 0, 0]
    assert hand.horizon_s == 25
    # busy GPU-seconds: X = j0 10 + j1 20 x 0.5 + j2 (25 - 12); Y = j0 5
    assert steps.integral(hand.horizon_s).tolist() == [33, 5]


def test_queue_by_type_hand_case(hand):
    steps = queue_by_type(hand)
    assert steps.keys == ("X", "Y", NOT_STARTED)
    assert steps.t_s.tolist() == [2, 3, 4, 5, 10, 12, 15]
    assert steps.value_TK.tolist() == [
        [1, 0, 0],  # j1 waits for X
        [2, 0, 0],  # j2 too
        [2, 0, 1],  # j3 never starts; j4 (rejected) never queues
        [1, 0, 1],
        [1, 1, 1],  # j0, preempted, waits for the Y it resumes on
        [0, 1, 1],
        [0, 0, 1],
    ]


def test_gantt_hand_case(hand):
    g = gantt(hand, per_node=False)
    assert g.lane_labels == ("a/0 X", "a/1", "b/0 Y")
    blocks = sorted(
        zip(
            g.block_lane.tolist(),
            g.block_start_s.tolist(),
            g.block_end_s.tolist(),
            g.block_job.tolist(),
            strict=True,
        )
    )
    assert blocks == [(0, 0, 10, 0), (0, 12, 25, 2), (1, 5, 25, 1), (2, 15, 20, 0)]  # the open run ends at 25
    assert (g.preempt_lane.tolist(), g.preempt_s.tolist()) == ([0], [10])
    assert (g.migrate_lane.tolist(), g.migrate_s.tolist()) == ([2], [15])
    by_node = gantt(hand, per_node=True)
    assert by_node.lane_labels == ("a X", "b Y") and sorted(by_node.block_lane.tolist()) == [0, 0, 0, 1]
    assert {p: v.tolist() for p, v in jct_by_priority(hand).items()} == {0: [20], 1: [23]}


def test_utilization_axis_zooms_when_utilization_is_tiny(hand, tmp_path):
    fig = run_figures.utilization_figure(hand, "t")  # peak 2.5 busy GPUs (1.5 X + 1 Y at 15-20 s) of 3
    assert fig.axes[0].get_ylim() == (0, 1.05) and "zoomed" not in fig.axes[0].get_title()
    (tmp_path / "big").mkdir()
    for name, text in (("jobs.csv", JOBS), ("runs.csv", RUNS)):
        (tmp_path / "big" / name).write_text(text)
    (tmp_path / "big" / "cluster.csv").write_text(CLUSTER + "c,X,997,80,1\n")  # 1,000 GPUs: peak 0.0025
    ax = run_figures.utilization_figure(read_run_tables(tmp_path / "big"), "t").axes[0]
    assert "zoomed" in ax.get_title() and "0.0025" in ax.get_title()
    assert ax.get_ylim() == pytest.approx((0, 0.0025 * 1.15))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 50),
            st.one_of(st.none(), st.integers(1, 30)),
            st.sampled_from([0.5, 1.0, 2.0, 0.1]),
            st.sampled_from("ab"),
        ),
        min_size=1,
        max_size=25,
    ),
    st.lists(st.floats(-5, 90), min_size=1, max_size=10),
)
def test_stacked_steps_equal_a_plain_sum_over_intervals(intervals, points):
    start = np.array([s for s, _, _, _ in intervals], dtype=float)
    end = np.array([np.nan if d is None else s + d for s, d, _, _ in intervals], dtype=float)
    weight = np.array([w for _, _, w, _ in intervals])
    key = np.array([k for *_, k in intervals], dtype=object)
    steps = _stacked(start, end, weight, key, ("a", "b"))
    for p in points:
        k = np.searchsorted(steps.t_s, p, side="right") - 1
        for i, name in enumerate(("a", "b")):
            plain = sum(
                w
                for s, e, w, kk in zip(start, end, weight, key, strict=True)
                if kk == name and s <= p < (e if e == e else np.inf)
            )
            assert (steps.value_TK[k, i] if k >= 0 else 0.0) == pytest.approx(plain, abs=1e-9)
    horizon = float(np.nanmax(np.concatenate([start, end])))
    for i, name in enumerate(("a", "b")):
        mine = key == name
        plain = float(
            (weight[mine] * (np.where(np.isfinite(end[mine]), end[mine], horizon) - start[mine])).sum()
        )
        assert steps.integral(horizon)[i] == pytest.approx(plain, abs=1e-6)


# ---- a simulated run: the CSVs, the simulator's timeline and the drawn figures agree ------------------------


CLUSTER_ARGS = [
    "--cluster",
    "2xA100:8,2xV100:8,1xT4:4",
]  # small and heterogeneous: jobs queue, tiresias preempts


def _simulated(folder: Path, algo: str = "tiresias"):
    args = ["--difficulty", "hard", "--num_jobs", "60", *CLUSTER_ARGS]
    cfg = config_from_args(build_parser().parse_args(args))
    result = run_one(cfg, build_scenario(cfg, 0), algo, False)
    write_jobs_csv(result, folder / "jobs.csv")
    write_runs_csv(result, folder / "runs.csv")
    write_cluster_csv(result, folder / "cluster.csv")
    return result, read_run_tables(folder)


def _at(steps, times):
    total = np.append(steps.value_TK.sum(axis=1), 0.0)
    k = np.searchsorted(steps.t_s, times, side="right") - 1
    return np.where(k >= 0, total[np.maximum(k, 0)], 0.0)


@pytest.mark.parametrize("algo", ["tiresias", "easy"])
def test_busy_and_queue_from_the_csvs_match_the_simulators_timeline(tmp_path, algo):
    result, tables = _simulated(tmp_path, algo)
    t = np.asarray(result.timeline_t_s)
    last = np.r_[t[1:] != t[:-1], True]  # the state after each instant is its last sample
    instants = t[last]
    mid = (instants[:-1] + instants[1:]) / 2  # the CSVs round times to 12 digits: compare between events
    busy = np.asarray(result.timeline_busy_gpus)[last][:-1]
    queue = np.asarray(result.timeline_queue_len)[last][:-1]
    assert np.abs(_at(busy_by_type(tables), mid) - busy).max() < 1e-6
    assert np.array_equal(_at(queue_by_type(tables), mid), queue)
    assert queue.max() > 0  # the case is not trivial


def _busy_gpu_s_by_type(folder: Path) -> dict[str, float]:
    """Per GPU type, busy GPU-seconds straight from runs.csv and jobs.csv (open runs end at the horizon)."""
    runs = pd.read_csv(folder / "runs.csv", dtype={"job_id": str})
    jobs = pd.read_csv(folder / "jobs.csv", dtype={"job_id": str})
    demand = dict(zip(jobs.job_id, jobs.num_gpus, strict=True))
    horizon = np.nanmax(np.concatenate([jobs.submit_time, runs.start_time, runs.end_time]))
    out: dict[str, float] = {}
    for job, start, end, gpu_type in zip(
        runs.job_id, runs.start_time, runs.end_time, runs.gpu_type, strict=True
    ):
        end = horizon if np.isnan(end) else end
        out[gpu_type] = out.get(gpu_type, 0.0) + demand[job] * (end - start)
    return out


@pytest.mark.parametrize("max_points", [100_000, 50])  # drawn exactly, and downsampled to 50 bins
def test_drawn_utilization_layers_integrate_to_busy_gpu_seconds_of_runs_csv(
    tmp_path, monkeypatch, max_points
):
    monkeypatch.setattr(run_figures, "MAX_PLOT_POINTS", max_points)
    _, tables = _simulated(tmp_path)
    fig = run_figures.utilization_figure(tables, "t", span="full")
    drawn = {}
    for patch in fig.axes[0].patches:
        if isinstance(patch, StepPatch):
            values, edges_h, baseline = patch.get_data()
            drawn[patch.get_label()] = (
                float(((values - baseline) * np.diff(edges_h) * 3600).sum()) * tables.total_gpus
            )
    expected = _busy_gpu_s_by_type(tmp_path)
    assert set(expected) <= set(drawn) and len(expected) > 1
    for gpu_type, gpu_s in drawn.items():
        assert gpu_s == pytest.approx(expected.get(gpu_type, 0.0), rel=1e-9, abs=1e-6), gpu_type


def test_window_span_cuts_the_axis_to_the_arrival_window(tmp_path):
    _, tables = _simulated(tmp_path)
    first, last = tables.submit_s.min() / 3600, tables.submit_s.max() / 3600
    for make in (run_figures.utilization_figure, run_figures.queue_figure):
        assert make(tables, "t").axes[0].get_xlim() == pytest.approx((first, last))
        assert make(tables, "t", span="full").axes[0].get_xlim()[1] == pytest.approx(tables.horizon_s / 3600)


def test_drawn_cdf_and_gantt_show_the_csvs_jobs_runs_and_preemptions(tmp_path):
    _, tables = _simulated(tmp_path)
    jobs = pd.read_csv(tmp_path / "jobs.csv")
    runs = pd.read_csv(tmp_path / "runs.csv", dtype={"job_id": str})
    lines = {line.get_label(): line for line in run_figures.jct_cdf_figure(tables, "t").axes[0].get_lines()}
    done = jobs[jobs.status == "completed"]
    assert np.array_equal(lines["all jobs"].get_xdata(), np.sort(done.jct_s.to_numpy()))
    for p, group in done.groupby("priority"):
        assert np.array_equal(
            lines[f"priority {p} ({len(group)} jobs)"].get_xdata(), np.sort(group.jct_s.to_numpy())
        )
    ax = run_figures.gantt_figure(tables, "t").axes[0]
    (runs_drawn,) = [c for c in ax.collections if c.get_label() == "runs"]
    blocks = runs_drawn.get_paths()
    # each block spans its lane +- 0.4 and its run's hours
    assert all(np.ptp(b.vertices[:, 1]) == pytest.approx(0.8) for b in blocks)
    spans = sorted(np.ptp(b.vertices[:, 0]) * 3600.0 for b in blocks)
    per_node = tables.total_gpus > run_figures.GANTT_MAX_GPU_LANES
    held = runs.placement.str.split(";").map(
        lambda g: len({x.rsplit("/", 1)[0] for x in g}) if per_node else len(g)
    )
    assert len(blocks) == held.sum()
    lengths = (runs.end_time - runs.start_time).repeat(held.to_numpy())
    assert spans == pytest.approx(sorted(lengths.to_numpy()), abs=1e-6)
    marks = {line.get_label(): len(line.get_xdata()) for line in ax.get_lines()}
    resumed = int((runs.groupby("job_id").size() - 1).sum())  # runs that follow a preemption
    assert resumed > 0 and marks["preempted"] == resumed


def test_a_timeline_window_draws_exactly_the_runs_overlapping_it_cut_to_it(tmp_path):
    _, tables = _simulated(tmp_path)
    runs = pd.read_csv(tmp_path / "runs.csv", dtype={"job_id": str})
    end = runs.end_time.fillna(tables.horizon_s)
    start_s, end_s = float(runs.start_time.quantile(0.3)), float(runs.start_time.quantile(0.6))
    assert start_s < end_s
    ax = run_figures.gantt_figure(tables, "t", (start_s, end_s)).axes[0]
    assert ax.get_xlim() == pytest.approx((start_s / 3600.0, end_s / 3600.0))
    (runs_drawn,) = [c for c in ax.collections if c.get_label() == "runs"]
    drawn = sorted(
        (b.vertices[:, 0].min() * 3600.0, b.vertices[:, 0].max() * 3600.0) for b in runs_drawn.get_paths()
    )
    # a plain second computation from runs.csv: each run overlapping the window, once per GPU it held, cut to it
    per_node = tables.total_gpus > run_figures.GANTT_MAX_GPU_LANES
    held = runs.placement.str.split(";").map(
        lambda g: len({x.rsplit("/", 1)[0] for x in g}) if per_node else len(g)
    )
    inside = (runs.start_time < end_s) & (end > start_s)
    assert 0 < inside.sum() < len(runs)  # the window leaves some runs out
    expected = sorted(
        (max(a, start_s), min(b, end_s))
        for a, b, k in zip(runs.start_time[inside], end[inside], held[inside], strict=True)
        for _ in range(k)
    )
    assert len(drawn) == len(expected) and np.allclose(drawn, expected, rtol=0, atol=1e-6)
    marks = {line.get_label(): line.get_xdata() * 3600.0 for line in ax.get_lines()}
    for times in marks.values():
        assert np.all((times >= start_s - 1e-6) & (times <= end_s + 1e-6))


def test_timeline_window_option_draws_a_gantt_beyond_the_job_limit(tmp_path, monkeypatch):
    monkeypatch.setattr(run_figures, "GANTT_MAX_JOBS", 5)  # the 25-job run is "too big" for a whole timeline
    assert main(["--mode", "eval", *TINY, "--log_dir", str(tmp_path / "whole")]) == 0
    assert not (tmp_path / "whole" / "gantt.png").exists()
    argv = ["--mode", "eval", *TINY, "--timeline_window", "0:3600", "--log_dir", str(tmp_path / "window")]
    assert main(argv) == 0
    assert (tmp_path / "window" / "gantt.png").stat().st_size > 0
    assert (tmp_path / "whole" / "jobs.csv").read_bytes() == (tmp_path / "window" / "jobs.csv").read_bytes()


# ---- the command line: formats, report.html, determinism --------------------------------------------------------

TINY = ["--algo", "tiresias", "--difficulty", "hard", "--num_jobs", "25", *CLUSTER_ARGS, "--no_progress"]


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


def _links(page: str) -> list[str]:
    return re.findall(r'(?:src|href)="([^"]*)"', page)


def _assert_offline(page: str, folder: Path) -> None:
    """No script, stylesheet or font fetched; every link is embedded data or a file of the folder."""
    assert not re.search(r"<script|<link|@import|url\(", page, re.IGNORECASE)
    for link in _links(page):
        assert link.startswith("data:image/") or (folder / link).is_file(), link


def test_eval_writes_every_format_and_a_self_contained_report_listing_every_file(tmp_path):
    args = ["--mode", "eval", *TINY, "--plot_formats", "png,svg,pdf"]
    assert main([*args, "--log_dir", str(tmp_path / "a")]) == 0
    folder = tmp_path / "a"
    for stem in ("jct_cdf", "utilization", "queue_length", "gantt"):
        for fmt, magic in (("png", b"\x89PNG"), ("svg", b"<?xml"), ("pdf", b"%PDF")):
            assert (folder / f"{stem}.{fmt}").read_bytes().startswith(magic)
    page = (folder / "report.html").read_text()
    _assert_offline(page, folder)
    assert page.count("<img ") == 4 and page.count('src="data:image/png;base64,') == 4
    listed = re.findall(r'<tr><td><a href="([^"]*)">[^<]*</a></td><td>([^<]*)</td></tr>', page)
    assert sorted(name for name, _ in listed) == _files(folder)
    assert all(what for _, what in listed)  # each says what it holds
    command = "python main.py --mode eval --algo tiresias --plot_formats png,svg,pdf --difficulty hard --num_jobs 25 "
    assert (
        f"<pre>{command}--cluster 2xA100:8,2xV100:8,1xT4:4</pre>" in page
    )  # no --log_dir: the same anywhere
    assert '<meta name="viewport" content="width=device-width' in page
    # the same run elsewhere: the same bytes, SVG and PDF included (no dates, no random ids)
    assert main([*args, "--log_dir", str(tmp_path / "b")]) == 0
    assert _files(tmp_path / "b") == _files(folder)
    for name in _files(folder):
        assert (tmp_path / "b" / name).read_bytes() == (folder / name).read_bytes(), name


def test_plots_none_writes_the_report_without_figures(tmp_path):
    assert main(["--mode", "eval", *TINY, "--plots", "none", "--log_dir", str(tmp_path)]) == 0
    assert not [n for n in _files(tmp_path) if n.endswith((".png", ".svg", ".pdf"))]
    page = (tmp_path / "report.html").read_text()
    assert "<img" not in page and "--plots none" in page
    _assert_offline(page, tmp_path)


@pytest.mark.parametrize("value", ["png,gif", ",", "PNG;svg"])
def test_a_bad_plot_format_is_one_error_line(tmp_path, capsys, value):
    with pytest.raises(SystemExit) as stop:  # argparse's own check: usage_error exits
        main(["--mode", "eval", *TINY, "--plot_formats", value, "--log_dir", str(tmp_path / "x")])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: argument --plot_formats") and "png, svg, pdf" in err[0]
    assert not (tmp_path / "x").exists()


def test_compare_report_shows_the_policies_and_links_each_runs_page(tmp_path):
    args = ["--mode", "compare", "--algos", "fcfs,easy", "--seeds", "1", "--difficulty", "easy"]
    assert main([*args, "--num_jobs", "12", "--no_progress", "--log_dir", str(tmp_path)]) == 0
    page = (tmp_path / "report.html").read_text()
    _assert_offline(page, tmp_path)
    top = [n for n in _files(tmp_path) if "/" not in n]
    subpages = ["easy_seed1/report.html", "fcfs_seed1/report.html"]
    listed = re.findall(r'<tr><td><a href="([^"]*)">', page)
    assert sorted(listed) == sorted(top + subpages)
    assert "<td>fcfs</td>" in page and "<td>easy</td>" in page
    for sub in subpages:
        _assert_offline((tmp_path / sub).read_text(), (tmp_path / sub).parent)


def assert_renders_cleanly(page: Path) -> None:
    """`page` loads in headless Chromium from disk with no console error, exception or failed request, and its
    screenshot at a phone's width is not blank (golden image hashes are not used: fonts differ between machines)."""
    import io

    from matplotlib.image import imread

    load = load_page(page)
    assert load.errors == ()
    pixels = imread(io.BytesIO(load.screenshot_png), format="png")
    assert pixels.shape[1] == 390 and pixels.std() > 0.01  # not blank


NO_CHROMIUM = "no chromium binary on PATH (install one with: sudo sh scripts/install_chromium.sh)"


@pytest.mark.skipif(CHROMIUM is None, reason=NO_CHROMIUM)
def test_report_renders_in_headless_chromium(tmp_path):
    # the check itself: a page with a missing image and a console error is caught
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><p>x</p><img src="missing.png"><script>console.error("boom")</script>')
    errors = load_page(bad).errors
    assert any("ERR_FILE_NOT_FOUND" in e for e in errors) and any("boom" in e for e in errors)
    assert main(["--mode", "eval", *TINY, "--log_dir", str(tmp_path / "run")]) == 0
    assert_renders_cleanly(tmp_path / "run" / "report.html")


# ---- compare: paired differences and log axes ------------------------------------------------------------------


def _rows(tmp_path, values: dict[str, list[float]]):
    """SummaryRows of one simulated run with the scheduler, seed and avg_jct_s replaced."""
    from metrics.summary import summarize

    result, _ = _simulated(tmp_path, "easy")
    base = summarize(result)
    return [
        dataclasses.replace(base, scheduler=name, seed=seed, avg_jct_s=v)
        for name, jct in values.items()
        for seed, v in enumerate(jct)
    ]


def test_paired_differences_by_hand(tmp_path):
    rows = _rows(tmp_path, {"fcfs": [100, 200, 300], "sjf": [90, 150, 330], "easy": [100, 200, 300]})
    sjf, easy = paired_differences(rows, "avg_jct_s")
    assert (sjf.scheduler, sjf.baseline, sjf.seeds, sjf.diff.tolist()) == (
        "sjf",
        "fcfs",
        (0, 1, 2),
        [-10, -50, 30],
    )
    assert sjf.mean == pytest.approx(-10)
    assert sjf.ci95 == pytest.approx(4.302652730 * 40 / np.sqrt(3))  # t_{0.975,2} x s / sqrt(n), s = 40
    assert easy.diff.tolist() == [0, 0, 0] and easy.ci95 == 0
    (one,) = paired_differences(rows[:1] + rows[3:4], "avg_jct_s")
    assert one.diff.tolist() == [-10] and np.isnan(one.ci95)  # one seed: no interval
    ax = paired_figure(rows).axes[0]
    dots = [line.get_ydata().tolist() for line in ax.get_lines() if line.get_marker() == "o"]
    assert dots == [[-10, -50, 30], [0, 0, 0]]


def test_compare_panels_use_a_log_axis_only_where_values_span_decades(tmp_path):
    assert spans_decades(np.array([1000.0, 230_000.0])) and not spans_decades(np.array([1000.0, 20_000.0]))
    assert not spans_decades(np.array([0.0, 230_000.0]))  # a log axis cannot show 0
    rows = _rows(tmp_path, {"fcfs": [230_000.0, 200_000.0], "easy": [1000.0, 1500.0]})
    axes = compare_figure(rows).axes
    assert axes[0].get_yscale() == "log" and "log scale" in axes[0].get_ylabel()  # avg JCT
    assert all(ax.get_yscale() == "linear" for ax in axes[1:])  # the other metrics are equal across rows
