"""`--mode report`: every heuristic and every trained model in --models_dir on the held-out sets, then the table of
paired differences against the best heuristic (markdown + CSV), the raw evaluations and the learning curves.

Files (in the run folder): `evaluations.csv` (one row per set, case, policy and checkpoint), `report.csv` and
`report.md` (per set and policy: mean average JCT; for learners the mean over training seeds, per test case, then
over cases; the paired relative difference against the set's best heuristic and against SJF with 95 % bootstrap and
t intervals; final and validation-selected checkpoints side by side; every row, losses included),
`learning_curves.csv` / `learning_curves.png` (validation average JCT against training steps, read from each
training run's TensorBoard events), `run_config.json`.
"""

from __future__ import annotations

import csv
import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from config import SCORER_ALGOS, RunConfig
from evaluation.paired import PairedDiff, paired_relative_difference
from evaluation.sets import SYNTHETIC_SETS, TRACES, TYPED_SETS, Case, scenario
from schedulers import POLICIES, make_policy

MODEL_FILE = re.compile(r"(?P<algo>[a-z0-9]+)_seed(?P<seed>\d+)_(?P<kind>final|best)\.pt")
KINDS = ("final", "best")
TARGET_GAIN = 0.05
"""the gain both quality targets ask of a learner over the best heuristic (see `target_lines`)"""
MIN_TRAIN_SEEDS = 3
REPORT_FILES = ("evaluations.csv", "report.csv", "report.md", "learning_curves.csv", "learning_curves.png")


@dataclass(frozen=True)
class Model:
    algo: str
    seed: int
    kind: str
    """final | best"""
    path: str


@dataclass(frozen=True)
class Evaluation:
    """One policy (a heuristic, or one checkpoint of one training seed) on one case."""

    set_name: str
    case: str
    policy: str
    """the heuristic or the learner's algo"""
    train_seed: int | None
    checkpoint: str
    """'' for a heuristic; final | best"""
    avg_jct_s: float
    completed: int
    unfinished: int


def find_models(models_dir: str) -> list[Model]:
    """Every <algo>_seed<S>_final.pt / _best.pt in models_dir, sorted by algo, seed and kind."""
    folder = Path(models_dir)
    found = []
    for path in sorted(folder.glob("*_seed*_*.pt")) if folder.is_dir() else []:
        m = MODEL_FILE.fullmatch(path.name)
        if m:
            found.append(Model(m["algo"], int(m["seed"]), m["kind"], str(path)))
    return sorted(found, key=lambda x: (x.algo, x.seed, KINDS.index(x.kind)))


# ---- evaluation tasks (run here or in worker processes) ----------------------------------------------------


@dataclass(frozen=True)
class Task:
    case: Case
    models: tuple[Model, ...]
    """() = every heuristic; else the checkpoints of one training seed of one learner"""


def run_task(cfg: RunConfig, task: Task) -> list[Evaluation]:
    from metrics.summary import summarize

    sc = scenario(cfg, task.case, cfg.traces_dir, cfg.workload.num_jobs)
    out = []
    if not task.models:
        for name in POLICIES:
            sim = sc.simulator()
            # as eval/compare build it
            sim.run(
                make_policy(
                    name,
                    round_s=cfg.policy.round_s,
                    seed=sc.seed,
                    matrix=sc.throughput,
                    score_preempt=cfg.policy.score_preempt,
                    round_on_arrival=cfg.policy.round_on_arrival,
                )
            )
            out.append(_row(task.case, name, None, "", summarize(sim.result(name, sc.seed))))
        return out
    import torch

    from agents.checkpoint import load_checkpoint
    from agents.policy import load_policy
    from config import run_config_from_dict
    from env.gym_env import run_policy_in_env

    torch.set_num_threads(1)
    for model in task.models:
        if model.algo in SCORER_ALGOS:  # a score-round scorer runs natively, as las_speed does
            from agents.scorers import load_scorer

            result = load_scorer(model.path).run(sc, cfg)
            out.append(_row(task.case, model.algo, model.seed, model.kind, summarize(result)))
            continue
        saved = load_checkpoint(model.path).get("run_config") or {}
        env = dataclasses.replace(run_config_from_dict(saved).env, reward="jct")
        policy = load_policy(model.path, warn=False)  # (the report warned once, before any task)
        result = run_policy_in_env(dataclasses.replace(cfg, env=env), sc, policy.act, model.algo)
        out.append(_row(task.case, model.algo, model.seed, model.kind, summarize(result)))
    return out


