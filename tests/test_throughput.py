"""Per-job GPU-type speeds (sim/throughput.py) through the placement rule and the simulator: hand-computed
durations from Gavel's measured matrix and from small matrices, a plain second implementation of the speed rule
read straight from the JSON, and Hypothesis invariants with typed jobs."""

from __future__ import annotations

import functools
import json
import statistics
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config import RunConfig, WorkloadConfig
from scenario.build import build_scenario
from schedulers import POLICIES, PREEMPTIVE
from sim.catalog import CATALOG
from sim.cluster import FULL, ClusterLayout
from sim.cluster_spec import ClusterSpec, NodeSpec, parse_cluster_spec
from sim.job import Workload
from sim.placement import Pace, alternatives, place
from sim.simulator import Simulator, typed_pace
from sim.throughput import load_matrix
from tests.helpers import job
from tests.test_placement import _brute_force, _occupied

GAVEL = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "traces"
    / "gavel-throughputs"
    / "simulation_throughputs.json"
)
needs_gavel = pytest.mark.skipif(not GAVEL.is_file(), reason=f"Gavel matrix not found at {GAVEL}")

R50 = "ResNet-50 (batch size 64)"


@functools.cache
def _gavel():
    """(raw JSON, loaded matrix) of Gavel's file, read once per session (Hypothesis tests draw many cases)."""
    return json.loads(GAVEL.read_text()), load_matrix(str(GAVEL))


REC = "Recommendation (batch size 512)"


def _run(cluster: str, jobs, matrix, policy: str = "fcfs", factor: float = 1.2) -> dict:
    layout = ClusterLayout(parse_cluster_spec(cluster))
    sim = Simulator(Workload("t", tuple(jobs)), layout, None, factor, throughput=matrix)
    sim.run(POLICIES[policy])
    r = sim.result(policy, 0)
    return {
        j.job_id: (float(r.start_s[i]), float(r.end_s[i]), r.status[i], r.gpu_type[i], r.placement[i])
        for i, j in enumerate(jobs)
    }


def _write(tmp_path: Path, raw: dict) -> str:
    path = tmp_path / "m.json"
    path.write_text(json.dumps(raw))
    return str(path)


# -- Gavel's measured matrix ---------------------------------------------------------------------------------


@needs_gavel
def test_resnet50_runs_its_measured_k80_over_v100_ratio():
    """ResNet-50 (bs 64), 1 GPU, Gavel simulation_throughputs.json: K80 0.6190282202246573, V100 4.394774823323071
    steps/s. runtime_s = 1000 s on A100 (reference); V100 = 0.5 (catalog) -> 2000 s on V100;
    K80 speed = 0.5 x 0.6190282202246573 / 4.394774823323071 = 0.0704277517177 -> 14198.9482 s on K80."""
    m = load_matrix(str(GAVEL))
    jobs = [job("v", 0, 1000, job_type=R50), job("k", 0, 1000, job_type=R50)]
    got = _run("1xV100:1,1xK80:1", jobs, m)
    assert got["v"][3] == "V100-16GB" and got["v"][1] == pytest.approx(2000.0, rel=1e-12)
    assert got["k"][3] == "K80"
    assert got["k"][1] == pytest.approx(1000 / (0.5 * 0.6190282202246573 / 4.394774823323071), rel=1e-12)
    assert got["k"][1] == pytest.approx(14198.9482, rel=1e-8)
    # untyped, the catalog's K80 speed 0.10 applies: 10000 s
    plain = _run("1xV100:1,1xK80:1", [job("v", 0, 1000), job("k", 0, 1000)], m)
    assert plain["k"][1] == pytest.approx(10000.0)


@needs_gavel
def test_a_job_faster_on_p100_than_v100_picks_p100():
    """Recommendation (bs 512): P100 48.882390510045944 vs V100 23.317634950657975 steps/s, so its P100 speed is
    0.5 x 48.88/23.32 = 1.0482 > 0.5: with both free it takes the P100 (an untyped job takes the V100, 0.5 > 0.34).
    Duration 100 s / 1.0482 = 95.40 s."""
    m = load_matrix(str(GAVEL))
    got = _run("1xV100:1,1xP100:1", [job("rec", 0, 100, job_type=REC)], m)
    assert got["rec"][3] == "P100"
    assert got["rec"][1] == pytest.approx(100 / (0.5 * 48.882390510045944 / 23.317634950657975), rel=1e-12)
    assert _run("1xV100:1,1xP100:1", [job("x", 0, 100)], m)["x"][3] == "V100-16GB"
    # ResNet-50 is faster on V100 (4.39 vs 2.62): it keeps the V100
    assert _run("1xV100:1,1xP100:1", [job("r", 0, 100, job_type=R50)], m)["r"][3] == "V100-16GB"


