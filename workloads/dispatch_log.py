"""A dispatch run folder's journal (`--mode dispatch`): its records, the reader that folds them into job
histories, how a dispatched job maps onto a simulator Job, and the replay workload (`--workload_type dispatch`).

The journal (`journal.jsonl`) is append-only, one JSON object per line, each with `event` and `t` (seconds since
the run began, on a 1/1024 s grid so that the replay's sums are exact): `run` (the header: devices, margin,
options), `resume`, `seen` (a jobs-file line first seen, or its attributes changed while it waited), `removed`,
`infeasible`, `start` (written before the process is started), `pid` (once it is), `overuse` (a job went above
its declaration), `end` and `stop`. dispatch/ writes it; this
module is its one reader, so the dispatcher's resume and the simulator's replay read it the same way.

The job model (one definition, used by the dispatcher's policy view and by the replay): a job without a VRAM
declaration takes whole GPUs (an idle GPU alone); a one-GPU job with a declaration is a fractional job whose
memory is its declaration and whose GPU share is that memory over the largest GPU's usable memory (so the
placement rule's best fit by share packs by memory); a multi-GPU job with a declaration takes its GPUs whole
(the simulator shares a GPU only among one-GPU jobs) on GPUs with at least that much memory. Durations do not
scale with GPU speed (`speed_scaled=False`): a measured run time is the time it took on the box.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from sim.catalog import CATALOG
from sim.cluster_spec import ClusterSpec, NodeSpec
from sim.job import FULL_GPU_MILLI, Job, Workload

JOURNAL = "journal.jsonl"
JOURNAL_FORMAT = 1
TIME_GRID = 1024
"""times are multiples of 1/TIME_GRID s: sums and differences of such numbers are exact in floating point"""
MB_PER_MIB = 1.048576
OK, FAILED, OOM, TIMEOUT, STOPPED, LOST = "ok", "failed", "oom", "timeout", "stopped", "lost"
OUTCOMES = (OK, FAILED, OOM, TIMEOUT, STOPPED, LOST)


def on_grid(t_s: float) -> float:
    """`t_s` rounded to the journal's time grid."""
    return round(t_s * TIME_GRID) / TIME_GRID


def mib_to_gb(mib: float) -> float:
    """MiB -> the simulator's GB (10^9 bytes)."""
    return mib * MB_PER_MIB / 1000.0


def mb_of_mib(mib: float) -> int:
    """MiB -> the simulator's memory unit (MB), rounded as the simulator rounds a job's gpu_mem_gb."""
    return int(round(mib_to_gb(mib) * 1000))


def share_milli(mem_mb: int, base_mb: int) -> int:
    """The GPU share (1/1000) of a one-GPU job declaring `mem_mb` on a box whose largest GPU has `base_mb`
    usable: its fraction of that memory, at least 1 and below a whole GPU."""
    return min(FULL_GPU_MILLI - 1, max(1, math.ceil(FULL_GPU_MILLI * mem_mb / base_mb)))


def sim_job(
    job_id: str,
    arrival_s: float,
    runtime_s: float,
    num_gpus: int,
    vram_mib: float | None,
    est_s: float,
    priority: int,
    base_mb: int,
    trace_status: str = "",
) -> Job:
    """The simulator's Job for one dispatched job (the model in the module docstring)."""
    mem_gb = 0.0 if vram_mib is None else mib_to_gb(vram_mib)
    milli = FULL_GPU_MILLI
    if vram_mib is not None and num_gpus == 1:
        milli = share_milli(mb_of_mib(vram_mib), base_mb)
    return Job(
        job_id,
        arrival_s,
        runtime_s,
        num_gpus,
        mem_gb,
        milli,
        (),
        priority,
        est_s,
        trace_status,
        runtime_includes_spread=True,
        speed_scaled=False,
    )


@dataclass(frozen=True)
class Device:
    """One GPU of the box: its index (NVML's, the CUDA_VISIBLE_DEVICES index), name, catalog type, memory."""

    index: int
    name: str
    gpu_type: str
    total_mib: int


def box_cluster(devices: tuple[Device, ...], margin_mib: int) -> tuple[ClusterSpec, tuple[int, ...]]:
    """The box as a cluster: one node per (type, memory) group of devices, in order of first appearance, each
    GPU with its usable memory (total less the margin); and the device index of each of the layout's GPUs."""
    groups: dict[tuple[str, int], list[Device]] = {}
    for d in devices:
        groups.setdefault((d.gpu_type, d.total_mib), []).append(d)
    nodes = []
    order: list[int] = []
    for n, ((gpu_type, total_mib), members) in enumerate(groups.items()):
        nodes.append(NodeSpec(f"n{n}", gpu_type, len(members), mib_to_gb(total_mib - margin_mib)))
        order += [d.index for d in sorted(members, key=lambda d: d.index)]
    name = ",".join(f"{len(m)}x{t}" for (t, _), m in groups.items())
    return ClusterSpec(name, tuple(nodes)), tuple(order)