def _row(case: Case, policy: str, seed: int | None, kind: str, summary) -> Evaluation:
    return Evaluation(
        case.set_name,
        case.label,
        policy,
        seed,
        kind,
        summary.avg_jct_s,
        summary.completed,
        summary.unfinished,
    )


def run_tasks(cfg: RunConfig, tasks: Sequence[Task]) -> list[Evaluation]:
    """Every task's evaluations, in task order, whatever the number of workers."""
    from tqdm import tqdm

    bar = tqdm(total=len(tasks), desc="report evaluations", unit="task", disable=not cfg.progress)
    results: list[list[Evaluation]] = [[] for _ in tasks]
    try:
        if cfg.report_workers == 1:
            for i, task in enumerate(tasks):
                results[i] = run_task(cfg, task)
                bar.update(1)
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor, as_completed

            from interrupts import quiet_worker

            ctx = multiprocessing.get_context("spawn")
            pool = ProcessPoolExecutor(cfg.report_workers, mp_context=ctx, initializer=quiet_worker)
            try:
                futures = {pool.submit(run_task, cfg, task): i for i, task in enumerate(tasks)}
                for future in as_completed(futures):
                    results[futures[future]] = future.result()
                    bar.update(1)
            except BaseException:  # a stop signal or a failed task: end the evaluations under way now
                for process in list((pool._processes or {}).values()):
                    process.terminate()
                pool.shutdown(wait=True, cancel_futures=True)
                raise
            pool.shutdown()
    finally:
        bar.close()
    return [row for rows in results for row in rows]


# ---- the table --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TableRow:
    set_name: str
    policy: str
    checkpoint: str
    train_seeds: int
    cases: int
    avg_jct_s: float
    """heuristic: mean over cases; learner: mean over cases of the mean over training seeds"""
    train_seed_std_s: float
    """learner: std over training seeds of each seed's mean over cases (NaN for one seed or a heuristic)"""
    baseline: str
    vs_best: PairedDiff
    vs_sjf: PairedDiff | None
    case_rel_vs_sjf: tuple[float, ...] = ()
    """per case: (score - SJF's) / SJF's"""


def build_table(rows: Sequence[Evaluation], set_names: Sequence[str]) -> list[TableRow]:
    table = []
    for set_name in set_names:
        mine = [r for r in rows if r.set_name == set_name]
        labels = list(dict.fromkeys(r.case for r in mine))
        heuristics = [p for p in POLICIES if any(r.policy == p and not r.checkpoint for r in mine)]
        score = {p: _per_case(mine, labels, p, "") for p in heuristics}
        best = min(heuristics, key=lambda p: float(score[p][0].mean()))
        learners = sorted({(r.policy, r.checkpoint) for r in mine if r.checkpoint}, key=_learner_order)
        for policy, kind in [(p, "") for p in heuristics] + learners:
            per_case, per_seed = score[policy] if not kind else _per_case(mine, labels, policy, kind)
            vs_sjf = paired_relative_difference(per_case, score["sjf"][0]) if "sjf" in score else None
            table.append(
                TableRow(
                    set_name,
                    policy,
                    kind,
                    len(per_seed) if kind else 0,
                    len(labels),
                    float(per_case.mean()),
                    float(np.std(per_seed, ddof=1)) if len(per_seed) > 1 else math.nan,
                    best,
                    paired_relative_difference(per_case, score[best][0]),
                    vs_sjf,
                    tuple(float(x) for x in (per_case - score["sjf"][0]) / score["sjf"][0]) if vs_sjf else (),
                )
            )
    return table


def _learner_order(key: tuple[str, str]) -> tuple[str, int]:
    return key[0], KINDS.index(key[1])


