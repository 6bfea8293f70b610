"""The dispatcher's policy view and memory ledger, without processes: placements and backfills computed by hand,
budgets and external memory, and a cross-check of the view against the simulator's own on the same jobs."""

from __future__ import annotations

import os

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from dispatch.devices import DeviceSample, ProcessUsage
from dispatch.memory import JobMemory, Ledger
from dispatch.view import Box, ViewJob, build_view, launches
from schedulers import make_policy
from sim.job import Workload
from sim.simulator import Simulator
from workloads.dispatch_log import Device, sim_job

MARGIN_MIB = 1024
A100 = Device(0, "simulated A100-80GB", "A100-80GB", 81920)
USABLE_MIB = 81920 - MARGIN_MIB  # 80896


def box(n: int = 2) -> Box:
    return Box(tuple(Device(i, A100.name, A100.gpu_type, A100.total_mib) for i in range(n)), MARGIN_MIB)


def queued(job: str, seq: int, gpus: int = 1, vram_gib: float | None = None, est_s: float = 10.0) -> ViewJob:
    return ViewJob(job, seq, 0.0, gpus, None if vram_gib is None else int(vram_gib * 1024), est_s, 0)


def running(job: str, seq: int, devices: tuple[int, ...], vram_gib=None, est_s=10.0, start_s=0.0) -> ViewJob:
    vram = None if vram_gib is None else int(vram_gib * 1024)
    return ViewJob(job, seq, 0.0, len(devices), vram, est_s, 0, start_s, devices)


def decide(
    b: Box, algo: str, run: list, queue: list, ext=None, busy=None, now_s=0.0
) -> list[tuple[str, tuple]]:
    view, order = build_view(b, now_s, run, queue, ext or {}, busy or {})
    starts, refused = launches(b, view, order, make_policy(algo)(view))
    assert refused == []
    return [(s.job, s.devices) for s in starts]


def test_declared_jobs_share_a_gpu_by_best_fit_and_an_undeclared_job_gets_an_idle_one():
    # 30 GiB is 380/1000 of an A100's 80896 usable MiB: both 30 GiB jobs fit GPU 0 (best fit packs them there),
    # the undeclared job needs a GPU alone (GPU 1); a third 30 GiB job fits neither (20401 MB left on GPU 0)
    q = [
        queued("a", 0, vram_gib=30),
        queued("b", 1, vram_gib=30),
        queued("c", 2),
        queued("d", 3, vram_gib=30),
    ]
    assert decide(box(), "fcfs", [], q) == [("a", (0,)), ("b", (0,)), ("c", (1,))]


def test_a_just_launched_job_reserves_its_declaration_before_its_memory_appears():
    # one GPU, a 60 GiB job running with nothing observed yet: 30 GiB more does not fit (90 > 79 GiB), 10 GiB does
    b = box(1)
    run = [running("big", 0, (0,), vram_gib=60)]
    assert decide(b, "fcfs", run, [queued("mid", 1, vram_gib=30), queued("small", 2, vram_gib=10)]) == []
    assert decide(
        b, "sjf", run, [queued("mid", 1, vram_gib=30, est_s=9), queued("small", 2, vram_gib=10, est_s=5)]
    ) == [("small", (0,))]


def test_an_external_process_makes_its_gpu_busy_and_takes_its_held_memory():
    ext, busy = {0: 55 * 1024}, {0: True}  # 24 GiB left on GPU 0
    b = box()
    assert decide(b, "fcfs", [], [queued("alone", 0)], ext, busy) == [("alone", (1,))]
    assert decide(b, "fcfs", [], [queued("fits", 0, vram_gib=20)], ext, busy) == [("fits", (0,))]
    assert decide(b, "fcfs", [], [queued("too_big", 0, vram_gib=30)], ext, busy) == [("too_big", (1,))]


def test_easy_backfills_only_what_ends_before_the_reservation():
    # GPU 0 runs a job estimated to end at t=10; at t=1 the head needs both GPUs (reserved at 10). A 4 s job
    # ends at 5 and backfills on GPU 1; a 20 s one would delay the head and waits. FCFS starts nothing.
    run = [running("r", 0, (0,), est_s=10.0)]
    q = [queued("head", 1, gpus=2, est_s=5), queued("short", 2, est_s=4), queued("long", 3, est_s=20)]
    b = box()
    assert decide(b, "fcfs", run, q, now_s=1.0) == []
    assert decide(b, "easy", run, q, now_s=1.0) == [("short", (1,))]
    assert decide(b, "cbf", run, q, now_s=1.0) == [("short", (1,))]
    assert decide(b, "sjf", run, q, now_s=1.0) == [("short", (1,))]


