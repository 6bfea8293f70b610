"""The SimPy world: job arrivals, executions and completions on one cluster; it knows nothing about RL.

Drive it with `while sim.advance(): for d in policy(sim.view()): sim.start(d)`. `advance()` processes every
event of the next instant at which a queued job exists (arrivals and completions are SimPy events), so a policy
is consulted once per such instant and may start any number of jobs then. Completions are SimPy timeouts with a
callback rather than one process per job, and arrivals one timeout per distinct arrival instant: the same
semantics as generator processes at half the per-job overhead.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import simpy

from env.cluster import FULL, ClusterLayout, Eligible, FreeState, Placement, gb_to_mb
from env.placement import Pace, effective_speed
from env.records import COMPLETED, REJECTED, UNFINISHED, RunResult
from env.throughput import ThroughputMatrix
from workloads.job import Job, Workload
from workloads.load import offered_load_factor

_INF = float("inf")


class Decision(NamedTuple):
    """Start queued job `job` (its index in the workload) on `placement`."""

    job: int
    placement: Placement


class JobTable:
    """Per-job static facts as python lists (fast scalar access on the hot path), indexed like the workload."""

    def __init__(
        self,
        jobs: Sequence[Job],
        layout: ClusterLayout,
        known_runtime_s: np.ndarray,
        multi_node_factor: float,
        throughput: ThroughputMatrix | None = None,
    ):
        self.jobs = tuple(jobs)
        self.arrival_s = [j.arrival_s for j in jobs]
        self.runtime_s = [j.runtime_s for j in jobs]
        self.num_gpus = [j.num_gpus for j in jobs]
        self.milli = [j.gpu_milli for j in jobs]
        self.mem_mb = [gb_to_mb(j.gpu_mem_gb) if j.gpu_milli < FULL else 0 for j in jobs]
        self.priority = [j.priority for j in jobs]
        self.known_runtime_s = [float(x) for x in known_runtime_s]
        # how each job's duration depends on its placement (env/placement.py's duration formula): a recorded trace
        # duration already includes its spreading (no multi-node factor), a service's lifetime ignores GPU speed
        paces: dict[tuple, Pace] = {}
        self.pace: list[Pace] = []
        types: list[tuple[str, ...]] = []
        runnable: dict[tuple, tuple[str, ...]] = {}
        self.no_speed: set[int] = set()  # jobs whose job type runs on none of their acceptable types
        for j in jobs:
            typed = throughput is not None and j.job_type != "" and j.speed_scaled
            key = (j.runtime_includes_spread, j.speed_scaled)
            if typed:
                key += (j.job_type, j.num_gpus, j.gpu_milli < FULL)
            pace = paces.get(key)
            if pace is None:
                factor = 1.0 if j.runtime_includes_spread else multi_node_factor
                pace = paces[key] = Pace(factor, j.speed_scaled)
                if typed:
                    pace = paces[key] = typed_pace(pace, j, layout, throughput)
            self.pace.append(pace)
            # a type the job cannot run on at all (throughput 0 in the matrix) is not acceptable to it
            if typed:
                hit = runnable.get((key, j.gpu_types))
                if hit is None:
                    hit = runnable[(key, j.gpu_types)] = _runnable_types(j.gpu_types, pace, layout)
                types.append(hit)
                if hit == _NONE:
                    self.no_speed.add(len(types) - 1)
            else:
                types.append(j.gpu_types)
        # a whole-GPU job's memory minimum only filters nodes; a fractional one also consumes it
        self.elig: list[Eligible] = [
            layout.eligible(t, gb_to_mb(j.gpu_mem_gb)) for t, j in zip(types, jobs, strict=True)
        ]
        # (eligible nodes, GPUs, share, memory, pace): the arguments of place(); equal shapes place identically
        self.shape = [
            (e, k, m, mem, pc)
            for e, k, m, mem, pc in zip(
                self.elig, self.num_gpus, self.milli, self.mem_mb, self.pace, strict=True
            )
        ]

    def __len__(self) -> int:
        return len(self.jobs)


def typed_pace(base: Pace, job: Job, layout: ClusterLayout, throughput: ThroughputMatrix) -> Pace:
    """`base` with the job type's own speeds (env/throughput.py) keyed by layout type speed.

    Spread speeds missing from the matrix fall back to the solo speed / the base multi-node factor; a trace
    duration that already includes its spreading (`runtime_includes_spread`) uses the solo speed spread or not.
    """
    sp = throughput.speeds(job.job_type, job.num_gpus, job.gpu_milli < FULL, layout.type_names)
    table: dict[float, tuple[float, float, float]] = {}
    for t, v in enumerate(layout.type_speed):
        solo = sp.solo[t]
        spread = sp.spread[t]
        if spread is None or job.runtime_includes_spread:
            spread = solo / base.multi_node_factor
        entry = (v, solo, spread)
        if table.setdefault(v, entry) != entry:
            raise ValueError(
                f"GPU types of equal speed {v} get different speeds for job type {job.job_type!r}; "
                "job types need the catalog's type speeds (not --uniform_speed)"
            )
    return base._replace(job_speeds=tuple(table.values()))


def _runnable_types(gpu_types: tuple[str, ...], pace: Pace, layout: ClusterLayout) -> tuple[str, ...]:
    """`gpu_types` (() = any) less the types on which the job's speed is 0."""
    zero = {
        layout.type_names[t] for t, v in enumerate(layout.type_speed) if effective_speed(v, False, pace) <= 0
    }
    if not zero:
        return gpu_types
    return tuple(t for t in (gpu_types or layout.type_names) if t not in zero) or _NONE


