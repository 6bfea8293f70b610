"""The dispatcher: a loop that watches the GPUs, the job processes and the jobs file, asks the scheduling policy
what to start whenever something changed (the simulator's decision instants: an arrival, a completion, a change
in what the GPUs' memory is committed to), starts those jobs, and journals everything so that a dispatcher
started again on the same run folder resumes without running any job twice.

Each round, in order: notice the jobs that ended; sample the GPUs (peaks, trust, external memory); record the
ends (an out-of-memory exit with retries left goes back to the queue with its declaration raised); enforce
timeouts (SIGTERM, then SIGKILL after a grace); re-read the jobs file if it changed; consult the policy and
start what it decides. All of a round happens at one instant `now` (seconds since the run began, on the
journal's 1/1024 s grid): ends are recorded and new jobs started at that instant, which is what lets the replay
reproduce the schedule exactly from the measured run times.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from config import DispatchConfig, UserError
from dispatch.board import Board, GpuLine, Status, duration, gib
from dispatch.devices import Backend
from dispatch.jobsfile import JobsFileError, JobSpec, parse_jobs_file
from dispatch.journal import FolderLock, JournalWriter
from dispatch.memory import JobMemory, Ledger, Overuse
from dispatch.processes import JobProcess, adopt, boot_id, launch, ran_out_of_memory, read_status
from dispatch.view import Box, Launch, ViewJob, build_view, launches
from workloads.dispatch_log import (
    FAILED,
    JOURNAL,
    JOURNAL_FORMAT,
    LOST,
    OK,
    OOM,
    STOPPED,
    TIMEOUT,
    Attempt,
    Journal,
    on_grid,
    read_journal,
)

RETRY_GROWTH = 1.25
"""an out-of-memory retry declares 25 % more than the larger of its declaration and its observed peak"""
OVER_DECLARED = 0.6
"""reported at the end: jobs whose peak stayed below 60 % of their declaration"""
JOBS_DIR = "jobs"
SIM_DIR = "sim_gpus"


@dataclass
class Running:
    attempt: int
    seq: int
    queued_s: float
    start_s: float
    devices: tuple[int, ...]
    vram_mib: int | None
    est_s: float
    proc: JobProcess | None
    """None for an attempt found ended (or gone) on resume"""
    memory: JobMemory
    stdout: Path
    stderr: Path
    stop_reason: str | None = None
    """timeout or stopped once SIGTERM has been sent"""
    term_s: float | None = None


@dataclass
class Job:
    """One jobs-file line's identity and where it stands."""

    spec: JobSpec
    seq: int
    queued_s: float
    state: str  # queued | running | done | failed | infeasible | removed
    file_pos: int = 0
    attempts: int = 0
    oom_retries: int = 0
    vram_mib: int | None = None
    """the declaration of its next attempt (raised after an out-of-memory exit)"""
    running: Running | None = None
    infeasible_attrs: dict | None = None
    peaks: list[tuple[int | None, int]] = field(default_factory=list)
    """(declared, peak) of each ended attempt"""

    def est_s(self, default_s: float) -> float:
        return self.spec.est_s if self.spec.est_s is not None else default_s


def _stem(job: str) -> str:
    return job.replace("#", "-")


