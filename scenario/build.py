"""Turns a RunConfig and a seed into one runnable scenario: workload, cluster, and the runtimes policies may know."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from config import DIFFICULTIES, RunConfig, SimConfig, UserError, WorkloadConfig
from sim.catalog import CATALOG, resolve_gpu_type
from sim.cluster import ClusterLayout
from sim.cluster_spec import SPEC_FORM, ClusterSpec, parse_cluster_spec
from sim.job import FULL_GPU_MILLI, Workload
from sim.limits import MAX_ARRIVAL_S, MAX_GPUS, MAX_JOBS, MAX_RUNTIME_S, TIME_SCALE_RANGE, time_problem
from sim.power import PowerModel
from sim.simulator import Simulator
from sim.throughput import ThroughputError, ThroughputMatrix, load_matrix
from workloads.profiles import PROFILE_NAMES
from workloads.trace_formats import TRACE_FORMATS

TRACE_TYPES = TRACE_FORMATS
WORKLOAD_TYPES = ("synthetic", "csv", "dispatch", *TRACE_TYPES)
# --multi_node_factor above this is a typo, not a network (Gavel: median 2.4x slower spread over servers)
MAX_MULTI_NODE_FACTOR = 100.0
# synthetic target load: outside this the arrival window under- or overflows (1e-308) and nothing is learned
LOAD_FACTOR_RANGE = (0.001, 100.0)


@dataclass(frozen=True)
class Scenario:
    workload: Workload
    cluster: ClusterSpec
    cluster_note: str
    layout: ClusterLayout
    known_runtime_s: np.ndarray
    """per job: what policies (and agents) may know of its reference runtime (see SimConfig.runtime_info)"""
    multi_node_runtime_factor: float
    seed: int
    restore_overhead_s: float = 0.0
    """what a preempted job pays when started again (SimConfig.preempt_overhead_s)"""
    throughput: ThroughputMatrix | None = None
    """--job_types: each typed job's speed per GPU type comes from this matrix (sim/throughput.py)"""

    def simulator(self, power: PowerModel | None = None) -> Simulator:
        """A fresh simulator of this scenario; with `power`, it tracks node power states (sim/power.py)."""
        return Simulator(
            self.workload,
            self.layout,
            self.known_runtime_s,
            self.multi_node_runtime_factor,
            self.restore_overhead_s,
            self.throughput,
            power=power,
        )