def largest_usable_mb(devices: tuple[Device, ...], margin_mib: int) -> int:
    """The memory a GPU share is measured against (share_milli's `base_mb`)."""
    return max(mb_of_mib(d.total_mib - margin_mib) for d in devices)


@dataclass(frozen=True)
class Header:
    """The run's header (`run` event)."""

    epoch_s: float
    jobs_file: str
    algo: str
    backend: str
    margin_mib: int
    default_est_s: float
    devices: tuple[Device, ...]
    cwd: str
    """where the jobs run"""


@dataclass
class Attempt:
    """One run of a job: when it was queued (`queued_s`: first seen, or when its previous attempt ended) and its
    arrival order (`seq`), where and how it ran and how it ended (`end_s` NaN while it runs)."""

    job: str
    attempt: int
    seq: int
    queued_s: float
    start_s: float
    command: str
    devices: tuple[int, ...]
    vram_mib: int | None
    est_s: float
    priority: int
    pid: int | None
    """the job's session leader (None until the dispatcher has recorded it: see `pid_file`)"""
    proc_start: str
    boot_id: str
    rc_file: str
    pid_file: str
    stdout: str
    stderr: str
    end_s: float = float("nan")
    exit_code: int | None = None
    outcome: str = ""
    final: bool = False
    next_vram_mib: int | None = None
    peak_mib: tuple[int, ...] = ()
    util_pct: float | None = None
    overuse_peak_mib: int | None = None


@dataclass
class JobHistory:
    """Everything the journal says about one job (one jobs-file line's identity)."""

    job: str
    seq: int
    seen_s: float
    attrs: dict
    attempts: list[Attempt] = field(default_factory=list)
    removed: bool = False
    infeasible: str = ""
    infeasible_attrs: dict | None = None


@dataclass
class Journal:
    header: Header
    jobs: dict[str, JobHistory]
    """by job id, in order of first sight"""
    last_t_s: float
    next_seq: int
    warnings: list[str]


def _header(record: dict) -> Header:
    devices = tuple(
        Device(int(d["index"]), str(d["name"]), str(d["gpu_type"]), int(d["total_mib"]))
        for d in record["devices"]
    )
    for d in devices:
        if d.gpu_type not in CATALOG:
            raise ValueError(f"device {d.index} has unknown GPU type {d.gpu_type!r}")
    return Header(
        float(record["epoch_s"]),
        str(record["jobs_file"]),
        str(record["algo"]),
        str(record["backend"]),
        int(record["margin_mib"]),
        float(record["default_est_s"]),
        devices,
        str(record["cwd"]),
    )


