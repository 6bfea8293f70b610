"""Side by side with the authors' own simulators, without their code: their per-job completion times pinned as
fixtures (tests/fixtures/*/README.md says how they were produced), and hand-computed cases of the points where
their bookkeeping differs from our default policies (docs/schedulers.md, Side by side with the authors'
simulators)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from schedulers import POLICIES
from schedulers.gavel_original import AGNOSTIC, AWARE, FIFO, FIFO_PERF, make_gavel_original
from schedulers.tiresias import make_tiresias
from schedulers.tiresias_original import make_tiresias_original
from sim.cluster import ClusterLayout
from sim.cluster_spec import parse_cluster_spec
from sim.job import Job, Workload
from sim.simulator import Simulator
from tests.test_throughput import needs_gavel
from workloads.sim_traces import load_gavel_trace, load_tiresias_trace

FIXTURES = Path(__file__).parent / "fixtures"


def _ends(workload: Workload, cluster: str, policy, matrix=None) -> np.ndarray:
    sim = Simulator(workload, ClusterLayout(parse_cluster_spec(cluster)), None, 1.2, 0.0, matrix)
    sim.run(policy)
    return np.asarray(sim.result("x", 0, preemptive=True).end_s, dtype=float)


# --- Tiresias (SymbioticLab/Tiresias at 959f9b0, simulator/run_sim.py --scheme=count) ---

_TIRESIAS_KNOB = {"dlas-gpu": 0.0, "dlas-gpu-2": 2.0, "dlas-gpu-05": 0.5}


def _tiresias_columns():
    for path in sorted((FIXTURES / "tiresias").glob("*.csv")):
        with path.open(newline="") as f:
            header = next(csv.reader(f))
        for col in header[4:]:
            # promotion (dlas-gpu-<knob>) takes seconds a run: the default suite keeps one trace's, the slow suite
            # has the rest
            slow = "dlas-gpu-" in col and path.stem != "t480_l0.8"
            yield pytest.param(path, col, id=f"{path.stem}-{col}", marks=[pytest.mark.slow] if slow else [])


@pytest.mark.parametrize(("path", "column"), list(_tiresias_columns()))
def test_tiresias_fixtures_identical_job_for_job(path, column):
    # column end_<schedule>_<G>g: the original's end time of each job with --schedule=<schedule> on G GPUs
    _, schedule, gpus = column.split("_")
    if schedule == "fifo":
        policy = POLICIES["fcfs"]
    elif schedule == "shortest":
        policy = POLICIES["srtf"]
    else:
        policy = make_tiresias_original(promote_knob=_TIRESIAS_KNOB[schedule])
    workload = load_tiresias_trace(path)
    with path.open(newline="") as f:
        theirs = np.array([float(r[column]) for r in csv.DictReader(f)])
    ours = _ends(workload, f"1xA100:{gpus[:-1]}", policy)
    np.testing.assert_array_equal(ours, theirs)


def test_tiresias_fixtures_cover_every_schedule_and_the_long_traces():
    ids = {p.id for p in _tiresias_columns()}
    for trace in ("t480_l0.8", "t480_l1.0", "t480_l1.8"):
        for schedule in ("fifo", "shortest", "dlas-gpu", "dlas-gpu-2", "dlas-gpu-05"):
            assert f"{trace}-end_{schedule}_64g" in ids


def _two(a: Job, b: Job, gpus: int, policy) -> np.ndarray:
    return _ends(Workload("two", (a, b), {}), f"1xA100:{gpus}", policy)


def test_tiresias_original_demoted_job_goes_behind_the_jobs_waiting_in_the_lower_queue():
    # one GPU, queues [0, 100) and [100, inf) GPU-s. A (0 s, 300 s) runs; B arrives at 10 and waits in queue 0.
    # t = 100: A reaches 100 GPU-s -> back of queue 1; B (queue 0) preempts it and runs.
    # t = 200: B reaches 100 -> back of queue 1, BEHIND A, which was waiting there: A preempts B and runs its
    # remaining 200 s (ends 400), then B its remaining 200 s (ends 600).
    a, b = Job("A", 0.0, 300.0, 1), Job("B", 10.0, 300.0, 1)
    np.testing.assert_array_equal(_two(a, b, 1, make_tiresias_original((100.0,))), [400.0, 600.0])
    # our default keeps each queue in arrival order with running jobs first: B, running when demoted, keeps the
    # GPU in queue 1 until it ends at 400, then A runs its remaining 200 s.
    np.testing.assert_array_equal(_two(a, b, 1, make_tiresias((100.0,))), [600.0, 400.0])


def test_tiresias_original_notices_a_demotion_only_at_its_events():
    # 3 GPUs, queue limit 100 GPU-s; A and B use all 3 GPUs for 1000 s each, B arrives at 1.
    # The original's clock: a running job's executed seconds grow by int(now - last event); the next "jump" is
    # now + (limit - executed) // GPUs (Python 2 integer division).
    # t=0: A starts, jump 0 + 100 // 3 = 33. t=1 (B arrives): A executed 1, jump 1 + 99 // 3 = 34.
    # t=34: A executed 34, 34 x 3 = 102 >= 100: demoted, B starts (jump 34 + 33 = 67).
    # t=67: B executed 33, 99 < 100: not yet; jump 67 + 67 // 3 = 89. t=89: 55 x 3 >= 100: B demoted behind A.
    # A runs its 1000 - 34 = 966 s: ends 89 + 966 = 1055; B its 1000 - 55: ends 1055 + 945 = 2000.
    a, b = Job("A", 0.0, 1000.0, 3), Job("B", 1.0, 1000.0, 3)
    policy = make_tiresias_original((100.0,))
    sim = Simulator(
        Workload("two", (a, b), {}), ClusterLayout(parse_cluster_spec("1xA100:3")), None, 1.2, 0.0
    )
    sim.run(policy)
    r = sim.result("x", 0, preemptive=True)
    np.testing.assert_array_equal(r.end_s, [1055.0, 2000.0])
    np.testing.assert_array_equal(r.start_s, [0.0, 34.0])
    # our default demotes at the crossing itself (A at 100 / 3 s) and keeps B running in the lower queue
    np.testing.assert_allclose(_two(a, b, 3, make_tiresias((100.0,))), [2000.0, 1000.0 + 100.0 / 3])


# --- Gavel (stanford-futuredata/gavel at c4fa400, scheduler/scripts/drivers/simulate_scheduler_with_trace.py) ---

_GAVEL_POLICIES = (AWARE, AGNOSTIC, FIFO_PERF, FIFO)


def _gavel_fixture(name: str, tmp_path: Path):
    """(workload, cluster, their JCTs by policy) of tests/fixtures/gavel/<name>.csv: the trace's fields that
    matter written back as Gavel's trace lines (read by workloads/sim_traces.py), the original's JCT columns."""
    from sim.throughput import load_matrix

    path = FIXTURES / "gavel" / f"{name}.csv"
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    lines = [
        f"{r['job_type']}\tcmd\tdir\t--steps\t1\t{r['total_steps']}\t{r['scale_factor']}\t1\t-1.000000\t"
        f"{r['arrival_time']}\n"
        for r in rows
    ]
    trace = tmp_path / f"{name}.trace"
    trace.write_text("".join(lines))
    matrix = load_matrix("gavel")
    workload = load_gavel_trace(trace, matrix)
    # one GPU per server as the original ran them (4:4:4); a multi-GPU trace on one node per type, so that
    # ours runs every job at the consolidated throughput, as the original does whatever its servers
    node = 4 if name.startswith("m") else 1
    cluster = ",".join(f"{4 // node}x{t}:{node}" for t in ("V100", "P100", "K80"))
    theirs = {p: np.array([float(r[f"jct_{p}"]) for r in rows]) for p in _GAVEL_POLICIES}
    return workload, cluster, theirs, matrix


@needs_gavel
@pytest.mark.parametrize(
    "name",
    ["s60", "m60", pytest.param("s120", marks=pytest.mark.slow), pytest.param("m80", marks=pytest.mark.slow)],
)
@pytest.mark.parametrize("policy", _GAVEL_POLICIES)
def test_gavel_original_matches_the_originals_jcts(name, policy, tmp_path):
    # measured (docs/schedulers.md): every round the same jobs on the same types; a job can end a fraction of
    # a step early here (it keeps its GPU to the round's end, the original idles it), and ties between equal
    # jobs follow the solver's rounding
    workload, cluster, theirs, matrix = _gavel_fixture(name, tmp_path)
    arrival = np.array([j.arrival_s for j in workload.jobs])
    ours = _ends(workload, cluster, make_gavel_original(policy, 0, matrix), matrix) - arrival
    rel = np.abs(ours - theirs[policy]) / theirs[policy]
    assert abs(ours.mean() / theirs[policy].mean() - 1) < 0.001
    assert np.median(rel) < 0.0002
    assert np.percentile(rel, 90) < 0.001


def _fifo_types(seed: int, policy: str) -> list[str]:
    # 8 one-GPU jobs at t = 0 on 3 V100 + 3 P100 + 3 K80: each job's GPU types over its run
    jobs = tuple(Job(str(i), 0.0, 36000.0, 1) for i in range(8))
    sim = Simulator(
        Workload("eight", jobs, {}), ClusterLayout(parse_cluster_spec("3xV100:1,3xP100:1,3xK80:1")), None
    )
    sim.run(make_gavel_original(policy, seed))
    return list(sim.result("x", seed, preemptive=True).gpu_type)


_LETTER = {"V100-16GB": "V", "P100": "P", "K80": "K"}


@pytest.mark.parametrize(
    ("seed", "expected"), [(0, "VVVVVVVV"), (1, "VVVVVVVV"), (3, "VVVPPPKK"), (5, "VVVPPPKK")]
)
def test_gavel_fifo_assigns_its_stale_type_and_drops_the_drawn_one(seed, expected):
    # the original's FIFOPolicy(seed=seed).get_allocation for these 8 jobs (run on its code): every job gets
    # the last listed type (V100) whatever the draw, and when V100 fills up the DRAWN type leaves the list:
    # seeds 0 and 1 keep V100 listed (all 8 pile onto 3 V100s and take turns), seeds 3 and 5 drop it, so the
    # next jobs go to P100, then K80. Allocations never change, so each job runs on that type only.
    assert "".join(_LETTER[t] for t in _fifo_types(seed, FIFO)) == expected  # (one type a job: no ';')


def test_gavel_fifo_perf_gives_each_job_its_fastest_type_with_room():
    # FIFOPolicyWithPerf on the same jobs: the first jobs by id their fastest type with GPUs left; it is
    # recomputed at resets, so later jobs move to faster types as the first ones end (a migration)
    types = _fifo_types(0, FIFO_PERF)
    assert "".join(_LETTER[t.split(";")[0]] for t in types) == "VVVPPPKK"
    assert types[:3] == ["V100-16GB"] * 3 and all(t.endswith("V100-16GB") for t in types[3:6])


def test_gavel_fifo_gives_a_job_that_cannot_use_its_stale_type_a_type_it_can_use():
    # FIFO's stale pick is the last listed type with GPUs left (name order: a100-80gb, t4 -> T4). Job 0 needs
    # 40 GB, more than a T4 has: it takes the last listed type with room it can run on (A100) instead of
    # waiting for ever for T4. A100 is then full and the DRAWN type leaves the list (seed 0 draws T4's index),
    # so job 1 gets the stale pick of the shorter list, A100 (the original's rule).
    jobs = (Job("0", 0.0, 1000.0, 1, gpu_mem_gb=40.0), Job("1", 0.0, 1000.0, 1))
    sim = Simulator(
        Workload("two", jobs, {}), ClusterLayout(parse_cluster_spec("1xA100-80GB:1,1xT4:1")), None
    )
    sim.run(make_gavel_original(FIFO, 0))
    r = sim.result("x", 0, preemptive=True)
    assert list(r.status) == ["completed", "completed"]
    assert list(r.gpu_type) == ["A100-80GB", "A100-80GB"]


def test_gavel_replay_forces_a_reset_once_every_job_arrived_and_nothing_runs_even_after_completions():
    # 3 jobs of 1 s at t = 0 on one GPU, Gavel's fifo. t = 0: the first reset gives job 0 the GPU (the type
    # leaves FIFO's list, jobs 1 and 2 get none). t = 1: job 0 done; the reset at time 0 counts as none yet
    # (the original's rule), so job 1 gets the GPU. t = 2: job 1 done, 2 s < 1,920 s since the last reset:
    # nothing is chosen; every job of the trace has arrived (two of them finished) and nothing runs, so the
    # original's trace mode forces a reset at once and job 2 runs from 2 to 3.
    jobs = tuple(Job(str(i), 0.0, 1.0, 1) for i in range(3))
    sim = Simulator(Workload("three", jobs, {}), ClusterLayout(parse_cluster_spec("1xA100-80GB:1")), None)
    sim.run(make_gavel_original(FIFO, 0))
    r = sim.result("x", 0, preemptive=True)
    assert list(r.status) == ["completed"] * 3
    assert list(r.end_s) == [1.0, 2.0, 3.0]


def test_gavel_fifo_gives_a_job_too_big_for_its_stale_type_a_type_that_holds_it():
    # 2 A100 nodes of 1 GPU and 1 V100: the stale pick for the 2-GPU job is V100 (last by name), which has 1
    # GPU in all: it takes A100 (the last listed type with room), spread over both nodes, and completes
    jobs = (Job("0", 0.0, 100.0, 2),)
    layout = ClusterLayout(parse_cluster_spec("2xA100-80GB:1,1xV100-16GB:1"))
    sim = Simulator(Workload("one", jobs, {}), layout, None)
    sim.run(make_gavel_original(FIFO, 0))
    r = sim.result("x", 0, preemptive=True)
    assert list(r.status) == ["completed"] and list(r.gpu_type) == ["A100-80GB"]


def test_gavel_replay_retries_a_job_blocked_by_one_that_outran_its_estimate():
    # one GPU; job 0 estimated 0.5 s, runs 1 s; job 1 estimated and runs 1 s; Gavel's fifo. t = 0: job 0 gets
    # the GPU for a micro-task of its estimated 0.5 s. t = 0.5: done in the original's count, so job 1 gets the
    # GPU, which job 0 still holds here: job 1 is blocked, nothing runs. t = 1: job 0 ends here; that instant
    # is an iteration (a blocked job waits), job 1 starts and ends at 2.
    jobs = (Job("0", 0.0, 1.0, 1), Job("1", 0.0, 1.0, 1))
    layout = ClusterLayout(parse_cluster_spec("1xA100-80GB:1"))
    sim = Simulator(Workload("two", jobs, {}), layout, np.array([0.5, 1.0]))
    sim.run(make_gavel_original(FIFO, 0))
    r = sim.result("x", 0, preemptive=True)
    assert list(r.status) == ["completed"] * 2
    assert list(r.end_s) == [1.0, 2.0]


@needs_gavel
def test_convert_trace_writes_a_jobs_csv_that_reads_back_as_the_same_jobs(tmp_path):
    import subprocess
    import sys

    from workloads.csv_jobs import load_jobs_csv

    workload, _, _, _ = _gavel_fixture("m60", tmp_path)
    out = tmp_path / "m60.csv"
    script = Path(__file__).resolve().parents[1] / "bench" / "convert_trace.py"
    cmd = [sys.executable, str(script), "--format", "gavel", str(tmp_path / "m60.trace"), str(out)]
    assert subprocess.run(cmd, capture_output=True, text=True, timeout=120).returncode == 0
    back = load_jobs_csv(out).jobs
    key = ("arrival_s", "runtime_s", "num_gpus", "job_type", "runtime_includes_spread")
    assert [tuple(getattr(j, k) for k in key) for j in back] == [
        tuple(getattr(j, k) for k in key) for j in workload.jobs
    ]
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)  # never overwrites a file
    assert again.returncode == 2 and again.stderr.strip().splitlines()[-1].endswith("exists; name a new file")