def check_options(cfg: RunConfig) -> None:
    """Reject contradictory or incomplete option combinations with a clear message."""
    w = cfg.workload
    if w.workload_type not in WORKLOAD_TYPES:
        raise UserError(
            f"unknown --workload_type {w.workload_type!r}; choose one of {', '.join(WORKLOAD_TYPES)}"
        )
    if w.difficulty not in DIFFICULTIES:
        raise UserError(f"unknown --difficulty {w.difficulty!r}; choose one of {', '.join(DIFFICULTIES)}")
    if w.workload_type == "synthetic":
        if w.workload_path:
            raise UserError(
                "--workload_path needs --workload_type csv or a trace type (the default is synthetic)"
            )
    else:
        if not w.workload_path:
            raise UserError(f"--workload_type {w.workload_type} needs --workload_path")
        if w.num_jobs is not None or w.load_factor is not None:
            raise UserError(
                "--num_jobs/--load_factor shape the synthetic generator only; for a file use --max_jobs/--time_scale"
            )
    if w.synthetic_profile not in PROFILE_NAMES:
        raise UserError(
            f"unknown --synthetic_profile {w.synthetic_profile!r}; choose one of {', '.join(PROFILE_NAMES)}"
        )
    for option, value in (("--num_jobs", w.num_jobs), ("--max_jobs", w.max_jobs)):
        if value is not None and value <= 0:
            raise UserError(f"{option} must be > 0, got {value}")
    if w.cpu_job_gpus <= 0:
        raise UserError(f"--cpu_job_gpus must be > 0, got {w.cpu_job_gpus}")
    # `not lo <= x` (rather than `x < lo`) also catches NaN, which compares false with everything
    if w.load_factor is not None and not (LOAD_FACTOR_RANGE[0] <= w.load_factor <= LOAD_FACTOR_RANGE[1]):
        raise UserError(
            f"--load_factor must be between {LOAD_FACTOR_RANGE[0]:g} and {LOAD_FACTOR_RANGE[1]:g}, got {w.load_factor}"
        )
    low, high = TIME_SCALE_RANGE
    if not low <= w.time_scale <= high:
        raise UserError(
            f"--time_scale must be between {low:g} and {high:g} (arrival times are divided by it), got {w.time_scale}"
        )
    if w.num_jobs is not None and w.num_jobs > MAX_JOBS:
        raise UserError(f"--num_jobs must be at most {MAX_JOBS:,} (sim/limits.py), got {w.num_jobs:,}")
    for option, value in (("--trace_start", w.trace_start_s), ("--trace_end", w.trace_end_s)):
        if value is not None and not math.isfinite(value):
            raise UserError(f"{option} must be a finite number of seconds, got {value}")
    if w.trace_start_s is not None and w.trace_end_s is not None and w.trace_end_s <= w.trace_start_s:
        raise UserError(f"--trace_end ({w.trace_end_s:g}) must be after --trace_start ({w.trace_start_s:g})")
    if cfg.cluster.spec is not None and not cfg.cluster.spec.strip():
        raise UserError(f"empty --cluster; expected {SPEC_FORM}")
    if cfg.cluster.spec and cfg.cluster.path:
        raise UserError("give either --cluster or --cluster_path, not both")
    factor = cfg.cluster.multi_node_runtime_factor
    if not (1.0 <= factor <= MAX_MULTI_NODE_FACTOR):
        raise UserError(
            f"--multi_node_factor must be between 1 (a job never runs faster across nodes) and "
            f"{MAX_MULTI_NODE_FACTOR:g}, got {factor}"
        )
    if cfg.sim.runtime_info not in ("oracle", "estimate"):
        raise UserError("--runtime_info must be oracle or estimate")
    if w.job_types is not None and cfg.cluster.uniform_speed:
        raise UserError(
            "--job_types gives each job its own speed per GPU type and --uniform_speed one speed for all; "
            "choose one"
        )
    if w.job_types is not None and (w.workload_type in TRACE_TYPES or w.workload_type == "dispatch"):
        raise UserError(
            f"--job_types works with synthetic and jobs CSV workloads, not a trace ({w.workload_type}): a trace's "
            "durations are converted with its recorded GPU type's catalog speed"
        )


def _load_cluster_path(path: str) -> ClusterSpec:
    from workloads.traces import load_trace_cluster

    if not Path(path).exists():
        raise UserError(f"--cluster_path {path}: no such file")
    if Path(path).is_dir():
        raise UserError(f"--cluster_path {path}: is a folder; give the machine file itself")
    return load_trace_cluster(path)


def _workload(cfg: RunConfig, cluster: ClusterSpec | None, rng: np.random.Generator):
    """(workload, cluster brought by the trace or None, default cluster or None, note)."""
    w: WorkloadConfig = cfg.workload
    if w.workload_type == "synthetic":
        from workloads.calibrated import generate_profile
        from workloads.profiles import LEGACY, PROFILES
        from workloads.synthetic import generate_synthetic

        preset = DIFFICULTIES[w.difficulty]
        spec = cluster or parse_cluster_spec(preset.cluster)
        num_jobs = w.num_jobs or preset.num_jobs
        load = w.load_factor or preset.load_factor
        if w.synthetic_profile == LEGACY:  # the original generator, byte for byte
            return (
                generate_synthetic(spec, num_jobs, load, rng, name=f"synthetic-{w.difficulty}"),
                None,
                None,
                "",
            )
        profile = PROFILES[w.synthetic_profile]
        name = f"synthetic-{w.synthetic_profile}-{w.difficulty}"
        return generate_profile(spec, num_jobs, load, rng, profile, name=name), None, None, ""
    if not Path(w.workload_path).exists():
        raise UserError(f"--workload_path {w.workload_path}: no such file or directory")
    if w.workload_type == "csv":
        from workloads.csv_jobs import load_jobs_csv

        if Path(w.workload_path).is_dir():
            raise UserError(f"--workload_path {w.workload_path}: is a folder; a jobs CSV is one file")

        return load_jobs_csv(w.workload_path), None, None, ""
    if w.workload_type == "dispatch":  # a --mode dispatch run folder: its attempts on its own GPUs
        from workloads.dispatch_log import load_dispatch_log

        workload, box, note = load_dispatch_log(w.workload_path)
        return workload, box, None, note
    from workloads.traces import load_trace

    t = load_trace(w)
    return t.workload, t.cluster, t.default_cluster, t.cluster_note


