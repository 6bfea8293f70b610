"""`python main.py --mode sweep`: check the study and its folder, run every run on a backend with a progress bar,
then write results.csv, aggregate.csv and the plots. Exit status: 0 all runs ok, 1 some failed, 2 a mistake in
the study or options (nothing run), 128 + N when stopped by signal N (130 Ctrl-C, 143 SIGTERM: finished runs
and the tables of what finished are kept; --resume continues)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cli.checks import usage_error
from cli.command import UNSHOWN, reproducing_command
from cli.parser import parse_plot_formats
from cli.run_folder import short_hash
from config import UserError
from interrupts import StopRequest, exit_status, signal_name
from sweep.folder import (
    Plan,
    check_study_folder,
    claim_study_folder,
    clear_run,
    read_marker,
    read_study_config,
    receive_files,
    reusable,
    run_complete,
    study_identity,
    write_marker,
    write_study_config,
)
from sweep.report import aggregate, format_table, result_rows, write_aggregate, write_results
from sweep.study import RunSpec, Study, argv_of, load_study
from sweep.worker import RunOutcome

if TYPE_CHECKING:
    from sweep.backends import RaySession


def build_sweep_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="main.py",
        description="Run every run of a study file; the runs' own options are in the study file (docs/sweeps.md).",
        epilog="exit status: 0 all runs ok, 1 some run failed, 2 a mistake in the study or options, 128 + N stopped "
        "by signal N (130 Ctrl-C, 143 SIGTERM; finished runs kept, --resume continues)",
    )
    p.add_argument("--mode", choices=("sweep",), required=True, help="sweep")
    p.add_argument("--study", required=True, help="the study file (TOML)")
    p.add_argument("--workers", type=int, default=None, help="runs at a time (default: all cores)")
    p.add_argument(
        "--backend", choices=("local", "ray"), default="local", help="where runs execute (default: local)"
    )
    p.add_argument("--address", default=None, help="Ray cluster address (default: start a local Ray)")
    p.add_argument(
        "--resume",
        action="store_true",
        help="reuse the finished runs (found by their options, also after the study grew)",
    )
    p.add_argument("--log_dir", default=None, help="the study folder (default: logs/sweep_<name>_<hash>)")
    p.add_argument(
        "--overwrite",
        action="store_true",
        help="replace another study held in the study folder, or remove the runs this study no longer has",
    )
    p.add_argument("--no_progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--plots",
        choices=("png", "none"),
        default="png",
        help="the study's figures and report.html (default), or none (the same CSV and JSON files)",
    )
    p.add_argument(
        "--plot_formats",
        type=parse_plot_formats,
        default=("png",),
        help="comma-separated file formats of the study's figures, of png, svg, pdf (report.html embeds the PNG)",
    )
    p.add_argument(
        "--baseline",
        default=None,
        help="the policy the paired differences are taken from (default: the first policy of the study)",
    )
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
        args.command = reproducing_command(parser, argv, args, SWEEP_UNSHOWN)
        return run_study(args)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


SWEEP_UNSHOWN = UNSHOWN | {"workers", "backend", "address", "resume"}
"""options left out of the command report.html shows: where and how a study runs, not what it computes (the same
study gives the same files on every backend and worker count)"""


def default_study_dir(study: Study) -> Path:
    return Path("logs") / f"sweep_{study.name}_{short_hash(study_identity(study))}"


def run_argv(study: Study, spec: RunSpec, folder: Path) -> list[str]:
    """The run's command line: its options, then where it writes (as a user would type it by hand)."""
    argv = argv_of(spec.options) + ["--log_dir", str(folder / "runs" / spec.name), "--no_progress"]
    if spec.models:  # training runs and evaluations that run an agent: their model set's folder in the study
        argv += ["--models_dir", str(folder / spec.models)]
    return argv


def run_study(args: argparse.Namespace) -> int:
    from sweep.backends import stop_request

    with stop_request() as stop:
        return _run_study(args, stop)


