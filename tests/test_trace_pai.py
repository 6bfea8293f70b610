"""Alibaba PAI 2020 loader: the shared machine spec as a cluster, and job/task/group tables we write that follow
the published headers exactly (the real job tables are not obtainable here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from config import WorkloadConfig
from workloads.traces import load_trace, load_trace_cluster

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
PAI = TRACES / "alibaba-pai-gpu-2020"
needs_pai = pytest.mark.skipif(not PAI.is_dir(), reason=f"shared trace copy absent: {PAI}")

# Column order of the published .header files (checked against the shared copies below when present).
TASK_HEADER = "job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,plan_gpu,gpu_type"
JOB_HEADER = "job_name,inst_id,user,status,start_time,end_time"
GROUP_HEADER = "inst_id,user,gpu_type_spec,group,workload"

TASKS = [
    # a training job: ps without GPU + 2 workers at 50 % each -> 1 GPU of demand, shared-capable
    "j1,ps,1.0,Terminated,1000.0,1600.0,600.0,29.296875,,",
    "j1,worker,2.0,Terminated,1010.0,1610.0,400.0,10.0,50.0,V100",
    # the README's example row: one instance at 50 % of a MISC GPU
    "j2,tensorflow,1.0,Terminated,1739162.0,1739200.0,600.0,29.296875,50.0,MISC",
    # 8 GPUs per instance x 2 instances, failed
    "j3,worker,2.0,Failed,2000.0,2500.0,1200.0,100.0,800.0,V100M32",
    # 150 % -> ceil to 2 whole GPUs
    "j4,worker,1.0,Terminated,3000.0,3100.0,100.0,1.0,150.0,T4",
    # CPU only
    "j5,worker,1.0,Terminated,3000.0,3100.0,100.0,1.0,0.0,",
    # never launched (start_time 0)
    "j6,worker,1.0,Waiting,0.0,0.0,100.0,1.0,100.0,",
    # still running: end_time 0 -> replayed to the latest timestamp in the tables
    "j7,worker,1.0,Running,1739000.0,0.0,100.0,1.0,100.0,P100",
]
JOBS = [
    "j1,i1,u1,Terminated,900.0,1610.0",
    "j2,i2,u1,Terminated,1739100.0,1739200.0",
    "j3,i3,u2,Failed,1990.0,2500.0",
    "j4,i4,u2,Terminated,2990.0,3100.0",
    "j5,i5,u3,Terminated,2990.0,3100.0",
    "j6,i6,u3,Waiting,2990.0,0.0",
    "j7,i7,u4,Running,1738990.0,0.0",
]
GROUPS = ["i3,u2,V100M32,g,bert", "i1,u1,,g,resnet"]


def _write(folder: Path, tasks=TASKS, jobs=JOBS, groups=GROUPS) -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "pai_task_table.csv").write_text("\n".join(tasks) + "\n")
    if jobs is not None:
        (folder / "pai_job_table.csv").write_text("\n".join(jobs) + "\n")
    if groups is not None:
        (folder / "pai_group_tag_table.csv").write_text("\n".join(groups) + "\n")
    return folder


def _load(path, kind="alibaba-pai", **kw):
    return load_trace(WorkloadConfig(workload_type=kind, workload_path=str(path), **kw))


@needs_pai
def test_our_headers_match_the_published_ones():
    assert (PAI / "pai_task_table.header").read_text().strip() == TASK_HEADER
    assert (PAI / "pai_job_table.header").read_text().strip() == JOB_HEADER
    assert (PAI / "pai_group_tag_table.header").read_text().strip() == GROUP_HEADER


@needs_pai
def test_machine_spec_gpu_totals():
    spec = load_trace_cluster(PAI / "pai_machine_spec.csv")
    assert spec.num_gpus == 6742
    assert len(spec.nodes) == 1897 - 83  # CPU machines skipped
    per_type: dict[str, tuple[int, int]] = {}
    for n in spec.nodes:
        nodes, gpus = per_type.get(n.gpu_type, (0, 0))
        per_type[n.gpu_type] = (nodes + 1, gpus + n.num_gpus)
    assert per_type == {
        "P100": (798, 1596), "T4": (497, 994), "MISC": (280, 2240), "V100-32GB": (135, 1080), "V100-16GB": (104, 832),
    }  # fmt: skip


def test_job_mapping(tmp_path):
    t = _load(_write(tmp_path / "pai"))
    jobs = {j.job_id: j for j in t.workload.jobs}
    assert set(jobs) == {"j1", "j2", "j3", "j4", "j7"}
    assert (jobs["j1"].num_gpus, jobs["j1"].gpu_milli, jobs["j1"].runtime_s) == (1, 1000, 600.0)
    assert jobs["j1"].arrival_s == 0.0  # job submission 900 is the earliest
    assert (jobs["j2"].num_gpus, jobs["j2"].gpu_milli, jobs["j2"].runtime_s) == (1, 500, 38.0)
    assert jobs["j2"].arrival_s == 1739100.0 - 900.0
    assert (jobs["j3"].num_gpus, jobs["j3"].trace_status, jobs["j3"].gpu_types) == (
        16,
        "Failed",
        ("V100-32GB",),
    )
    assert jobs["j4"].num_gpus == 2 and jobs["j4"].gpu_milli == 1000
    assert jobs["j7"].trace_status == "Running" and jobs["j7"].runtime_s == 1739200.0 - 1739000.0
    assert jobs["j1"].gpu_types == ()  # empty spec = any; the task's recorded V100 is not a constraint
    r = t.workload.report
    assert r["filtered"]["zero GPUs"] == 1 and r["filtered"]["never started"] == 1
    assert r["fractional_total_rounded_up"] == 1
    assert r["recorded_gpu_type_counts"]["V100"] == 1
    assert t.cluster is None


def test_task_table_alone_and_autodetect(tmp_path):
    folder = _write(tmp_path / "pai", jobs=None, groups=None)
    t = _load(folder / "pai_task_table.csv", kind="alibaba")
    assert t.workload.report["format"] == "alibaba-pai"
    jobs = {j.job_id: j for j in t.workload.jobs}
    assert jobs["j1"].arrival_s == 0.0 and jobs["j2"].arrival_s == 1739162.0 - 1000.0  # first task launch


@needs_pai
def test_machine_spec_beside_the_tables_is_the_cluster(tmp_path):
    folder = _write(tmp_path / "pai")
    (folder / "pai_machine_spec.csv").write_text((PAI / "pai_machine_spec.csv").read_text())
    t = _load(folder)
    assert t.cluster is not None and t.cluster.num_gpus == 6742
    assert "pai_machine_spec.csv" in t.cluster_note


def test_header_row_is_tolerated(tmp_path):
    folder = _write(tmp_path / "pai", tasks=[TASK_HEADER, *TASKS], jobs=[JOB_HEADER, *JOBS])
    assert len(_load(folder).workload.jobs) == 5


@pytest.mark.parametrize(
    ("tasks", "pattern"),
    [
        (
            [*TASKS[:2], "j9,worker,1.0,Exploded,1.0,2.0,1.0,1.0,100.0,T4"],
            r"pai_task_table\.csv:3: unknown status",
        ),
        (
            [*TASKS[:2], "j9,worker,1.0,Terminated,1.0,2.0,1.0,1.0,100.0,H800"],
            r"pai_task_table\.csv:3: column 'gpu_type'",
        ),
        (
            [*TASKS[:2], "j9,worker,one,Terminated,1.0,2.0,1.0,1.0,100.0,T4"],
            r"pai_task_table\.csv:3: column 'inst_num'",
        ),
        (["j9,worker,1.0,Terminated,1.0,2.0"], r"pai_task_table\.csv:1: expected 10 columns"),
    ],
)
def test_bad_rows_are_located(tmp_path, tasks, pattern):
    with pytest.raises(ValueError, match=pattern):
        _load(_write(tmp_path / "pai", tasks=tasks, jobs=None, groups=None))


def test_unknown_gpu_type_spec(tmp_path):
    folder = _write(tmp_path / "pai", groups=["i3,u2,A800,g,bert"])
    with pytest.raises(ValueError, match=r"pai_group_tag_table\.csv:1: column 'gpu_type_spec'.*A800"):
        _load(folder)


def test_machine_spec_errors(tmp_path):
    path = tmp_path / "pai_machine_spec.csv"
    path.write_text("m1,T4,96,512,2\nm2,H800,96,512,8\n")
    with pytest.raises(ValueError, match=r"pai_machine_spec\.csv:2: column 'gpu_type'.*H800"):
        load_trace_cluster(path)
    path.write_text("m1,T4,96,512,2\nm2,P100,96,512,two\n")
    with pytest.raises(ValueError, match=r"pai_machine_spec\.csv:2: column 'cap_gpu'"):
        load_trace_cluster(path)
