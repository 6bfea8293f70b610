"""Score rounds (schedulers/score_rounds.py): hand-computed rounds, the plain reference cross-checked decision for
decision (Hypothesis), the feature rows, and the scorer's contract."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from schedulers import POLICIES, PREEMPTIVE
from schedulers.score_features import COL, FEATURE_NAMES, NUM_FEATURES, active_rows, feature_names
from schedulers.score_rounds import (
    LAS_SPEED_WEIGHTS,
    LinearScorer,
    consult,
    decide,
    make_score_policy,
)
from sim.cluster import ClusterLayout
from sim.cluster_spec import parse_cluster_spec
from sim.job import Workload
from sim.simulator import Decision, Preempt, Simulator, WakeUp
from tests.helpers import job
from tests.score_rounds_reference import score_rounds_reference
from tests.test_invariants import clusters, workloads

LAS = {"log_attained_gpu": -1.0}
SJF = {"log_est_runtime": -1.0}


def _run(
    cluster: str,
    jobs,
    weights: dict,
    round_s: float = 100.0,
    overhead_s: float = 0.0,
    on_arrival: bool = False,
):
    layout = ClusterLayout(parse_cluster_spec(cluster))
    sim = Simulator(Workload("t", tuple(jobs)), layout, None, 1.2, overhead_s)
    sim.run(make_score_policy(LinearScorer.from_named(weights), round_s, on_arrival=on_arrival))
    return sim.result("score", 0, preemptive=True)


def test_las_speed_is_a_registered_preemptive_heuristic():
    assert "las_speed" in POLICIES and "las_speed" in PREEMPTIVE


def test_ties_go_to_the_lower_job_then_the_faster_type_and_a_running_job_stays_put():
    # 1 H100 (speed 2) + 1 V100 (0.5), every score 0. At the round at 0 the rows tie: A's rows come first (lower
    # index), the faster type first: A takes the H100 (200 / 2 = 100 s), B the V100 (100 / 0.5 = 200 s). At 100 A
    # ends at the boundary; B's rows tie again and the row of the type it runs on wins: no migration.
    r = _run("1xH100:1,1xV100-32GB:1", [job("A", 0, 200), job("B", 0, 100)], {}, overhead_s=60.0)
    assert r.gpu_type == ("H100", "V100-32GB")
    assert r.start_s.tolist() == [0.0, 0.0] and r.end_s.tolist() == [100.0, 200.0]
    assert r.preemptions.tolist() == [0, 0]


def test_a_job_chosen_for_a_faster_type_migrates_and_pays_the_restore_overhead():
    # As above with log_rel_speed weighted 1: at 100 B's H100 row (ln 1 = 0) beats its V100 row (ln 0.25), the
    # H100 is free: B is preempted with 100 x 0.5 = 50 s of its work done and restarts on the H100: 60 s restore
    # + 50 / 2 = 25 s -> ends at 185.
    r = _run(
        "1xH100:1,1xV100-32GB:1",
        [job("A", 0, 200), job("B", 0, 100)],
        {"log_rel_speed": 1.0},
        overhead_s=60.0,
    )
    assert r.end_s.tolist() == [100.0, 185.0]
    assert r.preemptions.tolist() == [0, 1] and r.overhead_s.tolist() == [0.0, 60.0]
    assert r.gpu_type[1] == "V100-32GB;H100"
    assert r.runs.start_s.tolist() == [0.0, 0.0, 100.0] and r.runs.end_s.tolist() == [100.0, 100.0, 185.0]


def test_a_gang_without_room_is_skipped_and_a_smaller_job_after_it_runs():
    # One node of 4 A100s, shortest known runtime first. At 0: A (1 GPU, 10 s) takes 1 of the 4 GPUs' room, G
    # (4 GPUs, 20 s) needs 4 > 3 and is skipped, S (1 GPU, 30 s), scored after G, still fits. A ends at 10; G
    # still does not fit (3 free); S ends at 30 and G starts at once (between rounds), ending at 50.
    r = _run("1xA100-80GB:4", [job("A", 0, 10), job("G", 0, 20, num_gpus=4), job("S", 0, 30)], SJF)
    assert r.start_s.tolist() == [0.0, 30.0, 0.0] and r.end_s.tolist() == [10.0, 50.0, 30.0]
    assert r.preemptions.tolist() == [0, 0, 0]


def test_a_running_job_not_chosen_is_preempted_and_restarts_when_the_gpu_frees():
    # 1 A100, least attained service first, restore 30 s. A (500 s) runs from 0; B (50 s) arrives at 10 and waits
    # (no preemption between rounds). At the round at 100 B (0 GPU-s) outranks A (100): A is preempted with 100 s
    # done, B runs 100-150; at 150 (between rounds) A restarts at once: 30 s restore + 400 s -> ends at 580.
    r = _run("1xA100-80GB:1", [job("A", 0, 500), job("B", 10, 50)], LAS, overhead_s=30.0)
    assert r.start_s.tolist() == [0.0, 100.0] and r.end_s.tolist() == [580.0, 150.0]
    assert r.preemptions.tolist() == [1, 0] and r.overhead_s.tolist() == [30.0, 0.0]
    assert r.runs.start_s.tolist() == [0.0, 100.0, 150.0] and r.runs.end_s.tolist() == [100.0, 150.0, 580.0]


def test_with_rounds_at_arrivals_an_arrival_that_outranks_a_running_job_preempts_it_at_once():
    # The case above with a round at every arrival: at 10 B (0 GPU-s) outranks A (10 GPU-s): A is preempted with
    # 10 s done, B runs 10-60; at 60 A restarts: 30 s restore + 490 s -> ends at 580.
    r = _run("1xA100-80GB:1", [job("A", 0, 500), job("B", 10, 50)], LAS, overhead_s=30.0, on_arrival=True)
    assert r.start_s.tolist() == [0.0, 10.0] and r.end_s.tolist() == [580.0, 60.0]
    assert r.runs.start_s.tolist() == [0.0, 10.0, 60.0] and r.runs.end_s.tolist() == [10.0, 60.0, 580.0]
    # shortest known runtime first instead: B (500 s) arriving at 10 does not outrank A (50 s): nothing moves
    r = _run("1xA100-80GB:1", [job("A", 0, 50), job("B", 10, 500)], SJF, overhead_s=30.0, on_arrival=True)
    assert r.start_s.tolist() == [0.0, 50.0] and r.end_s.tolist() == [50.0, 550.0]
    assert r.preemptions.sum() == 0


def test_a_round_at_an_arrival_keeps_the_boundaries_where_they_are():
    layout = ClusterLayout(parse_cluster_spec("1xA100-80GB:1"))
    sim = Simulator(Workload("t", (job("A", 0, 250), job("B", 5, 10))), layout, None, 1.2, 0.0)
    policy = make_score_policy(LinearScorer.from_named(LAS), 100.0, on_arrival=True)
    seen = []
    while sim.advance():
        ds = policy(sim.view())
        seen.append((sim.now_s, [type(d).__name__ for d in ds], ds[-1] if ds else None))
        for d in ds:
            sim.apply(d)
    assert seen[1] == (5.0, ["Preempt", "Decision", "WakeUp"], WakeUp(100.0))  # B preempts A on arrival
    assert seen[2] == (15.0, ["Decision", "WakeUp"], WakeUp(100.0))  # B ends: A restarts between rounds


def test_between_rounds_free_gpus_are_filled_at_once_in_score_order():
    # 2 A100s (round 100). X runs 0-40 on one, Y 0-1000 on the other. P (50 s) and Q (20 s) arrive at 10 and wait.
    # At 40 (between rounds) X ends: both fit one at a time, so the scores decide: shortest known runtime first ->
    # Q starts at 40 (ends 60), then P at 60 (ends 110) -- both without waiting for the boundary at 100.
    jobs = [job("X", 0, 40), job("Y", 0, 1000), job("P", 10, 50), job("Q", 10, 20)]
    r = _run("1xA100-80GB:2", jobs, SJF)
    assert r.start_s.tolist() == [0.0, 0.0, 60.0, 40.0] and r.end_s.tolist() == [40.0, 1000.0, 110.0, 60.0]
    assert r.preemptions.sum() == 0


def test_a_released_job_keeps_its_gpus_when_nobody_needs_them():
    # 1 A100 node and 2 H100 nodes of 2 GPUs; scores prefer the type a job does not run on, and the slower type for
    # a new job. J (2 GPUs) starts on the A100s at 0. L (H100 only) takes H100 node n1 at 1, F (5 s) the other GPU
    # of n1 at 2, M n2 at 3 (best fit), F ends at 4.5: each H100 node has one GPU free. At the rounds 100-500 J's
    # H100 row wins and the H100s have room for 2 GPUs by count, so J is released for a move; but no H100 node has
    # 2 free GPUs (a gang does not spread where a node is big enough), the move fails and J keeps its A100s: no
    # preemption. L ends at 501 and frees n1: at 600 the move succeeds (J preempted, restarted on n1).
    jobs = [
        job("J", 0, 1000, num_gpus=2),
        job("L", 1, 1000, gpu_types=("H100",)),
        job("F", 2, 5, gpu_types=("H100",)),
        job("M", 3, 1000, gpu_types=("H100",)),
    ]
    r = _run("1xA100-80GB:2,2xH100:2", jobs, {"runs_here": -5.0, "log_rel_speed": -1.0}, overhead_s=60.0)
    assert r.end_s[1:].tolist() == [501.0, 4.5, 503.0] and r.preemptions[1:].tolist() == [0, 0, 0]
    runs = zip(
        r.runs.job.tolist(), r.runs.start_s.tolist(), r.runs.end_s.tolist(), r.runs.placement, strict=True
    )
    j_runs = [(start, end, where) for i, start, end, where in runs if i == 0]
    assert j_runs[0] == (0.0, 600.0, "n0/0;n0/1")
    assert j_runs[1][0] == 600.0 and j_runs[1][2] == "n1/0;n1/1"


def test_a_restore_longer_than_a_round_still_makes_progress():
    # 1 A100, rounds of 5 s, restore 30 s, least attained service first: A and B would trade the GPU at every
    # round and, preempted while restoring, never do any work (the run never ended before this rule). A job still
    # restoring keeps its GPU, so every restarted run outlasts its restore, and both jobs finish.
    r = _run("1xA100-80GB:1", [job("A", 0, 100), job("B", 1, 100)], LAS, round_s=5.0, overhead_s=30.0)
    assert r.status == ("completed", "completed") and r.preemptions.min() > 0
    first = {}
    for i, start, end in zip(
        r.runs.job.tolist(), r.runs.start_s.tolist(), r.runs.end_s.tolist(), strict=True
    ):
        if i in first:
            assert end - start > 30.0  # a restart: its restore, then some work
        first.setdefault(i, start)


def test_decisions_end_with_a_wakeup_at_the_next_boundary_while_jobs_are_active():
    layout = ClusterLayout(parse_cluster_spec("1xA100-80GB:1"))
    sim = Simulator(Workload("t", (job("A", 0, 250), job("B", 5, 10))), layout, None, 1.2, 0.0)
    seen = []
    policy = make_score_policy(LinearScorer.from_named(LAS), 100.0)
    while sim.advance():
        ds = policy(sim.view())
        seen.append((sim.now_s, [type(d).__name__ for d in ds], ds[-1] if ds else None))
        for d in ds:
            sim.apply(d)
    assert seen[0] == (0.0, ["Decision", "WakeUp"], WakeUp(100.0))
    assert seen[1][:2] == (5.0, ["WakeUp"])  # B waits: nothing is preempted between rounds
    assert seen[2] == (100.0, ["Preempt", "Decision", "WakeUp"], WakeUp(200.0))
    assert seen[3] == (110.0, ["Decision", "WakeUp"], WakeUp(200.0))  # B ends: A restarts between rounds
    assert seen[-1][1:] == ([], None)  # nothing active at a boundary: no decision, no wake-up


def test_feature_rows_of_a_round_by_hand():
    # 1 H100 + 1 V100-32GB; A (1 GPU, 600 s, known as 900 s) runs on the H100 since 0; B (1 GPU, 60 s, H100 only)
    # waits since 30 (never ran). At 90: A's attained 90 GPU-s, work 90 x 2 = 180 s; B nothing.
    layout = ClusterLayout(parse_cluster_spec("1xH100:1,1xV100-32GB:1"))
    jobs = (job("A", 0, 600), job("B", 30, 60, gpu_types=("H100",)))
    sim = Simulator(Workload("t", jobs), layout, np.array([900.0, 60.0]), 1.2, 60.0)
    sim.advance()
    sim.apply(Decision(0, layout.whole_node(0)))
    while sim.advance():
        if sim.now_s == 30.0:
            break
    sim.wake_up(WakeUp(90.0))
    assert sim.advance() and sim.now_s == 90.0
    rows = active_rows(sim.view())
    got = {(int(j), int(t)): f for j, t, f in zip(rows.job, rows.type_idx, rows.features, strict=True)}
    assert set(got) == {(0, 0), (0, 1), (1, 0)}  # B may only use the H100
    lm = lambda s: math.log1p(s / 60)  # noqa: E731
    a_h100 = got[0, 0]
    assert a_h100[COL["log_est_runtime"]] == pytest.approx(lm(900))  # the known runtime, not the true one
    assert a_h100[COL["log_est_remaining"]] == pytest.approx(lm(900 - 180))
    assert a_h100[COL["log_est_remaining_here"]] == pytest.approx(lm(720 / 2))
    assert a_h100[COL["log_attained_gpu"]] == pytest.approx(lm(90))
    assert a_h100[COL["log_rel_speed"]] == 0.0 and a_h100[COL["rel_speed"]] == 1.0
    assert a_h100[COL["log_speed"]] == pytest.approx(math.log(2.0))
    assert a_h100[[COL["running"], COL["runs_here"], COL["pays_restore"], COL["restore_share"]]].tolist() == [
        1.0,
        1.0,
        0.0,
        0.0,
    ]
    a_v100 = got[0, 1]
    assert a_v100[COL["log_rel_speed"]] == pytest.approx(math.log(0.25))
    assert a_v100[COL["runs_here"]] == 0.0 and a_v100[COL["pays_restore"]] == 1.0  # a move pays the restore
    assert a_v100[COL["restore_share"]] == pytest.approx(60 / (60 + 720 / 0.5))
    assert a_v100[COL["type_share"]] == 0.5 and a_v100[COL["demand_share"]] == 1.0
    b = got[1, 0]
    assert b[COL["log_waiting"]] == pytest.approx(lm(60)) and b[COL["log_time_in_system"]] == pytest.approx(
        lm(60)
    )
    assert b[COL["log_attained_gpu"]] == 0.0 and b[COL["running"]] == 0.0 and b[COL["pays_restore"]] == 0.0


def test_linear_scorer_contract():
    assert feature_names() == FEATURE_NAMES and len(FEATURE_NAMES) == NUM_FEATURES
    s = LinearScorer.from_named({"log_speed": 2.0, "running": -1.0})
    f = np.zeros((3, NUM_FEATURES))
    f[:, COL["log_speed"]] = [0.5, 1.0, 0.0]
    f[:, COL["running"]] = [1.0, 0.0, 1.0]
    assert s(f).tolist() == [0.0, 2.0, -1.0]
    assert s.named() == {"log_speed": 2.0, "running": -1.0}
    with pytest.raises(ValueError, match="unknown feature"):
        LinearScorer.from_named({"speed_of_light": 1.0})
    with pytest.raises(ValueError, match="weights"):
        LinearScorer([1.0, 2.0])
    with pytest.raises(ValueError, match="finite"):
        LinearScorer([float("nan")] * NUM_FEATURES)
    with pytest.raises(ValueError, match="round_s"):
        make_score_policy(s, 0.0)


def test_decide_refuses_scores_of_the_wrong_shape_or_not_finite():
    layout = ClusterLayout(parse_cluster_spec("1xA100-80GB:2"))
    sim = Simulator(Workload("t", (job("A", 0, 10), job("B", 0, 10))), layout, None, 1.2, 0.0)
    assert sim.advance()
    c = consult(sim.view())
    assert c.at_round and len(c.rows) == 2
    with pytest.raises(ValueError, match="2 scores"):
        decide(sim.view(), c, np.zeros(3))
    with pytest.raises(ValueError, match="finite"):
        decide(sim.view(), c, np.array([0.0, np.nan]))


def test_las_speed_weights_name_real_features():
    assert set(LAS_SPEED_WEIGHTS) <= set(FEATURE_NAMES)


# -- the plain reference, decision for decision -------------------------------------------------------------

_GRID = 1e-6


def _on_grid(features: np.ndarray) -> np.ndarray:
    return np.floor(features / _GRID + 0.5) * _GRID


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    clusters(),
    workloads(),
    st.dictionaries(st.sampled_from(FEATURE_NAMES), st.integers(-3, 3).map(float), max_size=6),
    st.sampled_from([5.0, 20.0, 60.0]),
    st.sampled_from([0.0, 30.0]),
    st.integers(0, 2**32 - 1),
    st.booleans(),
)
def test_policy_equals_the_plain_reference_decision_for_decision(
    spec, workload, weights, round_s, overhead, seed, on_arrival
):
    """Random clusters, workloads (gangs, fractions, type constraints, memory minimums, services), weights,
    round lengths, overheads, estimated runtimes and rounds at arrivals or not: at every instant the policy's
    decisions are the reference's, in the same order, on the same placements."""
    layout = ClusterLayout(spec)
    rng = np.random.default_rng(seed)
    known = np.array([j.runtime_s for j in workload.jobs]) * rng.lognormal(0.0, 0.8, len(workload.jobs))
    sim = Simulator(workload, layout, known, 1.2, overhead)
    scorer = LinearScorer.from_named(weights)
    fast = make_score_policy(lambda f: scorer(_on_grid(f)), round_s, on_arrival=on_arrival)
    plain = score_rounds_reference(weights, round_s, _GRID, FEATURE_NAMES, on_arrival)
    instants = preempted = 0
    while sim.advance():
        view = sim.view()
        got, want = fast(view), plain(view)
        assert got == want, (sim.now_s, got, want)
        for d in got:
            sim.apply(d)
        instants += 1
        preempted += sum(type(d) is Preempt for d in got)
    event(f"preemptions: {min(preempted, 3)}")
    r = sim.result("score", 0, preemptive=True)
    accepted = [i for i in range(len(workload.jobs)) if not r.reject_reason[i]]
    assert all(r.status[i] == "completed" for i in accepted)


def test_the_feature_table_of_the_docs_lists_every_feature_in_order():
    text = (Path(__file__).resolve().parents[1] / "docs" / "schedulers.md").read_text()
    section = text.split("## Score rounds")[1]
    table = [line.split("`")[1] for line in section.splitlines() if line.startswith("| `")]
    assert tuple(table) == FEATURE_NAMES
