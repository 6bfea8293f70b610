"""Where a study's runs execute: fresh local processes (RunChild) or a Ray cluster (sweep.node on each node). Both
yield each run's outcome as it ends and act on the sweep's stop request between steps: the runs in flight get
Ctrl-C, finished ones are still yielded during a grace period, the rest are killed."""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from config import UserError
from interrupts import StopRequest
from sweep.node import NodeRun
from sweep.worker import RunChild, RunOutcome

ROOT = Path(__file__).resolve().parents[1]
POLL_S = 0.25
STOP_GRACE_S = 10.0
"""after a stop request, how long the runs in flight have to end by themselves (Kubernetes and Slurm wait 30 s
between SIGTERM and SIGKILL)"""
PROBE_S = 5.0
"""how long a Ray head has to answer --address's check"""


@dataclass(frozen=True)
class Job:
    name: str
    argv: list[str]
    timeout_s: float | None = None


def stop_request() -> StopRequest:
    """The sweep's stop request (interrupts.py): the first stop signal lets the runs in flight end gracefully, a
    second one stops them at once; either way the tables of what finished are written."""
    return StopRequest(
        f"stopping: the runs in flight get Ctrl-C and up to {STOP_GRACE_S:g} s to end; finished runs are kept",
        again_stops_at_once=False,
    )


def run_local(jobs: Sequence[Job], workers: int, stop: StopRequest) -> Iterator[RunOutcome]:
    """Yield each run's outcome as it finishes, at most `workers` runs at a time, each in a fresh process (nothing
    leaks from one run into another)."""
    queue = deque(jobs)
    running: list[RunChild] = []
    try:
        while (queue or running) and not stop.requested:
            while queue and len(running) < workers:
                job = queue.popleft()
                running.append(RunChild(job.name, job.argv, job.timeout_s))
            wait([w for child in running for w in child.waitables], POLL_S)
            for child in list(running):
                if (outcome := child.poll()) is not None:
                    running.remove(child)
                    yield outcome
        if running:
            for child in running:
                child.interrupt()
            until = time.monotonic() + STOP_GRACE_S
            while running and time.monotonic() < until and not stop.again:
                wait([w for child in running for w in child.waitables], POLL_S)
                for child in list(running):
                    if (outcome := child.poll()) is not None:
                        running.remove(child)
                        yield _stopped(outcome)
    finally:
        for child in running:
            child.kill()
        for child in running:
            child.process.join()


def _stopped(outcome: RunOutcome) -> RunOutcome:
    """An outcome that arrives after the stop request: a run that finished is kept; any other end (Ctrl-C, a
    process killed before its run started) is no failure of the run: it is not run, and --resume runs it."""
    if outcome.status == "ok":
        return outcome
    return RunOutcome(outcome.name, "interrupted", "interrupted", outcome.output, outcome.wall_s)


