"""Google 2011 loader: the README's facts on the twelve shared shards, attempt/task/gang logic on shards we write."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from config import WorkloadConfig
from workloads.traces import load_trace
from workloads.traces.google import read_google

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
GOOGLE = TRACES / "google-2011"
needs_google = pytest.mark.skipif(not GOOGLE.is_dir(), reason=f"shared trace copy absent: {GOOGLE}")
OFFSET_US = 600_000_000
SUBMIT, SCHEDULE, EVICT, FAIL, FINISH, KILL = 0, 1, 2, 3, 4, 5


@pytest.fixture(scope="module")
def shipped():
    if not GOOGLE.is_dir():
        pytest.skip(f"shared trace copy absent: {GOOGLE}")
    return load_trace(WorkloadConfig(workload_type="google", workload_path=str(GOOGLE)))


@needs_google
def test_shipped_shards_match_the_readme(shipped):
    t = shipped
    r = t.workload.report
    assert r["rows_read"] == r["task_event_rows"] == 2_211_842
    assert r["task_event_rows_at_t0"] == 277_321
    assert r["distinct_jobs_task_events"] == 16_623
    assert r["distinct_tasks"] == 541_186
    assert r["job_event_rows"] == 45_861
    assert r["distinct_jobs_job_events"] == 16_628
    assert r["task_event_counts"] == {
        "SUBMIT": 800_357, "SCHEDULE": 762_872, "EVICT": 179_647, "FAIL": 14_844, "FINISH": 286_392,
        "KILL": 167_609, "LOST": 0, "UPDATE_PENDING": 2, "UPDATE_RUNNING": 119,
    }  # fmt: skip
    assert r["attempts"] == 762_872  # one attempt per SCHEDULE
    assert r["last_timestamp_s"] == pytest.approx(60_733.665699 - 600)
    # per-task default: every task of the task table ends up loaded or under exactly one reason
    assert r["unit"] == "task"
    assert r["jobs_loaded"] + sum(r["filtered"].values()) == 541_186
    assert r["jobs_loaded"] == 373_502 and r["filtered"]["submitted before trace start"] == 144_339
    jobs = t.workload.jobs
    assert all(j.num_gpus == 1 and j.runtime_includes_spread for j in jobs)
    assert all(0 <= j.priority <= 11 for j in jobs)
    assert all(j.arrival_s <= 60_134 and j.runtime_s > 0 for j in jobs)
    assert r["mapping"]["gpus"] == "cpu_job_gpus=1 per task"
    # so the default cluster is sized by load alone (2 x the largest job is 2 GPUs)
    assert "largest job (1 GPUs)" in t.cluster_note


@needs_google
def test_shipped_shards_as_gangs():
    """--google_unit job: the published figures (601 gangs of >= 100 tasks carry 95.6 % of the work, one needs
    10,500 GPUs)."""
    cfg = WorkloadConfig(workload_type="google", workload_path=str(GOOGLE), google_unit="job")
    t = load_trace(cfg)
    r = t.workload.report
    assert r["unit"] == "job"
    # every job of either table ends up loaded or under exactly one reason
    assert r["jobs_loaded"] + sum(r["filtered"].values()) == 16_628
    assert r["jobs_loaded"] == 12_604 and r["filtered"]["submitted before trace start"] == 3_986
    assert r["mapping"]["gpus"].startswith("peak running tasks x cpu_job_gpus=1")
    jobs = t.workload.jobs
    work = sum(j.num_gpus * j.runtime_s for j in jobs)
    big = [j for j in jobs if j.num_gpus >= 100]
    assert len(big) == 601 and max(j.num_gpus for j in jobs) == 10_500
    assert sum(j.num_gpus * j.runtime_s for j in big) / work == pytest.approx(0.956, abs=5e-4)


@needs_google
def test_window_on_trace_time(shipped):
    cfg = WorkloadConfig(
        workload_type="google", workload_path=str(GOOGLE), trace_start_s=3600, trace_end_s=7200
    )
    t = load_trace(cfg)
    full = shipped
    in_hour = [
        j for j in full.workload.jobs if 3600 <= j.arrival_s + full.workload.report["arrival_offset_s"] < 7200
    ]
    assert len(t.workload.jobs) == len(in_hour)
    assert t.workload.jobs[0].arrival_s == 0.0


def _write_shards(folder: Path, task_rows, job_rows) -> Path:
    for table, rows in (("task_events", task_rows), ("job_events", job_rows)):
        (folder / table).mkdir(parents=True)
        text = "".join(",".join(str(v) for v in row) + "\n" for row in rows)
        with gzip.open(folder / table / "part-00000-of-00001.csv.gz", "wt") as f:
            f.write(text)
    return folder


def _us(seconds: float) -> int:
    return OFFSET_US + int(seconds * 1_000_000)


def _task(ts, job, task, event, prio=2):
    machine = "" if event == SUBMIT else 42
    return (ts, "", job, task, machine, event, "user", 1, prio, 0.1, 0.1, 0.0, 0)


def _job(ts, job, event):
    return (ts, "", job, event, "user", 1, "name", "logical")


@pytest.fixture
def small_trace(tmp_path):
    tasks = [
        _task(0, 1, 0, SUBMIT), _task(0, 1, 0, SCHEDULE),  # job 1: already running at the trace start
        _task(_us(10), 2, 0, SUBMIT), _task(_us(10), 2, 1, SUBMIT),
        _task(_us(12), 2, 0, SCHEDULE), _task(_us(15), 2, 1, SCHEDULE),
        _task(_us(20), 2, 0, EVICT), _task(_us(20), 2, 0, SUBMIT), _task(_us(25), 2, 1, FINISH),
        _task(_us(30), 2, 0, SCHEDULE), _task(_us(50), 2, 0, FINISH),
        _task(_us(100), 3, 0, SUBMIT, prio=11), _task(_us(110), 3, 0, SCHEDULE, prio=11),  # still running at the end
        _task(_us(150), 4, 0, SUBMIT), _task(_us(200), 4, 0, KILL),  # killed while pending
    ]  # fmt: skip
    jobs = [
        _job(0, 1, SUBMIT), _job(_us(10), 2, SUBMIT), _job(_us(50), 2, FINISH),
        _job(_us(100), 3, SUBMIT), _job(_us(150), 4, SUBMIT), _job(_us(200), 4, KILL),
    ]  # fmt: skip
    return _write_shards(tmp_path / "trace", tasks, jobs)


def test_gang_option_makes_jobs_gangs_of_their_tasks(small_trace):
    t = load_trace(WorkloadConfig(workload_type="google", workload_path=str(small_trace), google_unit="job"))
    by_id = {j.job_id: j for j in t.workload.jobs}
    assert set(by_id) == {"2", "3"}
    # job 2: task 0 held 8 s + 20 s (evicted, resubmitted), task 1 held 10 s, at most 2 at once
    assert by_id["2"].num_gpus == 2 and by_id["2"].runtime_s == pytest.approx(38 / 2)
    assert by_id["2"].arrival_s == 0.0 and by_id["2"].trace_status == "FINISH"
    # job 3 runs from 110 s to the last timestamp (200 s)
    assert by_id["3"].runtime_s == pytest.approx(90) and by_id["3"].trace_status == "Running"
    assert by_id["3"].arrival_s == pytest.approx(90) and by_id["3"].priority == 11
    f = t.workload.report["filtered"]
    assert f["submitted before trace start"] == 1 and f["never started"] == 1
    assert t.workload.report["evictions"] == 1 and t.workload.report["attempts_open_at_end"] == 2


def test_task_events_folder_is_accepted(small_trace):
    t = load_trace(WorkloadConfig(workload_type="google", workload_path=str(small_trace / "task_events")))
    assert t.workload.report["job_event_rows"] == 6 and len(t.workload.jobs) == 3


def test_cpu_job_gpus_scales_the_task_and_the_gang(small_trace):
    cfg = WorkloadConfig(workload_type="google", workload_path=str(small_trace), cpu_job_gpus=4)
    assert {j.job_id: j.num_gpus for j in load_trace(cfg).workload.jobs} == {"2-0": 4, "2-1": 4, "3-0": 4}
    gang = WorkloadConfig(
        workload_type="google", workload_path=str(small_trace), cpu_job_gpus=4, google_unit="job"
    )
    assert {j.job_id: j.num_gpus for j in load_trace(gang).workload.jobs} == {"2": 8, "3": 4}


def test_tasks_are_independent_jobs_by_default(small_trace):
    t = load_trace(WorkloadConfig(workload_type="google", workload_path=str(small_trace)))
    by_id = {j.job_id: j for j in t.workload.jobs}
    # task 2-0: held 12..20 s (evicted) and 30..50 s; task 2-1: 15..25 s; task 3-0: 110 s to the last timestamp
    assert {i: j.runtime_s for i, j in by_id.items()} == pytest.approx(
        {"2-0": 28.0, "2-1": 10.0, "3-0": 90.0}
    )
    # each arrives at its own first SUBMIT (10 s is the first kept arrival)
    assert {i: j.arrival_s for i, j in by_id.items()} == pytest.approx({"2-0": 0.0, "2-1": 0.0, "3-0": 90.0})
    assert all(j.num_gpus == 1 for j in by_id.values())
    assert by_id["2-0"].trace_status == "FINISH" and by_id["3-0"].trace_status == "Running"
    f = t.workload.report["filtered"]
    assert f["submitted before trace start"] == 1 and f["never started"] == 1
    assert t.workload.report["mapping"]["job"] == "one Google task"


def test_unknown_unit_is_refused(small_trace):
    with pytest.raises(ValueError, match="unknown google unit 'gang'"):
        read_google(small_trace, cpu_job_gpus=1, unit="gang")


def test_bad_row_is_located(tmp_path):
    rows = [_task(_us(1), 5, 0, SUBMIT), ("x" + str(_us(2)), "", 5, 0, "", SCHEDULE, "u", 1, 2, 0, 0, 0, 0)]
    folder = _write_shards(tmp_path / "t", rows, [_job(_us(1), 5, SUBMIT)])
    with pytest.raises(ValueError, match=r"part-00000-of-00001\.csv\.gz:2: column 'ts'"):
        load_trace(WorkloadConfig(workload_type="google", workload_path=str(folder)))


def test_truncated_shard_and_missing_folder(tmp_path):
    rows = [_task(_us(i), 7, i, SUBMIT) for i in range(20_000)]
    folder = _write_shards(tmp_path / "t", rows, [_job(_us(1), 7, SUBMIT)])
    shard = folder / "task_events" / "part-00000-of-00001.csv.gz"
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match=r"part-00000-of-00001\.csv\.gz.*(truncated|corrupt)"):
        load_trace(WorkloadConfig(workload_type="google", workload_path=str(folder)))
    with pytest.raises(ValueError, match="no task_events"):
        load_trace(WorkloadConfig(workload_type="google", workload_path=str(tmp_path)))
