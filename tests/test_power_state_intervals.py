"""power_states.csv and the timeline's power-state shading: each node's intervals are contiguous and cover the run,
agree with the run's energy figures and job runs (a plain recomputation under Hypothesis), and what the timeline
shades is exactly the file's non-busy intervals, over each node's lanes, cut to a --timeline_window."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import metrics.run_figures as run_figures
from main import main
from metrics.energy import energy_report
from metrics.figure_data import read_run_tables
from metrics.power_states import NODE_STATES, node_state_intervals, write_power_states_csv
from schedulers import POLICIES
from schedulers.power_managers import idle_off, make_manager, parse_manager
from sim.cluster import ClusterLayout
from sim.cluster_spec import parse_cluster_spec
from sim.job import Workload
from sim.power import GPU_POWER, OFF, ON, STATE_NAMES, PowerModel
from sim.prices import synthetic_curve
from sim.simulator import Simulator
from tests.helpers import job
from tests.test_invariants import clusters, workloads


def _rows(iv) -> list[tuple[int, str, float, float]]:
    return list(zip(iv.node.tolist(), iv.state, iv.start_s.tolist(), iv.end_s.tolist(), strict=True))


def test_hand_computed_idle_off_run():
    # The idle_off:100:0 run of tests/test_energy.py: n0 runs j0 (8 GPUs) 0..50, idles to 150, shuts down
    # 150..210, is off until j1 arrives at 400, boots 400..660, runs j1 660..670, idles 100 s, shuts down
    # 770..830 (the run's last event); n1 never runs a job: idle 0..100, shutting down 100..160, off after.
    model = PowerModel(node_base_w=300.0, pue=1.0, boot_s=260.0, shutdown_s=60.0)
    sim = Simulator(
        Workload("t", (job(0, 0, 50, 8), job(1, 400, 10, 8))),
        ClusterLayout(parse_cluster_spec("2xA100-80GB:8")),
        None,
        1.2,
        power=model,
    )
    sim.run(POLICIES["fcfs"], manager=make_manager(parse_manager("idle_off:100:0")))
    assert _rows(node_state_intervals(sim.result("fcfs", 0))) == [
        (0, "busy", 0, 50),
        (0, "idle", 50, 150),
        (0, "shutting_down", 150, 210),
        (0, "off", 210, 400),
        (0, "booting", 400, 660),
        (0, "busy", 660, 670),
        (0, "idle", 670, 770),
        (0, "shutting_down", 770, 830),
        (1, "idle", 0, 100),
        (1, "shutting_down", 100, 160),
        (1, "off", 160, 830),
    ]


def _overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cluster=clusters(),
    workload=workloads(),
    algo=st.sampled_from(["fcfs", "easy", "tiresias", "srtf"]),
    seed=st.integers(0, 2**16),
    idle_s=st.sampled_from([0.0, 20.0, 300.0]),
)
def test_intervals_cover_the_run_and_agree_with_energy_and_runs(cluster, workload, algo, seed, idle_s):
    layout = ClusterLayout(cluster)
    rng = np.random.default_rng(seed)
    initial = tuple(int(x) for x in rng.choice([ON, OFF], size=layout.num_nodes))
    model = PowerModel(boot_s=30.0, shutdown_s=10.0, off_w=5.0)
    sim = Simulator(workload, layout, None, 1.2, power=model, initial_power=initial)
    sim.run(POLICIES[algo], manager=lambda view: idle_off(view, idle_s, 0))
    r = sim.result(algo, 0)
    iv = node_state_intervals(r)
    end = r.end_of_run_s
    log = list(
        zip(r.power_log_t_s.tolist(), r.power_log_node.tolist(), r.power_log_state.tolist(), strict=True)
    )
    assert set(iv.state) <= set(NODE_STATES)
    # per node: contiguous, positive lengths, no two neighbours in one state, covering [0, end of run]
    by_node: dict[int, list[tuple[str, float, float]]] = {}
    for k, s, a, b in _rows(iv):
        by_node.setdefault(k, []).append((s, a, b))
    assert sorted(by_node) == list(range(len(r.nodes)))
    for k, rows in by_node.items():
        assert rows[0][1] == 0.0 and rows[-1][2] == end
        at_0 = [s for t, n, s in log if n == k and t == 0.0]  # changes at time 0 (a boot at once)
        first = at_0[-1] if at_0 else initial[k]
        assert rows[0][0] in ({"idle", "busy"} if first == ON else {STATE_NAMES[first]}) or end == 0
        for (s0, _, b0), (s1, a1, _) in zip(rows, rows[1:], strict=False):
            assert b0 == a1 and s0 != s1
        assert all(b > a for _, a, b in rows) or end == 0

    # the run's job intervals, per node (open ones up to the end)
    index = {n.node_id: k for k, n in enumerate(r.nodes)}
    runs_on: dict[int, list[tuple[float, float]]] = {}
    for a, b, placement in zip(r.runs.start_s.tolist(), r.runs.end_s.tolist(), r.runs.placement, strict=True):
        for k in {index[g.rsplit("/", 1)[0]] for g in placement.split(";")}:
            runs_on.setdefault(k, []).append((a, end if b != b else b))
    for k, rows in by_node.items():
        for a, b in runs_on.get(k, ()):
            # a job never runs on a node that is not busy: all of its time lies in the node's busy intervals
            assert sum(_overlap(a, b, x, y) for s, x, y in rows if s == "busy") == pytest.approx(b - a)
        for s, x, y in rows:
            if s == "busy":  # and a busy interval is covered by the node's jobs at each of its instants
                cuts = sorted({x, y, *(t for a, b in runs_on[k] for t in (a, b) if x < t < y)})
                for lo, hi in zip(cuts, cuts[1:], strict=False):
                    mid = (lo + hi) / 2
                    assert any(a <= mid < b for a, b in runs_on[k])

    # energy: sum over the intervals of the node's static draw (off_w when off, base + idle GPUs otherwise) plus
    # every run's dynamic GPU draw, both inside the energy window, equals the run's IT energy; off time likewise
    e = energy_report(r, synthetic_curve())
    t0, t1 = e.window_start_s, e.window_end_s
    it_j = 0.0
    off_s = 0.0
    for k, rows in by_node.items():
        n = r.nodes[k]
        w = model.node_watts(n.gpu_type, n.kind)
        for s, a, b in rows:
            seconds = _overlap(a, b, t0, t1)
            it_j += seconds * (model.off_w if s == "off" else w.base_w + n.num_gpus * w.gpu_idle_w)
            off_s += seconds if s == "off" else 0.0
    for i, a, b, placement in zip(
        r.runs.job.tolist(), r.runs.start_s.tolist(), r.runs.end_s.tolist(), r.runs.placement, strict=True
    ):
        share = r.jobs[i].gpu_milli / 1000.0
        seconds = _overlap(a, end if b != b else b, t0, t1)
        for g in placement.split(";"):
            n = r.nodes[index[g.rsplit("/", 1)[0]]]
            it_j += (
                seconds
                * share
                * (GPU_POWER[n.gpu_type].max_w - model.node_watts(n.gpu_type, n.kind).gpu_idle_w)
            )
    assert it_j / 3.6e6 == pytest.approx(e.it_energy_kwh, rel=1e-9, abs=1e-12)
    assert off_s / 3600.0 == pytest.approx(e.node_hours_off, rel=1e-9, abs=1e-12)


# ---- the command line and the drawn timeline ---------------------------------------------------------------------

ARGS = ["--algo", "easy", "--difficulty", "hard", "--num_jobs", "40", "--cluster", "2xA100:8,2xV100:8,2xT4:4"]
ARGS += ["--no_progress"]


def _run(folder: Path, *extra: str) -> Path:
    assert main(["--mode", "eval", *ARGS, *extra, "--log_dir", str(folder)]) == 0
    return folder


@pytest.fixture(scope="module")
def power_run(tmp_path_factory) -> Path:
    return _run(tmp_path_factory.mktemp("power") / "a", "--power", "idle_off:600:0")


def test_power_run_writes_the_file_byte_identical_and_lists_it(power_run, tmp_path):
    states = pd.read_csv(power_run / "power_states.csv", dtype={"node_id": str})
    assert list(states.columns) == ["node_id", "state", "start_s", "end_s"]
    assert {"off", "booting", "shutting_down", "idle", "busy"} <= set(states.state)  # the case is not trivial
    cluster = pd.read_csv(power_run / "cluster.csv", dtype={"node_id": str})
    assert list(dict.fromkeys(states.node_id)) == cluster.node_id.tolist()
    summary = pd.read_csv(power_run / "summary.csv")
    off = states[states.state == "off"]
    # the window of summary.csv's energy figures: first arrival to last completion
    jobs = pd.read_csv(power_run / "jobs.csv")
    t0, t1 = jobs.submit_time.min(), jobs.end_time.max()
    off_s = (np.minimum(off.end_s, t1) - np.maximum(off.start_s, t0)).clip(lower=0).sum()
    assert off_s / 3600.0 == pytest.approx(summary.node_hours_off[0], rel=1e-9)
    page = (power_run / "report.html").read_text()
    described = re.search(r'<a href="power_states.csv">[^<]*</a></td><td>([^<]+)</td>', page)
    assert described and "power state" in described.group(1)
    again = _run(tmp_path / "b", "--power", "idle_off:600:0")
    assert (again / "power_states.csv").read_bytes() == (power_run / "power_states.csv").read_bytes()
    assert (again / "gantt.png").read_bytes() == (power_run / "gantt.png").read_bytes()


def test_run_without_power_writes_no_power_states(tmp_path):
    folder = _run(tmp_path / "a", "--plots", "none")
    assert not (folder / "power_states.csv").exists()
    assert read_run_tables(folder).power_states is None


def _drawn_shading(ax) -> set[tuple[str, float, float, float, float]]:
    """(state, top lane edge, bottom lane edge, start s, end s) of every shaded rectangle on the timeline."""
    state_of = {label: state for state, (label, _, _) in run_figures.STATE_STYLE.items()}
    out = set()
    for c in ax.collections:
        if c.get_label() in state_of:
            for p in c.get_paths():
                x, y = p.vertices[:4, 0] * 3600.0, p.vertices[:4, 1]
                out.add((state_of[c.get_label()], y.min(), y.max(), round(x.min(), 6), round(x.max(), 6)))
    return out


def _expected_shading(folder: Path, window: tuple[float, float] | None) -> set:
    """The same from power_states.csv and cluster.csv by hand: each non-busy interval over its node's GPU lanes
    (lanes numbered from 0 down cluster.csv's GPUs), cut to the window."""
    states = pd.read_csv(folder / "power_states.csv", dtype={"node_id": str})
    cluster = pd.read_csv(folder / "cluster.csv", dtype={"node_id": str})
    first_lane = dict(zip(cluster.node_id, np.cumsum(cluster.num_gpus) - cluster.num_gpus, strict=True))
    gpus = dict(zip(cluster.node_id, cluster.num_gpus, strict=True))
    lo, hi = window if window else (-np.inf, np.inf)
    out = set()
    for node, state, a, b in zip(states.node_id, states.state, states.start_s, states.end_s, strict=True):
        if state != "busy" and a < hi and b > lo:
            top = first_lane[node] - 0.5
            out.add((state, top, top + gpus[node], round(max(a, lo), 6), round(min(b, hi), 6)))
    return out


@pytest.mark.parametrize("window", [None, (20000.0, 60000.0)])
def test_the_timeline_shades_exactly_the_files_non_busy_intervals(power_run, window):
    tables = read_run_tables(power_run)
    assert tables.total_gpus <= run_figures.GANTT_MAX_GPU_LANES  # one lane per GPU
    ax = run_figures.gantt_figure(tables, "t", window).axes[0]
    drawn = _drawn_shading(ax)
    expected = _expected_shading(power_run, window)
    assert drawn == expected and len(expected) > 4
    if window:
        assert ax.get_xlim() == pytest.approx((window[0] / 3600.0, window[1] / 3600.0))
        whole = _expected_shading(power_run, None)
        assert len(expected) < len(whole)  # the window leaves some intervals out
    labels = ax.get_legend_handles_labels()[1]
    assert {"node off", "idle (on, no job)"} <= set(labels)
    # a job block never overlaps a shaded (off, booting, shutting down or idle) span of its lane
    (runs,) = [c for c in ax.collections if c.get_label() == "runs"]
    for p in runs.get_paths():
        x0, x1 = p.vertices[:, 0].min() * 3600.0, p.vertices[:, 0].max() * 3600.0
        lane = p.vertices[:, 1].mean()
        for _, top, bottom, a, b in drawn:
            if top < lane < bottom:
                assert _overlap(x0, x1, a, b) < 1e-3


def test_per_node_lanes_shade_one_lane_per_node(power_run, monkeypatch):
    monkeypatch.setattr(run_figures, "GANTT_MAX_GPU_LANES", 4)  # this 28-GPU cluster gets one lane per node
    ax = run_figures.gantt_figure(read_run_tables(power_run), "t").axes[0]
    drawn = _drawn_shading(ax)
    cluster = pd.read_csv(power_run / "cluster.csv", dtype={"node_id": str})
    lane = {n: k for k, n in enumerate(cluster.node_id)}
    states = pd.read_csv(power_run / "power_states.csv", dtype={"node_id": str})
    expected = {
        (s, lane[n] - 0.5, lane[n] + 0.5, round(a, 6), round(b, 6))
        for n, s, a, b in zip(states.node_id, states.state, states.start_s, states.end_s, strict=True)
        if s != "busy"
    }
    assert drawn == expected


def test_writer_needs_a_power_model(tmp_path):
    sim = Simulator(
        Workload("t", (job(0, 0, 50, 1),)), ClusterLayout(parse_cluster_spec("1xT4:4")), None, 1.2
    )
    sim.run(POLICIES["fcfs"])
    with pytest.raises(ValueError, match="no power model"):
        write_power_states_csv(sim.result("fcfs", 0), tmp_path / "power_states.csv")
