"""Run folders: the default name, which folder a run may write into (never over an input or another run), and the
run_config.json each run leaves there."""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import functools
import hashlib
import importlib.metadata
import json
import os
import platform
import re
import shutil
import socket
import subprocess
from pathlib import Path
from typing import Any

from config import RunConfig, UserError
from interrupts import deferred_signals

RUN_CONFIG = "run_config.json"
LOCK = ".run.lock"
"""held (pid and host inside) while a run writes into its folder; hidden, so never one of the run's files"""
RUN_CONFIG_FORMAT = 1
BACKUP = ".replaced"
"""--overwrite: the replaced run's files wait here (hidden) until the new run has finished, so a run that fails
part-way gives the folder back as it was"""
ROOT = Path(__file__).resolve().parents[1]
"""the project's folder (its git checkout names the code version)"""

# Files a run of any mode may write, used to recognise a run folder without a usable manifest (a run that was
# interrupted before it finished, or one written before run_config.json existed).
RUN_FILE_NAMES = frozenset(
    {
        RUN_CONFIG,
        "jobs.csv",
        "runs.csv",
        "cluster.csv",
        "summary.csv",
        "fairness.csv",
        "workload_report.json",
        "jct_cdf.png",
        "utilization.png",
        "queue_length.png",
        "compare.csv",
        "compare.png",
        # --mode report (evaluation/report.py)
        "evaluations.csv",
        "report.csv",
        "report.md",
        "learning_curves.csv",
        "learning_curves.png",
        "power.png",  # with --power (docs/power.md)
        "power_states.png",
        "power_states.csv",
        "jct_vs_cost.png",
        "task.json",  # --task power|autoscaling eval (docs/power.md)
        "report.html",
    }
)
RUN_FILE_PATTERNS = (
    re.compile(r"events\.out\.tfevents\..+"),
    # every figure in each --plot_formats format
    re.compile(
        r"(jct_cdf|utilization|queue_length|gantt|power|power_states|jct_vs_cost|compare|"
        r"compare_paired|learning_curves|jct_cdf_seed\d+)\.(png|svg|pdf)"
    ),
)
RUN_SUBDIR = re.compile(r"[a-z0-9_]+(\+[a-z_]+(-[0-9.e+]+)*)?_seed\d+")
"""compare mode: one subfolder per (algorithm, seed), e.g. fcfs_seed0/; with --power per (algorithm, power
manager, seed), e.g. easy+idle_off-600-1_seed0/"""

# Options that say where and how visibly a run writes, not what it computes: left out of run_config.json.
NOT_RECORDED = (
    "log_dir",
    "progress",
    "overwrite",
    "explicit_options",
    "report_workers",
    "keep_checkpoints",
    "plots",
    "plot_formats",
    "plot_span",
    "timeline_window_s",
    "command",
)
"""(explicit_options: which options were typed rather than defaulted; the same run either way; report_workers:
how many processes a report uses, which never changes its files; keep_checkpoints: how many periodic checkpoints
stay in --models_dir; plots, plot_formats, plot_span, timeline_window_s: whether and how the figures are drawn, which changes no CSV or JSON file; command:
the command line shown in report.html, made of the recorded options)"""
VERSIONED_PACKAGES = ("numpy", "simpy", "gymnasium", "pandas", "matplotlib", "torch")


