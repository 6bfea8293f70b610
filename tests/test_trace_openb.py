"""Alibaba openb 2023 loader: the README's facts on the shared copy, and located errors for bad pod/node lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from config import WorkloadConfig
from workloads.traces import load_trace, load_trace_cluster

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
OPENB = TRACES / "alibaba-openb-gpu-2023"
needs_openb = pytest.mark.skipif(not OPENB.is_dir(), reason=f"shared trace copy absent: {OPENB}")
HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"


def _load(path, kind="alibaba", **kw):
    return load_trace(WorkloadConfig(workload_type=kind, workload_path=str(path), **kw))


@needs_openb
def test_default_pod_list_facts():
    t = _load(OPENB / "openb_pod_list_default.csv")
    r = t.workload.report
    assert r["format"] == "alibaba-openb"
    assert r["rows_read"] == 8152
    assert r["num_gpu_histogram_all_rows"] == {0: 1088, 1: 6989, 2: 16, 4: 15, 8: 44}
    assert r["sharing_pods_all_rows"] == 3078
    assert r["filtered"]["zero GPUs"] == 1088
    pending_gpu_pods = 897 - 36  # Pending pods minus the CPU-only ones among them
    assert r["filtered"]["never started"] == pending_gpu_pods
    assert r["jobs_loaded"] == 7064 - pending_gpu_pods
    jobs = t.workload.jobs
    assert all(j.gpu_milli == 1000 for j in jobs if j.num_gpus > 1)
    assert all(j.runtime_s > 0 for j in jobs)
    assert {j.trace_status for j in jobs} == {"Running", "Succeeded", "Failed"}
    assert jobs[0].arrival_s == 0.0 and jobs[-1].arrival_s <= 12_901_761
    assert {j.priority for j in jobs} <= {0, 1, 2, 3}


@needs_openb
def test_directory_brings_the_node_list_as_cluster():
    t = _load(OPENB, kind="alibaba-openb")
    assert t.workload.report["rows_read"] == 8152
    assert t.cluster is not None and len(t.cluster.nodes) == 1213 and t.cluster.num_gpus == 6212
    assert "openb_node_list_gpu_node.csv" in t.cluster_note


@needs_openb
def test_node_list_as_cluster_file():
    spec = load_trace_cluster(OPENB / "openb_node_list_gpu_node.csv")
    assert len(spec.nodes) == 1213 and spec.num_gpus == 6212
    per_type = {}
    for n in spec.nodes:
        per_type[n.gpu_type] = per_type.get(n.gpu_type, 0) + 1
    assert per_type == {
        "G2": 549,
        "T4": 404,
        "P100": 134,
        "V100-16GB": 55,
        "G3": 39,
        "V100-32GB": 30,
        "A10": 2,
    }


@needs_openb
def test_gpuspec_variant_constrains_types():
    t = _load(OPENB / "openb_pod_list_gpuspec20.csv")
    constrained = [j for j in t.workload.jobs if j.gpu_types]
    assert constrained and all(len(set(j.gpu_types)) == len(j.gpu_types) for j in constrained)
    assert t.workload.report["type_constrained_jobs"] == len(constrained)


@needs_openb
def test_reduced_multigpu_list_is_refused():
    with pytest.raises(ValueError, match="cannot be replayed by arrival time"):
        _load(OPENB / "openb_pod_list_multigpu40.csv")


def test_bad_rows_are_located(tmp_path):
    ok = "p0,1000,1024,1,500,,LS,Succeeded,0,100,10\n"
    cases = {
        "unknown GPU model": (
            ok + "p1,1000,1024,1,1000,V100M16|H800,LS,Succeeded,0,100,10\n",
            r":3: column 'gpu_spec'.*H800",
        ),
        "bad number": (ok + "p1,1000,1024,two,1000,,LS,Succeeded,0,100,10\n", r":3: column 'num_gpu'.*'two'"),
        "bad share": (
            ok + "p1,1000,1024,1,0,,LS,Succeeded,0,100,10\n",
            r":3: gpu_milli must be in 1\.\.1000",
        ),
        "bad qos": (ok + ok.replace("p0", "p1") + "p2,1,1,1,1000,,VIP,Failed,0,1,0\n", r":4: unknown qos"),
        "short row": (ok + "p1,1000,1024,1\n", r":3: column"),
        "long row": (ok + "p1,1000,1024,1,1000,,LS,Succeeded,0,100,10,extra\n", r":3: malformed row"),
        "duplicate": (ok + ok, r":3: duplicate pod name"),
    }
    for name, (rows, pattern) in cases.items():
        path = tmp_path / f"{name.replace(' ', '_')}.csv"
        path.write_text(HEADER + rows)
        with pytest.raises(ValueError, match=f"{path.name}{pattern}"):
            _load(path, kind="alibaba-openb")


def test_missing_column(tmp_path):
    path = tmp_path / "pods.csv"
    path.write_text(HEADER.replace(",qos", "") + "p0,1000,1024,1,500,,Succeeded,0,100,10\n")
    with pytest.raises(ValueError, match=r"pods\.csv:1: missing column\(s\) qos"):
        _load(path, kind="alibaba-openb")


def test_node_list_unknown_model(tmp_path):
    path = tmp_path / "nodes.csv"
    path.write_text("sn,cpu_milli,memory_mib,gpu,model\nn0,1,1,0,\nn1,1,1,8,B300\n")
    with pytest.raises(ValueError, match=r"nodes\.csv:3: column 'model'.*B300"):
        load_trace_cluster(path)


@needs_openb
def test_every_timed_variant_loads():
    for path in sorted(OPENB.glob("openb_pod_list_*.csv")):
        if "multigpu" in path.name:
            continue
        r = _load(path).workload.report
        assert r["jobs_loaded"] + sum(r["filtered"].values()) == r["rows_read"], path.name
        assert r["jobs_loaded"] > 5000, path.name
