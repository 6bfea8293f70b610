"""The simulator's preemption path, hand-computed: Preempt / WakeUp decisions, progress kept across runs, the
restore overhead, migration to another GPU type, stale completions, the View's per-job preemption state and the
per-run records."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sim.cluster import FULL, ClusterLayout, Placement
from sim.cluster_spec import parse_cluster_spec
from sim.job import Workload
from sim.simulator import Decision, Preempt, Simulator, WakeUp
from tests.helpers import job


def _sim(cluster: str, jobs, overhead_s: float = 0.0) -> Simulator:
    layout = ClusterLayout(parse_cluster_spec(cluster))
    return Simulator(Workload("t", tuple(jobs)), layout, None, 1.2, overhead_s)


def on_node(view, i: int, node: int) -> Placement:
    """Job i's whole GPUs on the first free GPUs of `node` (tests choose the node by hand)."""
    layout = view.layout
    a = layout.node_first_gpu[node]
    free = [a + g for g in range(layout.node_num_gpus[node]) if view.free.free_milli[a + g] == FULL]
    gpus = tuple(free[: view.jobs.num_gpus[i]])
    return Placement(gpus, (node,), FULL, 0, layout.node_type[node])


def scripted(script):
    """A policy that returns script[now](view) at the instants it lists and nothing otherwise."""
    seen = []

    def policy(view):
        seen.append(view.now_s)
        step = script.get(view.now_s)
        return step(view) if step is not None else []

    policy.seen = seen
    return policy


def test_preempted_job_keeps_its_progress_and_pays_the_restore_overhead():
    # 1 A100 (speed 1), a: 100 s of work. Run 1: 0..30 -> progress 30. Suspended 30..50. Run 2 at 50: 10 s
    # restore, then the remaining 70 s -> ends 50 + 10 + 70 = 130. Held 30 + 80 = 110 s, overhead 10 GPU-s,
    # attained 110 GPU-s, one preemption.
    sim = _sim("1xA100-80GB:1", [job("a", 0, 100)], overhead_s=10.0)
    policy = scripted(
        {
            0.0: lambda v: [Decision(0, on_node(v, 0, 0)), WakeUp(30.0)],
            30.0: lambda v: [Preempt(0), WakeUp(50.0)],
            50.0: lambda v: [Decision(0, on_node(v, 0, 0))],
        }
    )
    sim.run(policy)
    assert policy.seen == [0.0, 30.0, 50.0]
    r = sim.result("scripted", 0)
    assert (r.start_s[0], r.end_s[0], r.status[0]) == (0.0, 130.0, "completed")
    assert r.runtime_actual_s[0] == 110.0
    assert r.preemptions.tolist() == [1] and r.overhead_s.tolist() == [10.0]
    assert sim.attained_gpu_s[0] == 110.0 and sim.progress_s[0] == 100.0
    assert r.runs.job.tolist() == [0, 0]
    assert r.runs.start_s.tolist() == [0.0, 50.0] and r.runs.end_s.tolist() == [30.0, 130.0]
    assert r.runs.placement == ("n0/0", "n0/0") and r.runs.gpu_type == ("A100-80GB", "A100-80GB")
    assert r.preemptive and r.gpu_type[0] == "A100-80GB"
    assert sim.free.free_milli_total == FULL


def test_preempt_then_start_another_at_the_same_instant():
    # 1 GPU. a (100 s) runs from 0; b (10 s) arrives at 20: the policy preempts a and starts b on its GPU in the
    # same decision list. b: 20..30. At 30 a restarts: 5 s restore + 80 s left -> ends 115.
    sim = _sim("1xA100-80GB:1", [job("a", 0, 100), job("b", 20, 10)], overhead_s=5.0)
    policy = scripted(
        {
            0.0: lambda v: [Decision(0, on_node(v, 0, 0))],
            20.0: lambda v: [Preempt(0), Decision(1, Placement((0,), (0,), FULL, 0, 0))],
            30.0: lambda v: [Decision(0, on_node(v, 0, 0))],
        }
    )
    sim.run(policy)
    r = sim.result("scripted", 0)
    assert r.end_s.tolist() == [115.0, 30.0]
    assert r.runs.job.tolist() == [0, 1, 0]
    assert list(zip(r.runs.start_s.tolist(), r.runs.end_s.tolist(), strict=True)) == [
        (0.0, 20.0),
        (20.0, 30.0),
        (30.0, 115.0),
    ]
    assert r.preemptions.tolist() == [1, 0] and r.overhead_s.tolist() == [5.0, 0.0]


