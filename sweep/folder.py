"""A study folder: what it may hold, claiming it, and finding its runs again by their identity (RunSpec.key, kept
in each run folder's hidden marker) when the study has grown, was interrupted or is resumed."""

from __future__ import annotations

import json
import os
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli.run_folder import code_version, git_dirty, read_run_config, run_files
from config import UserError
from sweep.node import TOKEN
from sweep.page import is_study_figure
from sweep.study import RunSpec, Study

STUDY_CONFIG = "study_config.json"
STUDY_COPY = "study.toml"
STUDY_FORMAT = 2
STUDY_FILES = frozenset({STUDY_COPY, STUDY_CONFIG, "results.csv", "aggregate.csv", "report.html"})
"""the study's own top-level files, besides its figures (sweep/page.py's is_study_figure)"""
STUDY_DIRS = frozenset({"runs", "models", "output"})
"""runs/<run>/: each run's usual files; models/ (models/<set>/ per model set): the study's trained models;
output/<run>.log: what it printed"""
MARKER = ".sweep_run"
"""in each run folder, written before the run starts: the run's key (and what its training wrote)"""
MOVING = ".moving-"
"""runs/.moving-<key>: a run folder between its old and its new name (a study that grew renames its runs)"""


def study_identity(study: Study) -> dict[str, Any]:
    """What decides whether a study folder holds this study: its name and the code version. The study file itself
    may change (a grown grid): each run is then found again by its own key."""
    return {"name": study.name, "versions": code_version()}


@dataclass(frozen=True)
class Plan:
    """What claiming the study folder will do, decided before anything is written."""

    replace_all: bool
    """the folder holds another study and --overwrite was given: its files go"""
    obsolete: tuple[Path, ...]
    """run folders of an earlier version of this study that this version no longer has (--overwrite removes them)"""
    moves: tuple[tuple[Path, str], ...]
    """(run folder, its new name): runs of an earlier version found again under another name"""


def check_study_folder(
    folder: Path, study: Study, identity: dict[str, Any], study_file: Path, overwrite: bool
) -> Plan:
    """The study folder holds nothing but this study's files (any version of the study file: its runs are found
    again by key), or another study that --overwrite replaces. Files no study writes are never removed: such a
    folder is refused. The study file itself must not lie inside the folder (except as its own study.toml copy).
    Nothing is written here."""
    if folder.exists() and not folder.is_dir():
        raise UserError(f"--log_dir {folder} is a file, not a folder")
    src = study_file.resolve()
    out = folder.resolve()
    if out in src.parents and src != out / STUDY_COPY:
        raise UserError(
            f"--study {study_file} lies inside the study folder {folder}; choose another --log_dir"
        )
    none = Plan(False, (), ())
    if not folder.exists():
        return none
    entries = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    if not entries:
        return none
    unknown = [n for n in entries if n not in STUDY_FILES and n not in STUDY_DIRS and not is_study_figure(n)]
    if unknown:
        raise UserError(
            f"{folder}/ holds files that no study writes ({', '.join(unknown[:5])}); nothing was run: choose "
            "another --log_dir or move them (--overwrite only ever removes a study's own files)"
        )
    record = read_study_config(folder)
    if record is None or record.get("identity") != json.loads(json.dumps(identity)):
        if not overwrite:
            what = "another study" if record is not None else "an unfinished study without study_config.json"
            if record is not None and record.get("identity", {}).get("name") == identity["name"]:
                what = "this study run by another code version"
            raise UserError(
                f"{folder}/ holds {what}; nothing was run: pass --overwrite to replace it, or choose another "
                "--log_dir"
            )
        return Plan(True, (), ())
    found = scan_runs(folder / "runs")
    wanted = {spec.key: spec for spec in study.runs}
    obsolete = tuple(path for key, path in sorted(found.items()) if key not in wanted)
    if obsolete and not overwrite:
        names = ", ".join(p.name for p in obsolete[:3]) + (" …" if len(obsolete) > 3 else "")
        raise UserError(
            f"{folder}/ holds {len(obsolete)} run{'s' if len(obsolete) != 1 else ''} that this version of the "
            f"study no longer has ({names}); nothing was run: pass --overwrite to remove them (the others are "
            "kept), or choose another --log_dir"
        )
    moves = tuple(
        (found[key], spec.name)
        for key, spec in wanted.items()
        if key in found and found[key].name != spec.name
    )
    return Plan(False, obsolete, moves)


