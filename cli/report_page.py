"""report.html of eval and compare run folders: what each file of a run folder holds, and the page that shows the
run's results, figures, files, command and identity (metrics/html_page.py renders it)."""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cli.run_folder import RUN_CONFIG, RUN_SUBDIR
from config import RunConfig
from metrics.csv_table import Table
from metrics.html_page import Page, PageFigure, write_page
from metrics.summary import SummaryRow
from metrics.writers import summary_table

REPORT_HTML = "report.html"

FILES = {
    RUN_CONFIG: "the run's identity (every option, the inputs' and checkpoints' sha256, code versions), what each "
    "scenario resolved to, and the list of files the run wrote",
    REPORT_HTML: "this page",
    "jobs.csv": "one row per job: submit, start, end, GPUs, GPU type, placement, wait, JCT, runtime, slowdown, status, "
    "priority (docs/outputs.md)",
    "runs.csv": "one row per execution interval of a job (several for a preempted job): start, end, GPUs held, type",
    "cluster.csv": "one row per node: GPU type, GPUs, memory, speed",
    "summary.csv": "one row per run: completed/unfinished/rejected jobs, JCT, wait, slowdowns, utilization, loads",
    "fairness.csv": "one row per run: Jain's index of slowdowns, max slowdown, finish-time fairness",
    "workload_report.json": "what the loader read and filtered, the load factors, GPU-count histogram, cluster used",
    "compare.csv": "per policy, the mean and std over seeds of every summary.csv metric",
    "task.json": "the node task's return, its parts and grade",
    "evaluations.csv": "every evaluation of the report: set, case, policy, training seed, checkpoint, avg JCT",
    "report.csv": "per set and policy: avg JCT, paired difference from the best heuristic and from SJF with "
    "intervals, wins and losses, verdict",
    "report.md": "the report as text: the table, the verdicts and what they mean",
    "learning_curves.csv": "each training run's validation avg JCT against steps",
    "learning_curves": "each training run's validation avg JCT against steps, every training seed",
    "jct_cdf": "CDF of completed jobs' JCT (log axis), one curve per priority class when there are several",
    "utilization": "busy GPUs of each GPU type as a share of all GPUs, stacked, arrival window shaded",
    "queue_length": "queued jobs stacked by the GPU type each waits for, arrival window shaded",
    "gantt": "timeline of every GPU (or node): one block per run coloured by job, preemptions and migrations marked; "
    "with node power states, each node's off, booting, idle and shutting-down times shaded behind",
    "power": "facility power and the electricity price over time",
    "power_states": "nodes per power state over time",
    "power_states.csv": "one row per interval of a node's power state (off, booting, idle, busy, shutting_down): "
    "start and end; each node's rows cover the run without gaps",
    "jct_vs_cost": "avg JCT against energy cost, one dot per run",
    "compare": "per policy: mean over seeds (bar), min-max (whisker), each seed (dot); log axis where values span "
    "decades",
    "compare_paired": "per policy, its difference from the baseline (the first of --algos) on the same seed: each "
    "seed a dot, the mean with its 95 % t-interval",
}
"""what each file of a run folder holds, by name (a figure by its name without the format suffix)"""

_SEED_CDF = re.compile(r"jct_cdf_seed(\d+)")


def describe(rel: str) -> str:
    """What the file at `rel` (relative to its run folder) holds; "" for a file no run writes."""
    path = Path(rel)
    if len(path.parts) > 1 and RUN_SUBDIR.fullmatch(path.parts[0]):
        algo, seed = path.parts[0].rsplit("_seed", 1)
        return f"{algo} on seed {seed}: " + describe(Path(*path.parts[1:]).as_posix())
    stem = path.stem if path.suffix in (".png", ".svg", ".pdf") else path.name
    seed = _SEED_CDF.fullmatch(stem)
    if seed:
        return f"CDF of JCT of every policy on seed {seed.group(1)}, overlaid (log axis)"
    return FILES.get(stem, "")


