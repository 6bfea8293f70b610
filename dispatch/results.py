"""A dispatch run's result files, from its journal: the same jobs.csv, runs.csv, cluster.csv, summary.csv,
fairness.csv, workload_report.json and plots as a simulated run (one row per attempt: a retried job's later
attempts are `<job>~<attempt>`), and dispatch.csv with what only a real run has (command, exit status, outcome,
devices, declared and peak VRAM per GPU, utilization, log files)."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from cli.runner import write_run
from metrics.summary import summarize
from scenario.build import Scenario
from sim.catalog import CATALOG
from sim.job import Workload
from sim.load import offered_load_factor
from sim.records import COMPLETED, REJECTED, UNFINISHED, RunResult, Runs
from workloads.dispatch_log import OK, Attempt, Journal, sim_job

DISPATCH_CSV = "dispatch.csv"
DISPATCH_COLUMNS = (
    "job_id",
    "attempt",
    "line",
    "command",
    "devices",
    "declared_mib",
    "peak_mib",
    "util_pct",
    "exit_code",
    "outcome",
    "start_time",
    "end_time",
    "stdout",
    "stderr",
)


def attempt_id(a: Attempt) -> str:
    return a.job if a.attempt == 1 else f"{a.job}~{a.attempt}"


def run_result(journal: Journal, box, name: str) -> tuple[RunResult, Workload]:
    """The run as a RunResult: every attempt (ended: completed; still running: unfinished), every job still
    waiting (unfinished) and every infeasible job (rejected); removed lines are left out."""
    layout = box.layout
    rows = []  # (arrival, seq, Job, start, end, placement gpus, status, reason)
    for h in journal.jobs.values():
        for a in h.attempts:
            ended = a.end_s == a.end_s
            job = sim_job(
                attempt_id(a),
                a.queued_s,
                a.end_s - a.start_s if ended else a.est_s,
                len(a.devices),
                a.vram_mib,
                a.est_s,
                a.priority,
                box.base_mb,
                "" if a.outcome in ("", OK) else a.outcome,
            )
            gpus = tuple(box.gpu_of_device[d] for d in a.devices)
            rows.append(
                (a.queued_s, a.seq, job, a.start_s, a.end_s, gpus, COMPLETED if ended else UNFINISHED, "")
            )
        last = h.attempts[-1] if h.attempts else None
        waiting = last is None or (last.end_s == last.end_s and not last.final)
        if h.removed or not waiting:
            continue
        attrs = h.attrs
        est = attrs["est_s"] if attrs["est_s"] is not None else journal.header.default_est_s
        vram = (
            last.next_vram_mib if last is not None and last.next_vram_mib is not None else attrs["vram_mib"]
        )
        arrival = last.end_s if last is not None else h.seen_s
        job_id = h.job if last is None else f"{h.job}~{last.attempt + 1}"
        job = sim_job(job_id, arrival, est, attrs["gpus"], vram, est, attrs["priority"], box.base_mb)
        status = REJECTED if h.infeasible else UNFINISHED
        rows.append((arrival, h.seq, job, float("nan"), float("nan"), (), status, h.infeasible))
    rows.sort(key=lambda r: (r[0], r[1]))
    jobs = tuple(r[2] for r in rows)
    placements = tuple(";".join(layout.gpu_label(g) for g in r[5]) for r in rows)
    types = tuple(layout.nodes[layout.gpu_node[r[5][0]]].gpu_type if r[5] else "" for r in rows)
    start = np.array([r[3] for r in rows], dtype=float)
    end = np.array([r[4] for r in rows], dtype=float)
    started = [i for i, r in enumerate(rows) if r[5]]
    t, busy, tflops, queue = _timeline(rows, types)
    accepted = [j for j, r in zip(jobs, rows, strict=True) if r[6] != REJECTED]
    result = RunResult(
        scheduler=journal.header.algo,
        workload=name,
        seed=0,
        jobs=jobs,
        nodes=layout.nodes,
        start_s=start,
        end_s=end,
        runtime_actual_s=end - start,
        gpu_type=types,
        placement=placements,
        status=tuple(r[6] for r in rows),
        reject_reason=tuple(r[7] for r in rows),
        timeline_t_s=t,
        timeline_busy_gpus=busy,
        timeline_busy_tflops=tflops,
        timeline_queue_len=queue,
        load_factor=offered_load_factor(accepted, layout.num_gpus) if accepted else float("nan"),
        runs=Runs(
            job=np.array(sorted(started, key=lambda i: (start[i], i)), dtype=np.int64),
            start_s=np.array(sorted(start[i] for i in started), dtype=float),
            end_s=np.array([end[i] for i in sorted(started, key=lambda i: (start[i], i))], dtype=float),
            placement=tuple(placements[i] for i in sorted(started, key=lambda i: (start[i], i))),
            gpu_type=tuple(types[i] for i in sorted(started, key=lambda i: (start[i], i))),
        ),
    )
    return result, Workload(name, jobs, {"dispatch_algo": journal.header.algo})


def _timeline(rows: list, types: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The busy GPUs (shares as their fraction), busy TFLOPS and queue length after each event instant."""
    events: dict[float, list[tuple[float, float, int]]] = {}
    for r, gpu_type in zip(rows, types, strict=True):
        arrival, _, job, start, end, gpus, status, _ = r
        if status == REJECTED:
            continue
        share = job.gpu_demand
        tf = share * CATALOG[gpu_type].peak_tflops if gpu_type else 0.0
        events.setdefault(arrival, []).append((0.0, 0.0, 1))
        if gpus:
            events.setdefault(start, []).append((share, tf, -1))
            if end == end:
                events.setdefault(end, []).append((-share, -tf, 0))
    t, busy, tflops, queue = [], [], [], []
    b = f = 0.0
    q = 0
    for at in sorted(events):
        for db, dt, dq in events[at]:
            b, f, q = b + db, f + dt, q + dq
        t.append(at)
        busy.append(max(b, 0.0))
        tflops.append(max(f, 0.0))
        queue.append(q)
    return (
        np.array(t, dtype=float),
        np.array(busy, dtype=float),
        np.array(tflops, dtype=float),
        np.array(queue, dtype=np.int64),
    )


def write_results(journal: Journal, box, out: Path, plots: bool = True) -> None:
    """Every result file of the run into its folder `out` (rewritten from the whole journal each time; the
    plots only with `plots`)."""
    name = f"dispatch-{out.name}"
    result, workload = run_result(journal, box, name)
    known = np.array([j.estimate_s for j in workload.jobs], dtype=float)
    note = f"the box's GPUs ({box.spec.name}), usable memory = total less the {box.margin_mib} MiB margin"
    sc = Scenario(workload, box.spec, note, box.layout, known, 1.0, 0)
    write_run(result, sc, out, [summarize(result)], plots=plots)
    with open(out / DISPATCH_CSV, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(DISPATCH_COLUMNS)
        for h in journal.jobs.values():
            for a in h.attempts:
                w.writerow(
                    [
                        a.job,
                        a.attempt,
                        h.attrs.get("line", ""),
                        a.command,
                        ";".join(map(str, a.devices)),
                        "" if a.vram_mib is None else a.vram_mib,
                        ";".join(map(str, a.peak_mib)),
                        "" if a.util_pct is None else f"{a.util_pct:.1f}",
                        "" if a.exit_code is None else a.exit_code,
                        a.outcome,
                        f"{a.start_s:.12g}",
                        "" if a.end_s != a.end_s else f"{a.end_s:.12g}",
                        a.stdout,
                        a.stderr,
                    ]
                )