def _os_error(cfg: RunConfig, e: OSError) -> str:
    """One line naming the option and file an OSError while loading inputs is about, and what is wrong."""
    if isinstance(e, IsADirectoryError):
        problem = f"is a folder; --workload_type {cfg.workload.workload_type} reads a file here"
    else:
        problem = f"cannot read it ({e.strerror or e})"
    where = Path(e.filename).resolve() if e.filename else None
    for option, value in (
        ("--workload_path", cfg.workload.workload_path),
        ("--cluster_path", cfg.cluster.path),
    ):
        given = Path(value).resolve() if value else None
        if given is not None and where is not None and (where == given or given in where.parents):
            return f"{option} {value}{'' if where == given else f' ({e.filename})'}: {problem}"
    return f"{e.filename or cfg.workload.workload_path}: {problem}"


def _to_reference_runtimes(workload: Workload, layout: ClusterLayout, recorded: str | None, note: str):
    """Trace durations were measured on the trace's hardware: convert them to reference (A100) runtimes so that
    on the recorded type a job runs exactly its recorded duration (faster/slower types scale by speed). A job
    whose lifetime does not scale with speed (`speed_scaled=False`, e.g. an inference service) keeps its
    recorded duration as is: it lasts that long on every type.

    The recorded type is --recorded_gpu_type, else the cluster's most common GPU type.
    """
    if recorded is None:
        counts = {t: n for t, n in zip(layout.type_names, layout.type_num_gpus, strict=True)}
        recorded = max(counts, key=lambda t: (counts[t], -layout.type_names.index(t)))
    else:
        try:
            recorded = resolve_gpu_type(recorded)
        except ValueError as e:
            raise UserError(f"--recorded_gpu_type: {e}") from None
    speed = 1.0 if layout.type_speed == [1.0] * len(layout.type_speed) else CATALOG[recorded].speed
    note = f"{note}; trace durations taken as measured on {recorded} (speed {speed:g})"
    report = dict(workload.report, recorded_gpu_type=recorded, recorded_speed=speed)
    if speed == 1.0:
        return Workload(workload.name, workload.jobs, report), note
    jobs = tuple(
        replace(
            j,
            runtime_s=j.runtime_s * speed,
            estimate_s=None if j.estimate_s is None else j.estimate_s * speed,
        )
        if j.speed_scaled
        else j
        for j in workload.jobs
    )
    return Workload(workload.name, jobs, report), note


def kill_at_estimate(workload: Workload) -> Workload:
    """Cap each job's runtime at its requested time (estimate_s), as an HPC scheduler ends a job at its limit.

    A capped job runs exactly its request and is recorded with trace_status Killed; jobs within their request
    and jobs without one are unchanged. Done here, when the scenario is assembled, so the simulator replays
    the capped runtime like any recorded one.
    """
    from workloads.calibrated import KILLED

    if not any(j.estimate_s is not None and j.estimate_s > 0 for j in workload.jobs):
        raise UserError(
            f"--kill_at_estimate: workload {workload.name!r} has no requested times (use a synthetic profile "
            "other than legacy, a trace with requested times such as SWF, or a jobs CSV with an estimate column)"
        )
    jobs = tuple(
        replace(j, runtime_s=j.estimate_s, trace_status=KILLED)
        if j.estimate_s is not None and 0 < j.estimate_s < j.runtime_s
        else j
        for j in workload.jobs
    )
    killed = sum(a is not b for a, b in zip(jobs, workload.jobs, strict=True))
    return Workload(workload.name, jobs, dict(workload.report, killed_at_estimate=killed))


