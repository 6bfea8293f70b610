"""`python main.py --mode dispatch`: its options checked, the run folder chosen (running the same command again
resumes it), the dispatcher run, then the run's result files written. Exit status: 0 every job ended well, 1 some
job failed or cannot run on this box, 2 a mistake in the options or the jobs file (nothing run), 130 interrupted
(the journal keeps what happened; the same command goes on)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cli.run_folder import short_hash
from config import DispatchConfig, UserError
from dispatch.board import Board
from dispatch.devices import open_backend, parse_sim_spec
from dispatch.jobsfile import JobsFileError, parse_duration_s, parse_jobs_file, parse_size_mib
from dispatch.journal import LOCK
from dispatch.runner import Dispatcher
from schedulers import make_policy
from schedulers.sjf_gate import DEFAULT_GATE_S
from workloads.dispatch_log import JOURNAL, read_journal

DISPATCH_POLICIES = ("fcfs", "sjf", "easy", "cbf", "sjf_gate", "ect")
"""the non-preemptive policies: a dispatched job is never suspended"""


def _option(parse):
    def convert(text: str):
        try:
            return parse(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    return convert


def _gpu_list(text: str) -> tuple[int, ...]:
    try:
        gpus = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise ValueError(f"expected comma-separated GPU indices, got {text!r}") from None
    if not gpus or min(gpus) < 0:
        raise ValueError(f"expected comma-separated GPU indices >= 0, got {text!r}")
    return gpus


def build_dispatch_parser() -> argparse.ArgumentParser:
    d = DispatchConfig()
    p = argparse.ArgumentParser(
        prog="main.py --mode dispatch",
        description="Run the shell commands of a jobs file on this machine's GPUs under a scheduling policy "
        "(docs/dispatch.md).",
        epilog="exit status: 0 every job ended well, 1 some failed or cannot run, 2 a mistake (nothing run), "
        "130 interrupted (run the same command again to go on)",
    )
    p.add_argument("--mode", choices=("dispatch",), required=True, help="dispatch")
    p.add_argument("--jobs", required=True, help="the jobs file (read only; re-read while running)")
    p.add_argument(
        "--algo", default=d.algo, choices=DISPATCH_POLICIES, help=f"the scheduling policy (default: {d.algo})"
    )
    p.add_argument(
        "--gate_s", type=float, default=None, help=f"sjf_gate's gate (default: {DEFAULT_GATE_S:g})"
    )
    p.add_argument(
        "--sim",
        default=None,
        help="simulated GPUs instead of the real ones (NVML), e.g. 4xA100-80GB or 2xA100-80GB,1xT4",
    )
    p.add_argument(
        "--gpus", type=_option(_gpu_list), default=None, help="the GPU indices to use (default: all)"
    )
    p.add_argument(
        "--log_dir", default=None, help="the run folder (default: logs/dispatch_<jobs file>_<hash>)"
    )
    p.add_argument(
        "--poll_s", type=float, default=d.poll_s, help=f"seconds between two rounds (default: {d.poll_s:g})"
    )
    p.add_argument(
        "--vram_margin",
        type=_option(parse_size_mib),
        default=d.vram_margin_mib,
        help="memory of each GPU never given to jobs, MiB or e.g. 1G (default: 1G)",
    )
    p.add_argument(
        "--default_est",
        type=_option(parse_duration_s),
        default=d.default_est_s,
        help="runtime estimate of a job without est= (default: 1h)",
    )
    p.add_argument(
        "--kill_grace",
        type=_option(parse_duration_s),
        default=d.kill_grace_s,
        help="seconds from SIGTERM to SIGKILL on a timeout or a stop (default: 30s)",
    )
    p.add_argument(
        "--watch", action="store_true", help="keep running when all jobs are done, waiting for new lines"
    )
    p.add_argument(
        "--on_interrupt",
        choices=("ask", "wait", "stop", "detach"),
        default=d.on_interrupt,
        help="Ctrl-C: ask (on a terminal; elsewhere wait), wait for the running jobs, stop them, or detach "
        "(leave them running) (default: ask)",
    )
    p.add_argument(
        "--status_every",
        type=_option(parse_duration_s),
        default=d.status_every_s,
        help="without a terminal: seconds between status lines (default: 60s)",
    )
    p.add_argument(
        "--plots",
        choices=("all", "none"),
        default="all",
        help="the run's plots (jct_cdf, utilization, queue_length) beside its CSV files, or none (default: all)",
    )
    p.add_argument("--no_progress", action="store_true", help="no live status board")
    return p


def _usage_error(message: str) -> None:
    raise UserError(f"{message} (python main.py --mode dispatch --help lists the options)")


def dispatch_config(argv: list[str]) -> DispatchConfig:
    parser = build_dispatch_parser()
    parser.error = _usage_error  # one `error:` line for argparse's own mistakes, as in the other modes
    args, extra = parser.parse_known_args(argv)
    if extra:
        raise UserError(
            f"--mode dispatch does not take {' '.join(extra)} (python main.py --mode dispatch --help)"
        )
    if args.gate_s is not None and args.algo != "sjf_gate":
        raise UserError("--gate_s is sjf_gate's gate; --algo is " + args.algo)
    if not (args.poll_s > 0 and args.poll_s <= 60):
        raise UserError(f"--poll_s must be between 0 and 60 seconds, got {args.poll_s}")
    if args.sim is not None:
        parse_sim_spec(args.sim)
    jobs = Path(args.jobs)
    if not jobs.exists():
        raise UserError(f"--jobs {args.jobs}: no such file")
    if jobs.is_dir():
        raise UserError(f"--jobs {args.jobs}: is a folder; give the jobs file itself")
    try:
        parse_jobs_file(jobs)  # a bad line is reported before anything starts (file:line)
    except (JobsFileError, OSError) as e:
        raise UserError(str(e)) from None
    return DispatchConfig(
        jobs_path=args.jobs,
        algo=args.algo,
        gate_s=args.gate_s,
        log_dir=args.log_dir,
        sim=args.sim,
        gpus=args.gpus,
        poll_s=args.poll_s,
        vram_margin_mib=args.vram_margin,
        default_est_s=args.default_est,
        kill_grace_s=args.kill_grace,
        watch=args.watch,
        on_interrupt=args.on_interrupt,
        status_every_s=args.status_every,
        progress=not args.no_progress,
        plots=args.plots == "all",
    )


def run_folder(cfg: DispatchConfig) -> Path:
    """--log_dir, else logs/dispatch_<jobs file>_<hash of the jobs file's path, the policy and the GPUs>: the
    same command finds the same folder. Refused: a folder holding the jobs file, or files of something else."""
    jobs = Path(cfg.jobs_path).resolve()
    if cfg.log_dir:
        folder = Path(cfg.log_dir)
    else:
        identity = {"jobs": str(jobs), "algo": cfg.algo, "sim": cfg.sim, "gpus": cfg.gpus}
        folder = Path("logs") / f"dispatch_{jobs.stem}_{short_hash(identity)}"
    resolved = folder.resolve()
    if resolved == jobs.parent or resolved in jobs.parents:
        raise UserError(
            f"--log_dir {folder} holds the jobs file {cfg.jobs_path}; a run never writes beside its input"
        )
    if folder.exists() and not folder.is_dir():
        raise UserError(f"--log_dir {folder}: is a file")
    if folder.is_dir() and not (folder / JOURNAL).is_file():
        others = [p.name for p in folder.iterdir() if p.name != LOCK]
        if others:
            raise UserError(
                f"--log_dir {folder} holds files that are not a dispatch run's ({', '.join(sorted(others)[:3])}); "
                "give an empty or new folder"
            )
    return folder


def dispatch_main(argv: list[str]) -> int:
    try:
        cfg = dispatch_config(argv)
        folder = run_folder(cfg)
        folder.mkdir(parents=True, exist_ok=True)
        policy = make_policy(cfg.algo) if cfg.gate_s is None else make_policy(cfg.algo, cfg.gate_s)
        board = Board(cfg.progress and sys.stderr.isatty(), cfg.status_every_s)
        where = f"simulated GPUs {cfg.sim}" if cfg.sim else "this machine's GPUs (NVML)"
        print(f"dispatching {cfg.jobs_path} with {cfg.algo} on {where}; run folder {folder}/", flush=True)
        dispatcher = Dispatcher(cfg, folder, lambda sim_dir: open_backend(cfg.sim, sim_dir), policy, board)
        try:
            code = dispatcher.run()
            # lazy: pandas and matplotlib are needed only once the jobs are done
            from dispatch.results import write_results

            write_results(read_journal(folder / JOURNAL), dispatcher.box, folder, cfg.plots)
        finally:
            dispatcher.close()
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # before the dispatcher's own handling starts, or while the files are written
        print("interrupted (the journal keeps what happened; the same command goes on)", file=sys.stderr)
        return 130
    plots = ", the plots" if cfg.plots else ""
    print(f"wrote {folder}/ (jobs.csv, summary.csv, dispatch.csv{plots}; journal.jsonl, jobs/ logs)")
    return code
