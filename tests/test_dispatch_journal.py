"""A dispatch run's journal read back: records folded into attempts, a last record cut short by a kill, a damaged
record named by file and line, and the replay workload built from it."""

from __future__ import annotations

import json

import pytest

from workloads.dispatch_log import load_dispatch_log, mb_of_mib, on_grid, read_journal, share_milli

HEADER = {
    "event": "run", "t": 0.0, "format": 1, "epoch_s": 1.0e9, "jobs_file": "/x/jobs.txt", "algo": "easy",
    "backend": "sim:2xA100-80GB", "margin_mib": 1024, "default_est_s": 3600.0, "cwd": "/x",
    "devices": [{"index": i, "name": "simulated A100-80GB", "gpu_type": "A100-80GB", "total_mib": 81920} for i in (0, 1)],
}  # fmt: skip


def attrs(command: str, vram_mib=None, gpus=1) -> dict:
    return {"command": command, "line": 1, "vram_mib": vram_mib, "gpus": gpus, "est_s": 60.0, "retries": 1,
            "timeout_s": None, "priority": 0}  # fmt: skip


def start(job: str, attempt: int, t: float, queued: float, seq: int, devices, vram) -> dict:
    return {"event": "start", "t": t, "job": job, "attempt": attempt, "seq": seq, "queued_t": queued, "command": "c",
            "devices": devices, "vram_mib": vram, "est_s": 60.0, "priority": 0, "boot_id": "b", "rc_file": "r",
            "pid_file": "p", "stdout": "o", "stderr": "e"}  # fmt: skip


def end(job: str, attempt: int, t: float, outcome: str, final: bool, next_vram=None) -> dict:
    return {"event": "end", "t": t, "job": job, "attempt": attempt, "exit_code": 0 if outcome == "ok" else 1,
            "outcome": outcome, "final": final, "next_vram_mib": next_vram, "peak_mib": [100], "util_pct": 50.0}  # fmt: skip


def write(path, records, tail: str = "") -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)


def records() -> list[dict]:
    return [
        HEADER,
        {"event": "seen", "t": 0.0, "job": "a#1", "seq": 0, "attrs": attrs("a", 10240)},
        {"event": "seen", "t": 0.0, "job": "b#1", "seq": 1, "attrs": attrs("b", None, 2)},
        start("a#1", 1, 0.0, 0.0, 0, [0], 10240),
        {"event": "pid", "t": 0.0, "job": "a#1", "attempt": 1, "pid": 123, "proc_start": "99"},
        end("a#1", 1, 1.5, "oom", False, 12800),
        start("a#1", 2, 1.5, 1.5, 2, [1], 12800),
        end("a#1", 2, 4.0, "ok", True),
        start("b#1", 1, 4.0, 0.0, 1, [0, 1], None),
        {"event": "seen", "t": 5.0, "job": "c#1", "seq": 3, "attrs": attrs("c")},
    ]


def test_records_fold_into_attempts_and_a_cut_last_line_is_skipped(tmp_path):
    path = tmp_path / "journal.jsonl"
    write(path, records(), tail='{"event": "end", "t": 6.0, "jo')
    j = read_journal(path)
    assert j.warnings == [f"{path}:11: the last record is cut short (skipped)"]
    a1, a2 = j.jobs["a#1"].attempts
    assert (a1.pid, a1.proc_start, a1.outcome, a1.final, a1.next_vram_mib) == (123, "99", "oom", False, 12800)
    assert (a2.devices, a2.vram_mib, a2.outcome, a2.final) == ((1,), 12800, "ok", True)
    (b,) = j.jobs["b#1"].attempts
    assert b.end_s != b.end_s and b.pid is None  # still running; its pid only in its wrapper's file
    assert j.next_seq == 4 and j.last_t_s == 5.0 and not j.jobs["c#1"].attempts


def test_a_damaged_record_names_file_and_line(tmp_path):
    path = tmp_path / "journal.jsonl"
    write(path, records()[:3] + [{"event": "start", "t": 0.0, "job": "a#1"}] + records()[3:])
    with pytest.raises(ValueError, match=r"journal.jsonl:4: missing field 'attempt'"):
        read_journal(path)
    write(path, records()[1:])
    with pytest.raises(ValueError, match=r"journal.jsonl:1: the first record must be the run header"):
        read_journal(path)


def test_the_replay_has_the_ended_attempts_in_queue_order(tmp_path):
    write(tmp_path / "journal.jsonl", records())
    workload, cluster, note = load_dispatch_log(tmp_path)
    assert [(j.job_id, j.arrival_s, j.runtime_s, j.trace_status) for j in workload.jobs] == [
        ("a#1", 0.0, 1.5, "oom"),
        ("a#1~2", 1.5, 2.5, ""),
    ]
    first = workload.jobs[0]
    usable_mb = mb_of_mib(81920 - 1024)
    assert first.gpu_milli == share_milli(mb_of_mib(10240), usable_mb) == 127 and first.estimate_s == 60.0
    assert not first.speed_scaled and first.runtime_includes_spread
    assert workload.report["filtered"] == {"still running when the journal ends": 1, "never started": 1}
    assert [(n.gpu_type, n.num_gpus) for n in cluster.nodes] == [
        ("A100-80GB", 2)
    ] and "1024 MiB margin" in note


def test_times_are_on_a_binary_grid_so_sums_are_exact():
    start, runtime = on_grid(1234.5678), on_grid(0.1 + 0.2)
    assert (start + runtime) - start == runtime and on_grid(start) == start