def known_runtimes(workload: Workload, sim: SimConfig, rng: np.random.Generator) -> np.ndarray:
    """The reference runtime each job is believed to have.

    oracle: the true runtime. estimate: the job's user estimate where the workload has one, else the true
    runtime times a log-normal factor with median `estimate_median_factor` and sigma `estimate_sigma` (users
    mostly over-estimate, sometimes under-estimate).
    """
    true_s = np.array([j.runtime_s for j in workload.jobs], dtype=float)
    if sim.runtime_info == "oracle":
        return true_s
    noisy = true_s * rng.lognormal(np.log(sim.estimate_median_factor), sim.estimate_sigma, size=true_s.size)
    given = np.array(
        [j.estimate_s if j.estimate_s is not None else np.nan for j in workload.jobs], dtype=float
    )
    return np.where(np.isnan(given) | (given <= 0), noisy, given)


def _not_utf8_input(cfg: RunConfig) -> str:
    """The message for an input file that is not UTF-8 text: the first such file, line and byte."""
    from workloads.traces.common import first_undecodable, not_utf8

    for given in (cfg.cluster.path, cfg.workload.workload_path):
        if given and Path(given).is_file() and first_undecodable(Path(given)) is not None:
            return str(not_utf8(Path(given)))
    return "an input file is not UTF-8 text; save it as UTF-8"


def build_scenario(cfg: RunConfig, seed: int) -> Scenario:
    """The scenario for `seed`: the same seed always gives the same jobs, cluster and estimates."""
    check_options(cfg)
    workload_rng, estimate_rng = np.random.default_rng(seed).spawn(2)
    user_cluster: ClusterSpec | None = None
    note = ""
    try:
        if cfg.cluster.spec:
            user_cluster = parse_cluster_spec(cfg.cluster.spec)
            note = f"--cluster {cfg.cluster.spec}"
        elif cfg.cluster.path:
            user_cluster = _load_cluster_path(cfg.cluster.path)
            note = f"--cluster_path {cfg.cluster.path}"
        workload, trace_cluster, default_cluster, trace_note = _workload(cfg, user_cluster, workload_rng)
    except UserError:
        raise
    except UnicodeDecodeError:  # a reader that decodes text itself: find the file and line here, once for all
        raise UserError(_not_utf8_input(cfg)) from None
    except OSError as e:  # a folder where a file is read, unreadable, a damaged .gz, ...
        raise UserError(_os_error(cfg, e)) from None
    except (ValueError, EOFError) as e:
        raise UserError(str(e)) from None
    if user_cluster is not None:
        cluster = user_cluster
    elif trace_cluster is not None:
        cluster, note = trace_cluster, trace_note or "the trace's own cluster"
    elif default_cluster is not None:
        cluster, note = default_cluster, trace_note or "default cluster sized to the trace"
    else:
        preset = DIFFICULTIES[cfg.workload.difficulty]
        cluster = parse_cluster_spec(preset.cluster)
        note = f"difficulty preset {cfg.workload.difficulty}: {preset.cluster}"
    if not workload.jobs:
        dropped = workload.report.get("filtered") or {}
        why = "; ".join(f"{n} {reason}" for reason, n in dropped.items() if n) or "no job rows"
        raise UserError(
            f"workload {workload.name!r} has no jobs after filtering ({why}); check --trace_start/--trace_end "
            "(seconds on the trace's clock), --max_jobs and --exclude_failed"
        )
    if cluster.num_gpus > MAX_GPUS:
        raise UserError(
            f"cluster {cluster.name} has {cluster.num_gpus:,} GPUs; at most {MAX_GPUS:,} are simulated"
        )
    check_job_times(workload)
    layout = shared_layout(cluster, cfg.cluster.uniform_speed)
    if cfg.workload.workload_type in TRACE_TYPES:
        workload, note = _to_reference_runtimes(workload, layout, cfg.workload.recorded_gpu_type, note)
    if cfg.workload.kill_at_estimate:
        workload = kill_at_estimate(workload)
    throughput = None
    if cfg.workload.job_types is not None:
        workload, throughput = _with_job_types(cfg, workload, layout, workload_rng)
    elif any(j.job_type for j in workload.jobs):
        raise UserError(
            f"workload {workload.name!r} gives jobs a job_type; add --job_types (gavel or a matrix file) for "
            "their speeds, or remove the column"
        )
    known = known_runtimes(workload, cfg.sim, estimate_rng)
    return Scenario(
        workload,
        cluster,
        note,
        layout,
        known,
        cfg.cluster.multi_node_runtime_factor,
        seed,
        cfg.sim.preempt_overhead_s,
        throughput,
    )


