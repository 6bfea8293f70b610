"""What training episodes are drawn from (`--train_mix`): the configured scenario, or a documented mixture of cluster
compositions, difficulties, loads and real-trace windows; plus the held-out compositions and later trace windows
that evaluation uses and training never sees.

Every draw is a pure function of the episode's scenario seed (`np.random.default_rng([MIX_SALT, seed])`), so a
training run is reproducible and two training seeds never share an episode (their scenario seeds differ).

`--train_mix synthetic`, per episode:
- the cluster: with probability PRESET_PROBABILITY one of the difficulty presets' clusters (easy, medium, hard,
  uniformly), else a random composition: TYPES_PER_CLUSTER distinct types from TRAIN_TYPES, each with
  NODES_PER_TYPE nodes of GPUS_PER_NODE GPUs (both uniform). A composition equal to one of HELD_OUT_CLUSTERS (as a
  multiset of (type, nodes, GPUs per node)) is drawn again, so those stay unseen;
- the jobs: NUM_JOBS (uniform integer) jobs of the configured synthetic profile at a target load uniform in LOAD.
`--train_mix synthetic+traces` (needs `--train_windows`): with probability TRACE_PROBABILITY the episode is instead a
window of WINDOW_JOBS consecutive jobs of one of the traces (uniformly), starting at a uniform job among those
arriving in the first TRAIN_FRACTION of the trace's time span, cut at that point; evaluation windows
(`later_window`) start at it. On a trace the seed changes only the runtime estimates, so evaluation uses later
windows, never other seeds of a training window.
`--train_mix traces` (needs `--train_windows`): every episode is such a window (no synthetic episodes).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from config import DIFFICULTIES, RunConfig, UserError
from scenario.build import TRACE_TYPES, Scenario, build_scenario, known_runtimes
from sim.cluster_spec import parse_cluster_spec
from sim.job import Workload

MIXES = ("none", "synthetic", "synthetic+traces", "traces")
TRACE_MIXES = ("synthetic+traces", "traces")
"""the mixes with trace windows (they need --train_windows)"""
MIX_SALT = (
    0x6D6978  # "mix": keeps the mixture's draws apart from the workload generator's stream of the same seed
)
TRAIN_TYPES = ("A100-80GB", "V100-32GB", "H100", "T4", "A10")
TYPES_PER_CLUSTER = (1, 4)  # inclusive
NODES_PER_TYPE = (1, 6)  # inclusive
GPUS_PER_NODE = (4, 8)
NUM_JOBS = (200, 1200)  # inclusive
LOAD = (0.5, 1.1)
PRESET_PROBABILITY = 0.5
TRACE_PROBABILITY = 0.5
TRAIN_FRACTION = 0.7
"""training windows lie in the first 70 % of a trace's arrival span; evaluation windows start after it"""
WINDOW_JOBS = (300, 1000)  # inclusive
HELD_OUT_CLUSTERS = (
    "6xV100-32GB:8,3xA10:4,2xH100:8",
    "5xT4:4,3xA100-80GB:8",
    "2xH100:8,6xA10:4,4xV100-32GB:8,2xT4:4",
)
"""compositions of the `clusters` evaluation set (evaluation/sets.py): never drawn for training"""
_DAY_S = 86_400.0


@dataclass(frozen=True)
class TraceSource:
    """One `--train_windows` entry, FORMAT=PATH[@CLUSTER][#MAX_JOBS]: the trace, the cluster spec it runs on
    (default: the trace's own or one sized to it) and how many of its first jobs make up "the trace" (default: all).
    Training and evaluation must name a trace identically: the split at TRAIN_FRACTION is computed on these jobs."""

    workload_type: str
    path: str
    cluster: str | None = None
    max_jobs: int | None = None

    @classmethod
    def parse(cls, text: str) -> TraceSource:
        kind, sep, rest = text.partition("=")
        rest, _, max_jobs = rest.partition("#")
        path, _, cluster = rest.partition("@")
        kind = kind.strip().lower()
        if (
            not sep
            or not path.strip()
            or kind not in TRACE_TYPES
            or (max_jobs and not max_jobs.strip().isdigit())
        ):
            raise UserError(
                f"--train_windows {text!r}: expected FORMAT=PATH[@CLUSTER][#MAX_JOBS] with FORMAT one of "
                f"{', '.join(TRACE_TYPES)}, e.g. itp=cluster04.csv@40xV100:8"
            )
        return cls(kind, path.strip(), cluster.strip() or None, int(max_jobs) if max_jobs.strip() else None)


