"""`--mode report`: every checkpoint and every heuristic on the held-out sets, written to one run folder
(report.md, report.csv, evaluations.csv, learning curves); the tables are evaluation/report.py's."""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

from cli.report_page import REPORT_INTRO, write_top_page
from cli.run_folder import RunFolder, check_inputs_outside, run_identity, short_hash
from config import SCORER_ALGOS, RunConfig, UserError
from evaluation.report import (
    TABLE_COLUMNS,
    Evaluation,
    Model,
    Task,
    build_table,
    find_models,
    learning_curves,
    markdown,
    plot_curves,
    run_tasks,
    selection_seeds,
    table_cells,
    validation_heuristics,
    write_csv,
)
from evaluation.sets import TRACES, cases, check_sets, default_sets
from metrics.csv_table import Table
from schedulers import POLICIES


def mode_report(cfg: RunConfig) -> Path:
    set_names, missing = (cfg.report_sets, ()) if cfg.report_sets else default_sets(cfg.traces_dir)
    check_sets(set_names, cfg.traces_dir, cfg.workload.job_types)
    traces = [n for n in set_names if n in TRACES]
    if cfg.workload.job_types is not None and traces:
        raise UserError(
            f"--job_types gives synthetic jobs a job type; the trace set(s) {', '.join(traces)} have none: add "
            "--report_sets medium,hard,clusters,gavel"
        )
    for name in missing:
        print(
            f"warning: report set {name} not evaluated: no trace under --traces_dir {cfg.traces_dir}",
            file=sys.stderr,
        )
    models = find_models(cfg.models_dir)
    if not models:
        raise UserError(
            f"--models_dir {cfg.models_dir}: no <algo>_seed<S>_final.pt or _best.pt to report on "
            "(train some first: python main.py --mode train --algo ppo --seed 0)"
        )
    checkpoints = {Path(m.path).stem: m.path for m in models}
    identity = run_identity(cfg, checkpoints)
    path = (
        Path(cfg.log_dir)
        if cfg.log_dir
        else Path("logs") / f"report_{Path(cfg.models_dir).name}_{short_hash(identity)}"
    )
    check_inputs_outside(path, cfg, checkpoints)
    folder = RunFolder(path, cfg, identity)
    folder.check()
    seeds = cfg.seeds if "seeds" in cfg.explicit_options else None
    from evaluation.sets import TEST_SEEDS

    # the seeds of the seeded (synthetic) sets' cases, which a `best` checkpoint must not have been selected on
    case_seeds = set(seeds or TEST_SEEDS) if any(n not in TRACES for n in set_names) else set()
    not_held_out = []
    # unreadable files, unusable weights and agents of another task or observation are one error line before any
    # work; each model's warnings are said once here, not once per case by the tasks
    from agents.checkpoint import load_checkpoint, warn_if_best_of_another_run
    from agents.fit import check_fits, runtime_info_warning

    for m in models:
        checkpoint = load_checkpoint(m.path)
        check_fits(m.path, checkpoint, "scheduling")
        warning = runtime_info_warning(m.path, checkpoint, cfg.sim.runtime_info, "the report")
        if warning:
            print(warning, file=sys.stderr)
        if m.algo in SCORER_ALGOS:
            from agents.scorers import load_scorer

            load_scorer(m.path)
        else:
            from agents.policy import load_policy

            load_policy(m.path, warn=False)
        warn_if_best_of_another_run(Path(m.path), checkpoint)
        shared = sorted(case_seeds & set(selection_seeds(checkpoint))) if m.kind == "best" else []
        if shared:
            not_held_out.append(f"`{m.path}` (seeds {', '.join(map(str, shared))})")
            print(
                f"warning: {m.path} was selected on validation seeds {', '.join(map(str, shared))}, which are "
                "also cases of this report (--seeds): its `best` rows are not held out",
                file=sys.stderr,
            )
    all_cases = [c for name in set_names for c in cases(name, seeds or TEST_SEEDS)]
    groups: dict[tuple[str, int], list[Model]] = {}
    for m in models:
        groups.setdefault((m.algo, m.seed), []).append(m)
    tasks = [Task(c, ()) for c in all_cases] + [Task(c, tuple(g)) for c in all_cases for g in groups.values()]
    print(
        f"report: {len(models)} checkpoints ({len(groups)} training runs) and {len(POLICIES)} heuristics on "
        f"{len(all_cases)} cases of {', '.join(set_names)}: {len(tasks)} tasks on {cfg.report_workers} worker(s)"
    )
    folder.claim()
    t0 = time.perf_counter()
    try:
        rows = run_tasks(cfg, tasks)
        out = folder.path
        write_csv(
            out / "evaluations.csv",
            [f.name for f in dataclasses.fields(Evaluation)],
            [
                [r.set_name, r.case, r.policy, "" if r.train_seed is None else r.train_seed, r.checkpoint,
                 repr(round(r.avg_jct_s, 6)), r.completed, r.unfinished]
                for r in rows
            ],
        )  # fmt: skip
        table = build_table(rows, set_names)
        cells = [table_cells(r) for r in table]
        write_csv(out / "report.csv", TABLE_COLUMNS, cells)
        points = learning_curves(models)
        note = "No validation curves found (the training runs' folders are gone or validated nothing)."
        if points:
            write_csv(out / "learning_curves.csv", ("algo", "train_seed", "step", "val_avg_jct_s"), points)
            note = "`learning_curves.csv` holds the validation curves (no figure: --plots none)."
            if cfg.plots == "png":
                plot_curves(points, validation_heuristics(models), out / "learning_curves.png")
                note = "![learning curves](learning_curves.png) (`learning_curves.csv`: the same points)"
        text = markdown(cfg, table, rows, models, note, not_held_out)
        unevaluated = (
            f"\nNot evaluated (no trace under `{cfg.traces_dir}`): {', '.join(missing)}.\n" if missing else ""
        )
        text += unevaluated
        (out / "report.md").write_text(text)
        curves = [out / "learning_curves.png"] if points and cfg.plots == "png" else []
        columns = {name: [row[i] for row in cells] for i, name in enumerate(TABLE_COLUMNS)}
        title = f"Held-out report: {len(models)} checkpoints on {', '.join(set_names)}"
        shown = ("Report (report.csv)", Table(TABLE_COLUMNS, columns))
        # report.md's text on the page, but its title and its figure's section (the page has its own)
        notes = text.split("## Learning curves")[0].split("\n", 1)[1] + unevaluated
        write_top_page(out, cfg, folder.identity, shown, curves, title, REPORT_INTRO, notes)
    except BaseException as err:
        folder.failed(err)  # the folder goes back to how it was; a full disk becomes one error line
        raise
    folder.finish()
    print((out / "report.md").read_text().split("## Learning curves")[0].rstrip())
    print(f"wrote {out}/ in {time.perf_counter() - t0:.1f} s")
    return out