@needs_gavel
def test_unmeasured_types_take_the_catalog_speed_and_zero_throughput_is_unacceptable():
    """A100/H100/T4 have no column: every job type runs at the catalog speed there (1.0, 2.0, 0.2). ResNet-50
    (bs 128) on 4 K80s measured 0 steps/s (does not fit): K80 is not acceptable to it, so it waits for the
    V100 node instead of taking the free K80 node, and a K80-only cluster rejects it."""
    m = load_matrix(str(GAVEL))
    got = _run("1xH100:1,1xT4:1", [job("h", 0, 100, job_type=R50), job("t", 0, 100, job_type=R50)], m)
    assert got["h"][1] == pytest.approx(50.0) and got["t"][1] == pytest.approx(500.0)
    big = "ResNet-50 (batch size 128)"
    jobs = [job("first", 0, 100, 4), job("r", 0, 100, 4, job_type=big)]
    got = _run("1xV100:4,1xK80:4", jobs, m)
    assert got["first"][3] == "V100-16GB" and got["r"][3] == "V100-16GB"
    assert got["r"][0] == pytest.approx(200.0)  # after "first" (100 / 0.5 = 200 s)
    layout = ClusterLayout(parse_cluster_spec("1xK80:4"))
    sim = Simulator(Workload("t", (job("r", 0, 100, 4, job_type=big),)), layout, None, 1.2, throughput=m)
    assert sim.result("x", 0).status[0] == "rejected"
    assert (
        sim.reject_reason[0]
        == f"job type {big!r} has throughput 0 on every acceptable GPU type of the cluster"
    )


# -- small matrices: spread and co-location ----------------------------------------------------------------


def _small(tmp_path: Path) -> str:
    """Model M: 1 GPU v100 10 steps/s, p100 5; 4 GPUs v100 40, unconsolidated 20 (spread halves it).
    Co-location on v100: own 5 with A, 8 with B, 0 with C (could not run: left out) -> median(0.5, 0.8) = 0.65;
    on p100: own 4 with A -> 0.8; on k80: measured with A but could not run (0) -> factor 0."""
    return _write(
        tmp_path,
        {
            "v100": {
                "('M', 1)": {
                    "null": 10.0,
                    "('A', 1)": [5.0, 1.0],
                    "('B', 1)": [8.0, 1.0],
                    "('C', 1)": [0.0, 3.0],
                },
                "('M', 4)": {"null": 40.0},
            },
            "p100": {"('M', 1)": {"null": 5.0, "('A', 1)": [4.0, 1.0]}, "('M', 4)": {"null": 16.0}},
            "k80": {"('M', 1)": {"null": 2.0, "('A', 1)": [0.0, 1.0]}, "('M', 4)": {"null": 4.0}},
            "v100_unconsolidated": {"('M', 4)": {"null": 20.0}},
        },
    )


def test_a_spread_uses_the_unconsolidated_throughput_not_the_global_factor(tmp_path):
    """4-GPU job of M on 2 V100 nodes of 2 GPUs: it must spread. Spread speed = 0.5 x 20/40 = 0.25 ->
    100 s / 0.25 = 400 s (the global factor 1.2 would give 100 / 0.5 x 1.2 = 240 s, which the untyped job gets).
    On P100 nodes (no p100_unconsolidated column) the global factor applies to its solo speed:
    0.5 x 16/40 = 0.2, / 1.2 -> 100 / (0.2 / 1.2) = 600 s."""
    m = load_matrix(_small(tmp_path))
    got = _run("2xV100:2", [job("m", 0, 100, 4, job_type="M"), job("u", 400, 100, 4)], m)
    assert got["m"][1] == pytest.approx(400.0) and got["m"][4].count(";") == 3
    assert got["u"][1] - got["u"][0] == pytest.approx(240.0)
    got = _run("2xP100:2", [job("m", 0, 100, 4, job_type="M")], m)
    assert got["m"][1] == pytest.approx(600.0)
    # on one node big enough it is not spread: 100 / 0.5 = 200 s
    assert _run("1xV100:4", [job("m", 0, 100, 4, job_type="M")], m)["m"][1] == pytest.approx(200.0)