def _per_case(
    rows: Sequence[Evaluation], labels: list[str], policy: str, kind: str
) -> tuple[np.ndarray, list]:
    """(per case: the mean over training seeds; per training seed: its mean over cases). A training seed that
    lacks some case (it has no such checkpoint) is left out of both."""
    by_seed: dict[int | None, dict[str, float]] = {}
    for r in rows:
        if r.policy == policy and r.checkpoint == kind:
            by_seed.setdefault(r.train_seed, {})[r.case] = r.avg_jct_s
    complete = {s: v for s, v in by_seed.items() if all(c in v for c in labels)}
    grid = np.array([[v[c] for c in labels] for _, v in sorted(complete.items(), key=lambda kv: kv[0] or 0)])
    return grid.mean(axis=0), [float(x) for x in grid.mean(axis=1)]


TABLE_COLUMNS = (
    "set", "policy", "checkpoint", "train_seeds", "cases", "avg_jct_s", "train_seed_std_s", "best_heuristic",
    "diff_vs_best_pct", "boot_lo_pct", "boot_hi_pct", "t_lo_pct", "t_hi_pct", "wins", "losses", "verdict",
    "diff_vs_sjf_pct", "sjf_boot_lo_pct", "sjf_boot_hi_pct", "sjf_verdict",
)  # fmt: skip


def _pct(x: float) -> str:
    return "" if math.isnan(x) else f"{100 * x:.2f}"


def _num(x: float) -> str:
    return "" if math.isnan(x) else f"{x:.1f}"


def table_cells(row: TableRow) -> list[str]:
    b, s = row.vs_best, row.vs_sjf
    return [
        row.set_name, row.policy, row.checkpoint, str(row.train_seeds or ""), str(row.cases), _num(row.avg_jct_s),
        _num(row.train_seed_std_s), row.baseline, _pct(b.mean_rel), _pct(b.boot_lo), _pct(b.boot_hi),
        _pct(b.t_lo), _pct(b.t_hi), str(b.wins), str(b.losses), b.verdict,
        *((_pct(s.mean_rel), _pct(s.boot_lo), _pct(s.boot_hi), s.verdict) if s else ("", "", "", "")),
    ]  # fmt: skip


