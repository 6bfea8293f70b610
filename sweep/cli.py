"""`python main.py --mode sweep`: check the study and its folder, run every run on a backend with a progress bar,
then write results.csv, aggregate.csv and the plots. Exit status: 0 all runs ok, 1 some failed, 2 a mistake in
the study or options (nothing run), 130 interrupted (finished runs kept; --resume continues)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from cli.checks import usage_error
from cli.run_folder import code_version, git_dirty, read_run_config, run_files, short_hash
from config import UserError
from sweep.report import (
    MAIN_METRICS,
    aggregate,
    format_table,
    plot_groups,
    result_rows,
    write_aggregate,
    write_results,
)
from sweep.study import RunSpec, Study, argv_of, load_study

STUDY_CONFIG = "study_config.json"
STUDY_COPY = "study.toml"
STUDY_FORMAT = 1
STUDY_FILES = frozenset(
    {STUDY_COPY, STUDY_CONFIG, "results.csv", "aggregate.csv"} | {f"{m}.png" for m in MAIN_METRICS}
)
STUDY_DIRS = frozenset({"runs", "models", "output"})
"""runs/<run>/: each run's usual files; models/ (models/<set>/ per model set): the study's trained models;
output/<run>.log: what it printed"""


def build_sweep_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="main.py",
        description="Run every run of a study file; the runs' own options are in the study file (docs/sweeps.md).",
        epilog="exit status: 0 all runs ok, 1 some run failed, 2 a mistake in the study or options, 130 interrupted",
    )
    p.add_argument("--mode", choices=("sweep",), required=True, help="sweep")
    p.add_argument("--study", required=True, help="the study file (TOML)")
    p.add_argument("--workers", type=int, default=None, help="runs at a time (default: all cores)")
    p.add_argument(
        "--backend", choices=("local", "ray"), default="local", help="where runs execute (default: local)"
    )
    p.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray)")
    p.add_argument("--resume", action="store_true", help="skip runs whose outputs are complete")
    p.add_argument("--log_dir", default=None, help="the study folder (default: logs/sweep_<name>_<hash>)")
    p.add_argument("--overwrite", action="store_true", help="replace another study held in the study folder")
    p.add_argument("--no_progress", action="store_true", help="no progress bar")
    return p


def sweep_main(argv: list[str]) -> int:
    parser = build_sweep_parser()
    parser.error = usage_error  # one `error:` line for argparse's own mistakes, as in the other modes
    args, extra = parser.parse_known_args(argv)
    try:
        if extra:
            raise UserError(
                f"--mode sweep takes the runs' options from the study file ([options], [grid] or [[runs]]), "
                f"not from the command line: {' '.join(extra)}"
            )
        return run_study(args)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def study_identity(study: Study) -> dict[str, Any]:
    """What a study folder's results depend on: the study file's contents and the code version."""
    return {"name": study.name, "sha256": study.sha256, "versions": code_version()}


def default_study_dir(study: Study) -> Path:
    return Path("logs") / f"sweep_{study.name}_{short_hash(study_identity(study))}"


def run_argv(study: Study, spec: RunSpec, folder: Path) -> list[str]:
    """The run's command line: its options, then where it writes (as a user would type it by hand)."""
    argv = argv_of(spec.options) + ["--log_dir", str(folder / "runs" / spec.name), "--no_progress"]
    if spec.models:  # training runs and evaluations that run an agent: their model set's folder in the study
        argv += ["--models_dir", str(folder / spec.models)]
    return argv


def run_study(args: argparse.Namespace) -> int:
    workers = args.workers if args.workers is not None else (os.cpu_count() or 1)
    if workers < 1:
        raise UserError(f"--workers must be >= 1, got {workers}")
    if args.address and args.backend != "ray":
        raise UserError("--address is the address of a Ray cluster: it needs --backend ray")
    study = load_study(args.study)
    folder = Path(args.log_dir) if args.log_dir else default_study_dir(study)
    identity = study_identity(study)
    argvs = {spec.name: run_argv(study, spec, folder) for spec in study.runs}
    from sweep.worker import parse_run

    for spec in (
        study.runs
    ):  # every run checked by the command line's own parsing and validation before any run starts
        try:
            parse_run(argvs[spec.name])
        except UserError as err:
            raise UserError(f"{args.study}: run {spec.name}: {err}") from None
    check_study_folder(folder, identity, Path(args.study), args.overwrite)
    claim_study_folder(folder, study, identity, argvs)

    status: dict[str, tuple[str, str]] = {}
    todo: list[RunSpec] = []
    for spec in study.runs:
        if args.resume and run_complete(folder / "runs" / spec.name, spec.phase):
            status[spec.name] = ("ok", "")
        else:
            todo.append(spec)
    from sweep.backends import describe

    n_train = sum(s.phase == "train" for s in study.runs)
    print(
        f"study {study.name}: {len(study.runs)} runs ({n_train} training, {len(study.runs) - n_train} evaluation)"
        + (f", {len(study.runs) - len(todo)} already complete (skipped)" if args.resume else "")
        + f" -> {folder}/ on {describe(args.backend, workers, args.address)}"
    )
    t0 = time.perf_counter()
    interrupted = False
    try:
        for phase in ("train", "eval"):
            jobs = [s for s in todo if s.phase == phase]
            if jobs:
                _run_phase(jobs, argvs, folder, status, args, workers, phase)
    except KeyboardInterrupt:
        interrupted = True
        print("\ninterrupted: finished runs are kept; continue with --resume", file=sys.stderr)
    rows = result_rows(study, folder / "runs", status)
    write_results(study, rows, folder / "results.csv")
    groups = aggregate(study, rows)
    write_aggregate(groups, folder / "aggregate.csv")
    plot_groups(study, groups, folder)
    counts = {
        k: sum(1 for s in study.runs if status.get(s.name, ("not run",))[0] == k) for k in ("ok", "failed")
    }
    counts["not run"] = len(study.runs) - counts["ok"] - counts["failed"]
    _write_study_config(folder, study, identity, argvs, counts)
    print(format_table(groups))
    for spec in study.runs:
        state, error = status.get(spec.name, ("not run", ""))
        if state == "failed":
            print(f"failed: {spec.name}: {error} (output in {folder / 'output' / spec.name}.log)")
    print(
        f"wrote {folder}/ in {time.perf_counter() - t0:.1f} s: {counts['ok']} ok, {counts['failed']} failed"
        + (f", {counts['not run']} not run" if counts["not run"] else "")
    )
    if interrupted:
        return 130
    return 1 if counts["failed"] else 0