class Dispatcher:
    def __init__(self, cfg: DispatchConfig, folder: Path, backend_factory, policy, board: Board):
        self.cfg = cfg
        self.folder = folder
        self.jobs_path = Path(cfg.jobs_path).resolve()
        self.policy = policy
        self.board = board
        self.lock = FolderLock(folder)
        self.writer: JournalWriter | None = None
        self.backend: Backend | None = None
        try:
            self._open(cfg, folder, backend_factory)
        except BaseException:
            self.close()
            raise

    def _open(self, cfg: DispatchConfig, folder: Path, backend_factory) -> None:
        self.backend = backend_factory(folder / SIM_DIR)
        devices = self.backend.devices()
        if cfg.gpus is not None:
            missing = sorted(set(cfg.gpus) - {d.index for d in devices})
            if missing:
                raise UserError(
                    f"--gpus: no GPU {missing[0]}; this box has {', '.join(str(d.index) for d in devices)}"
                )
            devices = tuple(d for d in devices if d.index in cfg.gpus)
        self.devices = devices
        self.box = Box(devices, cfg.vram_margin_mib)
        self.ledger = Ledger(tuple(d.index for d in devices))
        self.jobs: dict[str, Job] = {}
        self.next_seq = 0
        self.launching = True
        self._last_key = None
        self._file_sig = None
        self._changing_sig = None
        self._bad_text_warned = None
        self._now = 0.0
        self._signals: list[int] = []
        self.resumed = ""
        """what a resume found, said when the run starts"""
        (folder / JOBS_DIR).mkdir(parents=True, exist_ok=True)
        path = folder / JOURNAL
        resumed = path.is_file() and path.stat().st_size > 0
        try:
            self.journal = read_journal(path) if resumed else None
        except ValueError as e:  # a damaged journal: file and line
            raise UserError(f"{e}; the run folder's journal is damaged: give another --log_dir") from None
        self.writer = JournalWriter(path)
        if self.journal is None:
            self.epoch_s = time.time()
            self.cwd = os.getcwd()
            self.writer.write(
                "run",
                0.0,
                format=JOURNAL_FORMAT,
                epoch_s=self.epoch_s,
                jobs_file=str(self.jobs_path),
                algo=cfg.algo,
                backend=self.backend.name,
                margin_mib=cfg.vram_margin_mib,
                default_est_s=cfg.default_est_s,
                cwd=self.cwd,
                devices=[d.__dict__ for d in devices],
                pid=os.getpid(),
            )
        else:
            self._resume(self.journal)

    # -- time and the journal ------------------------------------------------------------------------------

    def clock(self) -> float:
        """Seconds since the run began, on the journal's grid, never going back."""
        self._now = max(self._now, on_grid(time.time() - self.epoch_s))
        return self._now

    def _seen(self, job: Job, t: float) -> None:
        self.writer.write("seen", t, job=job.spec.job_id, seq=job.seq, attrs=job.spec.attrs())

    # -- resume ---------------------------------------------------------------------------------------------

    def _resume(self, journal: Journal) -> None:
        h = journal.header
        if h.jobs_file != str(self.jobs_path):
            raise UserError(
                f"{self.folder} holds the dispatch run of {h.jobs_file}, not {self.jobs_path}; give another --log_dir"
            )
        if h.algo != self.cfg.algo or h.backend != self.backend.name:
            raise UserError(
                f"{self.folder} was dispatched with --algo {h.algo} on {h.backend}; resume it with the same "
                f"options (now --algo {self.cfg.algo} on {self.backend.name}) or give another --log_dir"
            )
        if h.devices != self.devices or h.margin_mib != self.cfg.vram_margin_mib:
            raise UserError(
                f"{self.folder} was dispatched on other GPUs or another --vram_margin "
                f"({', '.join(f'{d.index}:{d.name}' for d in h.devices)}, margin {h.margin_mib} MiB); give another --log_dir"
            )
        for w in journal.warnings:
            self.board.line(w, warning=True)
        self.epoch_s = h.epoch_s
        self.cwd = h.cwd
        self._now = journal.last_t_s
        now = self.clock()
        self.writer.write("resume", now, pid=os.getpid())
        self.next_seq = journal.next_seq
        this_boot = boot_id()
        found = {"adopted": 0, "ended": 0, "lost": 0}
        for hist in journal.jobs.values():
            a = dict(hist.attrs)
            spec = JobSpec(
                hist.job,
                a["line"],
                a["command"],
                a["vram_mib"],
                a["gpus"],
                a["est_s"],
                a["retries"],
                a["timeout_s"],
                a["priority"],
            )
            job = Job(spec, hist.seq, hist.seen_s, "queued", vram_mib=spec.vram_mib)
            self.jobs[hist.job] = job
            job.attempts = len(hist.attempts)
            job.oom_retries = sum(1 for x in hist.attempts if x.outcome == OOM and not x.final)
            job.peaks = [
                (x.vram_mib, max(x.peak_mib, default=0)) for x in hist.attempts if x.end_s == x.end_s
            ]
            last = hist.attempts[-1] if hist.attempts else None
            if last is not None and last.next_vram_mib is not None:
                job.vram_mib = last.next_vram_mib
            if hist.removed:
                job.state = "removed"
            elif last is not None and last.end_s != last.end_s:
                found[self._adopt(job, last, this_boot)] += 1
            elif last is not None and last.final:
                job.state = "done" if last.outcome == OK else "failed"
            elif hist.infeasible and hist.infeasible_attrs == hist.attrs:
                job.state = "infeasible"
                job.infeasible_attrs = hist.infeasible_attrs
            if job.state == "queued" and last is not None:
                job.queued_s = last.end_s
                job.seq = self._new_seq()
        done = sum(1 for j in self.jobs.values() if j.state in ("done", "failed", "infeasible"))
        self.resumed = (
            f"resumed {self.folder}: {done} finished, {found['adopted']} still running (adopted), {found['ended']} "
            f"ended while no dispatcher ran, {found['lost']} lost and queued again; the rest waits"
        )

    def _adopt(self, job: Job, a: Attempt, this_boot: str) -> str:
        """Take over an attempt an earlier dispatcher started: `adopted` (it still runs), `ended` (it ended while
        no dispatcher ran: recorded with the status and time its wrapper wrote) or `lost` (gone without a status:
        recorded as lost, the job queued again)."""
        rc_file, pid_file = Path(a.rc_file), Path(a.pid_file)
        proc = adopt(a.pid, a.proc_start, rc_file, pid_file) if a.boot_id == this_boot else None
        if proc is not None and not proc.alive():
            proc = None  # it ended while no dispatcher ran (its status file says how, below)
        memory = JobMemory(job.spec.job_id, proc.pgid if proc else -1, a.devices, a.vram_mib)
        if a.overuse_peak_mib is not None:
            memory.trusted = False
            memory.peak_mib = {a.devices[0]: a.overuse_peak_mib}
        job.running = Running(
            a.attempt, a.seq, a.queued_s, a.start_s, a.devices, a.vram_mib, a.est_s, proc,
            memory, Path(a.stdout), Path(a.stderr),
        )  # fmt: skip
        job.state = "running"
        if proc is None:
            code = read_status(rc_file)
            if code is not None:  # it ended while no dispatcher ran: when its status file was written
                end_s = max(a.start_s, on_grid(rc_file.stat().st_mtime - self.epoch_s))
                self._finish(job, code, end_s)
                return "ended"
            self._finish(job, None, self.clock(), outcome=LOST)
            return "lost"
        self.ledger.track(memory)
        return "adopted"

    def _new_seq(self) -> int:
        self.next_seq += 1
        return self.next_seq - 1

    # -- the jobs file ----------------------------------------------------------------------------------------

    def read_jobs_file(self, now: float, first: bool = False) -> None:
        """Re-read the jobs file if it changed: new lines arrive, deleted waiting lines leave the queue, changed
        attributes apply to the next attempt; a file that does not parse keeps the last good queue (a warning).
        A change is read once the file has stayed the same for one round."""
        try:
            st = self.jobs_path.stat()
        except OSError as e:
            if first:
                raise UserError(f"--jobs {self.cfg.jobs_path}: {e.strerror}") from None
            return
        sig = (st.st_ino, st.st_size, st.st_mtime_ns)
        if sig == self._file_sig:
            return
        if not first and sig != self._changing_sig:
            # read a changed file only once it has stayed the same for a round: an editor that truncates then
            # writes must not be caught with an empty or half-written file
            self._changing_sig = sig
            return
        try:
            specs = parse_jobs_file(self.jobs_path)
        except (JobsFileError, OSError) as e:
            if first:
                raise UserError(str(e)) from None
            if str(e) != self._bad_text_warned:
                self.board.line(f"{e}; keeping the last good queue until the file is fixed", warning=True)
                self._bad_text_warned = str(e)
            self._file_sig = sig
            return
        self._file_sig = sig
        self._bad_text_warned = None
        present = set()
        for pos, spec in enumerate(specs):
            present.add(spec.job_id)
            job = self.jobs.get(spec.job_id)
            if job is None:
                job = self.jobs[spec.job_id] = Job(
                    spec, self._new_seq(), now, "queued", pos, vram_mib=spec.vram_mib
                )
                self._seen(job, now)
                self._check_feasible(job, now)
                continue
            job.file_pos = pos
            old = {k: v for k, v in job.spec.attrs().items() if k != "line"}
            new = {k: v for k, v in spec.attrs().items() if k != "line"}
            if job.state == "removed":
                job.spec, job.state, job.seq, job.queued_s = spec, "queued", self._new_seq(), now
                job.vram_mib = spec.vram_mib
                self._seen(job, now)
                self._check_feasible(job, now)
            elif old != new and job.state in ("queued", "infeasible"):
                if spec.vram_mib != job.spec.vram_mib:
                    job.vram_mib = spec.vram_mib
                job.spec = spec
                job.state = "queued"
                self._seen(job, now)
                self._check_feasible(job, now)
            elif job.state != "running":  # a running job keeps the attributes it was started with
                job.spec = spec
        for job in self.jobs.values():
            if job.spec.job_id not in present and job.state == "queued":
                job.state = "removed"
                self.writer.write("removed", now, job=job.spec.job_id)
                self.board.line(
                    f"removed {job.spec.job_id} (its line left the jobs file): {job.spec.command}"
                )

    def _check_feasible(self, job: Job, now: float) -> None:
        why = self.box.never_fits(job.spec.gpus, job.vram_mib)
        if why is None:
            return
        job.state = "infeasible"
        job.infeasible_attrs = job.spec.attrs()
        self.writer.write("infeasible", now, job=job.spec.job_id, reason=why, attrs=job.spec.attrs())
        self.board.line(f"infeasible {job.spec.job_id}: {why} | {job.spec.command}", warning=True)

    # -- one round ------------------------------------------------------------------------------------------

    def round(self, first: bool = False) -> None:
        now = self.clock()
        running = [j for j in self.jobs.values() if j.state == "running" and j.running.proc is not None]
        ended = [(j, j.running.proc.exit_code()) for j in running]
        ended = [(j, code) for j, code in ended if code is not None]
        for over in self.ledger.observe(self._samples()):
            self._overuse(over, now)
        for job, code in ended:
            self._finish(job, code, now)
        self._enforce_limits(now)
        self.read_jobs_file(now, first)
        if self.launching:
            self._decide(now)
        self.board.update(self.status(now), time.monotonic())

    def _samples(self):
        wanted = {d.index for d in self.devices}
        return tuple(s for s in self.backend.sample() if s.index in wanted)

    def _overuse(self, over: Overuse, now: float) -> None:
        job = self.jobs[over.job]
        if job.running is None:
            return
        self.writer.write("overuse", now, job=over.job, attempt=job.running.attempt, peak_mib=over.peak_mib)
        self.board.line(
            f"{over.job} uses {gib(over.peak_mib)} on GPU {over.device}, above its declaration of "
            f"{gib(over.declared_mib)}: from now on it counts as its peak + 10 % ({job.spec.command})",
            warning=True,
        )

    def _queue(self) -> list[Job]:
        queued = [j for j in self.jobs.values() if j.state == "queued"]
        return sorted(queued, key=lambda j: (-j.spec.priority, j.file_pos, j.seq))

    def _view_inputs(self, now: float) -> tuple[list[ViewJob], list[ViewJob], dict, dict]:
        default = self.cfg.default_est_s
        running = [
            ViewJob(
                j.spec.job_id, r.seq, r.queued_s, len(r.devices), r.memory.budget_mib(), r.est_s, j.spec.priority,
                r.start_s, r.devices,
            )
            for j in self.jobs.values()
            if (r := j.running) is not None and j.state == "running"
        ]  # fmt: skip
        queue = [
            ViewJob(
                j.spec.job_id, j.seq, j.queued_s, j.spec.gpus, j.vram_mib, j.est_s(default), j.spec.priority
            )
            for j in self._queue()
        ]
        return running, queue, dict(self.ledger.external_held_mib), dict(self.ledger.external_busy)

    def _decide(self, now: float) -> None:
        running, queue, ext, busy = self._view_inputs(now)
        key = (tuple(running), tuple(queue), tuple(ext.items()), tuple(busy.items()))
        if key == self._last_key or not queue:
            self._last_key = key
            return
        view, order = build_view(self.box, now, running, queue, ext, busy)
        starts, refused = launches(self.box, view, order, self.policy(view))
        for note in refused:
            self.board.line(f"policy {self.cfg.algo}: {note} (ignored)", warning=True)
        for s in starts:
            self._start(self.jobs[s.job], s, now)
        running, queue, ext, busy = self._view_inputs(now)
        self._last_key = (tuple(running), tuple(queue), tuple(ext.items()), tuple(busy.items()))

    # -- starting and ending jobs ---------------------------------------------------------------------------

    def _start(self, job: Job, s: Launch, now: float) -> None:
        job.attempts += 1
        k = job.attempts
        stem = self.folder / JOBS_DIR / f"{_stem(job.spec.job_id)}.a{k}"
        out, err, rc_file, pid_file = (Path(f"{stem}.{x}") for x in ("out", "err", "rc", "pid"))
        est = job.est_s(self.cfg.default_est_s)
        self.writer.write(
            "start", now, job=job.spec.job_id, attempt=k, seq=job.seq, queued_t=job.queued_s,
            command=job.spec.command, devices=list(s.devices), vram_mib=job.vram_mib, est_s=est,
            priority=job.spec.priority, boot_id=boot_id(), rc_file=str(rc_file), pid_file=str(pid_file),
            stdout=str(out), stderr=str(err),
        )  # fmt: skip
        env = dict(os.environ)
        env.update(self.backend.job_env())
        env.update(
            CUDA_VISIBLE_DEVICES=",".join(map(str, s.devices)),
            DISPATCH_JOB_ID=job.spec.job_id,
            DISPATCH_ATTEMPT=str(k),
            DISPATCH_RUN_DIR=str(self.folder),
        )
        if job.vram_mib is not None:
            env["DISPATCH_VRAM_MIB"] = str(job.vram_mib)
        try:
            proc = launch(job.spec.command, env, Path(self.cwd), out, err, rc_file, pid_file)
        except OSError as e:  # e.g. the folder the jobs run in is gone: this attempt fails, the run goes on
            self.board.line(f"cannot start {job.spec.job_id} in {self.cwd}: {e.strerror or e}", warning=True)
            memory = JobMemory(job.spec.job_id, -1, s.devices, job.vram_mib)
            job.running = Running(
                k, job.seq, job.queued_s, now, s.devices, job.vram_mib, est, None, memory, out, err
            )
            job.state = "running"
            self._finish(job, None, now, outcome=FAILED)
            return
        self.writer.write(
            "pid", now, job=job.spec.job_id, attempt=k, pid=proc.pid, proc_start=proc.proc_start
        )
        memory = JobMemory(job.spec.job_id, proc.pgid, s.devices, job.vram_mib)
        self.ledger.track(memory)
        job.running = Running(
            k, job.seq, job.queued_s, now, s.devices, job.vram_mib, est, proc, memory, out, err
        )
        job.state = "running"
        declared = f"declared {gib(job.vram_mib)}/GPU" if job.vram_mib is not None else "GPUs alone"
        retry = f" (attempt {k})" if k > 1 else ""
        self.board.line(
            f"start {job.spec.job_id}{retry} on GPU {','.join(map(str, s.devices))} ({declared}): {job.spec.command}"
        )

    def _enforce_limits(self, now: float) -> None:
        for job in self.jobs.values():
            r = job.running
            if r is None or job.state != "running" or r.proc is None:
                continue
            if (
                r.stop_reason is None
                and job.spec.timeout_s is not None
                and now - r.start_s >= job.spec.timeout_s
            ):
                self._terminate(job, TIMEOUT, now)
            elif r.term_s is not None and not r.proc.killed and now - r.term_s >= self.cfg.kill_grace_s:
                r.proc.signal(signal.SIGKILL)
                r.proc.killed = True

    def _terminate(self, job: Job, reason: str, now: float) -> None:
        r = job.running
        r.stop_reason = reason
        r.term_s = now
        r.proc.signal(signal.SIGTERM)

    def _finish(self, job: Job, code: int | None, now: float, outcome: str | None = None) -> None:
        r = job.running
        memory = self.ledger.forget(job.spec.job_id) or r.memory
        peaks = [memory.peak_mib.get(d, 0) for d in r.devices]
        if outcome is None:
            if r.stop_reason is not None:
                outcome = r.stop_reason
            elif code == 0:
                outcome = OK
            elif ran_out_of_memory(r.stderr, r.stdout):
                outcome = OOM
            else:
                outcome = FAILED
        final = outcome in (OK, FAILED, TIMEOUT, OOM)
        next_vram = None
        if outcome == OOM and job.oom_retries < job.spec.retries:
            final = False
            job.oom_retries += 1
            if r.vram_mib is not None:
                next_vram = math.ceil(max(r.vram_mib, max(peaks, default=0)) * RETRY_GROWTH)
                job.vram_mib = next_vram
        self.writer.write(
            "end", now, job=job.spec.job_id, attempt=r.attempt, exit_code=code, outcome=outcome, final=final,
            next_vram_mib=next_vram, peak_mib=peaks, util_pct=memory.util_pct,
        )  # fmt: skip
        job.running = None
        job.peaks.append((r.vram_mib, max(peaks, default=0)))
        if final:
            job.state = "done" if outcome == OK else "failed"
        else:
            job.state = "queued"
            job.queued_s = now
            job.seq = self._new_seq()
        self.board.line(completion_line(job, r, code, outcome, peaks, memory.util_pct, now, next_vram))
        if job.state == "queued":
            self._check_feasible(job, now)

    # -- status -------------------------------------------------------------------------------------------

    def status(self, now: float) -> Status:
        states = [j.state for j in self.jobs.values() if j.state != "removed"]
        running = [j for j in self.jobs.values() if j.state == "running" and j.running is not None]
        gpus = []
        for d in self.devices:
            held = [j for j in running if d.index in j.running.devices]
            whole = any(j.running.memory.budget_mib() is None for j in held)
            committed = (
                d.total_mib
                if whole
                else sum(j.running.memory.budget_mib() for j in held) + self.ledger.external_held_mib[d.index]
            )
            gpus.append(
                GpuLine(
                    d.index, d.gpu_type, self.ledger.used_mib[d.index], d.total_mib, committed,
                    self.ledger.util_pct[d.index], tuple(j.spec.job_id for j in held),
                )
            )  # fmt: skip
        return Status(
            now,
            sum(s in ("done", "failed", "infeasible") for s in states),
            sum(s in ("failed", "infeasible") for s in states),
            len(states),
            tuple(
                (j.spec.job_id, j.running.devices, now - j.running.start_s, j.spec.command) for j in running
            ),
            sum(s == "queued" for s in states),
            tuple(gpus),
        )

    def finished(self) -> bool:
        return not self.cfg.watch and not any(j.state in ("queued", "running") for j in self.jobs.values())

    def any_running(self) -> bool:
        return any(j.state == "running" for j in self.jobs.values())

    # -- the whole run ----------------------------------------------------------------------------------------

    def run(self) -> int:
        """Dispatch until every job has finished (or forever with --watch); the exit status: 0 every job ended
        well, 1 some failed or cannot run, 130 interrupted. Ctrl-C and SIGTERM are noted by a handler and acted on
        between rounds, so a job is never half started or half recorded."""
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        interrupted = False
        if self.resumed:
            self.board.line(self.resumed)
        try:
            first = True
            while not self._signals:
                self.round(first)
                first = False
                if self.finished():
                    break
                self._sleep()
            if self._signals:
                interrupted = True
                if self._signals[0] == signal.SIGTERM:
                    self._stop_dispatching("detach")
                else:
                    self._interrupted()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.board.close()
        self.writer.write("stop", self.clock(), reason="interrupted" if interrupted else "finished")
        self._report_over_declared()
        failed = sum(j.state in ("failed", "infeasible") for j in self.jobs.values())
        return 130 if interrupted else (1 if failed else 0)

    def _on_signal(self, signum, frame) -> None:
        self._signals.append(signum)

    def _sleep(self) -> None:
        """poll_s, cut short by a signal."""
        until = time.monotonic() + self.cfg.poll_s
        while not self._signals and (left := until - time.monotonic()) > 0:
            time.sleep(min(left, 0.05))

    def _interrupted(self) -> None:
        """Ctrl-C: wait for the running jobs, stop them, or leave them running (--on_interrupt, or asked)."""
        self.launching = False
        n = sum(j.state == "running" for j in self.jobs.values())
        choice = self.cfg.on_interrupt
        if n == 0:
            choice = "detach"
        elif choice == "ask":
            choice = ask_interrupt(n, self.board)
        self._stop_dispatching(choice)

    def _stop_dispatching(self, how: str) -> None:
        """Stop starting jobs; then wait for the running ones, stop them (SIGTERM, SIGKILL after the grace), or
        leave them running (detach). Another Ctrl-C while waiting stops them."""
        self.launching = False
        if how == "detach":
            if self.any_running():
                self.board.line(
                    "leaving the running jobs running; run the same command again to adopt them and go on"
                )
            return
        if how == "stop":
            self._stop_all()
        self.board.line(
            f"{'stopping' if how == 'stop' else 'waiting for'} the running jobs; nothing new starts"
        )
        seen = len(self._signals)
        while self.any_running():
            time.sleep(min(self.cfg.poll_s, 0.1))
            if len(self._signals) > seen:
                seen = len(self._signals)
                self.board.line("interrupted again: stopping the running jobs")
                self._stop_all()
            self.round()

    def _stop_all(self) -> None:
        now = self.clock()
        for job in self.jobs.values():
            if job.state == "running" and job.running.proc is not None and job.running.stop_reason is None:
                self._terminate(job, STOPPED, now)

    def _report_over_declared(self) -> None:
        over = []
        for j in self.jobs.values():
            for declared, peak in j.peaks[-1:]:
                if declared is not None and peak < OVER_DECLARED * declared:
                    over.append(
                        f"  {j.spec.job_id}: declared {gib(declared)}, peak {gib(peak)}: {j.spec.command}"
                    )
        if over:
            self.board.line(
                f"over-declared (peak below {OVER_DECLARED:.0%} of the declaration: lower vram= to share GPUs "
                "better):\n" + "\n".join(over)
            )

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.backend is not None:
            self.backend.close()
        self.lock.release()