def test_a_fractional_typed_job_runs_at_its_median_co_location_factor(tmp_path):
    """Half a V100 for M (1 GPU): 0.5 x 0.65 = 0.325 -> 100 / 0.325 = 307.6923 s. On P100 (alone there):
    0.5 x 5/10 x 0.8 = 0.2 -> 500 s. An untyped fractional job keeps the catalog speed (100 / 0.5 = 200 s)."""
    m = load_matrix(_small(tmp_path))
    jobs = [job("f", 0, 100, gpu_milli=500, job_type="M"), job("u", 0, 100, gpu_milli=500)]
    got = _run("1xV100:1", jobs, m)
    assert got["f"][1] == pytest.approx(100 / 0.325, rel=1e-12) and got["u"][1] == pytest.approx(200.0)
    assert _run("1xP100:1", [job("f", 0, 100, gpu_milli=500, job_type="M")], m)["f"][1] == pytest.approx(
        500.0
    )
    # on a K80 M ran with no partner (factor 0): a fractional M never uses the free K80, it waits for the V100
    # that w holds until 200 s (FCFS: g waits behind it); a whole-GPU M may use the K80: 0.5 x 2/10 = 0.1 -> 1000 s
    jobs = [
        job("w", 0, 100, 1),
        job("f", 0, 100, gpu_milli=500, job_type="M"),
        job("g", 0, 100, job_type="M"),
    ]
    got = _run("1xV100:1,1xK80:1", jobs, m)
    assert got["w"][3] == "V100-16GB" and got["f"][3] == "V100-16GB" and got["f"][0] == pytest.approx(200.0)
    assert got["g"][3] == "K80" and got["g"][1] - got["g"][0] == pytest.approx(1000.0)


def test_fractional_typed_jobs_rank_gpus_by_their_own_speed(tmp_path):
    """Model F is 3x faster on P100 than on V100 (30 vs 10 steps/s): its fractional share goes to the P100
    (speed 0.5 x 3 = 1.5 > 0.5), and `alternatives` lists the P100 first, then the V100."""
    path = _write(tmp_path, {"v100": {"('F', 1)": {"null": 10.0}}, "p100": {"('F', 1)": {"null": 30.0}}})
    m = load_matrix(path)
    layout = ClusterLayout(parse_cluster_spec("1xV100:1,1xP100:1"))
    sim = Simulator(
        Workload("t", (job("f", 0, 100, gpu_milli=300, job_type="F"),)), layout, None, 1.2, throughput=m
    )
    sim.run(POLICIES["fcfs"])
    assert sim.result("fcfs", 0).gpu_type[0] == "P100"
    assert sim.result("fcfs", 0).end_s[0] == pytest.approx(100 / 1.5)
    e, k, milli, mem, pace = sim.jobs.shape[0]
    from sim.cluster import FreeState

    alts = list(alternatives(FreeState(layout), e, k, milli, mem, pace))
    assert [layout.type_names[a.type_idx] for a in alts] == ["P100", "V100-16GB"]


# -- a second, plain implementation of the speed rule --------------------------------------------------------


def _plain_speed(raw: dict, model: str, k: int, gpu_type: str, spread: bool, fractional: bool, factor: float):
    """The README's rule read straight from the JSON: columns by name, the anchor V100 = 0.5."""
    col = {"K80": "k80", "P100": "p100", "V100-16GB": "v100", "V100-32GB": "v100"}.get(gpu_type)
    scales = sorted(
        {int(key.rsplit(",", 1)[1].rstrip(")")) for key in raw["v100"] if key.startswith(f"('{model}',")}
    )
    s = max(x for x in scales if x <= k)
    key = f"('{model}', {s})"
    anchor = raw["v100"][key]["null"]
    own = raw[col][key]["null"] if col else anchor * CATALOG[gpu_type].speed / 0.5
    v = 0.5 * own / anchor
    if spread:
        un = raw.get((col or "v100") + "_unconsolidated", {}).get(key)
        if un is None:
            return v / factor
        return 0.5 * un["null"] / anchor if col else v * un["null"] / anchor
    if fractional:
        entry = raw[col or "v100"][key]
        pairs = [p for o, p in entry.items() if o != "null"]
        ratios = [p[0] / entry["null"] for p in pairs if p[0] > 0 and entry["null"] > 0]
        v *= statistics.median(ratios) if ratios else (0.0 if pairs else 1.0)  # ran with no partner: 0
    return v


GAVEL_TYPES = ("K80", "P100", "V100-16GB", "A100-80GB", "T4")