_NONE = ("",)  # acceptable types of a job that can run on none (no node has type "")


class View(NamedTuple):
    """What a policy sees at one decision instant. Read-only by contract: policies never mutate it.

    `queue` iterates waiting job indices in arrival order; `queue_by_runtime` is (known runtime, job) sorted;
    `queue_by_shape` maps each job shape (`jobs.shape[i]`) present in the queue to its waiting jobs, ascending
    (job indices follow arrival order, so this is arrival order within the shape), and
    `queue_by_shape_runtime` to the same jobs as sorted (known runtime, job) pairs;
    `running` is (estimated end, job) sorted by estimated end (an end in the past means the job overran its
    estimate). `free` is the current free capacity; policies plan on `free.copy()`.
    """

    now_s: float
    queue: Sequence[int]
    queue_by_runtime: Sequence[tuple[float, int]]
    queue_by_shape: Mapping[tuple, Sequence[int]]
    queue_by_shape_runtime: Mapping[tuple, Sequence[tuple[float, int]]]
    running: Sequence[tuple[float, int]]
    running_whole_gpus: Sequence[int]
    """aligned with `running`: the whole GPUs each holds (0 for a fractional job)"""
    free: FreeState
    jobs: JobTable
    layout: ClusterLayout
    placements: Sequence[Placement | None]

    def duration_on(self, job: int, p: Placement, runtime_s: float | None = None) -> float:
        """Duration of `job` on placement `p` given a reference runtime (default: the known runtime)."""
        r = self.jobs.known_runtime_s[job] if runtime_s is None else runtime_s
        return r / effective_speed(self.layout.type_speed[p.type_idx], len(p.nodes) > 1, self.jobs.pace[job])