def ask_interrupt(running: int, board: Board) -> str:
    """On a terminal: ask what to do with the running jobs; elsewhere: wait (said so)."""
    board.close()
    if not sys.stdin.isatty():
        board.line(f"interrupted: waiting for the {running} running job(s) (Ctrl-C again stops them)")
        return "wait"
    prompt = (
        f"interrupted: {running} job(s) running. [w]ait for them, [s]top them, or [d]etach (they go on; the same "
        "command adopts them)? [w] "
    )
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C at the prompt: stop
    try:
        answer = input(prompt).strip().lower()
    except EOFError:
        answer = ""
    except KeyboardInterrupt:
        answer = "s"
    finally:
        signal.signal(signal.SIGINT, previous)
    return {"s": "stop", "d": "detach"}.get(answer[:1], "wait")


def completion_line(
    job: Job, r: Running, code: int | None, outcome: str, peaks: list[int], util: float | None, now: float,
    next_vram: int | None,
) -> str:  # fmt: skip
    """`done <job> in 1m03s on GPU 0,1: exit 0 | peak GPU0 17.2 GiB, GPU1 16.9 GiB (declared 18.0 GiB) |
    util 87% | <command>`"""
    word = {OK: "done", FAILED: "failed", OOM: "oom", TIMEOUT: "timeout", STOPPED: "stopped", LOST: "lost"}[
        outcome
    ]
    peak = ", ".join(f"GPU{d} {gib(p)}" for d, p in zip(r.devices, peaks, strict=True))
    if r.vram_mib is not None:
        peak += f" (declared {gib(r.vram_mib)}"
        top = max(peaks, default=0)
        peak += ", above it)" if top > r.vram_mib else ")"
    what = f"exit {code}" if code is not None else "no exit status"
    after = ""
    if outcome == OOM and not job.state == "failed":
        left = job.spec.retries - job.oom_retries
        raised = f" declaring {gib(next_vram)}" if next_vram is not None else ""
        after = f" | retry {job.oom_retries}/{job.spec.retries}{raised} ({left} left)"
    elif outcome in (STOPPED, LOST):
        after = " | queued again"
    u = f" | util {util:.0f}%" if util is not None else ""
    where = ",".join(map(str, r.devices))
    return (
        f"{word} {job.spec.job_id} in {duration(now - r.start_s)} on GPU {where}: {what} | peak {peak}{u}{after} | "
        f"{job.spec.command}"
    )