def test_the_queue_keeps_its_order_in_the_view_indices():
    b = box()
    run = [running("r", 1, (0,))]
    _, order = build_view(b, 0.0, run, [queued("x", 0), queued("y", 2)], {}, {})
    assert [j.job for j in order] == ["x", "r", "y"]  # arrival order, as the replay's simulator indexes them
    view, order = build_view(b, 0.0, run, [queued("y", 2), queued("x", 0)], {}, {})
    assert [j.job for j in order] == ["r", "y", "x"] and [order[i].job for i in view.queue] == ["y", "x"]


def test_infeasible_shapes_say_why():
    b = box()
    assert b.never_fits(1, USABLE_MIB) is None
    assert "80896 MiB usable" in b.never_fits(1, USABLE_MIB + 1)
    assert b.never_fits(3, None) == "needs 3 GPUs; the box has 2"
    assert b.never_fits(2, 40 * 1024) is None
    mixed = Box((A100, Device(1, "simulated T4", "T4", 16384)), MARGIN_MIB)
    assert mixed.never_fits(2, None) == "needs 2 GPUs but at most 1 acceptable GPUs of one type exist"
    assert "the largest GPU has 80896 MiB usable" in mixed.never_fits(1, 81000)


def _sample(index: int, used: int, processes: list[ProcessUsage], util: float = 50.0) -> DeviceSample:
    return DeviceSample(index, used, util, tuple(processes))


def test_ledger_trust_budget_and_external_memory():
    ledger = Ledger((0, 1))
    me = JobMemory("x", os.getpgid(0), (0,), 10 * 1024)
    ledger.track(me)
    ours = ProcessUsage(os.getpid(), 20 * 1024, 20 * 1024)  # this process's group is the job's
    other = ProcessUsage(999_999_999, 5000, 5000, pgid=999_999_999)
    over = ledger.observe((_sample(0, 20 * 1024, [ours]), _sample(1, 5000, [other])))
    assert [(o.job, o.device, o.peak_mib) for o in over] == [("x", 0, 20480)]
    assert me.budget_mib() == 22528  # 20480 x 1.1: above its declaration it counts as its buffered peak
    assert ledger.external_busy[1] and ledger.external_held_mib[1] == 5500
    shrunk = ProcessUsage(999_999_999, 3000, 3000, pgid=999_999_999)
    assert ledger.observe((_sample(0, 20 * 1024, [ours]), _sample(1, 3000, [shrunk]))) == []  # warned once
    assert ledger.external_held_mib[1] == 5500  # held at its buffered peak while it is there
    ledger.observe((_sample(0, 0, []), _sample(1, 100, [])))
    assert not ledger.external_busy[1] and ledger.external_held_mib[1] == 100  # gone; driver noise only
    assert me.peak == 20480 and me.util_pct == 50.0


jobs_st = st.lists(
    st.tuples(st.integers(1, 3), st.sampled_from([None, 5, 20, 40, 70, 90]), st.integers(1, 50)),
    min_size=1,
    max_size=9,
)


@settings(max_examples=40, deadline=None)
@given(jobs=jobs_st, algo=st.sampled_from(["fcfs", "sjf", "easy", "cbf", "sjf_gate", "ect"]))
def test_the_view_decides_as_the_simulator_does_on_the_same_jobs(jobs, algo):
    """The dispatcher's view of queued jobs at t=0 and the simulator's view of the replay's same jobs: the
    policy starts the same jobs on the same GPUs (a second construction of the View, cross-checked)."""
    b = box(3)
    q = [queued(f"j{k}", k, gpus, vram, float(est)) for k, (gpus, vram, est) in enumerate(jobs)]
    feasible = [j for j in q if b.never_fits(j.num_gpus, j.vram_mib) is None]
    mine = decide(b, algo, [], feasible)
    sim_jobs = tuple(
        sim_job(j.job, 0.0, j.est_s, j.num_gpus, j.vram_mib, j.est_s, 0, b.base_mb) for j in feasible
    )
    sim = Simulator(Workload("w", sim_jobs), b.layout, np.array([j.est_s for j in feasible]), 1.0)
    theirs = []
    if sim_jobs and sim.advance():
        theirs = [
            (sim_jobs[d.job].job_id, tuple(b.device_of_gpu[g] for g in d.placement.gpus))
            for d in make_policy(algo)(sim.view())
        ]
    assert mine == theirs
