"""What a Ray task does on its node: find or make the study folder there, put the models an evaluation needs in place,
run the run in a fresh process (time limit, Ctrl-C on cancel), and send every file it wrote back to the driver, so
that no filesystem needs to be shared with the driver."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import time
from dataclasses import dataclass
from multiprocessing.connection import wait
from pathlib import Path

from sweep.worker import TIMEOUT_GRACE_S, RunChild, RunOutcome

TOKEN = ".sweep_token"
"""in the driver's study folder: a node that reads the same token there shares the driver's filesystem"""
REPLICA = ".sweep_replica"
"""in a study folder a node made for itself (the driver's is not visible there): the node may clear it"""
POLL_S = 0.25


@dataclass(frozen=True)
class NodeRun:
    """One run as a Ray task receives it."""

    name: str
    argv: tuple[str, ...]
    """exactly the run's command line (the paths as the driver names them)"""
    study_dir: str
    """the study folder as the driver names it (a relative path is relative to the node's working folder)"""
    models_dir: str
    """'' or models[/<set>], relative to the study folder"""
    model_prefix: str
    """a training run: '<algo>_seed<S>_', the names of the model files it writes; '' otherwise"""
    token: str
    timeout_s: float | None


def run_on_node(run: NodeRun, models: tuple[tuple[str, bytes], ...]) -> RunOutcome:
    """The Ray task: never raises except on cancellation (then the run got Ctrl-C and has ended)."""
    study = Path(run.study_dir)
    t0 = time.perf_counter()
    try:
        shared = _shared(study, run.token)
        if not shared:
            _replica(study)
            _clear(study / "runs" / run.name)
            _place(study, models)
    except OSError as err:
        where = f"{socket.gethostname()}:{os.path.abspath(study)}"
        error = f"node {where}: cannot prepare the study folder there ({err.strerror or err})"
        return RunOutcome(run.name, "failed", error, error + "\n", time.perf_counter() - t0)
    except _NotOurs as err:
        return RunOutcome(run.name, "failed", str(err), f"{err}\n", time.perf_counter() - t0)
    # Ray sets the GPUs of this task in this process; the fork server the run is forked from predates it
    env = {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}
    child = RunChild(run.name, list(run.argv), run.timeout_s, env)
    try:
        outcome = _supervise(child)
    finally:
        child.kill()
    if outcome.status != "ok":
        return outcome
    files = _collect(study, run)
    if not shared:
        _clear(study / "runs" / run.name)
    return RunOutcome(outcome.name, outcome.status, outcome.error, outcome.output, outcome.wall_s, files)


def _supervise(child: RunChild) -> RunOutcome:
    """Wait for the run; a cancelled task (KeyboardInterrupt from Ray) gives the run Ctrl-C and a grace period."""
    try:
        while (outcome := child.poll()) is None:
            wait(child.waitables, POLL_S)
        return outcome
    except KeyboardInterrupt:
        child.interrupt()
        until = time.monotonic() + TIMEOUT_GRACE_S
        while child.poll() is None and time.monotonic() < until:
            wait(child.waitables, POLL_S)
        raise


class _NotOurs(Exception):
    pass


def _shared(study: Path, token: str) -> bool:
    try:
        return (study / TOKEN).read_text() == token
    except (OSError, UnicodeDecodeError):
        return False


def _replica(study: Path) -> None:
    """This node's own study folder at the driver's path: made (and marked) here, or marked by an earlier task."""
    if (study / REPLICA).is_file():
        return
    if study.is_dir() and any(study.iterdir()):
        raise _NotOurs(
            f"node {socket.gethostname()}: {os.path.abspath(study)} holds files that are not this study's and the "
            "driver's study folder is not visible there; choose a --log_dir that is free on every node"
        )
    study.mkdir(parents=True, exist_ok=True)
    (study / REPLICA).write_text("a node's copy of a study folder; its results were sent to the driver\n")


def _clear(folder: Path) -> None:
    """A run folder of this node's own copy of the study (never the driver's)."""
    shutil.rmtree(folder, ignore_errors=True)


def _place(study: Path, models: tuple[tuple[str, bytes], ...]) -> None:
    """The driver's model files an evaluation loads, written where missing or different (atomically: other tasks
    on this node may read them)."""
    for rel, data in models:
        path = study / rel
        with contextlib.suppress(OSError):
            if path.read_bytes() == data:
                continue
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)


def _collect(study: Path, run: NodeRun) -> tuple[tuple[str, bytes], ...]:
    """Every file of the run's folder and, for a training run, its model files: (path relative to the study
    folder, contents). Hidden files (locks, temporary files) are not results."""
    found: list[Path] = []
    run_dir = study / "runs" / run.name
    if run_dir.is_dir():
        found += [
            p
            for p in sorted(run_dir.rglob("*"))
            if p.is_file() and not any(part.startswith(".") for part in p.relative_to(run_dir).parts)
        ]
    if run.model_prefix:
        found += sorted(p for p in (study / run.models_dir).glob(f"{run.model_prefix}*") if p.is_file())
    return tuple((p.relative_to(study).as_posix(), p.read_bytes()) for p in found)