@st.composite
def typed_clusters(draw):
    groups = draw(
        st.lists(
            st.tuples(st.sampled_from(GAVEL_TYPES), st.integers(1, 2), st.sampled_from([1, 2, 4, 8])),
            min_size=1,
            max_size=3,
        )
    )
    nodes = [
        NodeSpec(f"n{i}-{c}", t, g, CATALOG[t].mem_gb) for i, (t, n, g) in enumerate(groups) for c in range(n)
    ]
    return ClusterSpec("random", tuple(nodes))


@st.composite
def typed_workloads(draw, models):
    jobs = []
    t = 0.0
    for i in range(draw(st.integers(1, 20))):
        t += draw(st.sampled_from([0.0, 1.0, 7.0]))
        fractional = draw(st.booleans()) and draw(st.booleans())
        k = 1 if fractional else draw(st.sampled_from([1, 1, 2, 3, 4, 8, 16]))
        jobs.append(
            job(
                i,
                t,
                draw(st.integers(1, 300)),
                k,
                gpu_milli=draw(st.sampled_from([250, 500])) if fractional else FULL,
                job_type=draw(st.sampled_from(models)) if draw(st.integers(0, 4)) else "",  # 4 in 5 typed
            )
        )
    return Workload("random", tuple(jobs))


@needs_gavel
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_typed_jobs_run_their_own_speed_and_never_over_commit(data):
    """Every policy on random clusters of measured and unmeasured types with Gavel-typed jobs: each job runs
    exactly runtime / the plain rule's speed on the type (and spread) it got, on a type it can run on, and no
    GPU is ever over-committed."""
    raw, m = _gavel()
    spec = data.draw(typed_clusters())
    wl = data.draw(typed_workloads(m.models))
    # one execution per job: the preemptive policies (wt-A) split a job into runs, checked in test_preemption
    policy = data.draw(st.sampled_from(sorted(set(POLICIES) - PREEMPTIVE)))
    factor = data.draw(st.sampled_from([1.0, 1.2, 2.0]))
    layout = ClusterLayout(spec)
    sim = Simulator(wl, layout, None, factor, throughput=m)
    sim.run(POLICIES[policy])
    r = sim.result(policy, 0)
    use = defaultdict(list)
    for i, j in enumerate(wl.jobs):
        if r.status[i] == "rejected":
            continue
        assert r.status[i] == "completed"
        p = sim.placements[i]
        gpu_type = layout.type_names[p.type_idx]
        spread = len(p.nodes) > 1
        if j.job_type:
            v = _plain_speed(raw, j.job_type, j.num_gpus, gpu_type, spread, j.gpu_milli < FULL, factor)
            assert v > 0
        else:
            v = CATALOG[gpu_type].speed / (factor if spread else 1.0)
        assert r.end_s[i] - r.start_s[i] == pytest.approx(j.runtime_s / v, rel=1e-12)
        for g in p.gpus:
            use[g] += [(r.start_s[i], 1, p.milli), (r.end_s[i], 0, -p.milli)]
    for events in use.values():
        level = 0
        for _, _, m_ in sorted(events):
            level += m_
            assert level <= FULL


@settings(max_examples=80, deadline=None)
@given(
    typed_clusters(),
    st.lists(st.booleans(), min_size=64, max_size=64),
    st.sampled_from([1, 2, 4, 8, 16]),
    st.lists(st.floats(0.01, 3.0), min_size=3, max_size=3),
)
def test_typed_place_takes_the_earliest_completing_free_option(spec, busy, k, measured):
    """The placement rule with a per-job speed table ranks options by the job's own durations: the brute force
    of tests/test_placement.py (which calls the same duration formula with the typed Pace) agrees."""
    layout = ClusterLayout(spec)
    free = _occupied(layout, busy)
    by_col = dict(zip(("K80", "P100", "V100-16GB"), measured, strict=True))
    table = {}
    for v, t in zip(layout.type_speed, layout.type_names, strict=True):
        solo = by_col.get(t, CATALOG[t].speed)
        table[v] = (v, solo, solo / 1.5)
    pace = Pace(1.2, True, tuple(table.values()))
    elig = layout.eligible((), 0)
    options = _brute_force(layout, free, (), 0, k, pace)
    p = place(free, elig, k, FULL, 0, pace)
    if not options:
        assert p is None
        return
    what, where = options[0][1]
    assert p is not None
    assert p.nodes == (where,) if what == "node" else p.type_idx == where


# -- scenario: --job_types on synthetic workloads --------------------------------------------------------------