class Simulator:
    """One run of a workload on a cluster; records every job's outcome and the utilization timeline."""

    def __init__(
        self,
        workload: Workload,
        layout: ClusterLayout,
        known_runtime_s: np.ndarray | None = None,
        multi_node_runtime_factor: float = 1.2,
        throughput: ThroughputMatrix | None = None,
    ):
        jobs = workload.jobs
        if any(jobs[i].arrival_s > jobs[i + 1].arrival_s for i in range(len(jobs) - 1)):
            raise ValueError(f"workload {workload.name!r}: jobs must be sorted by arrival_s")
        if jobs and jobs[0].arrival_s < 0:
            raise ValueError(f"workload {workload.name!r}: arrival times must be >= 0")
        for j in jobs:
            if j.num_gpus < 1 or not 1 <= j.gpu_milli <= FULL or not j.runtime_s >= 0 or j.gpu_mem_gb < 0:
                raise ValueError(
                    f"workload {workload.name!r}: job {j.job_id} needs num_gpus >= 1, 1 <= gpu_milli <= 1000, "
                    "runtime_s >= 0 and gpu_mem_gb >= 0"
                )
        self.workload = workload
        self.layout = layout
        known = np.array([j.runtime_s for j in jobs]) if known_runtime_s is None else known_runtime_s
        self.jobs = JobTable(jobs, layout, known, multi_node_runtime_factor, throughput)
        n = len(jobs)
        self.env = simpy.Environment()
        self.free = FreeState(layout)
        self.queue: dict[int, None] = {}
        self.queue_by_runtime: list[tuple[float, int]] = []
        self.queue_by_shape: dict[tuple, list[int]] = {}
        self.queue_by_shape_runtime: dict[tuple, list[tuple[float, int]]] = {}
        self.running: list[tuple[float, int]] = []
        self.running_whole_gpus: list[int] = []
        self.start_s = [float("nan")] * n
        self.end_s = [float("nan")] * n
        self.duration_s = [float("nan")] * n
        self.placements: list[Placement | None] = [None] * n
        self.reject_reason = [""] * n
        self._est_end: list[float] = [0.0] * n
        self._busy_milli = 0
        self._busy_tflops_x10k = 0
        self._timeline: list[tuple[float, int, int, int]] = []  # (t, busy milli, busy TFLOPS x 10^4, queue)
        self.num_completed = 0
        self.num_arrived = 0
        accepted = []
        for i, j in enumerate(jobs):
            why = self.jobs.elig[i].never_fits(j.num_gpus, j.gpu_milli)
            if i in self.jobs.no_speed:
                why = f"job type {j.job_type!r} has throughput 0 on every acceptable GPU type of the cluster"
            if why is not None:
                self.reject_reason[i] = why
            else:
                accepted.append(i)
        self.num_rejected = n - len(accepted)
        self._accepted = accepted
        self._schedule_arrivals(accepted)

    # -- SimPy processes and callbacks -------------------------------------------------------------------

    def _schedule_arrivals(self, accepted: list[int]) -> None:
        """One SimPy timeout per distinct arrival instant, all scheduled from t=0 so that each fires exactly at
        its arrival time (chaining delays would accumulate float rounding)."""
        arrival = self.jobs.arrival_s
        groups: list[list[int]] = []
        last = None
        for i in accepted:
            if groups and arrival[i] == last:
                groups[-1].append(i)
            else:
                groups.append([i])
                last = arrival[i]
        env = self.env
        for g in groups:
            env.timeout(arrival[g[0]], value=g).callbacks.append(self._on_arrival)

    def _on_arrival(self, event: simpy.Event) -> None:
        """Enqueue the jobs of one arrival instant."""
        known = self.jobs.known_runtime_s
        queue = self.queue
        qbr = self.queue_by_runtime
        by_shape = self.queue_by_shape
        by_shape_runtime = self.queue_by_shape_runtime
        shape = self.jobs.shape
        jobs = event.value
        for i in jobs:
            queue[i] = None
            bisect.insort(qbr, (known[i], i))
            s = shape[i]
            members = by_shape.get(s)
            if members is None:
                by_shape[s] = [i]
                by_shape_runtime[s] = [(known[i], i)]
            else:
                members.append(i)  # arrivals come in index order
                bisect.insort(by_shape_runtime[s], (known[i], i))
        self.num_arrived += len(jobs)

    def _on_complete(self, event: simpy.Event) -> None:
        i = event.value
        p = self.placements[i]
        self.free.give(p)
        self.end_s[i] = self.env.now
        running = self.running
        k = bisect.bisect_left(running, (self._est_end[i], i))
        running.pop(k)
        self.running_whole_gpus.pop(k)
        share = p.milli * len(p.gpus)
        self._busy_milli -= share
        self._busy_tflops_x10k -= share * self.layout.type_tflops_x10[p.type_idx]
        self.num_completed += 1

    # -- driving ----------------------------------------------------------------------------------------

    @property
    def now_s(self) -> float:
        return self.env.now

    def advance(self) -> bool:
        """Process all events of the next instant at which a job waits. False when the run is over.

        The run is over when no event remains (every job done, or queued jobs left that nothing will start).
        """
        env = self.env
        peek, step, tl = env.peek, env.step, self._timeline
        tl.append((env.now, self._busy_milli, self._busy_tflops_x10k, len(self.queue)))
        while True:
            t = peek()
            if t == _INF:
                return False
            while peek() == t:
                step()
            if self.queue:
                return True
            tl.append((t, self._busy_milli, self._busy_tflops_x10k, 0))

    def step_instant(self) -> bool:
        """Process all events of the next instant only (the Gymnasium env accounts reward per instant).

        Returns False, processing nothing, when no event remains.
        """
        env = self.env
        self._timeline.append((env.now, self._busy_milli, self._busy_tflops_x10k, len(self.queue)))
        t = env.peek()
        if t == _INF:
            return False
        while env.peek() == t:
            env.step()
        return True

    @property
    def jobs_in_system(self) -> int:
        """Arrived, accepted jobs that have not finished (queued or running)."""
        return len(self.queue) + len(self.running)

    @property
    def has_future_events(self) -> bool:
        return self.env.peek() != _INF

    def view(self) -> View:
        return View(
            self.env.now,
            self.queue.keys(),
            self.queue_by_runtime,
            self.queue_by_shape,
            self.queue_by_shape_runtime,
            self.running,
            self.running_whole_gpus,
            self.free,
            self.jobs,
            self.layout,
            self.placements,
        )

    def start(self, d: Decision) -> None:
        """Start queued job `d.job` on `d.placement` now; raises ValueError if that is not possible."""
        i, p = d
        jt = self.jobs
        if i not in self.queue:
            raise ValueError(f"job {i} is not waiting")
        if (
            p.milli != jt.milli[i]
            or len(p.gpus) != jt.num_gpus[i]
            or p.mem_mb != jt.mem_mb[i]
            or not jt.elig[i].accepts(p.nodes)
            or not self.free.fits(p)
        ):
            raise ValueError(f"placement {p} is not free or does not match job {i}'s request")
        self.free.take(p)
        del self.queue[i]
        known = jt.known_runtime_s[i]
        qbr = self.queue_by_runtime
        qbr.pop(bisect.bisect_left(qbr, (known, i)))
        s = jt.shape[i]
        members = self.queue_by_shape[s]
        if len(members) == 1:
            del self.queue_by_shape[s]
            del self.queue_by_shape_runtime[s]
        else:
            members.pop(bisect.bisect_left(members, i))
            by_runtime = self.queue_by_shape_runtime[s]
            by_runtime.pop(bisect.bisect_left(by_runtime, (known, i)))
        now = self.env.now
        speed = effective_speed(self.layout.type_speed[p.type_idx], len(p.nodes) > 1, jt.pace[i])
        duration = jt.runtime_s[i] / speed
        self.placements[i] = p
        self.start_s[i] = now
        self.duration_s[i] = duration
        est_end = now + known / speed
        self._est_end[i] = est_end
        k = bisect.bisect_right(self.running, (est_end, i))
        self.running.insert(k, (est_end, i))
        self.running_whole_gpus.insert(k, len(p.gpus) if p.milli == FULL else 0)
        share = p.milli * len(p.gpus)
        self._busy_milli += share
        self._busy_tflops_x10k += share * self.layout.type_tflops_x10[p.type_idx]
        self.env.timeout(duration, value=i).callbacks.append(self._on_complete)

    def run(self, policy, progress=None) -> None:
        """Run to the end under `policy(view) -> list[Decision]`; `progress(num_completed)` is called now and then."""
        n = 0
        while self.advance():
            for d in policy(self.view()):
                self.start(d)
            n += 1
            if progress is not None and n % 4096 == 0:
                progress(self.num_completed)
        if progress is not None:
            progress(self.num_completed)

    # -- results ----------------------------------------------------------------------------------------

    def result(self, scheduler: str, seed: int) -> RunResult:
        """Outcomes so far: jobs never started or still running are UNFINISHED, never dropped."""
        n = len(self.jobs)
        layout = self.layout
        status = []
        gpu_type = []
        placement = []
        for i in range(n):
            p = self.placements[i]
            if self.reject_reason[i]:
                status.append(REJECTED)
            elif self.end_s[i] == self.end_s[i]:
                status.append(COMPLETED)
            else:
                status.append(UNFINISHED)
            gpu_type.append(layout.type_names[p.type_idx] if p is not None else "")
            placement.append(";".join(layout.gpu_label(g) for g in p.gpus) if p is not None else "")
        accepted_jobs = [self.jobs.jobs[i] for i in self._accepted]
        tl = np.asarray(self._timeline, dtype=float).reshape(-1, 4)
        return RunResult(
            scheduler=scheduler,
            workload=self.workload.name,
            seed=seed,
            jobs=self.jobs.jobs,
            nodes=layout.nodes,
            start_s=np.asarray(self.start_s, dtype=float),
            end_s=np.asarray(self.end_s, dtype=float),
            runtime_actual_s=np.asarray(self.duration_s, dtype=float),
            gpu_type=tuple(gpu_type),
            placement=tuple(placement),
            status=tuple(status),
            reject_reason=tuple(self.reject_reason),
            timeline_t_s=tl[:, 0].copy(),
            timeline_busy_gpus=tl[:, 1] / FULL,
            timeline_busy_tflops=tl[:, 2] / (FULL * 10),
            timeline_queue_len=tl[:, 3].astype(np.int64),
            load_factor=offered_load_factor(accepted_jobs, layout.num_gpus)
            if accepted_jobs
            else float("nan"),
        )