def claim_study_folder(
    folder: Path, study: Study, identity: dict[str, Any], argvs: dict[str, list[str]], plan: Plan
) -> str:
    """Carry out the plan, copy the study file, write study_config.json and a fresh token (which tells a Ray node
    whether it sees this very folder); returns the token."""
    try:
        if plan.replace_all:
            for path in sorted(folder.iterdir()):
                if not path.name.startswith("."):
                    shutil.rmtree(path) if path.is_dir() else path.unlink()
        for path in plan.obsolete:
            remove_run(folder, path)
        _move_logs(folder / "output", plan.moves)
        _move_runs(folder / "runs", plan.moves)
        (folder / "runs").mkdir(parents=True, exist_ok=True)
        copy = folder / STUDY_COPY
        if copy.resolve() != study.path.resolve():
            copy.write_bytes(study.path.read_bytes())
        write_study_config(folder, study, identity, argvs, None)
        token = secrets.token_hex(16)
        (folder / TOKEN).write_text(token)
    except OSError as err:
        raise UserError(f"--log_dir {folder}: cannot write there ({err.strerror})") from None
    return token


def _move_logs(output: Path, moves: tuple[tuple[Path, str], ...]) -> None:
    """Each moved run's output log follows it to its new name (in two steps, as the folders: names may swap),
    so a grown study's folder equals a fresh run of it."""
    staged = []
    for path, name in moves:
        log = output / f"{path.name}.log"
        if log.is_file():
            hidden = output / f"{MOVING}{name}.log"
            os.replace(log, hidden)
            staged.append((hidden, output / f"{name}.log"))
    for hidden, target in staged:
        os.replace(hidden, target)


def _move_runs(runs: Path, moves: tuple[tuple[Path, str], ...]) -> None:
    """Rename run folders in two steps (each first to a hidden name), so that names that swap never collide; a
    folder at a new name that is no run of this study (no marker: an unfinished run) is cleared first."""
    staged = []
    for path, name in moves:
        hidden = runs / f"{MOVING}{read_marker(path)['key']}"
        if path != hidden:
            os.replace(path, hidden)
        staged.append((hidden, name))
    for hidden, name in staged:
        target = runs / name
        if target.exists():
            clear_run(target)
            (target / MARKER).unlink(missing_ok=True)
            if any(target.iterdir()):
                raise UserError(
                    f"{target}/ holds files that no run writes; move them so that the study's run "
                    f"{hidden.name[len(MOVING) :]} can take that name"
                )
            target.rmdir()
        os.replace(hidden, target)


def scan_runs(runs: Path) -> dict[str, Path]:
    """key -> run folder, for every folder under runs/ whose marker names its run (also those caught between two
    names by an interrupted rename)."""
    found: dict[str, Path] = {}
    if not runs.is_dir():
        return found
    for path in sorted(runs.iterdir()):
        marker = read_marker(path) if path.is_dir() else None
        if marker is not None:
            found.setdefault(marker["key"], path)
    return found


