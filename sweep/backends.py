"""Where a study's runs execute: a local process pool (one fresh process per run) or a Ray cluster."""

from __future__ import annotations

import multiprocessing
import os
import socket
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path

from config import UserError
from sweep.worker import RunOutcome, execute, execute_isolated, preload

ROOT = Path(__file__).resolve().parents[1]
Job = tuple[str, list[str]]
"""(run name, argv)"""


def run_local(jobs: Sequence[Job], workers: int) -> Iterator[RunOutcome]:
    """Yield each run's outcome as it finishes. Every run gets a fresh process (forked from a fork server that has
    only imported the code, or spawned where there is none), so nothing leaks from one run into another."""
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["sweep.forkserver_guard", "sweep.worker", "runner"])
    pool = ProcessPoolExecutor(
        max_workers=workers, mp_context=ctx, max_tasks_per_child=1, initializer=preload
    )
    try:
        pending = {pool.submit(execute, name, argv): name for name, argv in jobs}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                name = pending.pop(fut)
                yield _outcome(name, fut.result)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _outcome(name: str, result: Callable[[], RunOutcome]) -> RunOutcome:
    try:
        return result()
    except Exception as err:  # noqa: BLE001 - a worker that died (killed, out of memory) fails only its run
        return RunOutcome(name, "failed", f"worker process died: {type(err).__name__}: {err}", "", 0.0)


def run_ray(jobs: Sequence[Job], workers: int | None, address: str | None) -> Iterator[RunOutcome]:
    """Yield each run's outcome as it finishes on Ray: `address` of a running cluster, else a local Ray with
    `workers` CPUs. Each run is a task of 1 CPU; the (reused) Ray worker runs it in a fresh forked process
    (sweep.worker.execute_isolated): a new Ray worker per run (max_calls=1) cost 5.5 s a run here (BENCHMARKS.md).
    The cluster's nodes must see this checkout and the study folder at the same paths (a shared filesystem)."""
    try:
        import ray
    except ImportError:
        raise UserError(
            "--backend ray needs Ray: pip install -r requirements-ray.txt (or use the default --backend local)"
        ) from None
    env = {
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }
    started_here = not ray.is_initialized()
    if started_here:
        _check_reachable(address)
        try:
            ray.init(
                address=address,
                num_cpus=workers if address is None else None,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
                runtime_env={"env_vars": env},
            )
        except (ConnectionError, ValueError, RuntimeError) as err:
            raise UserError(f"--address {address}: cannot connect to Ray ({err})") from None
    task = ray.remote(num_cpus=1)(execute_isolated)
    cwd = os.getcwd()
    refs = {task.remote(name, argv, cwd): name for name, argv in jobs}
    try:
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                name = refs.pop(ref)
                yield _outcome(name, lambda ref=ref: ray.get(ref))
    finally:
        for ref in refs:
            ray.cancel(ref, force=True)
        if started_here:
            ray.shutdown()


def _check_reachable(address: str | None, timeout_s: float = 5.0) -> None:
    """An explicit `host:port` that nothing answers on is an error at once: Ray itself retries for minutes."""
    if address is None or address == "auto" or address.startswith(("ray://", "local")):
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise UserError(
            f"--address {address}: expected HOST:PORT of a Ray head node, 'auto' or ray://HOST:PORT"
        )
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as err:
        raise UserError(
            f"--address {address}: no Ray head answers there ({err.strerror or err}); start one with "
            "`ray start --head` or leave --address out for a local Ray"
        ) from None


def describe(backend: str, workers: int | None, address: str | None) -> str:
    if backend == "ray":
        return f"Ray at {address}" if address else f"local Ray with {workers} CPUs"
    return f"{workers} local worker process{'es' if workers != 1 else ''} (python {sys.version.split()[0]})"
