"""A study folder's figures and its report.html (drawn by cli/report_page.py's page builder): the policies side by
side against the first varied option with every seed's value, the paired differences from a baseline policy, the
overlaid JCT CDFs of each case, avg JCT against energy cost when the runs model power, and what each file holds.

Everything is computed from the files the runs wrote (each run's summary.csv and jobs.csv), so a resumed study
draws the same figures as a fresh one.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cli.report_page import REPORT_HTML, describe, write_folder_page
from cli.run_folder import RUN_SUBDIR
from metrics.csv_table import Table
from metrics.summary import SummaryRow, energy_of
from metrics.writers import summary_row_of
from sweep.report import MAIN_METRICS, Group, ResultRow, plot_groups
from sweep.study import Study

PAIRED = "sweep_paired"
JCT_VS_COST = "jct_vs_cost"
CDF_PREFIX = "jct_cdf_case"
MAX_CDF_CASES = 12
"""overlaid-CDF figures drawn at most (one per case, in the study's order; the page says how many were left out)"""
FIGURE_STEMS = (*MAIN_METRICS, PAIRED, JCT_VS_COST)
FIGURE_SUFFIXES = (".png", ".svg", ".pdf")


def is_study_figure(name: str) -> bool:
    """Whether `name` (a file at the top of a study folder) is one of the figures a study draws."""
    stem, dot, suffix = name.rpartition(".")
    if not dot or f".{suffix}" not in FIGURE_SUFFIXES:
        return False
    return stem in FIGURE_STEMS or (stem.startswith(CDF_PREFIX) and stem[len(CDF_PREFIX) :].isdigit())


FILES = {
    "study.toml": "a copy of the study file",
    "study_config.json": "the study's identity (name, code version), the study file's sha256, each run's key and "
    "command line, and how many runs are ok, failed, not run",
    "results.csv": "one row per summary row of each run: run, phase, status, error, every option the study sets, "
    "every summary.csv column (docs/sweeps.md)",
    "aggregate.csv": "per group (the varied options but the seed, and the policy): n, mean and 95 % CI half-width "
    "of every metric, and the geometric mean and interval the figures show",
    REPORT_HTML: "this page",
    PAIRED: "per policy and case, its difference from the baseline policy on the same seed: each seed a dot, the "
    "mean with its 95 % t-interval",
    JCT_VS_COST: "avg JCT against energy cost, one dot per run",
}
"""what each top-level file of a study folder holds (a figure by its stem)"""


@dataclass(frozen=True)
class Case:
    """One combination of the varied options other than the policy and the seed, with its runs' summary rows
    (their `workload` field set to the case's label, so that rows pair by (case, seed))."""

    label: str
    rows: tuple[SummaryRow, ...]
    jobs_csv: tuple[Path | None, ...]
    """per row, the jobs.csv of that run (None where it is missing)"""


def study_cases(study: Study, rows: Sequence[ResultRow], run_dir: Path) -> list[Case]:
    """The ok evaluation rows as SummaryRows, grouped into cases in first-seen order."""
    varied = [p for p in study.varying if p not in ("seed", "seeds", "algo", "algos")]
    cases: dict[str, tuple[list[SummaryRow], list[Path | None]]] = {}
    folders: dict[str, dict[tuple[str, int], Path]] = {}
    for r in rows:
        if r.status != "ok" or r.phase != "eval" or not r.metrics:
            continue
        line = {_unprefixed(k, study): v for k, v in r.metrics}
        params = dict(zip(study.params, r.params, strict=True))
        label = ", ".join(f"{p}={params[p]}" for p in varied) or line["workload"]
        row = dataclasses.replace(summary_row_of(line), workload=label)
        if r.run not in folders:
            folders[r.run] = _run_folders(run_dir / r.run)
        found, paths = cases.setdefault(label, ([], []))
        found.append(row)
        folder = folders[r.run].get((row.scheduler, row.seed))
        paths.append(folder / "jobs.csv" if folder is not None else None)
    return [Case(label, tuple(rs), tuple(ps)) for label, (rs, ps) in cases.items()]


def _unprefixed(column: str, study: Study) -> str:
    """results.csv's summary_<name> (a metric named like an option) back to summary.csv's <name>."""
    name = column.removeprefix("summary_")
    return name if column.startswith("summary_") and name in study.params else column


def _run_folders(run: Path) -> dict[tuple[str, int], Path]:
    """(scheduler, seed) -> the folder holding that run's jobs.csv: the run's own (eval) or one of its
    <algo>_seed<S>/ subfolders (compare), read from each folder's summary.csv."""
    out: dict[tuple[str, int], Path] = {}
    for folder in [run, *sorted(p for p in run.iterdir() if p.is_dir() and RUN_SUBDIR.fullmatch(p.name))]:
        summary = folder / "summary.csv"
        if folder is not run and not (folder / "jobs.csv").is_file():
            continue
        if not summary.is_file() or not (folder / "jobs.csv").is_file():
            continue
        with open(summary, newline="") as fh:
            lines = list(csv.DictReader(fh))
        if len(lines) == 1:
            out.setdefault((lines[0]["scheduler"], int(lines[0]["seed"])), folder)
    return out


def _completed_jct_s(jobs_csv: Path) -> np.ndarray:
    with open(jobs_csv, newline="") as fh:
        return np.array(
            [float(r["jct_s"]) for r in csv.DictReader(fh) if r["status"] == "completed"], dtype=float
        )


def draw_study_figures(
    study: Study,
    groups: Sequence[Group],
    cases: Sequence[Case],
    folder: Path,
    formats: Sequence[str],
    baseline: str | None,
) -> tuple[list[Path], dict[str, str]]:
    """Draw every figure of the study into `folder`, in each of `formats`; returns their paths and captions by
    stem."""
    # lazy: matplotlib takes 0.4 s to import; a study with --plots none never needs it
    from metrics.plots import cdf_overlay_figure, plot_compare_paired, save_formats
    from metrics.power_plots import plot_jct_vs_cost

    paths = plot_groups(study, groups, folder, formats)
    captions = {
        p.stem: f"{p.stem} against the first varied option, one line per policy: geometric mean over seeds with "
        "its 95 % interval on a log axis where every value is > 0 (else the mean, linear), a dot per seed"
        for p in paths
    }
    rows = [r for c in cases for r in c.rows]
    paired = plot_compare_paired(rows, folder, formats, baseline, stem=PAIRED)
    if paired:
        base = baseline or rows[0].scheduler
        captions[PAIRED] = (
            f"difference from {base} on the same case and seed (policy minus {base}): a dot per seed, the mean with "
            "its 95 % t-interval"
        )
    paths += paired
    for i, case in enumerate(cases[:MAX_CDF_CASES]):
        pooled: dict[str, list[np.ndarray]] = {}
        for row, jobs in zip(case.rows, case.jobs_csv, strict=True):
            if jobs is not None and jobs.is_file():
                pooled.setdefault(row.scheduler, []).append(_completed_jct_s(jobs))
        if not pooled:
            continue
        seeds = sorted({r.seed for r in case.rows})
        curves = [(name, np.concatenate(parts)) for name, parts in pooled.items()]
        stem = f"{CDF_PREFIX}{i}"
        title = f"JCT CDF, {case.label}: completed jobs of seeds {', '.join(map(str, seeds))} pooled"
        paths += save_formats(cdf_overlay_figure(curves, title), folder / stem, formats)
        captions[stem] = (
            f"CDF of JCT of every policy on {case.label} (the completed jobs of every seed), overlaid"
        )
    if any(energy_of(r) for r in rows):
        paths += plot_jct_vs_cost([r for r in rows if energy_of(r)], folder / JCT_VS_COST, formats)
    return paths, captions


def remove_study_figures(folder: Path) -> None:
    """Remove the figures and report.html an earlier invocation drew (the study's own files), so that none of a
    smaller or figure-less (--plots none) rerun is left over."""
    for path in folder.iterdir():
        if path.is_file() and (is_study_figure(path.name) or path.name == REPORT_HTML):
            path.unlink()


def results_table(groups: Sequence[Group]) -> Table:
    """aggregate.csv's groups as a page table: the group's options, n, and mean ± 95 % CI of the main metrics."""
    key_cols = [c for c, _ in groups[0].key] if groups else []
    metrics = [m for m in MAIN_METRICS if any(m == s[0] for g in groups for s in g.stats)]
    columns: dict[str, list[str]] = {c: [dict(g.key)[c] for g in groups] for c in key_cols}
    columns["n"] = [str(g.n) for g in groups]
    for m in metrics:
        cells = []
        for g in groups:
            mean, ci = {name: (a, b) for name, a, b in g.stats}.get(m, (math.nan, math.nan))
            cells.append(f"{mean:.6g}" + ("" if math.isnan(ci) else f" ± {ci:.3g}"))
        columns[m] = cells
    return Table([*key_cols, "n", *metrics], columns)


def runs_table(study: Study, rows: Sequence[ResultRow]) -> Table:
    """One line per run and summary row: run, phase, status, error, the policy and seed, the main metrics."""
    names = ["run", "phase", "status", "error", "scheduler", "seed", *MAIN_METRICS]
    columns: dict[str, list[str]] = {n: [] for n in names}
    for r in rows:
        m = {_unprefixed(k, study): v for k, v in r.metrics}
        for n, v in zip(names[:4], (r.run, r.phase, r.status, r.error), strict=True):
            columns[n].append(v)
        for n in names[4:]:
            columns[n].append(m.get(n, ""))
    return Table(names, columns)


def study_files(folder: Path, study: Study) -> list[tuple[str, str]]:
    """(path, what it holds) for every file of the study folder: the top-level ones, each run's page (or folder),
    each run's output log, each trained model."""
    files = []
    top = sorted(
        {p.name for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")} | {REPORT_HTML}
    )
    for name in top:
        stem = name.rpartition(".")[0] if is_study_figure(name) else name
        if stem.startswith(CDF_PREFIX):
            what = "CDF of JCT of every policy on one case, overlaid (its caption above names the case)"
        elif stem in MAIN_METRICS:
            what = f"{stem} against the first varied option, one line per policy, a dot per seed"
        else:
            what = FILES.get(stem, describe(name))
        files.append((name, what))
    for spec in study.runs:
        run = folder / "runs" / spec.name
        page = run / REPORT_HTML
        if page.is_file():
            files.append(
                (f"runs/{spec.name}/{REPORT_HTML}", f"{spec.phase} run {spec.name}: its page and files")
            )
        elif run.is_dir():
            files.append((f"runs/{spec.name}/", f"{spec.phase} run {spec.name}: its files (docs/outputs.md)"))
        log = folder / "output" / f"{spec.name}.log"
        if log.is_file():
            files.append((f"output/{spec.name}.log", f"what run {spec.name} printed"))
    models = folder / "models"
    if models.is_dir():
        for p in sorted(models.rglob("*")):
            if p.is_file() and not p.name.startswith("."):
                files.append(
                    (p.relative_to(folder).as_posix(), "a model (or its training state) the study trained")
                )
    return files


def write_study_page(
    folder: Path,
    study: Study,
    rows: Sequence[ResultRow],
    groups: Sequence[Group],
    identity: dict[str, Any],
    command: str,
    plots: bool,
    formats: Sequence[str] = ("png",),
    baseline: str | None = None,
) -> Path:
    """The study's figures (when `plots`) and report.html at the top of its folder; returns the page's path."""
    remove_study_figures(folder)
    paths: list[Path] = []
    captions: dict[str, str] = {}
    if plots:
        cases = study_cases(study, rows, folder / "runs")
        paths, captions = draw_study_figures(study, groups, cases, folder, formats, baseline)
        left_out = len(cases) - MAX_CDF_CASES
    ok = sum(1 for r in rows if r.status == "ok")
    intro = (
        f"Study {study.name}: {len(study.runs)} runs ({ok} ok result rows). Every number and figure is computed "
        "from the runs' own files (each run folder has its summary.csv, jobs.csv and report.html); docs/sweeps.md "
        "explains the tables."
    )
    if plots and left_out > 0:
        intro += f" JCT CDFs are drawn for the first {MAX_CDF_CASES} cases ({left_out} left out)."
    tables = [("Mean ± 95 % CI over seeds (aggregate.csv)", results_table(groups))] if groups else []
    tables.append(("Runs (results.csv, main metrics)", runs_table(study, rows)))
    return write_folder_page(
        folder,
        f"Study {study.name}",
        intro,
        tables,
        paths,
        study_files(folder, study),
        command,
        identity,
        plots,
        captions,
    )
