"""The fake GPU job of the simulated devices: it "allocates" VRAM on the GPUs in CUDA_VISIBLE_DEVICES by writing
its usage to a file the simulated backend reads, ramping up to a target and holding it, then exits with a chosen
status; an allocation beyond a simulated GPU's memory fails as CUDA's would (an out-of-memory message, exit 1).

    python dispatch/fake_job.py --vram 18G --ramp 0.5 --hold 2 [--exit 0] [--util 80] [--marker FILE]
        [--start_after FILE] [--ready FILE] [--end_after FILE] [--oom_marker FILE]

The four file options let a test order events between jobs without relying on wall-clock timing: wait for a file
before the ramp, create one once the target is held, hold until one exists, create one on running out of memory
(each wait gives up after WAIT_CAP_S, so a broken test fails instead of hanging).

Standard library only (it runs as a plain script, also from a jobs file). The usage files live in
$DISPATCH_SIM_DIR/usage/<pid>.json: {"pid", "pgid", "devices": [index...], "mib": now, "peak": most, "util": percent,
"exited": bool}; devices.json there holds each simulated GPU's memory. Allocation is atomic under a file lock,
as on a real GPU, so two fake jobs never both get the last free MiB.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import signal
import sys
import time
from pathlib import Path

USAGE_DIR = "usage"
DEVICES_FILE = "devices.json"
LOCK_FILE = "alloc.lock"
OOM_MESSAGE = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate {need} MiB. GPU {gpu} has a total capacity of {total} MiB of which {free} MiB is free."
STEP_S = 0.02
WAIT_CAP_S = 60.0


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # no /proc: kill(pid, 0) is all we know
    return stat.rpartition(")")[2].split()[0] != "Z"


def read_usage(sim_dir: Path) -> list[dict]:
    """Every usage record in `sim_dir` (a file being replaced at this instant is skipped: it is written whole by
    a rename, so it is either the old or the new record)."""
    found = []
    folder = sim_dir / USAGE_DIR
    if not folder.is_dir():
        return found
    for path in sorted(folder.glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        record["path"] = str(path)
        found.append(record)
    return found


def write_usage(sim_dir: Path, record: dict) -> None:
    folder = sim_dir / USAGE_DIR
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{record['pid']}.tmp"
    tmp.write_text(json.dumps(record))
    tmp.replace(folder / f"{record['pid']}.json")


def _size_mib(text: str) -> int:
    t = text.strip().lower()
    for suffix, factor in (("gib", 1024), ("gb", 1024), ("g", 1024), ("mib", 1), ("mb", 1), ("m", 1)):
        if t.endswith(suffix):
            return int(float(t[: -len(suffix)]) * factor)
    return int(float(t))


class FakeGpuJob:
    """One fake job's allocation on its GPUs."""

    def __init__(self, sim_dir: Path | None, gpus: list[int], util: float):
        self.sim_dir = sim_dir
        self.gpus = gpus
        self.record = {
            "pid": os.getpid(),
            "pgid": os.getpgid(0),
            "devices": gpus,
            "mib": 0,
            "peak": 0,
            "util": util,
            "exited": False,
        }

    def allocate(self, mib: int) -> str | None:
        """Hold `mib` per GPU; the out-of-memory message if a GPU has not that much free."""
        if self.sim_dir is None or not self.gpus:
            return None
        with open(self.sim_dir / LOCK_FILE, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            totals = {int(k): v for k, v in json.loads((self.sim_dir / DEVICES_FILE).read_text()).items()}
            others = {g: 0 for g in self.gpus}
            for r in read_usage(self.sim_dir):
                if r["pid"] != os.getpid() and not r["exited"] and pid_alive(int(r["pid"])):
                    for g in r["devices"]:
                        if g in others:
                            others[g] += int(r["mib"])
            for g in self.gpus:
                if others[g] + mib > totals[g]:
                    free = totals[g] - others[g] - self.record["mib"]
                    return OOM_MESSAGE.format(
                        need=mib - self.record["mib"], gpu=g, total=totals[g], free=free
                    )
            self.record["mib"] = mib
            self.record["peak"] = max(self.record["peak"], mib)
            write_usage(self.sim_dir, self.record)
        return None

    def release(self) -> None:
        if self.sim_dir is not None and self.gpus:
            write_usage(self.sim_dir, dict(self.record, mib=0, exited=True))


def _touch(path: str | None) -> None:
    if path:
        Path(path).touch()


def _wait_for(path: str | None) -> None:
    """Wait until `path` exists (at most WAIT_CAP_S)."""
    deadline = time.monotonic() + WAIT_CAP_S
    while path and not Path(path).exists() and time.monotonic() < deadline:
        time.sleep(STEP_S)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--vram", default="0", help="VRAM per GPU to reach (MiB, or 18G)")
    p.add_argument("--ramp", type=float, default=0.2, help="seconds to reach it")
    p.add_argument("--hold", type=float, default=1.0, help="seconds to hold it")
    p.add_argument("--exit", type=int, default=0, help="exit status at the end")
    p.add_argument("--util", type=float, default=100.0, help="GPU utilization it reports, percent")
    p.add_argument("--marker", default=None, help="append '<job> start' to this file when it starts")
    p.add_argument(
        "--ignore_term", action="store_true", help="ignore SIGTERM (to test the SIGKILL escalation)"
    )
    p.add_argument("--start_after", default=None, help="wait until this file exists before the ramp")
    p.add_argument("--ready", default=None, help="create this file once the VRAM target is held")
    p.add_argument(
        "--end_after", default=None, help="after the ramp, hold until this file exists, then --hold"
    )
    p.add_argument("--oom_marker", default=None, help="create this file when an allocation fails")
    a = p.parse_args(argv)
    if a.marker:
        with open(a.marker, "a") as f:
            f.write(f"{os.environ.get('DISPATCH_JOB_ID', '?')} start\n")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    gpus = [int(x) for x in visible.split(",") if x.strip()]
    sim = os.environ.get("DISPATCH_SIM_DIR")
    job = FakeGpuJob(Path(sim) if sim else None, gpus, a.util)

    def on_term(signum, frame):
        job.release()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, signal.SIG_IGN if a.ignore_term else on_term)
    target = _size_mib(a.vram)
    _wait_for(a.start_after)
    steps = max(1, int(a.ramp / STEP_S))
    for k in range(1, steps + 1):
        oom = job.allocate(target * k // steps)
        if oom is not None:
            print(oom, file=sys.stderr, flush=True)
            job.release()
            _touch(a.oom_marker)
            return 1
        time.sleep(a.ramp / steps)
    _touch(a.ready)
    _wait_for(a.end_after)
    time.sleep(a.hold)
    job.release()
    return a.exit


if __name__ == "__main__":
    sys.exit(main())