def read_journal(path: str | Path) -> Journal:
    """Fold a journal into job histories; ValueError naming file and line for a malformed record. A last line
    cut short (the dispatcher killed while writing it) is skipped with a warning."""
    path = Path(path)
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    header: Header | None = None
    jobs: dict[str, JobHistory] = {}
    open_attempts: dict[str, Attempt] = {}
    last_t = 0.0
    next_seq = 0
    warnings: list[str] = []
    for n, text in enumerate(lines, 1):
        try:
            record = json.loads(text)
        except json.JSONDecodeError:
            if n == len(lines):
                warnings.append(f"{path}:{n}: the last record is cut short (skipped)")
                break
            raise ValueError(f"{path}:{n}: not a JSON record") from None
        try:
            event = record["event"]
            t = float(record["t"])
            last_t = max(last_t, t)
            if event == "run":
                if header is not None:
                    raise ValueError("a second run header")
                if record.get("format") != JOURNAL_FORMAT:
                    raise ValueError(
                        f"journal format {record.get('format')!r}; this version reads {JOURNAL_FORMAT}"
                    )
                header = _header(record)
                continue
            if header is None:
                raise ValueError("the first record must be the run header")
            if event in ("resume", "stop"):
                continue
            job = str(record["job"])
            h = jobs.get(job)
            if event == "seen":
                attrs = dict(record["attrs"])
                if h is None:
                    h = jobs[job] = JobHistory(job, int(record["seq"]), t, attrs)
                else:
                    h.attrs = attrs
                    if h.removed:
                        h.removed = False
                        h.seen_s, h.seq = t, int(record["seq"])
                next_seq = max(next_seq, int(record["seq"]) + 1)
                continue
            if h is None:
                raise ValueError(f"job {job} was never seen")
            if event == "removed":
                h.removed = True
            elif event == "infeasible":
                h.infeasible = str(record["reason"])
                h.infeasible_attrs = dict(record["attrs"])
            elif event == "start":
                a = Attempt(
                    job,
                    int(record["attempt"]),
                    int(record["seq"]),
                    float(record["queued_t"]),
                    t,
                    str(record["command"]),
                    tuple(int(g) for g in record["devices"]),
                    None if record["vram_mib"] is None else int(record["vram_mib"]),
                    float(record["est_s"]),
                    int(record["priority"]),
                    None,
                    "",
                    str(record["boot_id"]),
                    str(record["rc_file"]),
                    str(record["pid_file"]),
                    str(record["stdout"]),
                    str(record["stderr"]),
                )
                h.attempts.append(a)
                open_attempts[job] = a
                next_seq = max(next_seq, a.seq + 1)
            elif event == "pid":
                a = open_attempts[job]
                a.pid = int(record["pid"])
                a.proc_start = str(record["proc_start"])
            elif event == "overuse":
                a = open_attempts[job]
                a.overuse_peak_mib = int(record["peak_mib"])
            elif event == "end":
                a = open_attempts.pop(job)
                a.end_s = t
                a.exit_code = None if record["exit_code"] is None else int(record["exit_code"])
                a.outcome = str(record["outcome"])
                if a.outcome not in OUTCOMES:
                    raise ValueError(f"unknown outcome {a.outcome!r}")
                a.final = bool(record["final"])
                a.next_vram_mib = (
                    None if record.get("next_vram_mib") is None else int(record["next_vram_mib"])
                )
                a.peak_mib = tuple(int(x) for x in record["peak_mib"])
                a.util_pct = None if record.get("util_pct") is None else float(record["util_pct"])
            else:
                raise ValueError(f"unknown event {event!r}")
        except (KeyError, TypeError, ValueError) as e:
            what = f"missing field {e}" if isinstance(e, KeyError) else str(e)
            raise ValueError(f"{path}:{n}: {what}") from None
    if header is None:
        raise ValueError(f"{path}: no run header")
    return Journal(header, jobs, last_t, next_seq, warnings)


def load_dispatch_log(folder: str | Path) -> tuple[Workload, ClusterSpec, str]:
    """The replay of a dispatch run folder: every attempt that ran to its end, as a job arriving when it was
    queued (in arrival order, then the order it was queued in) and running its measured time, with the
    declaration and estimate the dispatcher's policy saw; and the box as a cluster. Attempts still running
    when the journal ends and jobs that never started are left out and counted in the report."""
    folder = Path(folder)
    path = folder / JOURNAL if folder.is_dir() else folder
    if not path.is_file():
        raise ValueError(f"{folder}: no {JOURNAL} (not a --mode dispatch run folder)")
    journal = read_journal(path)
    h = journal.header
    cluster, _ = box_cluster(h.devices, h.margin_mib)
    base_mb = largest_usable_mb(h.devices, h.margin_mib)
    ended = sorted(
        (a for j in journal.jobs.values() for a in j.attempts if a.end_s == a.end_s),
        key=lambda a: (a.queued_s, a.seq),
    )
    jobs = tuple(
        sim_job(
            a.job if a.attempt == 1 else f"{a.job}~{a.attempt}",
            a.queued_s,
            a.end_s - a.start_s,
            len(a.devices),
            a.vram_mib,
            a.est_s,
            a.priority,
            base_mb,
            "" if a.outcome == OK else a.outcome,
        )
        for a in ended
    )
    outcomes: dict[str, int] = {}
    for a in ended:
        outcomes[a.outcome] = outcomes.get(a.outcome, 0) + 1
    running = sum(1 for j in journal.jobs.values() for a in j.attempts if a.end_s != a.end_s)
    never = sum(1 for j in journal.jobs.values() if not j.attempts)
    report = {
        "dispatch_run": str(folder),
        "dispatch_algo": h.algo,
        "dispatch_backend": h.backend,
        "attempts_replayed": len(jobs),
        "attempt_outcomes": dict(sorted(outcomes.items())),
        "filtered": {"still running when the journal ends": running, "never started": never},
    }
    note = (
        f"the dispatch run's own GPUs ({cluster.name}, usable memory = total less the {h.margin_mib} MiB margin); "
        "measured run times do not scale with GPU speed"
    )
    return Workload(f"dispatch-{folder.name}", jobs, report), cluster, note