def folder_files(folder: Path, top_level: bool = True) -> list[str]:
    """The run's files in `folder` (relative paths, sorted; hidden ones left out), report.html (and at the top
    level run_config.json) included even before they are written."""
    names = {
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    }
    return sorted(names | {REPORT_HTML} | ({RUN_CONFIG} if top_level else set()))


def write_folder_page(
    folder: Path,
    title: str,
    intro: str,
    tables: Sequence[tuple[str, Table]],
    figure_paths: Sequence[Path],
    files: Sequence[tuple[str, str]],
    command: str,
    identity: dict[str, Any],
    plots: bool,
    captions: dict[str, str] | None = None,
    notes: str = "",
) -> Path:
    """report.html of any results folder (a run, a compare, a report, a sweep): its tables, its figures (a caption
    from `captions` by file stem, else what `describe` says), what each of `files` holds, the command and the
    identity record, after `notes` (Markdown: metrics/html_page.py's `notes_html`). `plots` False: the folder was
    made with --plots none (the page says so)."""
    captions = captions or {}
    by_stem: dict[str, list[Path]] = {}
    for p in figure_paths:
        by_stem.setdefault(p.stem, []).append(p)
    figures = tuple(
        PageFigure(captions.get(stem) or describe(stem + ".png"), tuple(ps)) for stem, ps in by_stem.items()
    )
    if not plots:
        note = "No figures: the run was made with --plots none."
    else:
        note = "" if figure_paths else "No figure of this kind for this run."
    page = Page(
        title=title,
        intro=intro,
        notes=notes,
        tables=tuple(tables),
        figures=figures,
        figures_note=note,
        files=tuple(files),
        command=command,
        identity=identity,
    )
    return write_page(page, folder / REPORT_HTML)


def write_run_page(
    folder: Path,
    cfg: RunConfig,
    identity: dict[str, Any],
    rows: Sequence[SummaryRow],
    figure_paths: Sequence[Path],
    title: str,
    top_level: bool = True,
) -> Path:
    """report.html of one run's folder: an eval's, or (not `top_level`) one <algo>_seed<S>/ of a compare, whose
    run_config.json is the compare folder's."""
    return write_folder_page(
        folder,
        title,
        "Results of one simulated run. Every number and figure here is computed from the CSV files listed "
        "below; docs/outputs.md defines each metric.",
        (("Summary (summary.csv)", summary_table(rows)),),
        figure_paths,
        [(name, describe(name)) for name in folder_files(folder, top_level) if "/" not in name],
        _command(cfg),
        identity,
        cfg.plots != "none",
    )


COMPARE_INTRO = (
    "Policies compared on the same jobs; every number is computed from the CSV files listed below "
    "(docs/outputs.md defines each metric). Each run's folder has its own report.html."
)
REPORT_INTRO = (
    "Held-out report: every checkpoint and heuristic on the same cases; report.md explains the columns and the "
    "verdicts, evaluations.csv holds every evaluation behind them."
)


def write_top_page(
    folder: Path,
    cfg: RunConfig,
    identity: dict[str, Any],
    table: tuple[str, Table],
    figure_paths: Sequence[Path],
    title: str,
    intro: str,
    notes: str = "",
) -> Path:
    """report.html at the top of a compare folder (intro COMPARE_INTRO: the policies side by side, the overlaid
    CDFs) or a --mode report folder (REPORT_INTRO: report.csv's table, the learning curves; `notes`: report.md's
    text, its verdicts): the table, the figures, the top-level files and each run folder's own page."""
    files = []
    for name in folder_files(folder):
        top = name.split("/", 1)[0]
        if "/" not in name:
            files.append((name, describe(name)))
        elif name == f"{top}/{REPORT_HTML}":
            algo, seed = top.rsplit("_seed", 1)
            files.append((name, f"{algo} on seed {seed}: that run's page and the files of its folder"))
    return write_folder_page(
        folder,
        title,
        intro,
        (table,),
        figure_paths,
        files,
        _command(cfg),
        identity,
        cfg.plots != "none",
        notes=notes,
    )


def _command(cfg: RunConfig) -> str:
    return shlex.join(cfg.command) if cfg.command else "(not recorded: the run was not started from main.py)"