def test_preemptions_of_one_instant_leave_the_queue_in_arrival_order():
    # 4 one-GPU nodes; a, b, c, d start at 0; e arrives at 10. Then the policy preempts d, b, a (out of
    # arrival order, in one decision list that also starts e); run() orders the queue once after the list, and
    # the next instant's view must show a, b, d in arrival order, as sim.apply() one decision at a time does.
    jobs = [job(n, 0, 100) for n in "abcd"] + [job("e", 10, 100)]
    seen = {}

    def at10(v):
        return [Preempt(3), Preempt(1), Decision(4, v.placements[1]), Preempt(0), WakeUp(20.0)]

    def at20(v):
        seen["queue"] = list(v.queue)
        seen["by_runtime"] = [i for _, i in v.queue_by_runtime]
        return []

    script = {0.0: lambda v: [Decision(i, on_node(v, i, i)) for i in range(4)], 10.0: at10, 20.0: at20}
    sim = _sim("4xA100-80GB:1", jobs)
    sim.run(scripted(script))
    assert seen["queue"] == [0, 1, 3]
    by_hand = _sim("4xA100-80GB:1", jobs)  # the same decisions applied one by one (no batching)
    while by_hand.advance():
        step = script.get(by_hand.now_s)
        for d in step(by_hand.view()) if step else []:
            by_hand.apply(d)
    assert list(by_hand.queue) == [0, 1, 3]
    batched, one_by_one = sim.result("x", 0).runs, by_hand.result("x", 0).runs
    for field in ("job", "start_s", "end_s"):
        assert getattr(batched, field).tolist() == getattr(one_by_one, field).tolist()
    assert batched.placement == one_by_one.placement


def test_migration_to_a_faster_type_and_the_stale_completion_is_ignored():
    # n0 = A100 (speed 1), n1 = V100-16GB (speed 0.5). a (100 s of A100 work) starts on the V100 at 0: its first
    # completion timeout is due at 200. Preempted at 40 -> progress 40 x 0.5 = 20. Restarted on the A100 at 40
    # with no overhead: 80 s left -> ends 120. The stale timeout at 200 must change nothing.
    sim = _sim("1xA100-80GB:1,1xV100-16GB:1", [job("a", 0, 100)])
    policy = scripted(
        {
            0.0: lambda v: [Decision(0, on_node(v, 0, 1)), WakeUp(40.0)],
            40.0: lambda v: [Preempt(0), Decision(0, on_node(v, 0, 0))],
        }
    )
    sim.run(policy)
    r = sim.result("scripted", 0)
    assert r.end_s[0] == 120.0 and sim.num_completed == 1
    assert sim.env.now == 200.0  # the stale timeout did fire
    assert r.gpu_type[0] == "V100-16GB;A100-80GB"
    assert r.runs.gpu_type == ("V100-16GB", "A100-80GB")
    assert r.runtime_actual_s[0] == 120.0
    assert sim.free.free_milli_total == 2 * FULL and sim.running == []


def test_restart_on_a_slower_type_ends_later_than_the_first_runs_stale_timeout():
    # a starts on the A100 (due at 100), is preempted at 10 (progress 10) and restarted at once on the V100: the
    # remaining 90 s take 180 s -> ends 190. The stale timeout at 100 must not complete it.
    sim = _sim("1xA100-80GB:1,1xV100-16GB:1", [job("a", 0, 100)])
    policy = scripted(
        {
            0.0: lambda v: [Decision(0, on_node(v, 0, 0)), WakeUp(10.0)],
            10.0: lambda v: [Preempt(0), Decision(0, on_node(v, 0, 1))],
        }
    )
    sim.run(policy)
    assert sim.end_s[0] == 190.0 and sim.num_completed == 1


def test_wake_up_returns_with_only_running_jobs_and_is_deduplicated():
    # nothing waits after 0; the policy asks twice for 40 and once for 70: advance() returns at 40 and 70 only
    sim = _sim("1xA100-80GB:2", [job("a", 0, 100)])
    policy = scripted(
        {
            0.0: lambda v: [Decision(0, on_node(v, 0, 0)), WakeUp(40.0), WakeUp(40.0), WakeUp(70.0)],
            40.0: lambda v: [WakeUp(40.0)],  # the current instant: a no-op
        }
    )
    sim.run(policy)
    assert policy.seen == [0.0, 40.0, 70.0]
    assert sim.end_s[0] == 100.0
    assert len(sim._wakeups) == 0