@lru_cache(maxsize=8)
def shared_layout(cluster: ClusterSpec, uniform_speed: bool) -> ClusterLayout:
    """The layout of `cluster`, one object for every scenario built on an equal cluster: a layout never changes
    but for its memos (each job shape's eligible nodes and placement options, the same for every scenario), which
    an env would otherwise rebuild at every reset."""
    return ClusterLayout(cluster, uniform_speed=uniform_speed)


def check_job_times(workload: Workload) -> None:
    """Every job's arrival and runtime within sim/limits.py's ranges (the loaders check their rows with file and
    line; this covers every source, generators included), else a UserError naming the job."""
    arrival = np.fromiter((j.arrival_s for j in workload.jobs), float, len(workload.jobs))
    runtime = np.fromiter((j.runtime_s for j in workload.jobs), float, len(workload.jobs))
    for values, limit, what in (
        (arrival - arrival.min(), MAX_ARRIVAL_S, "arrival after the first job's"),
        (runtime, MAX_RUNTIME_S, "runtime"),
    ):
        bad = np.flatnonzero(~(values <= limit))
        if len(bad):
            job = workload.jobs[int(bad[0])]
            raise UserError(
                f"workload {workload.name!r}, job {job.job_id}: {time_problem(what, float(values[bad[0]]), limit)}"
            )


def _with_job_types(
    cfg: RunConfig, workload: Workload, layout: ClusterLayout, rng: np.random.Generator
) -> tuple[Workload, ThroughputMatrix]:
    """Load --job_types, draw a job type for every job without one (after every other workload draw), and
    check that the matrix covers the cluster's GPU types and every job's type and GPU count."""
    from workloads.job_types import assign_job_types

    try:
        matrix = load_matrix(cfg.workload.job_types)
        matrix.check_types(layout.type_names)
    except ThroughputError as e:
        raise UserError(str(e)) from None
    workload = assign_job_types(workload, matrix, rng)
    checked: dict[tuple[str, int, bool], bool] = {}
    for j in workload.jobs:
        key = (j.job_type, j.num_gpus, j.gpu_milli < FULL_GPU_MILLI)
        if key not in checked:
            try:
                speeds = matrix.speeds(j.job_type, j.num_gpus, key[2], layout.type_names)
            except ThroughputError as e:
                raise UserError(f"{e} (job {j.job_id} of workload {workload.name!r})") from None
            checked[key] = j.num_gpus > 1 and None in speeds.spread
    fallback = sum(checked[(j.job_type, j.num_gpus, j.gpu_milli < FULL_GPU_MILLI)] for j in workload.jobs)
    report = dict(workload.report, job_types_spread_without_measurement=fallback)
    return Workload(workload.name, workload.jobs, report), matrix