def read_marker(run_dir: Path) -> dict[str, Any] | None:
    try:
        record = json.loads((run_dir / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and isinstance(record.get("key"), str) else None


def write_marker(run_dir: Path, spec: RunSpec, model_prefix: str) -> None:
    """Before the run starts: which run this folder is for (its key), and the model files a training run writes
    (so that --overwrite can remove them with the run)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    record = {"key": spec.key, "phase": spec.phase, "models": spec.models, "model_prefix": model_prefix}
    (run_dir / MARKER).write_text(json.dumps(record, sort_keys=True) + "\n")


def run_complete(run_dir: Path, phase: str) -> bool:
    """A finished run: its run_config.json lists its outputs and they are all there (eval: summary.csv too)."""
    record = read_run_config(run_dir)
    outputs = record.get("outputs") if record else None
    if not isinstance(outputs, list):
        return False
    if phase == "eval" and "summary.csv" not in outputs:
        return False
    return all((run_dir / name).is_file() for name in outputs)


def reusable(folder: Path, spec: RunSpec) -> bool:
    """The run's folder holds this very run (its key), finished."""
    run_dir = folder / "runs" / spec.name
    marker = read_marker(run_dir)
    return marker is not None and marker["key"] == spec.key and run_complete(run_dir, spec.phase)


def clear_run(run_dir: Path) -> None:
    """Remove an unfinished run's own files (run_folder.run_files) so that its rerun starts clean; files no run
    writes stay, and the rerun then refuses the folder and is recorded as failed. (Not --overwrite on the run's
    command line: the run is then exactly the study's command line.)"""
    ours, _ = run_files(run_dir)
    for name in ours:
        (run_dir / name).unlink(missing_ok=True)
    for d in sorted((p for p in run_dir.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
        if not any(d.iterdir()):
            d.rmdir()


def remove_run(folder: Path, run_dir: Path) -> None:
    """A run the study no longer has (--overwrite): its own files, its marker, and a training run's models."""
    marker = read_marker(run_dir) or {}
    clear_run(run_dir)
    (run_dir / MARKER).unlink(missing_ok=True)
    if not any(run_dir.iterdir()):
        run_dir.rmdir()
    prefix, models = marker.get("model_prefix"), marker.get("models")
    if prefix and isinstance(models, str) and models:
        for path in (folder / models).glob(f"{prefix}*"):
            if path.is_file():
                path.unlink()


def receive_files(
    folder: Path, spec: RunSpec, model_prefix: str, files: tuple[tuple[str, bytes], ...]
) -> str:
    """Write the files a Ray node sent back (where missing or different); '' or what was wrong. Only the run's
    own folder and, for a training run, its model files are accepted."""
    allowed_dir = f"runs/{spec.name}/"
    for rel, data in files:
        path = Path(rel)
        inside_run = rel.startswith(allowed_dir) and ".." not in path.parts
        own_model = (
            bool(model_prefix)
            and path.parent.as_posix() == spec.models
            and path.name.startswith(model_prefix)
        )
        if path.is_absolute() or not (inside_run or own_model):
            return f"the node sent back a file outside the run's folder: {rel}"
        dest = folder / path
        if dest.is_file() and dest.read_bytes() == data:
            continue  # a filesystem shared with the node: already here
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, dest)
    return ""


def write_study_config(
    folder: Path,
    study: Study,
    identity: dict[str, Any],
    argvs: dict[str, list[str]],
    counts: dict[str, int] | None,
) -> None:
    """study_config.json: the study's identity (name, code version), the study file's sha256, each run's key and
    command line and, once the study ends, how many runs are ok / failed / not run (null while it runs). No
    times, no backend: the same study writes the same bytes on every backend."""
    record = {
        "format": STUDY_FORMAT,
        "identity": identity,
        "study_file": str(study.path),
        "study_sha256": study.sha256,
        "git_dirty": git_dirty(),
        "runs": [{"name": s.name, "phase": s.phase, "key": s.key, "argv": argvs[s.name]} for s in study.runs],
        "result": counts,
    }
    tmp = folder / f".{STUDY_CONFIG}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, folder / STUDY_CONFIG)


def read_study_config(folder: Path) -> dict[str, Any] | None:
    try:
        record = json.loads((folder / STUDY_CONFIG).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("format") == STUDY_FORMAT else None