def sha256_of(path: Path) -> str:
    """sha256 of a file; of a folder: of its files' relative names and contents, in sorted order."""
    digest = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        if f != path:
            digest.update(f.relative_to(path).as_posix().encode() + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def file_record(path: str) -> dict[str, Any]:
    """What identifies an input file or folder: its path as given, size and sha256 (None when it does not exist;
    loading it reports that)."""
    p = Path(path)
    if not p.exists():
        return {"path": path, "size_bytes": None, "sha256": None}
    size = p.stat().st_size if p.is_file() else sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return {"path": path, "size_bytes": size, "sha256": sha256_of(p)}


def input_paths(cfg: RunConfig) -> dict[str, str]:
    """Option name -> path of every input file or folder the run reads (checkpoints of agents come separately)."""
    named = {
        "--workload_path": cfg.workload.workload_path,
        "--cluster_path": cfg.cluster.path,
        "--job_types": _job_types_path(cfg.workload.job_types),
        "--resume": cfg.resume if cfg.mode == "train" else None,
        "--prices": cfg.power.prices_path,
    }
    return {k: v for k, v in named.items() if v}


def _job_types_path(job_types: str | None) -> str | None:
    from sim.throughput import resolve_path

    return None if job_types is None else str(resolve_path(job_types))


@functools.cache
def code_version() -> dict[str, Any]:
    """Python and package versions, and the git commit of this checkout (None outside a git checkout)."""
    versions: dict[str, Any] = {"python": platform.python_version()}
    for name in VERSIONED_PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    versions["git_commit"] = _git("rev-parse", "HEAD")
    return versions


@functools.cache
def git_dirty() -> bool | None:
    """Whether tracked files of this checkout differ from its commit (recorded, not part of a run's identity)."""
    status = _git("status", "--porcelain", "--untracked-files=no")
    return None if status is None else bool(status)


def _git(*args: str) -> str | None:
    try:
        proc = subprocess.run(
            ["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return proc.stdout.strip() if proc.returncode == 0 else None


def run_identity(cfg: RunConfig, checkpoints: dict[str, str]) -> dict[str, Any]:
    """Everything a run's results depend on: every option, the inputs' and checkpoints' contents, the code version.
    Two runs with the same identity write byte-identical files."""
    options = dataclasses.asdict(cfg)
    for key in NOT_RECORDED:
        options.pop(key, None)
    if cfg.power == type(cfg.power)():  # no power model: recorded exactly as before the option existed
        options.pop("power", None)
    if cfg.cem == type(cfg.cem)():  # the cross-entropy search's defaults: recorded as before it existed
        options.pop("cem", None)
    if cfg.es == type(cfg.es)():  # the evolution strategies' defaults: recorded as before they existed
        options.pop("es", None)
    if cfg.policy.score_preempt:  # the score rounds as they are: recorded as before the ablation existed
        options["policy"].pop("score_preempt", None)
    if not cfg.policy.round_on_arrival:  # no rounds at arrivals: recorded as before the option existed
        options["policy"].pop("round_on_arrival", None)
    identity = {
        "options": options,
        "inputs": {name: file_record(path) for name, path in input_paths(cfg).items()},
        "checkpoints": {algo: file_record(path) for algo, path in sorted(checkpoints.items())},
        "versions": code_version(),
    }
    return json.loads(_canonical(identity))  # as read back from run_config.json (tuples become lists)


def short_hash(identity: dict[str, Any]) -> str:
    return hashlib.sha256(_canonical(identity).encode()).hexdigest()[:8]


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


OUTPUT_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO}
)
"""errors of writing output (a full disk or quota, a read-only or failing disk, no permission): a user's problem to
fix, reported as one line, never a traceback"""


def write_error(err: OSError, folder: Path | str, left: str) -> UserError:
    """One line for an OSError while writing a run's output: the file (else `folder`), what went wrong, what was
    left (`left`, e.g. "the folder is as it was before the run") and what to do."""
    where = err.filename or folder
    if err.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        what = "the disk is full" if err.errno == errno.ENOSPC else err.strerror or "no space"
        todo = "free space there, or choose a folder on another disk"
    else:
        what = err.strerror or str(err)
        todo = "make it writable, or choose another folder"
    return UserError(f"cannot write {where}: {what}; {left}: {todo} and run again")


def check_inputs_outside(folder: Path, cfg: RunConfig, checkpoints: dict[str, str]) -> None:
    """A run folder must not hold any input (its outputs or --overwrite could replace it), nor lie inside an input
    folder (a loader reading that folder would pick up our outputs)."""
    out = folder.resolve()
    named = dict(input_paths(cfg)) | {f"checkpoint of {algo}": path for algo, path in checkpoints.items()}
    for option, path in named.items():
        p = Path(path).resolve()
        if p == out or out in p.parents:
            raise UserError(
                f"--log_dir {folder} holds the input {option} {path}; the run's outputs could overwrite it: "
                "choose another --log_dir"
            )
        if p.is_dir() and p in out.parents:
            raise UserError(
                f"--log_dir {folder} is inside the input folder {option} {path}: choose a --log_dir outside it"
            )


class RunFolder:
    """The folder one run writes into. `check` decides (before any work) whether the run may use it, `claim`
    clears a replaced run's files and records this run as started, `finish` records what it wrote.

    The rule: a folder is used when it is absent or empty, or holds the run with the same identity (a rerun then
    rewrites the same bytes; a training run is resumed in its own folder). A folder holding another run, an
    interrupted run or files no run writes is refused; `--overwrite` replaces another run (its files are removed
    first, so old and new results never mix) but never removes files that no run wrote. While a run writes, its
    folder holds LOCK: a second live run into it is refused."""

    def __init__(self, path: Path, cfg: RunConfig, identity: dict[str, Any]):
        self.path = path
        self.cfg = cfg
        self.identity = identity
        self.resolved: list[dict[str, Any]] = []
        self._replaced: list[Path] = []
        self._kept: set[str] = set()
        self._kept_dirs: set[str] = set()
        self._previous_config: bytes | None = None
        self._created = False
        self._claimed = False

    def check(self) -> None:
        if self.path.exists() and not self.path.is_dir():
            raise UserError(f"--log_dir {self.path} is a file, not a folder")
        if not self.path.exists():
            return
        _refuse_if_locked(self.path)
        try:
            ours, unknown = run_files(self.path)
        except OSError as err:
            raise UserError(f"--log_dir {self.path}: cannot read it ({err.strerror})") from None
        if unknown:
            listed = ", ".join(unknown[:5]) + (f" and {len(unknown) - 5} more" if len(unknown) > 5 else "")
            raise UserError(
                f"{self.path}/ holds files that no run writes ({listed}); nothing was written: choose another "
                "--log_dir or move them (--overwrite only ever removes a run's own files)"
            )
        # a run killed while replacing another (a failure would have put it back)
        if (self.path / BACKUP).is_dir() and not self.cfg.overwrite:
            raise UserError(
                f"{self.path}/ holds an unfinished run that was replacing another, whose files are in "
                f"{self.path / BACKUP}/; nothing was written: move them back to keep them, or pass --overwrite to "
                "replace both"
            )
        if not ours:
            return
        previous = read_run_config(self.path)
        fresh_train = self.cfg.mode == "train" and not self.cfg.resume
        if self.cfg.mode == "train" and self.cfg.resume:
            if previous is None or previous.get("run", {}).get("options", {}).get("mode") == "train":
                return  # a resumed training appends to its own folder (TensorBoard's convention)
        elif previous is not None and self._same_run(previous) and not fresh_train:
            return  # the same run again: every file is rewritten with the same bytes
        if self.cfg.overwrite:
            self._replaced = [self.path / name for name in ours]
            return
        if previous is None:
            why = "the files of a run without run_config.json (interrupted, or written by an older version)"
        elif self._same_run(previous):
            why = "a training run of the same configuration (continue it with --resume)"
        else:
            why = "another run (" + differences(previous.get("run", {}), self.identity) + ")"
        raise UserError(
            f"{self.path}/ holds {why}; nothing was written: pass --overwrite to replace it, or choose another "
            "--log_dir"
        )

    def _same_run(self, previous: dict[str, Any]) -> bool:
        return _canonical(previous.get("run")) == _canonical(self.identity)  # NaN-safe, unlike ==

    def claim(self) -> None:
        """Move the run being replaced (--overwrite) out of the way, create the folder and record this run as
        started. A stop signal arriving meanwhile is delivered once the claim is complete, and then gives the
        folder back (`abandon`) before it stops the run."""
        try:
            with deferred_signals():
                self._claim()
                self._claimed = True
        except OSError as err:
            self._undo_claim()
            raise write_error(err, self.path, "nothing was written") from None
        except KeyboardInterrupt:
            if self._claimed:
                self.abandon()
            raise

    def _claim(self) -> None:
        self._created = not self.path.exists()
        self.path.mkdir(parents=True, exist_ok=True)
        _lock(self.path)
        backup = self.path / BACKUP
        shutil.rmtree(backup, ignore_errors=True)  # a killed run's: check() let only --overwrite through
        for p in self._replaced:
            if p.exists():
                (backup / p.relative_to(self.path)).parent.mkdir(parents=True, exist_ok=True)
                os.replace(p, backup / p.relative_to(self.path))
        _remove_empty_subfolders(self.path, {p.parent for p in self._replaced})
        self._kept = set(run_files(self.path)[0])  # the same run's files (rerun, resumed training)
        self._kept_dirs = {p.name for p in self.path.iterdir() if p.is_dir()}
        config = self.path / RUN_CONFIG
        self._previous_config = config.read_bytes() if config.exists() else None
        self._write(outputs=None)

    def failed(self, err: BaseException) -> None:
        """After the run failed with `err`: `abandon`; a write error (a full disk, no permission: OUTPUT_ERRNOS)
        then raises one UserError line naming the file (the caller re-raises any other `err`)."""
        self.abandon()
        if isinstance(err, OSError) and err.errno in OUTPUT_ERRNOS:
            raise write_error(err, self.path, f"{self.path}/ is as it was before the run") from None

    def _undo_claim(self) -> None:
        """After a claim failed part-way (the run wrote nothing): put the replaced run back, remove the lock, the
        temp file and the folder if the claim created it."""
        with deferred_signals(), contextlib.suppress(OSError):
            self._restore_backup()
            (self.path / f".{RUN_CONFIG}.{os.getpid()}.tmp").unlink(missing_ok=True)
            (self.path / LOCK).unlink(missing_ok=True)
            if self._created and self.path.is_dir() and not any(self.path.iterdir()):
                self.path.rmdir()

    def _restore_backup(self) -> None:
        backup = self.path / BACKUP
        if backup.is_dir():
            for p in sorted(q for q in backup.rglob("*") if q.is_file()):
                (self.path / p.relative_to(backup)).parent.mkdir(parents=True, exist_ok=True)
                os.replace(p, self.path / p.relative_to(backup))
            shutil.rmtree(backup, ignore_errors=True)

    def abandon(self) -> None:
        """After a run failed (a user error, Ctrl-C, a crash): give the folder back as it was before `claim` -
        remove the files this run wrote, put back the run it was replacing and the previous run_config.json. A stop
        signal waits until it is done."""
        with deferred_signals():
            self._abandon()

    def _abandon(self) -> None:
        if not self.path.is_dir():
            return
        ours, _ = run_files(self.path)
        written = [self.path / name for name in ours if name not in self._kept]
        for p in written:
            p.unlink(missing_ok=True)
        created = {
            self.path / d.name for d in self.path.iterdir() if d.is_dir() and d.name not in self._kept_dirs
        }
        _remove_empty_subfolders(self.path, {p.parent for p in written} | created)
        if self._previous_config is not None:
            tmp = self.path / f".{RUN_CONFIG}.{os.getpid()}.tmp"
            try:  # the files removed above free the space this needs on a full disk
                tmp.write_bytes(self._previous_config)
                os.replace(tmp, self.path / RUN_CONFIG)
            except OSError:  # left recorded as an unfinished run: the next run into the folder says so
                tmp.unlink(missing_ok=True)
        self._restore_backup()
        (self.path / LOCK).unlink(missing_ok=True)
        if self._created and not any(self.path.iterdir()):
            self.path.rmdir()

    def leave_unfinished(self) -> None:
        """A training stopped part-way but resumable: the replaced run is gone, this one stays recorded as
        unfinished (outputs null), so only --resume or --overwrite reuses the folder."""
        with deferred_signals():
            shutil.rmtree(self.path / BACKUP, ignore_errors=True)
            (self.path / LOCK).unlink(missing_ok=True)

    def finish(self) -> None:
        """Record the run's files in run_config.json and release the folder (a stop signal waits until done)."""
        with deferred_signals():
            self._finish()

    def _finish(self) -> None:
        ours, _ = run_files(self.path)
        self._write(outputs=[name for name in ours if name != RUN_CONFIG])
        shutil.rmtree(self.path / BACKUP, ignore_errors=True)  # the replaced run is gone only now
        (self.path / LOCK).unlink(missing_ok=True)

    def _write(self, outputs: list[str] | None) -> None:
        record = {
            "format": RUN_CONFIG_FORMAT,
            "run": self.identity,
            "git_dirty": git_dirty(),
            "resolved": self.resolved,
            "outputs": outputs,
        }
        tmp = self.path / f".{RUN_CONFIG}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")
        os.replace(tmp, self.path / RUN_CONFIG)