@needs_gavel
def test_synthetic_job_types_are_drawn_after_the_workload_and_fit_the_gpu_count():
    base = RunConfig(workload=WorkloadConfig(num_jobs=200, difficulty="easy"))
    typed = RunConfig(workload=WorkloadConfig(num_jobs=200, difficulty="easy", job_types="gavel"))
    a, b = build_scenario(base, 3), build_scenario(typed, 3)
    # same jobs apart from the job type; same estimates
    assert [j.__class__(**{**_fields(j), "job_type": ""}) for j in b.workload.jobs] == list(a.workload.jobs)
    assert np.array_equal(a.known_runtime_s, b.known_runtime_s)
    m = b.throughput
    assert all(j.job_type in m.models for j in b.workload.jobs)
    for j in b.workload.jobs:
        if j.num_gpus > 1:  # Gavel: only the distributed models (not A3C, CycleGAN, Recommendation)
            assert m.model_scales[j.job_type][-1] >= 2
    again = build_scenario(typed, 3)
    assert again.workload.jobs == b.workload.jobs
    assert b.workload.report["job_types_drawn"] == 200
    assert sum(b.workload.report["jobs_per_job_type"].values()) == 200


def _fields(j) -> dict:
    return {f: getattr(j, f) for f in j.__slots__}


def test_equal_layout_speeds_must_have_equal_job_speeds(tmp_path):
    """The per-job table is keyed by layout type speed: two types of equal speed with different job speeds
    (possible only with --uniform_speed) are refused rather than mixed up."""
    m = load_matrix(
        _write(tmp_path, {"v100": {"('M', 1)": {"null": 10.0}}, "k80": {"('M', 1)": {"null": 1.0}}})
    )
    layout = ClusterLayout(parse_cluster_spec("1xV100:1,1xK80:1"), uniform_speed=True)
    with pytest.raises(ValueError, match="equal speed"):
        typed_pace(Pace(), job("m", 0, 1, job_type="M"), layout, m)


@needs_gavel
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_easy_with_typed_jobs_equals_the_plain_scan(data):
    """EASY's by-shape scan and the plain reference (tests/easy_reference.py) take the same decisions when jobs
    have their own speeds (both reach them only through the Pace in each job's shape)."""
    from tests.easy_reference import easy_reference

    m = _gavel()[1]
    spec = data.draw(typed_clusters())
    wl = data.draw(typed_workloads(m.models))
    layout = ClusterLayout(spec)
    fast, plain = (
        Simulator(wl, layout, None, 1.2, throughput=m),
        Simulator(wl, layout, None, 1.2, throughput=m),
    )
    fast.run(POLICIES["easy"])
    plain.run(easy_reference)
    assert fast.placements == plain.placements
    assert np.array_equal(np.array(fast.start_s), np.array(plain.start_s), equal_nan=True)


@needs_gavel
def test_a_missing_unconsolidated_entry_falls_back_to_the_global_factor():
    """Gavel's k80_unconsolidated has no ResNet-50 (bs 64) 2-GPU entry. On two 1-GPU K80 nodes the job spreads:
    solo speed 0.5 x 1.2636370655757299 / 7.922054367597505 = 0.0797545, / factor 1.5 -> 1000 s takes
    1000 x 1.5 / 0.0797545 = 18807.74 s."""
    m = load_matrix(str(GAVEL))
    got = _run("2xK80:1", [job("r", 0, 1000, 2, job_type=R50)], m, factor=1.5)
    solo = 0.5 * 1.2636370655757299 / 7.922054367597505
    assert got["r"][1] == pytest.approx(1000 * 1.5 / solo, rel=1e-12)
    assert got["r"][1] == pytest.approx(18807.74, rel=1e-6)


@needs_gavel
def test_typed_runs_are_byte_identical_for_one_seed(tmp_path, capsys):
    from main import main

    argv = ["--mode", "eval", "--algo", "easy", "--num_jobs", "60", "--job_types", "gavel", "--no_progress"]
    argv += ["--cluster", "2xV100:4,2xP100:4,2xK80:4"]
    assert main([*argv, "--log_dir", str(tmp_path / "a")]) == 0
    assert main([*argv, "--log_dir", str(tmp_path / "b")]) == 0
    for name in ("jobs.csv", "summary.csv", "fairness.csv", "workload_report.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    header = (tmp_path / "a" / "jobs.csv").read_text().splitlines()[0]
    assert header.endswith(",reject_reason,job_type")