def check_mix(cfg: RunConfig) -> None:
    """The mixture options, checked before any work (UserError)."""
    mix = cfg.mix
    if mix.train_mix not in MIXES:
        raise UserError(f"--train_mix must be one of {', '.join(MIXES)}, got {mix.train_mix!r}")
    if mix.train_mix != "none" and cfg.workload.workload_type != "synthetic":
        raise UserError(
            f"--train_mix {mix.train_mix} draws synthetic clusters and jobs; the workload is "
            f"{cfg.workload.workload_type} (traces join the mix through --train_windows)"
        )
    if mix.train_mix != "none" and (cfg.cluster.spec or cfg.cluster.path):
        raise UserError(
            f"--train_mix {mix.train_mix} draws the clusters itself; remove --cluster/--cluster_path"
        )
    if mix.train_mix in TRACE_MIXES and not mix.train_windows:
        raise UserError(f"--train_mix {mix.train_mix} needs --train_windows FORMAT=PATH[@CLUSTER],...")
    if mix.train_windows and mix.train_mix not in TRACE_MIXES:
        raise UserError("--train_windows has no effect without --train_mix synthetic+traces or traces")
    for text in mix.train_windows:
        source = TraceSource.parse(text)
        if not Path(source.path).exists():  # a damaged file is reported when the first window is read
            raise UserError(f"--train_windows {text}: no such file or directory {source.path}")


def _canonical(spec_text: str) -> tuple:
    spec = parse_cluster_spec(spec_text)
    counts: dict[tuple[str, int], int] = {}
    for node in spec.nodes:
        key = (node.gpu_type, node.num_gpus)
        counts[key] = counts.get(key, 0) + 1
    return tuple(sorted((t, n, g) for (t, g), n in counts.items()))


@functools.cache
def _held_out() -> frozenset:
    return frozenset(_canonical(s) for s in HELD_OUT_CLUSTERS)


def random_cluster(rng: np.random.Generator) -> str:
    """A training cluster spec: a preset's (PRESET_PROBABILITY) or a random composition, never a held-out one."""
    if rng.random() < PRESET_PROBABILITY:
        return DIFFICULTIES[("easy", "medium", "hard")[int(rng.integers(3))]].cluster
    while True:
        k = int(rng.integers(TYPES_PER_CLUSTER[0], TYPES_PER_CLUSTER[1] + 1))
        types = [TRAIN_TYPES[i] for i in sorted(rng.choice(len(TRAIN_TYPES), size=k, replace=False))]
        parts = []
        for t in types:
            nodes = int(rng.integers(NODES_PER_TYPE[0], NODES_PER_TYPE[1] + 1))
            gpus = GPUS_PER_NODE[int(rng.integers(len(GPUS_PER_NODE)))]
            parts.append(f"{nodes}x{t}:{gpus}")
        spec = ",".join(parts)
        if _canonical(spec) not in _held_out():
            return spec


def synthetic_config(cfg: RunConfig, seed: int) -> RunConfig:
    """The RunConfig of a synthetic mixture episode: drawn cluster, job count and load (documented above)."""
    rng = np.random.default_rng([MIX_SALT, seed])
    spec = random_cluster(rng)
    num_jobs = int(rng.integers(NUM_JOBS[0], NUM_JOBS[1] + 1))
    load = float(rng.uniform(*LOAD))
    workload = dataclasses.replace(cfg.workload, num_jobs=num_jobs, load_factor=load)
    return dataclasses.replace(cfg, cluster=dataclasses.replace(cfg.cluster, spec=spec), workload=workload)


def mixture_scenario(cfg: RunConfig, seed: int) -> Scenario:
    """The training scenario of scenario seed `seed` under cfg.mix (for `none`, build_scenario(cfg, seed))."""
    mix = cfg.mix.train_mix
    if mix == "none":
        return build_scenario(cfg, seed)
    rng = np.random.default_rng([MIX_SALT, seed, 1])
    if mix in TRACE_MIXES:
        drawn = rng.random()  # under either trace mix, so that both pick the same window for a seed
        if mix == "traces" or drawn < TRACE_PROBABILITY:
            sources = [TraceSource.parse(t) for t in cfg.mix.train_windows]
            source = sources[int(rng.integers(len(sources)))]
            return training_window(cfg, source, seed, rng)
    return build_scenario(synthetic_config(cfg, seed), seed)