def write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def markdown(
    cfg: RunConfig,
    table: Sequence[TableRow],
    rows: Sequence[Evaluation],
    models: Sequence[Model],
    curves_note: str,
    not_held_out: Sequence[str] = (),
) -> str:
    """report.md; `not_held_out` names the `best` checkpoints selected on seeds that are also cases here."""
    algos = sorted({m.algo for m in models})
    seeds = {a: sorted({m.seed for m in models if m.algo == a}) for a in algos}
    lines = [
        "# RL quality report",
        "",
        f"Models: `{cfg.models_dir}` ({'; '.join(f'{a}: training seeds {seeds[a]}' for a in algos) or 'none'}). "
        f"Runtime information: `{cfg.sim.runtime_info}`. Scores are average JCT (s) over completed jobs; a "
        "learner's score per case is the mean over its training seeds. Differences are paired over the set's "
        "cases, relative to the baseline ((learner - baseline) / baseline; negative = lower JCT), with 95 % "
        "intervals: percentile bootstrap over cases (10,000 resamples) and Student's t. The best heuristic is "
        "chosen per set on these same cases (which favours the heuristic). Every row is shown, losses included. "
        "Checkpoint `final`: the model at the end of its training run (the result); `best`: the one its run "
        "selected on its validation seeds (`--validation_seeds`).",
        "",
        unfinished_line(rows),
        "",
        *(
            [
                "**Not held out**: these `best` checkpoints were selected on validation seeds that are also cases "
                f"of this report, so their `best` rows are biased: {'; '.join(not_held_out)}.",
                "",
            ]
            if not_held_out
            else []
        ),
        *ablation_lines(cfg),
        "| set | policy | checkpoint | train seeds | cases | avg JCT (s) | ± std over train seeds | vs best heuristic "
        "| Δ % | 95 % bootstrap CI | 95 % t CI | wins / losses | verdict | Δ vs SJF % [bootstrap CI] |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in table:
        b, s = r.vs_best, r.vs_sjf
        sjf = f"{_pct(s.mean_rel)} [{_pct(s.boot_lo)}, {_pct(s.boot_hi)}]" if s else ""
        lines.append(
            f"| {r.set_name} | {r.policy} | {r.checkpoint or '-'} | {r.train_seeds or '-'} | {r.cases} | "
            f"{r.avg_jct_s:,.0f} | {'' if math.isnan(r.train_seed_std_s) else f'{r.train_seed_std_s:,.0f}'} | "
            f"{r.baseline} | {_pct(b.mean_rel)} | [{_pct(b.boot_lo)}, {_pct(b.boot_hi)}] | "
            f"[{_pct(b.t_lo)}, {_pct(b.t_hi)}] | {b.wins} / {b.losses} | {b.verdict} | {sjf} |"
        )
    lines += [
        "",
        "## Quality target",
        "",
        *target_lines(table, rows),
        "",
        "## Learning curves",
        "",
        curves_note,
    ]
    return "\n".join(lines) + "\n"


def selection_seeds(checkpoint: dict) -> tuple[int, ...]:
    """The validation seeds a `best` checkpoint was selected on: its validation record's, else its run's."""
    record = checkpoint.get("validation") or {}
    seeds = (
        record.get("validation_seeds") or (checkpoint.get("run_config") or {}).get("validation_seeds") or ()
    )
    return tuple(int(s) for s in seeds)


def unfinished_line(rows: Sequence[Evaluation], shown: int = 10) -> str:
    """Whether any evaluation left jobs unfinished (an average over completed jobs would hide them): none, or
    which ones (the first `shown`) and how many jobs each."""
    left = [r for r in rows if r.unfinished]
    if not left:
        return "Unfinished jobs: none (every evaluation finished every accepted job; counts in `evaluations.csv`)."
    named = [
        f"{r.set_name} {r.case} {r.policy}"
        + (f" seed {r.train_seed} {r.checkpoint}" if r.checkpoint else "")
        + f": {r.unfinished} of {r.completed + r.unfinished}"
        for r in left[:shown]
    ]
    more = f"; and {len(left) - shown} more" if len(left) > shown else ""
    return (
        f"**Unfinished jobs in {len(left)} evaluation(s)** (their average JCT counts completed jobs only, so it "
        f"flatters them; every count is in `evaluations.csv`): {'; '.join(named)}{more}."
    )


def ablation_lines(cfg: RunConfig) -> list[str]:
    """The settings of an ablation report that differ from the score rounds' study defaults, said at the top (none:
    no line); the runtime information is always in the header."""
    defaults = RunConfig()
    said = []
    if not cfg.policy.score_preempt:
        said.append(
            "las_speed and the trained scorers run **without rounds or preemption** (`--score_preempt no`)"
        )
    if cfg.policy.round_on_arrival:
        said.append(
            "las_speed and the trained scorers hold a round **at every arrival** too (`--round_on_arrival yes`)"
        )
    if cfg.sim.preempt_overhead_s != defaults.sim.preempt_overhead_s:
        said.append(
            f"restore overhead after a preemption **{cfg.sim.preempt_overhead_s:g} s** (`--preempt_overhead_s`)"
        )
    if cfg.workload.job_types is not None:
        said.append(
            f"jobs carry job types of the throughput matrix **{cfg.workload.job_types}** (`--job_types`)"
        )
    return [f"Ablation: {'; '.join(said)}.", ""] if said else []


def target_lines(table: Sequence[TableRow], rows: Sequence[Evaluation]) -> list[str]:
    """Per learner, final checkpoints. Slot-env learners (mean over training seeds): >= 5 % better than the best
    heuristic with the CI excluding 0 on medium and hard; within +5 % of SJF on every held-out trace window, at
    least 3 of them. Score-round learners: `scorer_target_lines`."""
    out = []
    learners = sorted({r.policy for r in table if r.checkpoint == "final"})
    for algo in learners:
        if algo in SCORER_ALGOS:
            out += scorer_target_lines(algo, table, rows)
            continue
        rows_of = {r.set_name: r for r in table if r.policy == algo and r.checkpoint == "final"}
        parts = []
        ok = True
        for name in ("medium", "hard"):
            r = rows_of.get(name)
            if r is None:
                parts.append(f"{name}: not evaluated")
                ok = False
                continue
            hit = r.vs_best.mean_rel <= -TARGET_GAIN and r.vs_best.below_zero
            ok &= hit
            parts.append(
                f"{name} {_pct(r.vs_best.mean_rel)} % vs {r.baseline} ({'met' if hit else 'NOT met'})"
            )
        windows = [
            x
            for n, r in rows_of.items()
            if n not in (*SYNTHETIC_SETS, *TYPED_SETS)
            for x in r.case_rel_vs_sjf
        ]
        within = [x for x in windows if x <= TARGET_GAIN]
        ok &= len(windows) >= 3 and len(within) == len(windows)
        parts.append(
            f"held-out trace windows within +5 % of SJF: {len(within)} of {len(windows)}"
            + ("" if len(windows) >= 3 else " (fewer than 3 evaluated)")
        )
        out.append(f"- **{algo} (final)**: {'; '.join(parts)} → target {'met' if ok else 'NOT met'}.")
    return out or ["- no learner with final checkpoints"]


def scorer_target_lines(algo: str, table: Sequence[TableRow], rows: Sequence[Evaluation]) -> list[str]:
    """The score-round learners' target, judged per training seed on its final checkpoint (every one of at least
    MIN_TRAIN_SEEDS seeds must meet it, not their mean): on each of medium, hard and clusters >= 5 % lower average
    JCT than the set's best heuristic, mean paired relative difference with its intervals below 0 (`below_zero`); on each
    trace set (itp, google, swf) no worse than the set's best heuristic (mean paired difference <= 0) and better
    than SJF on every window. A set that was not evaluated counts as not met."""
    baseline = {r.set_name: r.baseline for r in table}
    scores: dict[tuple[str, str, int | None], dict[str, float]] = {}
    for r in rows:
        if r.checkpoint in ("", "final"):  # heuristics and final checkpoints
            scores.setdefault((r.set_name, r.policy, r.train_seed), {})[r.case] = r.avg_jct_s
    seeds = sorted({r.train_seed for r in rows if r.policy == algo and r.checkpoint == "final"})
    lines, met = [], 0
    for seed in seeds:
        parts, ok = [], True
        for name in (*SYNTHETIC_SETS, *TRACES):
            best = baseline.get(name)
            mine = scores.get((name, algo, seed), {})
            labels = list(scores.get((name, best, None), {}))
            if best is None or not labels or any(c not in mine for c in labels):
                parts.append(f"{name}: not evaluated")
                ok = False
                continue
            d = paired_relative_difference(
                [mine[c] for c in labels], [scores[name, best, None][c] for c in labels]
            )
            if name in SYNTHETIC_SETS:
                hit = d.mean_rel <= -TARGET_GAIN and d.below_zero
                parts.append(
                    f"{name} {_pct(d.mean_rel)} % [{_pct(d.boot_lo)}, {_pct(d.boot_hi)}] vs {best} "
                    f"({'met' if hit else 'NOT met'})"
                )
            else:
                sjf = scores.get((name, "sjf", None), {})
                better = sum(mine[c] < sjf[c] for c in labels if c in sjf)
                hit = d.mean_rel <= 0 and better == len(labels)
                parts.append(
                    f"{name} {_pct(d.mean_rel)} % vs {best}, better than SJF on {better} of {len(labels)} windows "
                    f"({'met' if hit else 'NOT met'})"
                )
            ok &= hit
        met += ok
        lines.append(f"  - training seed {seed}: {'; '.join(parts)} → {'met' if ok else 'NOT met'}.")
    ok = met == len(seeds) and len(seeds) >= MIN_TRAIN_SEEDS
    head = (
        f"- **{algo} (final, per training seed)**: {met} of {len(seeds)} training seeds meet the score-round target "
        f"(every one of at least {MIN_TRAIN_SEEDS} must) → target {'met' if ok else 'NOT met'}."
    )
    return [head, *lines]


# ---- learning curves ----------------------------------------------------------------------------------------


def learning_curves(models: Sequence[Model]) -> list[tuple[str, int, int, float]]:
    """(algo, training seed, step, validation average JCT) from each final model's training run folder."""
    from agents.checkpoint import load_checkpoint

    points = []
    for m in models:
        if m.kind != "final":
            continue
        log_dir = (load_checkpoint(m.path).get("run_config") or {}).get("log_dir")
        if not log_dir or not Path(log_dir).is_dir():
            continue
        from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

        acc = EventAccumulator(log_dir, size_guidance={"scalars": 0})
        acc.Reload()
        if "eval/val_avg_jct_s" not in acc.Tags().get("scalars", []):
            continue
        steps: dict[int, float] = {}
        for event in acc.Scalars("eval/val_avg_jct_s"):
            steps[int(event.step)] = float(event.value)  # a resumed run may log a step twice: keep the last
        points += [(m.algo, m.seed, step, value) for step, value in sorted(steps.items())]
    return points


def validation_heuristics(models: Sequence[Model]) -> dict[str, float]:
    """Each heuristic's average JCT on the validation seeds of the first final model's training (the curves' own
    scenarios), as reference lines; {} when that training validated nothing."""
    from agents.checkpoint import load_checkpoint
    from config import run_config_from_dict
    from metrics.summary import summarize
    from scenario.build import build_scenario

    finals = [m for m in models if m.kind == "final"]
    saved = (load_checkpoint(finals[0].path).get("run_config") or {}) if finals else {}
    if not saved.get("validation_seeds"):
        return {}
    train_cfg = run_config_from_dict(saved)
    scores: dict[str, list[float]] = {name: [] for name in POLICIES}
    for seed in train_cfg.validation_seeds:
        sc = build_scenario(train_cfg, seed)
        for name in POLICIES:
            sim = sc.simulator()
            sim.run(make_policy(name, seed=sc.seed, matrix=sc.throughput))
            scores[name].append(summarize(sim.result(name, seed)).avg_jct_s)
    return {name: float(np.mean(v)) for name, v in scores.items()}


def plot_curves(
    points: Sequence[tuple[str, int, int, float]], heuristics: dict[str, float], path: Path
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    algos = sorted({p[0] for p in points})
    fig, axes = plt.subplots(1, len(algos), figsize=(5.5 * len(algos), 4.2), squeeze=False)
    for ax, algo in zip(axes[0], algos, strict=True):
        mine = [p[3] for p in points if p[0] == algo]
        for seed in sorted({p[1] for p in points if p[0] == algo}):
            xs = [p[2] for p in points if p[0] == algo and p[1] == seed]
            ys = [p[3] for p in points if p[0] == algo and p[1] == seed]
            ax.plot(xs, ys, marker=".", linewidth=1, label=f"seed {seed}")
        # Heuristics far above every learner point (FCFS is often 10x) would squash the curves: they are
        # listed in a corner instead of drawn.
        top = 1.5 * max(mine)
        shown = sorted((v, name) for name, v in heuristics.items() if v <= top)
        off = sorted((v, name) for name, v in heuristics.items() if v > top)
        colours = plt.get_cmap("Dark2")
        for k, (value, name) in enumerate(shown):
            ax.axhline(
                value, linestyle="--", linewidth=0.9, color=colours(k % 8), label=f"{name} {value:,.0f}"
            )
        if off:
            text = "off scale: " + ", ".join(f"{name} {value:,.0f}" for value, name in off)
            ax.text(0.01, 0.99, text, transform=ax.transAxes, va="top", fontsize=7, color="grey")
        ax.set_title(f"{algo}: validation avg JCT (dashed: heuristics)", fontsize=10)
        if algo in SCORER_ALGOS:  # a score-round search logs once per generation
            ax.set_xlabel("generations")
        else:
            ax.set_xlabel("training steps (thousands)")
            ax.xaxis.set_major_formatter(lambda x, _: f"{x / 1000:g}")
        ax.set_ylabel("avg JCT (s)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, ncol=2, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, format="png", metadata={"Software": None})
    plt.close(fig)
