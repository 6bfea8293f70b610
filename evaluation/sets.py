"""The held-out evaluation sets of `--mode report`: which scenarios each set holds, and how each is built.

No set shares a scenario with training: synthetic test seeds lie far below the training range (agents/trainer.py)
and apart from the validation seeds (200-204); the `clusters` compositions are never drawn by the training mixture
(scenario.mixtures.HELD_OUT_CLUSTERS); trace sets are windows after the first TRAIN_FRACTION of each trace's time, which
is all `--train_windows` trains on (the trace strings here and in a study's --train_windows must name the same
file, cluster and job limit, so both compute the same split); the `gavel` set (only with --job_types) runs the test
seeds on a K80/P100/V100 cluster, types the training mixture never draws.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from config import DIFFICULTIES, RunConfig, UserError
from scenario.build import Scenario, build_scenario
from scenario.mixtures import HELD_OUT_CLUSTERS, TraceSource, later_window

TEST_SEEDS = tuple(range(900, 910))
"""default scenario seeds of the synthetic sets (seeds nobody tuned on; validation uses 200-204)"""
CLUSTER_SEEDS = 3
"""the `clusters` set runs the first CLUSTER_SEEDS test seeds on each held-out composition"""
TRACE_WINDOWS = 3
TRACE_WINDOW_JOBS = 1000
TRACES = {
    "itp": "itp=microsoft-itp-elasticflow-2021/cluster04.csv@40xV100:8",
    "google": "google=google-2011@16xA100-80GB:8",
    "swf": "swf=swf-pwa/RICC-2010-2.swf.gz#60000",
}
"""trace sets: FORMAT=PATH[@CLUSTER][#MAX_JOBS] relative to --traces_dir. ITP on the trace table's 40xV100:8; Google
per task on 128 A100s (its default cluster, sized to the whole trace, leaves a 1,000-task window without any
queue); RICC's first 60,000 jobs on its default cluster"""
SYNTHETIC_SETS = ("medium", "hard", "clusters")
GAVEL_CLUSTER = "4xV100-32GB:8,4xP100:8,4xK80:8"
"""the `gavel` set's cluster: the three GPU types of Gavel's throughput matrix, where each job type has its own
speed per GPU type (with --job_types gavel; on the other sets' types only spread jobs' speeds differ per job)"""
TYPED_SETS = ("gavel",)
"""sets that need --job_types (never in the default list): the medium preset's jobs at its load on GAVEL_CLUSTER"""
ALL_SETS = (*SYNTHETIC_SETS, *TYPED_SETS, *TRACES)


@dataclass(frozen=True)
class Case:
    """One scenario of a set: a synthetic seed (on a held-out composition for `clusters`) or a later trace window."""

    set_name: str
    label: str
    seed: int
    cluster: str | None = None
    window: int | None = None


def default_sets(traces_dir: str | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the default sets to evaluate, the trace sets left out because their file is not under traces_dir): without
    --report_sets, a trace that is absent is reported as not evaluated instead of failing the whole report."""
    if not traces_dir:
        return SYNTHETIC_SETS, ()
    missing = tuple(n for n in TRACES if not Path(trace_source(n, traces_dir).path).exists())
    return (*SYNTHETIC_SETS, *(n for n in TRACES if n not in missing)), missing


def check_sets(names: tuple[str, ...], traces_dir: str | None, job_types: str | None = None) -> None:
    unknown = [n for n in names if n not in ALL_SETS]
    if unknown or not names:
        raise UserError(
            f"--report_sets: unknown set(s) {', '.join(unknown) or '(none given)'}; choose from {', '.join(ALL_SETS)}"
        )
    typed = [n for n in names if n in TYPED_SETS]
    if typed and job_types is None:
        raise UserError(
            f"--report_sets {','.join(typed)}: that set gives jobs their own speed per GPU type; add --job_types gavel"
        )
    needs = [n for n in names if n in TRACES]
    if needs and not traces_dir:
        raise UserError(
            f"--report_sets {','.join(needs)} read traces: give --traces_dir (e.g. ../shared/traces)"
        )
    for name in needs:
        path = trace_source(name, traces_dir).path
        if not Path(path).exists():
            raise UserError(f"--report_sets {name}: no trace at {path} (--traces_dir {traces_dir})")


def trace_source(name: str, traces_dir: str) -> TraceSource:
    source = TraceSource.parse(TRACES[name])
    return dataclasses.replace(source, path=str(Path(traces_dir) / source.path))


def cases(name: str, seeds: tuple[int, ...]) -> list[Case]:
    if name in ("medium", "hard"):
        return [Case(name, f"seed{s}", s) for s in seeds]
    if name in TYPED_SETS:
        return [Case(name, f"seed{s}", s, cluster=GAVEL_CLUSTER) for s in seeds]
    if name == "clusters":
        return [
            Case(name, f"c{k}-seed{s}", s, cluster=spec)
            for k, spec in enumerate(HELD_OUT_CLUSTERS)
            for s in seeds[:CLUSTER_SEEDS]
        ]
    return [Case(name, f"later{w}", 0, window=w) for w in range(TRACE_WINDOWS)]


def scenario(cfg: RunConfig, case: Case, traces_dir: str | None, num_jobs: int | None) -> Scenario:
    """The case's scenario under cfg's runtime information and simulation options. `num_jobs` (--num_jobs)
    overrides every set's job count (synthetic jobs and trace window length)."""
    if case.window is not None:
        source = trace_source(case.set_name, traces_dir)
        return later_window(cfg, source, case.window, num_jobs or TRACE_WINDOW_JOBS, case.seed)
    difficulty = "medium" if case.set_name in ("clusters", *TYPED_SETS) else case.set_name
    preset = DIFFICULTIES[difficulty]
    workload = dataclasses.replace(
        cfg.workload,
        difficulty=difficulty,
        num_jobs=num_jobs or preset.num_jobs,
        load_factor=preset.load_factor,
    )
    cluster = dataclasses.replace(cfg.cluster, spec=case.cluster, path=None)
    return build_scenario(dataclasses.replace(cfg, workload=workload, cluster=cluster), case.seed)