def _run_study(args: argparse.Namespace, stop: StopRequest) -> int:
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

    prefixes: dict[str, str] = {}
    policies: dict[str, None] = {}  # the evaluated policies, in the study's order
    for spec in study.runs:  # every run checked by the command line's own parsing and validation first
        try:
            cfg = parse_run(argvs[spec.name])
        except UserError as err:
            raise UserError(f"{args.study}: run {spec.name}: {err}") from None
        prefixes[spec.name] = f"{cfg.algo}_seed{cfg.seed}_" if spec.phase == "train" else ""
        if spec.phase == "eval":
            policies.update(dict.fromkeys(cfg.algos if cfg.mode == "compare" else (cfg.algo,)))
    if args.baseline is not None and args.baseline not in policies:
        raise UserError(
            f"--baseline {args.baseline}: no run of the study evaluates it; its policies are {', '.join(policies)}"
        )
    plan = check_study_folder(folder, study, identity, Path(args.study), args.overwrite)
    session: RaySession | None = None
    if args.backend == "ray":
        from sweep.backends import RaySession

        # connected before anything is written: a wrong address or a cluster too small costs nothing
        session = RaySession(args.address, workers)
    try:
        stop.install()  # ray.init installs its own SIGTERM handler
        if session is not None:
            session.check_fits(_resource_needs(study))
        if stop.requested:
            print(f"{signal_name(stop.signum)}: stopped before any run; nothing was written", file=sys.stderr)
            return exit_status(stop)
        return _run_claimed(args, study, folder, identity, argvs, prefixes, plan, session, workers, stop)
    finally:
        if session is not None:
            session.close()


def _resource_needs(study: Study) -> list[tuple[str, float, float]]:
    needs = []
    for phase, what in (("train", "[train.resources]"), ("eval", "[resources]")):
        specs = [s for s in study.runs if s.phase == phase]
        if specs:
            r = specs[0].resources
            needs.append((f"{study.path}: {what}: its runs", r.num_cpus, r.num_gpus))
    return needs


def _run_claimed(
    args: argparse.Namespace,
    study: Study,
    folder: Path,
    identity: dict[str, Any],
    argvs: dict[str, list[str]],
    prefixes: dict[str, str],
    plan: Plan,
    session: RaySession | None,
    workers: int,
    stop: StopRequest,
) -> int:
    token = claim_study_folder(folder, study, identity, argvs, plan)
    status: dict[str, tuple[str, str]] = {}
    complete = {s.name for s in study.runs if args.resume and reusable(folder, s)}
    # an evaluation that loads models of a set that is trained (again) now is rerun, not reused
    retrained = {s.models for s in study.runs if s.phase == "train" and s.name not in complete}
    stale = {s.name for s in study.runs if s.phase == "eval" and s.name in complete and s.models in retrained}
    complete -= stale
    n_train = sum(s.phase == "train" for s in study.runs)
    where = session.describe() if session is not None else _describe_local(workers)
    print(
        f"study {study.name}: {len(study.runs)} runs ({n_train} training, {len(study.runs) - n_train} evaluation)"
        + (f", {len(complete)} already complete (skipped)" if args.resume else "")
        + (
            f", {len(stale)} finished evaluation{'s' if len(stale) != 1 else ''} rerun (new models)"
            if stale
            else ""
        )
        + (f", {len(plan.moves)} found again under a new name" if plan.moves else "")
        + (f", {len(plan.obsolete)} no longer in the study removed" if plan.obsolete else "")
        + f" -> {folder}/ on {where}"
    )
    t0 = time.perf_counter()
    for phase in ("train", "eval"):
        specs = [s for s in study.runs if s.phase == phase]
        for s in specs:
            if s.name in complete:
                status[s.name] = ("ok", "")
        todo = [s for s in specs if s.name not in complete]
        if todo and not stop.requested:
            run = _Phase(study, folder, argvs, prefixes, token, status, args.no_progress, stop)
            run.run(phase, todo, session, workers)
    rows = result_rows(study, folder / "runs", status)
    write_results(study, rows, folder / "results.csv")
    groups = aggregate(study, rows)
    write_aggregate(groups, folder / "aggregate.csv")
    counts = {
        k: sum(1 for s in study.runs if status.get(s.name, ("not run",))[0] == k) for k in ("ok", "failed")
    }
    counts["not run"] = len(study.runs) - counts["ok"] - counts["failed"]
    write_study_config(folder, study, identity, argvs, counts)
    from sweep.page import write_study_page

    record = {k: v for k, v in (read_study_config(folder) or {}).items() if k != "runs"}
    write_study_page(
        folder, study, rows, groups, record, shlex.join(args.command), args.plots == "png", args.plot_formats,
        args.baseline,
    )  # fmt: skip
    print(format_table(groups))
    for spec in study.runs:
        state, error = status.get(spec.name, ("not run", ""))
        if state == "failed":
            print(f"failed: {spec.name}: {error} (output in {folder / 'output' / spec.name}.log)")
    print(
        f"wrote {folder}/ in {time.perf_counter() - t0:.1f} s: {counts['ok']} ok, {counts['failed']} failed"
        + (f", {counts['not run']} not run" if counts["not run"] else "")
    )
    if stop.requested:
        print(
            f"{signal_name(stop.signum)}: stopped; the {counts['ok']} finished runs and their tables are kept: continue with "
            "--resume",
            file=sys.stderr,
        )
        return exit_status(stop)
    return 1 if counts["failed"] else 0