def test_view_reports_progress_attained_service_and_remaining_runtime_keys():
    # 2 GPUs. a (2 GPUs, 100 s) runs from 0; at 25 it is preempted: progress 25, attained 2 x 25 = 50 GPU-s.
    # b (1 GPU, 60 s) arrived at 5 and c (1 GPU, 90 s) at 10, both queued. The requeued a goes back in arrival
    # order (first) with runtime key 100 - 25 = 75 (between b's 60 and c's 90).
    jobs = [job("a", 0, 100, 2), job("b", 5, 60), job("c", 10, 90)]
    sim = _sim("1xA100-80GB:2", jobs, overhead_s=7.0)
    checks = {}

    def at_20(v):
        checks["progress_20"] = v.progress_now(0)
        checks["attained_20"] = v.attained_now(0)
        return [WakeUp(25.0)]

    def at_25(v):
        return [Preempt(0)]

    policy = scripted(
        {0.0: lambda v: [Decision(0, on_node(v, 0, 0)), WakeUp(20.0)], 20.0: at_20, 25.0: at_25}
    )
    while sim.advance():
        for d in policy(sim.view()):
            sim.apply(d)
        if sim.now_s == 25.0:
            break
    v = sim.view()
    assert checks == {"progress_20": 20.0, "attained_20": 40.0}
    assert list(v.queue) == [0, 1, 2]
    assert list(v.queue_by_runtime) == [(60.0, 1), (75.0, 0), (90.0, 2)]
    assert [v.queue_key_s[i] for i in range(3)] == [75.0, 60.0, 90.0]  # job 0: 100 s known - 25 s done
    assert (v.progress_s[0], v.attained_gpu_s[0], v.preemptions[0]) == (25.0, 50.0, 1)
    assert v.progress_now(0) == 25.0 and v.attained_now(0) == 50.0
    assert v.restore_overhead_s == 7.0
    assert v.running == [] and v.free.free_milli_total == 2 * FULL
    # restarted at 25: 7 s restore (no progress yet at 30), then work: at 40, 25 + 8 = 33 done
    sim.apply(Decision(0, on_node(v, 0, 0)))
    assert sim.running == [(25.0 + 7.0 + 75.0, 0)]
    sim.apply(WakeUp(30.0))
    sim.apply(WakeUp(40.0))
    assert sim.advance() and sim.now_s == 30.0 and sim.view().progress_now(0) == 25.0
    assert sim.advance() and sim.now_s == 40.0 and sim.view().progress_now(0) == 33.0


def test_bad_decisions_raise():
    sim = _sim("1xA100-80GB:1", [job("a", 0, 100), job("b", 0, 10)])
    assert sim.advance()
    with pytest.raises(ValueError, match="not running"):
        sim.apply(Preempt(0))
    with pytest.raises(ValueError, match="not running"):
        sim.apply(Preempt(5))
    with pytest.raises(TypeError, match="unknown decision kind"):
        sim.apply((0, 1))
    sim.apply(Decision(0, on_node(sim.view(), 0, 0)))
    sim.apply(WakeUp(10.0))
    assert sim.advance() and sim.now_s == 10.0
    with pytest.raises(ValueError, match="in the past"):
        sim.apply(WakeUp(5.0))
    with pytest.raises(ValueError, match="restore_overhead_s"):
        _sim("1xA100-80GB:1", [job("a", 0, 1)], overhead_s=-1.0)


def test_unfinished_preempted_job_is_reported_with_its_closed_runs():
    # preempted at 10 and never restarted: unfinished, one closed run 0..10, progress 10
    sim = _sim("1xA100-80GB:1", [job("a", 0, 100)])
    sim.run(
        scripted({0.0: lambda v: [Decision(0, on_node(v, 0, 0)), WakeUp(10.0)], 10.0: lambda v: [Preempt(0)]})
    )
    r = sim.result("scripted", 0)
    assert r.status == ("unfinished",) and math.isnan(r.end_s[0])
    assert r.runs.start_s.tolist() == [0.0] and r.runs.end_s.tolist() == [10.0]
    assert sim.progress_s == [10.0]


def test_closed_runs_leave_the_cyclic_gc_nothing_to_track():
    # a round policy closes ~10 runs per job (103,206 on the 10,000-job Gavel benchmark): each closed run must be
    # a tuple of atomics that a collection untracks, not one that keeps its Placement (never untracked) alive
    import gc

    sim = _sim("1xA100-80GB:2", [job("a", 0, 100, 2)])
    sim.run(
        scripted(
            {
                0.0: lambda v: [Decision(0, on_node(v, 0, 0)), WakeUp(10.0)],
                10.0: lambda v: [Preempt(0), WakeUp(20.0)],
                20.0: lambda v: [Decision(0, on_node(v, 0, 0))],
            }
        )
    )
    gc.collect()
    gc.collect()  # (a tuple is untracked once its items are: the GPUs' tuple may be untracked only by the first)
    assert len(sim._closed_runs) == 1 and not gc.is_tracked(sim._closed_runs[0])
    r = sim.result("scripted", 0)
    assert r.runs.placement == ("n0/0;n0/1", "n0/0;n0/1") and r.runs.end_s.tolist()[0] == 10.0