# ---- trace windows ---------------------------------------------------------------------------------------


def trace_config(cfg: RunConfig, source: TraceSource) -> RunConfig:
    """cfg reading the whole trace of `source` (no window, no job limit) on its cluster."""
    workload = dataclasses.replace(
        cfg.workload,
        workload_type=source.workload_type,
        workload_path=source.path,
        num_jobs=None,
        load_factor=None,
        trace_start_s=None,
        trace_end_s=None,
        max_jobs=source.max_jobs,
    )
    cluster = dataclasses.replace(cfg.cluster, spec=source.cluster, path=None)
    return dataclasses.replace(cfg, workload=workload, cluster=cluster)


@functools.cache
def _trace_scenario_cached(cfg: RunConfig, source: TraceSource) -> Scenario:
    return build_scenario(trace_config(cfg, source), 0)


def _trace_scenario(cfg: RunConfig, source: TraceSource) -> Scenario:
    """The whole trace as a scenario, read once per process however many episodes, runs or algos use it (cached
    on the only settings it depends on)."""
    return _trace_scenario_cached(RunConfig(cluster=cfg.cluster, workload=cfg.workload, sim=cfg.sim), source)


def split_index(jobs) -> int:
    """Index of the first job arriving at or after TRAIN_FRACTION of the trace's arrival span."""
    first, last = jobs[0].arrival_s, jobs[-1].arrival_s
    split = first + TRAIN_FRACTION * (last - first)
    return next((i for i, j in enumerate(jobs) if j.arrival_s >= split), len(jobs))


def _window(cfg: RunConfig, whole: Scenario, lo: int, hi: int, seed: int, name: str) -> Scenario:
    """Jobs lo..hi-1 of the trace as a scenario: arrivals shifted back by whole days (time of day kept), runtime
    estimates drawn for `seed` as build_scenario would."""
    jobs = whole.workload.jobs[lo:hi]
    shift = math.floor(jobs[0].arrival_s / _DAY_S) * _DAY_S
    shifted = tuple(dataclasses.replace(j, arrival_s=j.arrival_s - shift) for j in jobs)
    workload = Workload(name, shifted, dict(whole.workload.report, window_jobs=[lo, hi]))
    estimate_rng = np.random.default_rng(seed).spawn(2)[1]
    known = known_runtimes(workload, cfg.sim, estimate_rng)
    note = f"{whole.cluster_note}; jobs {lo}-{hi - 1} of the trace"
    return Scenario(workload, whole.cluster, note, whole.layout, known, whole.multi_node_runtime_factor, seed)


def training_window(cfg: RunConfig, source: TraceSource, seed: int, rng: np.random.Generator) -> Scenario:
    """A window of WINDOW_JOBS consecutive jobs within the first TRAIN_FRACTION of the trace's time."""
    whole = _trace_scenario(cfg, source)
    split = split_index(whole.workload.jobs)
    size = min(int(rng.integers(WINDOW_JOBS[0], WINDOW_JOBS[1] + 1)), split)
    lo = int(rng.integers(0, split - size + 1))
    return _window(cfg, whole, lo, lo + size, seed, f"{whole.workload.name}-train{lo}")


def later_window(cfg: RunConfig, source: TraceSource, index: int, num_jobs: int, seed: int = 0) -> Scenario:
    """Evaluation window `index` (0, 1, ...): jobs split + index*num_jobs onwards, after every training window."""
    whole = _trace_scenario(cfg, source)
    jobs = whole.workload.jobs
    lo = split_index(jobs) + index * num_jobs
    if lo >= len(jobs):
        raise UserError(
            f"{source.path}: evaluation window {index} of {num_jobs} jobs starts after the trace's last job "
            f"({len(jobs) - split_index(jobs)} jobs after the training part)"
        )
    hi = min(lo + num_jobs, len(jobs))
    return _window(cfg, whole, lo, hi, seed, f"{whole.workload.name}-later{index}")