def _describe_local(workers: int) -> str:
    from sweep.backends import describe_local

    return describe_local(workers)


class _Phase:
    """Run one phase's runs on the backend, recording each outcome as it arrives (status, output/<run>.log, and
    on Ray the files the node sent back)."""

    def __init__(
        self,
        study: Study,
        folder: Path,
        argvs: dict[str, list[str]],
        prefixes: dict[str, str],
        token: str,
        status: dict[str, tuple[str, str]],
        no_progress: bool,
        stop: StopRequest,
    ):
        self.study, self.folder, self.argvs, self.prefixes, self.token = study, folder, argvs, prefixes, token
        self.status, self.no_progress, self.stop = status, no_progress, stop

    def run(self, phase: str, jobs: list[RunSpec], session: RaySession | None, workers: int) -> None:
        from tqdm import tqdm

        for spec in jobs:
            run_dir = self.folder / "runs" / spec.name
            marker = read_marker(run_dir)
            same = marker is not None and marker["key"] == spec.key
            if run_dir.is_dir() and not (same and run_complete(run_dir, phase)):
                clear_run(run_dir)  # an unfinished run, or no run of this study's (the folder was checked)
            write_marker(run_dir, spec, self.prefixes[spec.name])
        specs = {spec.name: spec for spec in jobs}
        outcomes = self._outcomes(phase, jobs, session, workers)
        bar = tqdm(total=len(jobs), desc=f"{phase} runs", unit="run", disable=self.no_progress, smoothing=0.1)
        failed = 0
        try:
            for outcome in outcomes:
                (self.folder / "output").mkdir(exist_ok=True)
                (self.folder / "output" / f"{outcome.name}.log").write_text(outcome.output)
                if outcome.status == "interrupted":
                    continue  # neither ok nor failed: not run, and --resume runs it
                state, error = self._check(specs[outcome.name], outcome)
                self.status[outcome.name] = (state, error)
                if state != "ok":
                    failed += 1
                    bar.write(f"failed: {outcome.name}: {error}")
                bar.update(1)
                bar.set_postfix(failed=failed)
        finally:
            bar.close()
            outcomes.close()

    def _check(self, spec: RunSpec, outcome: RunOutcome) -> tuple[str, str]:
        """ok only when the run's files are in the driver's study folder (those a Ray node sent back written)."""
        if outcome.status != "ok":
            return outcome.status, outcome.error
        try:
            wrong = receive_files(self.folder, spec, self.prefixes[spec.name], outcome.files)
        except OSError as err:
            wrong = f"cannot write the files the node sent back ({err.strerror or err})"
        if wrong:
            return "failed", wrong
        if not run_complete(self.folder / "runs" / spec.name, spec.phase):
            return (
                "failed",
                "the run's files did not reach the study folder (a Ray node without a shared filesystem?)",
            )
        return "ok", ""

    def _outcomes(
        self, phase: str, jobs: list[RunSpec], session: RaySession | None, workers: int
    ) -> Iterator[RunOutcome]:
        from sweep.backends import Job, run_local

        if session is None:
            batch = [Job(s.name, self.argvs[s.name], s.resources.timeout_s) for s in jobs]
            return run_local(batch, workers, self.stop)
        from sweep.node import NodeRun

        models = {}
        for spec in jobs:
            if phase == "eval" and spec.models and spec.models not in models:
                models[spec.models] = session.ray.put(_model_files(self.folder, spec.models))
        empty = session.ray.put(())
        batch = [
            (
                NodeRun(
                    s.name,
                    tuple(self.argvs[s.name]),
                    str(self.folder),
                    s.models,
                    self.prefixes[s.name],
                    self.token,
                    s.resources.timeout_s,
                ),
                models.get(s.models, empty),
                s.resources.num_cpus,
                s.resources.num_gpus,
            )
            for s in jobs
        ]
        return session.run(batch, self.stop)


def _model_files(folder: Path, models: str) -> tuple[tuple[str, bytes], ...]:
    """The model files of one model set that its evaluations load (not replay buffers, locks or hidden files), as
    (path relative to the study folder, contents), for Ray nodes that do not share the driver's filesystem."""
    files = sorted(
        p
        for p in (folder / models).iterdir()
        if p.is_file() and not p.name.startswith(".") and p.suffix == ".pt"
    )
    return tuple((p.relative_to(folder).as_posix(), p.read_bytes()) for p in files)