def _remove_empty_subfolders(root: Path, folders: set[Path]) -> None:
    for d in sorted(folders, key=lambda d: -len(d.parts)):
        if d != root and d.is_dir() and not any(d.iterdir()):
            d.rmdir()


def _lock_holder(folder: Path) -> str | None:
    """'pid N on HOST' of another live run writing into `folder`, else None (no lock, or a stale one left by a
    run that was killed: its process is gone)."""
    try:
        pid_text, _, host = (folder / LOCK).read_text().partition(" ")
        pid = int(pid_text)
    except (OSError, ValueError):
        return None
    if host == socket.gethostname():
        if pid == os.getpid():
            return None  # left by an earlier run of this process (runs in one process are sequential)
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass  # alive, another user's
    return f"pid {pid} on {host}"


def _refuse_if_locked(folder: Path) -> None:
    holder = _lock_holder(folder)
    if holder:
        raise UserError(
            f"{folder}/ is being written by another run ({holder}); wait for it or choose another --log_dir "
            f"(if no such run exists, delete {folder / LOCK})"
        )


def _lock(folder: Path) -> None:
    """Take the folder's lock (exclusive create; a stale lock is replaced)."""
    mine = f"{os.getpid()} {socket.gethostname()}"
    try:
        fd = os.open(folder / LOCK, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        _refuse_if_locked(folder)
        tmp = folder / f"{LOCK}.{os.getpid()}.tmp"
        tmp.write_text(mine)
        os.replace(tmp, folder / LOCK)
        return
    with os.fdopen(fd, "w") as fh:
        fh.write(mine)


def read_run_config(folder: Path) -> dict[str, Any] | None:
    try:
        record = json.loads((folder / RUN_CONFIG).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("format") == RUN_CONFIG_FORMAT else None


def run_files(folder: Path) -> tuple[list[str], list[str]]:
    """(files a run wrote, entries no run writes) in `folder`, as sorted relative paths (an unknown folder ends in
    "/" and is not opened). A run's files are those its finished run_config.json lists, else those named like the
    files runs write. Hidden entries are neither: never removed, never in the way."""
    previous = read_run_config(folder)
    listed = set(previous["outputs"]) if previous and isinstance(previous.get("outputs"), list) else set()
    listed_dirs = {p.as_posix() for name in listed for p in Path(name).parents if p != Path(".")}
    ours: list[str] = []
    unknown: list[str] = []

    def walk(d: Path) -> None:
        for p in sorted(d.iterdir()):
            rel = p.relative_to(folder)
            name = rel.as_posix()
            if p.name.startswith("."):
                continue
            if p.is_dir() and not p.is_symlink():
                if (len(rel.parts) == 1 and RUN_SUBDIR.fullmatch(p.name)) or name in listed_dirs:
                    walk(p)
                else:
                    unknown.append(name + "/")
            elif name in listed or _is_run_file(rel):
                ours.append(name)
            else:
                unknown.append(name)

    walk(folder)
    return ours, unknown


def _is_run_file(rel: Path) -> bool:
    """Named like a file a run writes: top level, or inside a compare run's <algo>_seed<S>/ subfolder."""
    if len(rel.parts) > 2 or (len(rel.parts) == 2 and not RUN_SUBDIR.fullmatch(rel.parts[0])):
        return False
    return rel.name in RUN_FILE_NAMES or any(p.fullmatch(rel.name) for p in RUN_FILE_PATTERNS)


def differences(old: dict[str, Any], new: dict[str, Any], limit: int = 4) -> str:
    """'options.seed 0 -> 5, …': the first `limit` fields where two identities differ."""
    a, b = _flat(old), _flat(new)
    keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    shown = [f"{k} {_short(a.get(k))} -> {_short(b.get(k))}" for k in keys[:limit]]
    more = f", and {len(keys) - limit} more" if len(keys) > limit else ""
    return "differs in " + ", ".join(shown) + more if shown else "differs"


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out |= _flat(v, f"{prefix}.{k}" if prefix else str(k))
        return out
    return {prefix: json.loads(_canonical(value))}


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:12] + "…"


def workload_tag(cfg: RunConfig) -> str:
    w = cfg.workload
    if w.workload_type == "synthetic":  # as the workload names itself: legacy keeps its old name
        profile = "" if w.synthetic_profile == "legacy" else f"{w.synthetic_profile}-"
        return f"synthetic-{profile}{w.difficulty}"
    return f"{w.workload_type}-{Path(w.workload_path).name.split('.')[0]}"


def default_log_dir(cfg: RunConfig, checkpoints: dict[str, str]) -> Path:
    """--log_dir, else logs/<mode>_<algo(s)>_<workload>_seed(s)<S>_<hash>: the hash covers every option, the
    inputs' and checkpoints' contents and the code version (run_identity), so runs that can differ
    never share a default folder. A resumed training continues in the folder its checkpoint records."""
    if cfg.log_dir:
        return Path(cfg.log_dir)
    if cfg.mode == "train" and cfg.resume:
        recorded = _resumed_run_dir(cfg.resume)
        if recorded:
            return Path(recorded)
    if cfg.mode == "compare":
        name = f"compare_{'-'.join(cfg.algos)}_{workload_tag(cfg)}_seeds{'-'.join(map(str, cfg.seeds))}"
    else:
        name = f"{cfg.mode}_{cfg.algo}_{workload_tag(cfg)}_seed{cfg.seed}"
    return Path("logs") / f"{name}_{short_hash(run_identity(cfg, checkpoints))}"


def _resumed_run_dir(checkpoint: str) -> str | None:
    """The run folder recorded in a training checkpoint (None when it records none or cannot be read here; loading
    it for training reports a bad file)."""
    try:
        from agents.checkpoint import load_checkpoint

        run_config = load_checkpoint(checkpoint).get("run_config") or {}
    except Exception:  # noqa: BLE001 - any unreadable file: the trainer's own load names the problem
        return None
    log_dir = run_config.get("log_dir") if isinstance(run_config, dict) else None
    return log_dir if isinstance(log_dir, str) and log_dir else None