def test_non_preemptive_runs_have_one_run_per_started_job():
    from tests.helpers import run

    jobs = [job("A", 0, 100, 3), job("B", 1, 10, 4), job("C", 2, 200, 1), job("D", 3, 50, 1)]
    sim, _ = run("1xA100:4", jobs, "easy")
    r = sim.result("easy", 0)
    assert not r.preemptive and r.preemptions.tolist() == [0, 0, 0, 0]
    order = np.lexsort((np.arange(4), r.start_s))
    assert r.runs.job.tolist() == order.tolist()
    assert np.array_equal(r.runs.start_s, r.start_s[order]) and np.array_equal(r.runs.end_s, r.end_s[order])
    assert r.runs.placement == tuple(r.placement[i] for i in order)


def test_preemption_columns_in_jobs_and_summary_csv(tmp_path):
    # a (2 GPUs, 100 s): runs 0..30, preempted, restarted at 50 with a 10 s restore -> ends 130. overhead_s 10,
    # overhead_gpu_s 10 x 2 = 20; runtime_s = held 30 + 80 = 110. b (1 GPU, 5 s) is never preempted.
    from metrics.summary import summarize
    from metrics.writers import write_jobs_csv, write_runs_csv, write_summary_csv

    sim = _sim("1xA100-80GB:2", [job("a", 0, 100, 2), job("b", 200, 5)], overhead_s=10.0)
    policy = scripted(
        {
            0.0: lambda v: [Decision(0, on_node(v, 0, 0)), WakeUp(30.0)],
            30.0: lambda v: [Preempt(0), WakeUp(50.0)],
            50.0: lambda v: [Decision(0, on_node(v, 0, 0))],
            200.0: lambda v: [Decision(1, on_node(v, 1, 0))],
        }
    )
    sim.run(policy)
    r = sim.result("scripted", 0, preemptive=True)
    jobs = write_jobs_csv(r, tmp_path / "jobs.csv").read_text().splitlines()
    assert jobs[0].endswith(",trace_status,reject_reason,preemptions,overhead_s,overhead_gpu_s")
    assert jobs[1] == "a,0,0,130,2,A100-80GB,n0/0;n0/1,0,130,110,1.18181818182,completed,0,1000,0,,,1,10,20"
    assert jobs[2].endswith(",completed,0,1000,0,,,0,0,0")
    runs = write_runs_csv(r, tmp_path / "runs.csv").read_text()
    assert runs == (
        "job_id,start_time,end_time,placement,gpu_type\n"
        "a,0,30,n0/0;n0/1,A100-80GB\na,50,130,n0/0;n0/1,A100-80GB\nb,200,205,n0/0,A100-80GB\n"
    )
    row = summarize(r)
    assert (row.preemptions, row.overhead_gpu_s) == (1, 20.0)
    plain = summarize(sim.result("scripted", 0))  # preempted jobs mark a result preemptive whatever it says
    assert plain.preemptions == 1
    summary = write_summary_csv([row], tmp_path / "summary.csv").read_text().splitlines()
    assert summary[0].endswith(",avg_jct_s_prio0,preemptions,overhead_gpu_s") and summary[1].endswith(",1,20")


def test_a_preemptive_policy_that_never_preempts_still_writes_the_columns(tmp_path):
    """Columns depend on the policy, not on the data: srtf on an idle cluster has them, all zero."""
    from metrics.summary import summarize
    from metrics.writers import write_jobs_csv, write_summary_csv
    from schedulers import POLICIES

    sim = _sim("1xA100-80GB:2", [job("a", 0, 10), job("b", 0, 10)])
    sim.run(POLICIES["srtf"])
    r = sim.result("srtf", 0, preemptive=True)
    assert write_jobs_csv(r, tmp_path / "j.csv").read_text().splitlines()[1].endswith(",0,0,0")
    assert write_summary_csv([summarize(r)], tmp_path / "s.csv").read_text().splitlines()[1].endswith(",0,0")
    non = sim.result("srtf", 0)
    assert "preemptions" not in write_jobs_csv(non, tmp_path / "n.csv").read_text().splitlines()[0]
