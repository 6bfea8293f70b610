"""Job processes: each job runs in its own session (`setsid`) under a small shell wrapper that writes its exit
status to a file, so that a dispatcher started again after a crash can adopt a job still running (it is no
child of the new dispatcher) and learn how it ended; timeouts and stops send SIGTERM to the job's process
group, then SIGKILL after a grace period; an exit with a CUDA out-of-memory message is told apart."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

# the wrapper first writes its pid (a dispatcher killed between starting it and journaling its pid finds it
# there); the user's command runs in a child shell: an `exit 3` in it ends that shell, not the wrapper; the wrapper
# traps SIGTERM (a handler, not an ignore, so the job itself still gets the default) to record the status of a
# job it was sent to; the status file appears whole (written, then renamed)
WRAPPER = (
    'echo $$ > "$4.tmp" && mv "$4.tmp" "$4"; trap : TERM; "$1" -c "$2"; rc=$?; '
    'echo "$rc" > "$3.tmp" && mv "$3.tmp" "$3"; exit "$rc"'
)
OOM_PATTERNS = (
    b"CUDA out of memory",
    b"OutOfMemoryError",
    b"CUDA error: out of memory",
    b"CUBLAS_STATUS_ALLOC_FAILED",
    b"RESOURCE_EXHAUSTED: Out of memory",
)
OOM_SCAN_BYTES = 256 * 1024


def boot_id() -> str:
    """This boot's id (Linux), "" elsewhere: a process recorded under another boot is gone."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def process_start(pid: int) -> str:
    """When process `pid` started (clock ticks since boot, Linux), "" if unknown: tells a reused pid apart."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return ""


@dataclass
class JobProcess:
    """A running job: its session leader (the wrapper), status file, and what has been sent to it."""

    pid: int
    rc_file: Path
    popen: subprocess.Popen | None
    """None for a job adopted from an earlier dispatcher"""
    proc_start: str
    term_sent_s: float | None = None
    killed: bool = False

    @property
    def pgid(self) -> int:
        return self.pid  # the session leader's pid is the process group's id

    def exit_code(self) -> int | None:
        """The job's exit status once it has ended (negative: killed by that signal), else None. A job whose
        wrapper was killed (SIGKILL, a reboot) has no status file: -9."""
        if self.popen is not None:
            rc = self.popen.poll()
            if rc is None:
                return None
            status = read_status(self.rc_file)
            return status if status is not None else rc
        if self.alive():
            return None
        status = read_status(self.rc_file)
        return status if status is not None else -signal.SIGKILL

    def alive(self) -> bool:
        """Whether the session leader still runs (checked by pid and start time: a pid may be reused)."""
        if self.pid <= 1:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        start = process_start(self.pid)
        if self.proc_start and start and start != self.proc_start:
            return False
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rpartition(")")[2].split()[0]
        except (OSError, IndexError):
            return True
        return state != "Z"

    def signal(self, sig: int) -> None:
        if self.pgid <= 1:  # never a signal to every process (-1) or to init
            return
        try:
            os.killpg(self.pgid, sig)
        except (ProcessLookupError, PermissionError):
            pass


def read_status(path: Path) -> int | None:
    """The exit status a job's wrapper wrote, None if there is none (yet)."""
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def launch(
    command: str, env: dict[str, str], cwd: Path, stdout: Path, stderr: Path, rc_file: Path, pid_file: Path
) -> JobProcess:
    """Start `command` (a shell command line, run by bash where there is one) in a new session."""
    shell = shutil.which("bash") or "/bin/sh"
    rc_file.unlink(missing_ok=True)
    pid_file.unlink(missing_ok=True)
    with open(stdout, "ab") as out, open(stderr, "ab") as err:
        popen = subprocess.Popen(
            ["/bin/sh", "-c", WRAPPER, "dispatch-job", shell, command, str(rc_file), str(pid_file)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
    return JobProcess(popen.pid, rc_file, popen, process_start(popen.pid))


def adopt(pid: int | None, proc_start: str, rc_file: Path, pid_file: Path) -> JobProcess | None:
    """A job an earlier dispatcher started, as far as this boot can tell: None if it never started (no pid
    recorded nor written by its wrapper) or its process is another one now (the pid reused); it may have
    ended since (see exit_code)."""
    if pid is None:
        try:
            pid = int(pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
    job = JobProcess(pid, rc_file, None, proc_start)
    if job.alive() and not _runs_wrapper(pid, rc_file):
        return None
    return job


def _runs_wrapper(pid: int, rc_file: Path) -> bool:
    """Whether process `pid` is the wrapper writing `rc_file` (True where /proc cannot tell)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True
    return str(rc_file).encode() in cmdline


def ran_out_of_memory(*logs: Path) -> bool:
    """Whether the tail of any of these logs holds a CUDA (or XLA) out-of-memory message."""
    for path in logs:
        try:
            with open(path, "rb") as f:
                f.seek(max(0, path.stat().st_size - OOM_SCAN_BYTES))
                tail = f.read()
        except OSError:
            continue
        if any(p in tail for p in OOM_PATTERNS):
            return True
    return False