def _run_phase(
    jobs: list[RunSpec],
    argvs: dict[str, list[str]],
    folder: Path,
    status: dict[str, tuple[str, str]],
    args: argparse.Namespace,
    workers: int,
    phase: str,
) -> None:
    """Run one phase's runs on the backend, recording each outcome as it arrives (status, output/<run>.log)."""
    from tqdm import tqdm

    from sweep.backends import run_local, run_ray

    for spec in jobs:
        run_dir = folder / "runs" / spec.name
        if run_dir.is_dir() and not run_complete(run_dir, spec.phase):
            clear_run(
                run_dir
            )  # an interrupted or failed run of this same study (the study folder was checked)
    batch = [(spec.name, argvs[spec.name]) for spec in jobs]
    outcomes = run_ray(batch, workers, args.address) if args.backend == "ray" else run_local(batch, workers)
    bar = tqdm(total=len(batch), desc=f"{phase} runs", unit="run", disable=args.no_progress, smoothing=0.1)
    failed = 0
    try:
        for outcome in outcomes:
            (folder / "output").mkdir(exist_ok=True)
            (folder / "output" / f"{outcome.name}.log").write_text(outcome.output)
            status[outcome.name] = (outcome.status, outcome.error)
            if outcome.status != "ok":
                failed += 1
                bar.write(f"failed: {outcome.name}: {outcome.error}")
            bar.update(1)
            bar.set_postfix(failed=failed)
    finally:
        bar.close()
        outcomes.close()


def run_complete(run_dir: Path, phase: str) -> bool:
    """A finished run: its run_config.json lists its outputs and they are all there (eval: summary.csv too)."""
    record = read_run_config(run_dir)
    outputs = record.get("outputs") if record else None
    if not isinstance(outputs, list):
        return False
    if phase == "eval" and "summary.csv" not in outputs:
        return False
    return all((run_dir / name).is_file() for name in outputs)


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


def check_study_folder(folder: Path, identity: dict[str, Any], study_file: Path, overwrite: bool) -> None:
    """The study folder holds nothing but this study's files (then the study is rerun or resumed there), or
    another study that --overwrite replaces. Files no study writes are never removed: such a folder is refused.
    The study file itself must not lie inside the folder (except as its own study.toml copy)."""
    if folder.exists() and not folder.is_dir():
        raise UserError(f"--log_dir {folder} is a file, not a folder")
    src = study_file.resolve()
    out = folder.resolve()
    if out in src.parents and src != out / STUDY_COPY:
        raise UserError(
            f"--study {study_file} lies inside the study folder {folder}; choose another --log_dir"
        )
    if not folder.exists():
        return
    entries = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    if not entries:
        return
    unknown = [n for n in entries if n not in STUDY_FILES and n not in STUDY_DIRS]
    if unknown:
        raise UserError(
            f"{folder}/ holds files that no study writes ({', '.join(unknown[:5])}); nothing was run: choose "
            "another --log_dir or move them (--overwrite only ever removes a study's own files)"
        )
    record = _read_json(folder / STUDY_CONFIG)
    if record is not None and record.get("identity") == json.loads(json.dumps(identity)):
        return
    if not overwrite:
        what = "another study" if record is not None else "an unfinished study without study_config.json"
        if record is not None and record.get("identity", {}).get("versions") != identity["versions"]:
            what += " (or this study run by another code version)"
        raise UserError(
            f"{folder}/ holds {what}; nothing was run: pass --overwrite to replace it, or choose another --log_dir"
        )
    for name in entries:
        path = folder / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()


def claim_study_folder(
    folder: Path, study: Study, identity: dict[str, Any], argvs: dict[str, list[str]]
) -> None:
    try:
        (folder / "runs").mkdir(parents=True, exist_ok=True)
        copy = folder / STUDY_COPY
        if copy.resolve() != study.path.resolve():
            copy.write_bytes(study.path.read_bytes())
        _write_study_config(folder, study, identity, argvs, None)
    except OSError as err:
        raise UserError(f"--log_dir {folder}: cannot write there ({err.strerror})") from None


def _write_study_config(
    folder: Path,
    study: Study,
    identity: dict[str, Any],
    argvs: dict[str, list[str]],
    counts: dict[str, int] | None,
) -> None:
    """study_config.json: the study's identity (file sha256, code version), each run's command line and, once the
    study ends, how many runs are ok / failed / not run (null while it runs). No times, no backend: the same
    study writes the same bytes on every backend."""
    record = {
        "format": STUDY_FORMAT,
        "identity": identity,
        "study_file": str(study.path),
        "git_dirty": git_dirty(),
        "runs": [{"name": s.name, "phase": s.phase, "argv": argvs[s.name]} for s in study.runs],
        "result": counts,
    }
    tmp = folder / f".{STUDY_CONFIG}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, folder / STUDY_CONFIG)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and record.get("format") == STUDY_FORMAT else None
