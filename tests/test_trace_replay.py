"""Trace replay fidelity: recorded durations replay as recorded (no multi-node factor), service lifetimes do not
scale with GPU speed, SWF processors = max(allocated, requested); hand-computed cases on jobs and files we write,
and NASA job 1 from the shared log."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from config import ClusterConfig, RunConfig, WorkloadConfig
from scenario.build import build_scenario
from schedulers import POLICIES
from sim.cluster import ClusterLayout
from sim.cluster_spec import parse_cluster_spec
from sim.placement import Pace, duration_s
from sim.simulator import JobTable
from tests.helpers import job, run, times
from workloads.csv_jobs import load_jobs_csv
from workloads.traces import load_trace

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
NASA = TRACES / "swf-pwa" / "NASA-iPSC-1993-3.1-cln.swf.gz"
TRACE = {"runtime_includes_spread": True}  # what every trace loader sets


def _scenario_run(cfg: RunConfig, policy: str = "fcfs"):
    sc = build_scenario(cfg, 0)
    sim = sc.simulator()
    sim.run(POLICIES[policy])
    return sc, sim.result(policy, 0)


@pytest.mark.skipif(not NASA.is_file(), reason=f"shared trace copy absent: {NASA}")
def test_nasa_job_1_replays_its_recorded_1451_s_spread_over_128_nodes():
    # the log's first lines (job, submit, wait, run, processors):
    #   1 0 -1 1451 128 / 2 1460 -1 3726 128 / 3 5198 -1 1067 128 -- each job holds the whole 128-node machine
    w = WorkloadConfig(workload_type="swf", workload_path=str(NASA), max_jobs=3)
    sc, r = _scenario_run(RunConfig(workload=w))
    assert sc.cluster.num_gpus == 128 and len(sc.cluster.nodes) == 128  # MaxNodes 128 x 1 processor
    assert r.placement[0].count(";") == 127  # 128 GPUs on 128 nodes: spread
    assert r.runtime_actual_s.tolist() == [1451.0, 3726.0, 1067.0]  # not 1,741.2 s (x 1.2)
    assert r.start_s.tolist() == [0.0, 1460.0, 5198.0]  # each arrives after the previous ended: no wait
    assert r.end_s.tolist() == [1451.0, 5186.0, 6265.0]


def test_synthetic_multi_node_job_still_gets_the_factor_and_a_trace_job_does_not():
    jobs = [job("synthetic", 0, 100, 16), job("trace", 0, 100, 16, **TRACE)]
    _, by_id = run("4xA100-80GB:8", jobs, "fcfs", factor=1.2)
    assert times(by_id) == {"synthetic": (0.0, 120.0), "trace": (0.0, 100.0)}
    # on a slower type the speed still scales both (recorded type = reference here): 100 / 0.5 = 200
    _, by_id = run("4xV100-32GB:8", jobs, "fcfs", factor=1.5)
    assert times(by_id) == {"synthetic": (0.0, 300.0), "trace": (0.0, 200.0)}
    # a one-node job never gets the factor, trace or not
    _, by_id = run("1xA100-80GB:8", [job("one", 0, 100, 8)], "fcfs", factor=2.0)
    assert times(by_id) == {"one": (0.0, 100.0)}


def test_easy_plans_with_the_same_rule():
    """EASY's shadow time uses the recorded duration too: a is a trace job spread over 2 nodes ending at 100 (not
    120), so the head h (24 GPUs) is reserved for 100 and c (one node, ends 2 + 110 = 112) may not backfill; with
    the factor (a synthetic a) the shadow is 120 and c backfills. Hand-computed on 3 nodes of 8 A100s."""
    cluster = "3xA100-80GB:8"

    def jobs(flags):
        return [job("a", 0, 100, 16, **flags), job("h", 1, 50, 24, **flags), job("c", 2, 110, 8)]

    _, by_id = run(cluster, jobs(TRACE), "easy")
    assert times(by_id) == {"a": (0.0, 100.0), "h": (100.0, 150.0), "c": (150.0, 260.0)}
    _, by_id = run(cluster, jobs({}), "easy")
    assert times(by_id) == {"a": (0.0, 120.0), "c": (2.0, 112.0), "h": (120.0, 180.0)}


def test_service_lifetime_does_not_scale_with_speed():
    svc = {"speed_scaled": False}
    jobs = [
        job("svc_t4", 0, 1000, 1, gpu_types=("T4",), **svc),
        job("svc_a100", 0, 1000, 1, gpu_types=("A100-80GB",), **svc),
        job("batch_t4", 0, 1000, 1, gpu_types=("T4",)),
        job("batch_a100", 0, 1000, 1, gpu_types=("A100-80GB",)),
    ]
    _, by_id = run("1xT4:2,1xA100-80GB:2", jobs, "fcfs")
    assert times(by_id) == {
        "svc_t4": (0.0, 1000.0),
        "svc_a100": (0.0, 1000.0),
        "batch_t4": (0.0, 5000.0),  # 1000 / 0.2
        "batch_a100": (0.0, 1000.0),
    }


OPENB_HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
    "scheduled_time\n"
)


def test_openb_ls_pod_lasts_the_same_on_a_t4_and_an_a100_while_a_be_pod_scales(tmp_path):
    rows = [
        "ls-t4,1000,1024,1,1000,T4,LS,Succeeded,0,1010,10",
        "ls-a100,1000,1024,1,1000,A100,LS,Succeeded,0,1010,10",
        "be-t4,1000,1024,1,1000,T4,BE,Succeeded,0,1010,10",
        "be-a100,1000,1024,1,1000,A100,BE,Succeeded,0,1010,10",
    ]
    pods = tmp_path / "pods.csv"
    pods.write_text(OPENB_HEADER + "\n".join(rows) + "\n")
    cfg = RunConfig(
        workload=WorkloadConfig(workload_type="alibaba", workload_path=str(pods), recorded_gpu_type="T4"),
        cluster=ClusterConfig(spec="1xT4:2,1xA100-80GB:2"),
    )
    sc, r = _scenario_run(cfg)
    jobs = {j.job_id: j for j in sc.workload.jobs}
    assert {i: j.speed_scaled for i, j in jobs.items()} == {
        "ls-t4": False,
        "ls-a100": False,
        "be-t4": True,
        "be-a100": True,
    }
    assert sc.workload.report["not_speed_scaled_jobs"] == 2
    got = dict(zip([j.job_id for j in sc.workload.jobs], r.runtime_actual_s.tolist(), strict=True))
    # recorded 1000 s on a T4 (speed 0.2): BE -> reference 200 s, 200 s on the A100; LS keeps 1000 s everywhere
    assert got == {"ls-t4": 1000.0, "ls-a100": 1000.0, "be-t4": 1000.0, "be-a100": 200.0}
    assert dict(zip(jobs, r.gpu_type, strict=True)) == {
        "ls-t4": "T4",
        "ls-a100": "A100-80GB",
        "be-t4": "T4",
        "be-a100": "A100-80GB",
    }


def test_every_trace_job_carries_its_spreading_and_csv_jobs_do_not(tmp_path):
    itp = tmp_path / "cluster01.csv"
    itp.write_text("job_id,submission_time,duration,num_gpu\na,0,100,16\nb,5,50,1\n")
    t = load_trace(WorkloadConfig(workload_type="itp", workload_path=str(itp)))
    assert all(j.runtime_includes_spread and j.speed_scaled for j in t.workload.jobs)
    csv = tmp_path / "jobs.csv"
    csv.write_text("arrival_time,runtime,gpus\n0,100,16\n")
    cfg = RunConfig(
        workload=WorkloadConfig(workload_type="csv", workload_path=str(csv)),
        cluster=ClusterConfig(spec="2xA100-80GB:8"),
    )
    sc, r = _scenario_run(cfg)
    assert not sc.workload.jobs[0].runtime_includes_spread
    assert r.runtime_actual_s.tolist() == [120.0]  # a user's own jobs file: the factor applies


def test_duration_rule_and_each_jobs_pace():
    pace = Pace(multi_node_factor=1.25, scales_with_speed=True)
    assert duration_s(100.0, 0.5, False, pace) == 200.0
    assert duration_s(100.0, 0.5, True, pace) == 250.0
    assert duration_s(100.0, 0.2, True, Pace(1.0, False)) == 100.0
    jobs = [job("a", 0, 1), job("b", 0, 1, **TRACE), job("c", 0, 1)]
    layout = ClusterLayout(parse_cluster_spec("1xA100-80GB:8"))
    paces = JobTable(jobs, layout, np.ones(3), 1.5).pace
    assert paces[0] is paces[2] and paces[0] == Pace(1.5, True) and paces[1] == Pace(1.0, True)


def _swf(tmp_path, lines: list[str]) -> Path:
    p = tmp_path / "tiny.swf"
    header = "; MaxNodes: 4\n; MaxProcs: 32\n"
    p.write_text(header + "\n".join(lines) + "\n")
    return p


def test_swf_processors_are_max_of_allocated_and_requested(tmp_path):
    # fields: job submit wait run alloc cpu mem req_procs req_time req_mem status user group exe queue part prev think
    lines = [
        "1 0 -1 100 1 -1 -1 8 -1 -1 1 1 1 -1 -1 -1 -1 -1",  # allocated holds a node count: 8 processors
        "2 10 -1 100 16 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1",  # requested unknown: allocated 16
        "3 20 -1 100 -1 -1 -1 4 -1 -1 1 1 1 -1 -1 -1 -1 -1",  # allocated unknown: requested 4
        "4 30 -1 100 4 -1 -1 2 -1 -1 1 1 1 -1 -1 -1 -1 -1",  # more allocated than requested: 4
        "5 40 -1 100 -1 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1",  # both unknown: skipped, counted
    ]
    t = load_trace(WorkloadConfig(workload_type="swf", workload_path=str(_swf(tmp_path, lines))))
    assert {j.job_id: j.num_gpus for j in t.workload.jobs} == {"1": 8, "2": 16, "3": 4, "4": 4}
    assert t.workload.report["filtered"]["unknown processors"] == 1
    assert t.workload.report["mapping"]["gpus"].startswith("processors = max(field 5 allocated, field 8")


def test_csv_columns_set_the_duration_rule(tmp_path):
    csv = tmp_path / "jobs.csv"
    csv.write_text(
        "job_id,arrival_time,runtime,gpus,gpu_types,runtime_includes_spread,speed_scaled\n"
        "spread,0,100,16,A100,1,\n"
        "default,0,100,16,A100,,\n"
        "service,0,100,1,T4,,false\n"
        "batch,0,100,1,T4,0,TRUE\n"
    )
    cfg = RunConfig(
        workload=WorkloadConfig(workload_type="csv", workload_path=str(csv)),
        cluster=ClusterConfig(spec="4xA100-80GB:8,1xT4:2"),
    )
    sc, r = _scenario_run(cfg)
    got = dict(zip([j.job_id for j in sc.workload.jobs], r.runtime_actual_s.tolist(), strict=True))
    assert got == {"spread": 100.0, "default": 120.0, "service": 100.0, "batch": 500.0}
    csv.write_text("arrival_time,runtime,gpus,speed_scaled\n0,100,1,yes\n")
    with pytest.raises(ValueError, match=r"jobs\.csv:2: speed_scaled must be 1/0 or true/false, got 'yes'"):
        load_jobs_csv(csv)


def test_google_unit_option():
    from cli.parser import build_parser, config_from_args

    def cfg(*argv):
        return config_from_args(build_parser().parse_args(["--workload_type", "google", *argv]))

    assert cfg().workload.google_unit == "task"
    assert cfg("--google_unit", "job").workload.google_unit == "job"
    with pytest.raises(SystemExit) as e:
        cfg("--google_unit", "gang")
    assert e.value.code == 2