class RaySession:
    """A connection to Ray, made before the study folder is touched, so that a wrong --address or a cluster that
    cannot run the study is an error with nothing written."""

    def __init__(self, address: str | None, workers: int):
        try:
            import ray
        except ImportError:
            raise UserError(
                "--backend ray needs Ray: pip install -r requirements-ray.txt (or use the default --backend local)"
            ) from None
        self.ray = ray
        self.address = address
        self.workers = workers
        self.started_here = not ray.is_initialized()
        if not self.started_here:
            return
        _check_head(address)
        env = {
            "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
            "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
        try:
            ray.init(
                address=address,
                num_cpus=workers if address is None else None,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
                runtime_env={"env_vars": env},
            )
        except Exception as err:  # noqa: BLE001 - Ray raises many kinds; each is the user's address or cluster
            raise UserError(
                f"--address {address}: cannot connect to Ray ({type(err).__name__}: {err})"
            ) from None

    def describe(self) -> str:
        nodes = [n for n in self.ray.nodes() if n.get("Alive")]
        total = self.ray.cluster_resources()
        where = f"Ray at {self.address}" if self.address else "a local Ray"
        return (
            f"{where} ({len(nodes)} node{'s' if len(nodes) != 1 else ''}, {total.get('CPU', 0):g} CPUs, "
            f"{total.get('GPU', 0):g} GPUs)"
        )

    def check_fits(self, needs: Sequence[tuple[str, float, float]]) -> None:
        """Each (what, num_cpus, num_gpus) must fit on one node: Ray would otherwise wait for such a node
        forever."""
        nodes = [n.get("Resources", {}) for n in self.ray.nodes() if n.get("Alive")]
        for what, cpus, gpus in needs:
            if not any(n.get("CPU", 0) >= cpus and n.get("GPU", 0) >= gpus for n in nodes):
                biggest = max(((n.get("CPU", 0), n.get("GPU", 0)) for n in nodes), default=(0, 0))
                raise UserError(
                    f"{what} ask for num_cpus = {cpus:g}, num_gpus = {gpus:g} per run, but no node of the Ray "
                    f"cluster has that much (the largest: {biggest[0]:g} CPUs, {biggest[1]:g} GPUs)"
                )

    def run(
        self,
        jobs: Sequence[tuple[NodeRun, Any, float, float]],
        stop: StopRequest,
    ) -> Iterator[RunOutcome]:
        """Yield each run's outcome as it finishes: (run, its models (an object ref), num_cpus, num_gpus) per
        job, each a Ray task (sweep.node.run_on_node) that runs the run in a fresh process on its node and sends
        back every file it wrote."""
        from sweep.node import run_on_node

        ray = self.ray
        task = ray.remote(run_on_node)
        refs = {
            task.options(num_cpus=cpus, num_gpus=gpus, max_retries=0).remote(run, models): run.name
            for run, models, cpus, gpus in jobs
        }
        try:
            while refs and not stop.requested:
                done, _ = ray.wait(list(refs), num_returns=1, timeout=POLL_S)
                for ref in done:
                    yield self._outcome(refs.pop(ref), ref)
            if refs:
                for ref in refs:
                    ray.cancel(ref)  # KeyboardInterrupt in the task: its run gets Ctrl-C (sweep.node)
                until = time.monotonic() + STOP_GRACE_S
                while refs and time.monotonic() < until and not stop.again:
                    done, _ = ray.wait(list(refs), num_returns=1, timeout=POLL_S)
                    for ref in done:
                        yield _stopped(self._outcome(refs.pop(ref), ref))
        finally:
            for ref in refs:
                ray.cancel(ref, force=True)

    def _outcome(self, name: str, ref: Any) -> RunOutcome:
        try:
            return self.ray.get(ref)
        except self.ray.exceptions.TaskCancelledError:
            return RunOutcome(name, "interrupted", "interrupted", "", 0.0)
        except Exception as err:  # noqa: BLE001 - a node or worker that died fails only its run
            text = " ".join(str(err).split())[:300]
            return RunOutcome(name, "failed", f"Ray task failed: {type(err).__name__}: {text}", str(err), 0.0)

    def close(self) -> None:
        if self.started_here:
            self.ray.shutdown()


def _check_head(address: str | None) -> None:
    """An explicit `host:port` must answer, and answer as a Ray head's GCS, within seconds: Ray itself retries for
    minutes before saying either."""
    if address is None or address == "auto" or address.startswith(("ray://", "local")):
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise UserError(
            f"--address {address}: expected HOST:PORT of a Ray head node, 'auto' or ray://HOST:PORT"
        )
    try:
        with socket.create_connection((host, int(port)), timeout=PROBE_S) as conn:
            conn.settimeout(PROBE_S)
            conn.sendall(
                HTTP2_PREFACE
            )  # a Ray head's GCS speaks gRPC, which answers with its own SETTINGS frame
            try:
                reply = conn.recv(9)
            except TimeoutError:
                reply = b""
    except OSError as err:
        raise UserError(
            f"--address {address}: no Ray head answers there ({err.strerror or err}); start one with "
            "`ray start --head` or leave --address out for a local Ray"
        ) from None
    if len(reply) < 4 or reply[3] != 0x4:
        raise UserError(
            f"--address {address}: something answers there, but not a Ray head (no gRPC); give the address "
            "`ray start --head` printed (port 6379 by default)"
        )
    try:
        with _quiet_stderr():  # Ray's C++ client logs its failure on the process's stderr
            # Ray's own client of the head's GCS (what ray.init connects to); it answers within milliseconds
            from ray._raylet import GcsClient

            GcsClient(address=address).cluster_id  # noqa: B018 - the call is the check
    except Exception as err:  # noqa: BLE001 - any failure is the answer
        text = " ".join(str(err).split())[:200]
        raise UserError(
            f"--address {address}: not a Ray head's GCS ({type(err).__name__}: {text}); for Ray Client give "
            "ray://HOST:PORT"
        ) from None


HTTP2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
"""an HTTP/2 client's connection preface and an empty SETTINGS frame"""


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[None]:
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def describe_local(workers: int) -> str:
    return f"{workers} local worker process{'es' if workers != 1 else ''} (python {sys.version.split()[0]})"
