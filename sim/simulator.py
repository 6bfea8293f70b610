"""The SimPy world: job arrivals, executions and completions on one cluster; it knows nothing about RL.

Drive it with `while sim.advance(): for d in policy(sim.view()): sim.apply(d)`. `advance()` processes every
event of the next instant at which a queued job exists or a policy asked to be woken up (arrivals, completions
and wake-ups are SimPy events), so a policy is consulted once per such instant and may return any number of
decisions then: starts (`Decision`), suspensions of running jobs (`Preempt`) and wake-up requests (`WakeUp`),
applied in order. Completions are SimPy timeouts with a callback rather than one process per job (`_Timer`:
a timeout built in one call). Arrivals are no SimPy events: `advance` takes the next arrival instant
(`next_arrival_s`) from the workload's sorted arrival times and merges it with SimPy's event heap, an arrival
instant's jobs first, as an arrival event scheduled at t=0 would be (its id, hence its tie order, is smaller than
every event's scheduled later): the same semantics as generator processes at a fraction of the per-job
overhead. So `env.peek()` does not see arrivals: `next_event_s()` is the simulator's next event.
A preempted job's completion timeout cannot be cancelled; it stays scheduled and is ignored when it fires (each
run of a job owns its own timeout object).
"""

from __future__ import annotations

import gc
from array import array
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from heapq import heappop, heappush
from operator import attrgetter
from typing import NamedTuple

import numpy as np
import simpy
from simpy.events import NORMAL

from sim.cluster import FULL, ClusterLayout, Eligible, FreeState, Placement, gb_to_mb
from sim.job import Job, Workload
from sim.load import offered_load_factor
from sim.placement import Pace, effective_speed
from sim.power import BOOTING, OFF, ON, SHUTTING_DOWN, NodePower, PowerModel, PowerOff, PowerOn
from sim.records import COMPLETED, REJECTED, UNFINISHED, RunResult, Runs
from sim.sorted_list import OnDemandDict, OnDemandSortedList, SortedList
from sim.throughput import ThroughputMatrix

_INF = float("inf")
_tuple_new = tuple.__new__
_object_new = object.__new__  # an event without its __init__ call (two per job: hot path)


class _Timer:
    """A SimPy timeout at an absolute time calling `callbacks` (a tuple the simulator shares between all its
    events of one kind: nothing ever appends to them): what `env.timeout(delay, value)` plus `callbacks.append`
    build. Scheduled like any timeout (normal priority, next event id), so SimPy processes it exactly as it would
    a Timeout; it holds only what `Environment.step` reads of an event (`callbacks`, `_ok`, `_value`), in slots:
    no per-event dict. Built where it is scheduled, without an `__init__` call (one per job run, on the hot
    path): `_object_new(_Timer)`, its two slots set, then `heappush(env._queue, (at_s, NORMAL, eid, event))`."""

    __slots__ = ("callbacks", "_value")
    _ok = True  # it always succeeds

    @property
    def value(self):
        return self._value


class Decision(NamedTuple):
    """Start queued job `job` (its index in the workload) on `placement`."""

    job: int
    placement: Placement


class Preempt(NamedTuple):
    """Suspend running job `job` now: its GPUs are free for the decisions after this one, its progress is kept,
    and it waits in the queue again (in arrival order) until a later `Decision` restarts it, on any acceptable
    placement, after paying the restore overhead."""

    job: int


class WakeUp(NamedTuple):
    """Consult the policy again at `at_s` (simulated seconds) even if nothing else happens then; a request for
    the current instant is a no-op."""

    at_s: float


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
        # Job.gpu_demand, inlined
        self.gpu_demand = [k * m / FULL for k, m in zip(self.num_gpus, self.milli, strict=True)]
        self.mem_mb = [gb_to_mb(j.gpu_mem_gb) if j.gpu_milli < FULL else 0 for j in jobs]
        self.priority = [j.priority for j in jobs]
        self.known_runtime_s = [float(x) for x in known_runtime_s]
        # how each job's duration depends on its placement (sim/placement.py's duration formula): a recorded trace
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
        eligible: dict[tuple, Eligible] = {}  # (types, memory in GB) -> layout.eligible's answer
        self.elig: list[Eligible] = [
            eligible.get(key) or eligible.setdefault(key, layout.eligible(key[0], gb_to_mb(key[1])))
            for key in zip(types, map(attrgetter("gpu_mem_gb"), jobs), strict=True)
        ]
        # (eligible nodes, GPUs, share, memory, pace): the arguments of place(); equal shapes place identically
        # equal shapes are one tuple object: the queue indexes' dict lookups then match by identity
        # and each job's shape as a small int, `shape_slot` (the simulator's per-shape lists: no hash of the
        # shape tuple per job), numbering shapes in order of first appearance
        slot_of: dict[tuple, int] = {}
        self.shape_of_slot: list[tuple] = []
        self.shape_slot: list[int] = []
        for s in zip(self.elig, self.num_gpus, self.milli, self.mem_mb, self.pace, strict=True):
            k = slot_of.get(s)
            if k is None:
                k = slot_of[s] = len(self.shape_of_slot)
                self.shape_of_slot.append(s)
            self.shape_slot.append(k)
        self.shape = [self.shape_of_slot[k] for k in self.shape_slot]
        # what Simulator.start reads per job, in one tuple: (milli, GPUs, memory, eligible node set, shape,
        # runtime, effective speeds by 2 * type index + spans nodes, shape slot); the speeds are
        # effective_speed's, per Pace
        speeds: dict[int, tuple[float, ...]] = {}
        for pc in self.pace:
            if id(pc) not in speeds:
                speeds[id(pc)] = tuple(
                    effective_speed(v, spans, pc) for v in layout.type_speed for spans in (False, True)
                )
        self.start_row = [
            (m, k, mem, e._node_set, s, r, speeds[id(pc)], slot)
            for m, k, mem, e, s, r, pc, slot in zip(
                self.milli,
                self.num_gpus,
                self.mem_mb,
                self.elig,
                self.shape,
                self.runtime_s,
                self.pace,
                self.shape_slot,
                strict=True,
            )
        ]

    def reject_reason(self, i: int) -> str | None:
        """Why job i can never run on the cluster (the simulator rejects it at once), None if it can."""
        j = self.jobs[i]
        if i in self.no_speed:
            return f"job type {j.job_type!r} has throughput 0 on every acceptable GPU type of the cluster"
        return self.elig[i].never_fits(j.num_gpus, j.gpu_milli)

    def __len__(self) -> int:
        return len(self.jobs)


def typed_pace(base: Pace, job: Job, layout: ClusterLayout, throughput: ThroughputMatrix) -> Pace:
    """`base` with the job type's own speeds (sim/throughput.py) keyed by layout type speed.

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
    `queue_by_shape_runtime` to the same jobs as sorted (known runtime, job) pairs; the sorted ones are
    `sim.sorted_list.SortedList`s (sequences with bisect and `first_after` lookups in O(log n));
    `running` is (estimated end, job) sorted by estimated end (an end in the past means the job overran its
    estimate). `free` is the current free capacity; policies plan on `free.copy()`.

    Preemption state (per job, indexed like the workload; the last fields): `progress_s` is the reference work
    done (seconds of the job's reference runtime) and `attained_gpu_s` the GPU-seconds of service attained, both
    as of the start of the job's current run (use `progress_now`/`attained_now` for a running job); `preemptions`
    counts its suspensions; `run_start_s`, `run_work_start_s` and `run_speed` describe its current (or last) run:
    when it started, when its work started after the restore overhead, and its effective speed;
    `preempted_at_s` is when it was last preempted (NaN if never).
    `restore_overhead_s` is what a preempted job pays when started again. A preempted job waits in `queue` in
    arrival order; in `queue_by_runtime` and `queue_by_shape_runtime` its key is its REMAINING known runtime
    (known runtime - progress; restore overhead excluded).
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
    progress_s: Sequence[float]
    attained_gpu_s: Sequence[float]
    preemptions: Sequence[int]
    run_start_s: Sequence[float]
    run_work_start_s: Sequence[float]
    run_speed: Sequence[float]
    preempted_at_s: Sequence[float]
    restore_overhead_s: float
    queue_key_s: Sequence[float]
    """each job's key in `queue_by_runtime` and `queue_by_shape_runtime` while it waits: its known runtime, after
    a preemption its remaining known runtime as of that preemption"""

    def progress_now(self, job: int) -> float:
        """Reference seconds of work `job` has done by now (counting its current run if it is running)."""
        done = self.progress_s[job]
        if self.placements[job] is not None and job not in self.queue:
            done += max(0.0, self.now_s - self.run_work_start_s[job]) * self.run_speed[job]
            done = min(done, self.jobs.runtime_s[job])
        return done

    def attained_now(self, job: int) -> float:
        """GPU-seconds of service `job` has attained by now (a fractional share counts as its fraction)."""
        got = self.attained_gpu_s[job]
        if self.placements[job] is not None and job not in self.queue:
            got += (self.now_s - self.run_start_s[job]) * self.jobs.gpu_demand[job]
        return got

    node_power: NodePower | None = None
    """each node's power state (sim/power.py); None when the run has no power model (every node always on)"""

    def duration_on(self, job: int, p: Placement, runtime_s: float | None = None) -> float:
        """Duration of `job` on placement `p` given a reference runtime (default: the known runtime)."""
        r = self.jobs.known_runtime_s[job] if runtime_s is None else runtime_s
        return r / effective_speed(self.layout.type_speed[p.type_idx], len(p.nodes) > 1, self.jobs.pace[job])


def starts_only_when(applies: Callable[[JobTable], bool]):
    """Mark a policy (view -> decisions) as one that, in the runs whose job table satisfies `applies` (asked once
    per run), only starts waiting jobs and decides from the view alone (any memo it keeps between calls gives what
    a fresh call would): at an instant where no GPU share is free it could start nothing, so `Simulator.run` does
    not call it there. (CBF holds so except in a run of fractional jobs with exact runtimes, where it keeps slots
    between calls.)"""

    def mark(policy):
        policy.starts_only = applies
        return policy

    return mark


def _every_run(jobs: JobTable) -> bool:
    return True


starts_only = starts_only_when(_every_run)
"""Mark a policy `starts_only_when` in every run (FCFS, SJF, EASY)."""


class Simulator:
    """One run of a workload on a cluster; records every job's outcome and the utilization timeline."""

    def __init__(
        self,
        workload: Workload,
        layout: ClusterLayout,
        known_runtime_s: np.ndarray | None = None,
        multi_node_runtime_factor: float = 1.2,
        restore_overhead_s: float = 0.0,
        throughput: ThroughputMatrix | None = None,
        power: PowerModel | None = None,
        initial_power: tuple[int, ...] | None = None,
    ):
        """`restore_overhead_s`: seconds a preempted job spends restoring (holding its GPUs, doing no work) each
        time it is started again (config.SimConfig.preempt_overhead_s gives the CLI's default). `power`: track
        node power states (PowerOn/PowerOff decisions, RunResult power log); None keeps the run exactly as
        without a power model. `initial_power`: each node's state at time 0 (ON or OFF)."""
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
        if len(known) != len(jobs):
            raise ValueError(
                f"workload {workload.name!r}: known_runtime_s needs one number per job ({len(jobs)}), got "
                f"{len(known)} values"
            )
        nan = np.flatnonzero(np.isnan(known))  # (a NaN end would break `running`'s order)
        if len(nan):
            raise ValueError(
                f"workload {workload.name!r}: known_runtime_s is NaN for job(s) "
                + ", ".join(jobs[k].job_id for k in nan[:5])
            )
        self.jobs = JobTable(jobs, layout, known, multi_node_runtime_factor, throughput)
        n = len(jobs)
        self.env = simpy.Environment()
        self.free = FreeState(layout)
        # an OrderedDict, not a dict: iterating a dict from its start walks over every slot freed by a start
        # since its last resize (the waiting jobs that started), an OrderedDict follows its links
        self.queue: OrderedDict[int, None] = OrderedDict()
        # of (known runtime, job), built and kept up to date only once a policy reads it (few do: most read
        # the per-shape lists, and keeping the largest index sorted costs every job two updates)
        self.queue_by_runtime = OnDemandSortedList(lambda: ((self.queue_key_s[i], i) for i in self.queue))
        self.queue_by_shape: dict[tuple, SortedList] = {}  # of jobs
        # the same lists by shape slot (JobTable.shape_slot; None: no job of that shape waits)
        self._members: list[SortedList | None] = [None] * len(self.jobs.shape_of_slot)
        # of (known runtime, job), per shape; built (from queue_by_shape, whose key order it shares) and kept up
        # to date only once a policy reads it (FCFS and CBF never do: it would cost every job two sorted updates)
        self.queue_by_shape_runtime: dict[tuple, SortedList] = OnDemandDict(self._build_shape_runtime)
        self._shape_runtime_live = False
        self.running: list[tuple[float, int]] = []
        self.running_whole_gpus: list[int] = []
        # each running job's GPU type index, in `running`'s order (the slot env's next release per type: the first
        # job of a type is one C-level index() away)
        self.running_type: list[int] = []
        self.start_s = [float("nan")] * n
        self.end_s = [float("nan")] * n
        self.duration_s = [float("nan")] * n
        self.placements: list[Placement | None] = [None] * n
        self.reject_reason = [""] * n
        self._est_end: list[float] = [0.0] * n
        if not restore_overhead_s >= 0:
            raise ValueError(f"restore_overhead_s must be >= 0, got {restore_overhead_s}")
        self.restore_overhead_s = float(restore_overhead_s)
        # preemption state (View's last fields); a job that is never preempted only writes run_* once
        self.queue_key_s = list(self.jobs.known_runtime_s)  # key in queue_by_runtime: known runtime left
        self._event: list[_Timer | None] = [None] * n  # the completion timeout of its current run
        self.progress_s = [0.0] * n
        self.attained_gpu_s = [0.0] * n
        self.preemptions = [0] * n
        self.overhead_s = [0.0] * n  # restore time spent holding GPUs
        self.run_start_s = [0.0] * n
        self.run_work_start_s = [0.0] * n
        self.run_speed = [0.0] * n
        self.preempted_at_s = [float("nan")] * n
        self._held_s = [0.0] * n  # seconds held in closed (preempted) runs
        # (job, start, end, GPUs, type index): a placement's parts, not the Placement, so that the cyclic GC can
        # untrack each row (a NamedTuple is never untracked; a tuple of atomics and such tuples is)
        self._closed_runs: list[tuple[int, float, float, tuple[int, ...], int]] = []
        self._wakeups: set[float] = set()
        self._woken = False
        self._queue_unsorted = False  # preemptions appended jobs out of arrival order (see preempt)
        self._busy_milli = 0
        self._busy_tflops_x10k = 0
        self._type_tflops_x10 = layout.type_tflops_x10
        self._start_row = self.jobs.start_row  # (hot-path reads: one attribute, not two)
        # (t, busy milli, busy TFLOPS x 10^4, queue) per instant, flat: four values a row (no tuple per instant)
        self._timeline: list[float | int] = []
        self.num_completed = 0
        self.num_arrived = 0
        accepted = []
        for i in range(n):
            why = self.jobs.reject_reason(i)
            if why is not None:
                self.reject_reason[i] = why
            else:
                accepted.append(i)
        self.num_rejected = n - len(accepted)
        self._accepted = accepted
        # with a power model: make `advance` return when a node falls idle (run() sets it while a manager runs)
        self.wake_on_idle = False
        self.node_power: NodePower | None = None
        if power is not None:
            self._enable_power(power, initial_power)
        # bound once: every completion (start) and arrival event calls these
        self._complete_cbs = (self._on_complete,)
        self._view_tail = self._build_view_tail()  # live objects: mutate them in place, never rebind them
        self._schedule_arrivals(accepted)

    def _build_shape_runtime(self) -> list[tuple[tuple, SortedList]]:
        """queue_by_shape_runtime's items now (it is read for the first time): from now on it is kept up to date."""
        self._shape_runtime_live = True
        key = self.queue_key_s
        return [(s, SortedList([(key[i], i) for i in members])) for s, members in self.queue_by_shape.items()]

    # -- SimPy processes and callbacks -------------------------------------------------------------------

    def _schedule_arrivals(self, accepted: list[int]) -> None:
        """The arrival instants: the distinct arrival times of the accepted jobs, ascending, each with the jobs
        that arrive then (`_arrive` takes them in order; `next_arrival_s` is the next one's time, inf when none is
        left)."""
        arrival = np.asarray(self.jobs.arrival_s, dtype=float)[accepted]
        # where each group of equal arrival times starts in `accepted`, then len(accepted)
        new_time = np.r_[True, arrival[1:] != arrival[:-1]] if accepted else np.zeros(0, dtype=bool)
        starts = np.r_[np.flatnonzero(new_time), len(accepted)].astype(np.int64)
        self._group_first = array("q", starts.tobytes())  # 8 B a group, read as python ints
        # each instant's time as env.timeout(arrival) at t=0 would give it, then inf
        times = self.env._now + arrival[starts[:-1]]
        self._group_s = array("d", np.r_[times, np.inf].tobytes())
        self._next_group = 0
        self.next_arrival_s: float = self._group_s[0]

    def _arrive(self) -> None:
        """Enqueue the jobs of the next arrival instant (it is now)."""
        g = self._next_group
        self._next_group = g + 1
        self.next_arrival_s = self._group_s[g + 1]
        first = self._group_first
        jobs = self._accepted[first[g] : first[g + 1]]
        if self.queue_by_runtime.active or self._shape_runtime_live:
            self._enqueue_indexed(jobs)
            return
        queue = self.queue
        slots = self.jobs.shape_slot
        by_slot = self._members
        for i in jobs:  # arrivals have the largest indices yet: each is appended to its shape's list
            queue[i] = None
            k = slots[i]
            members = by_slot[k]
            if members is None:
                by_slot[k] = self.queue_by_shape[self.jobs.shape[i]] = SortedList.of_one(i)
            else:
                members.append_max(i)
        self.num_arrived += len(jobs)

    def _enqueue_indexed(self, jobs: list[int]) -> None:
        """_arrive's work when the by-runtime indexes are live (a policy reads them)."""
        known = self.queue_key_s
        queue = self.queue
        qbr = self.queue_by_runtime
        by_shape = self.queue_by_shape
        by_shape_runtime = self.queue_by_shape_runtime
        shape, slots, by_slot = self.jobs.shape, self.jobs.shape_slot, self._members
        qbr = qbr if qbr.active else None
        live = self._shape_runtime_live
        for i in jobs:
            queue[i] = None
            entry = (known[i], i)
            if qbr is not None:
                qbr.add(entry)
            s = shape[i]
            members = by_slot[slots[i]]
            if members is None:
                by_shape[s] = by_slot[slots[i]] = SortedList.of_one(i)
                if live:
                    by_shape_runtime[s] = SortedList.of_one(entry)
            else:
                members.append_max(i)
                if live:
                    by_shape_runtime[s].add(entry)
        self.num_arrived += len(jobs)

    def _on_complete(self, event: _Timer) -> None:
        i = event._value
        runs = self._event
        if runs[i] is not event:
            return  # the timeout of a run that was preempted
        runs[i] = None
        p = self.placements[i]  # _release inlined: this is the hot path
        self.free.give(p)
        running = self.running
        if running[0][1] == i:  # the earliest estimated end (most completions when estimates are exact): no
            k = 0  # bisection
        else:
            k = bisect_left(running, (self._est_end[i], i))
        del running[k]
        del self.running_whole_gpus[k]
        del self.running_type[k]
        share = p.milli * len(p.gpus)
        self._busy_milli -= share
        self._busy_tflops_x10k -= share * self._type_tflops_x10[p.type_idx]
        now = self.env._now
        self.end_s[i] = now
        self.num_completed += 1
        if self.preemptions[i]:
            self._account_run(i, now)
            self.progress_s[i] = self.jobs.runtime_s[i]

    def _release(self, i: int) -> Placement:
        """Give job i's GPUs back and drop it from `running`; returns its placement."""
        p = self.placements[i]
        self.free.give(p)
        running = self.running
        k = bisect_left(running, (self._est_end[i], i))
        running.pop(k)
        self.running_whole_gpus.pop(k)
        self.running_type.pop(k)
        gpus, _, milli, _, t, _, _ = p
        share = milli * len(gpus)
        self._busy_milli -= share
        self._busy_tflops_x10k -= share * self._type_tflops_x10[t]
        return p

    def _account_run(self, i: int, now: float) -> None:
        """Add the run of job i that ends now to its attained service, overhead and time held."""
        start = self.run_start_s[i]
        demand = self.jobs.gpu_demand[i]
        self.attained_gpu_s[i] += (now - start) * demand
        self.overhead_s[i] += min(now, self.run_work_start_s[i]) - start
        self._held_s[i] += now - start

    def _on_wakeup(self, event: simpy.Event) -> None:
        self._wakeups.discard(event.value)
        self._woken = True

    # -- node power (only with a power model) ------------------------------------------------------------

    def _enable_power(self, model: PowerModel, initial: tuple[int, ...] | None) -> None:
        layout = self.layout
        self.node_power = NodePower(layout.num_nodes, model, initial)
        for n, state in enumerate(self.node_power.state):
            if state != ON:
                self.free.take(self.layout.whole_node(n))
        # completions and preemptions also note when a node falls idle; instance attributes, so the path without
        # a power model is unchanged (start() hands on self._complete_cbs, preempt() calls self._release)
        self._on_complete = self._on_complete_power
        self._release = self._release_power

    def _on_complete_power(self, event: _Timer) -> None:
        i = event.value
        live = self._event[i] is event  # else the timeout of a preempted run: nothing is released
        Simulator._on_complete(self, event)
        if live:
            self._note_idle(self.placements[i])

    def _release_power(self, i: int) -> Placement:
        p = Simulator._release(self, i)
        self._note_idle(p)
        return p

    def _note_idle(self, p: Placement) -> None:
        """Record when the nodes of a released placement fell idle."""
        whole, size = self.free.node_whole, self.layout.node_num_gpus
        for n in p.nodes:
            if whole[n] == size[n]:
                self.node_power.idle_since_s[n] = self.env.now
                # a power manager wants to hear of a node falling idle (to set its idle deadline)
                self._woken = self._woken or self.wake_on_idle

    def power_off(self, n: int) -> None:
        """Start shutting node n down now; it must be ON and hold no job (else ValueError)."""
        np_ = self.node_power
        if np_ is None:
            raise ValueError("PowerOff needs a simulator with a power model")
        if not 0 <= n < self.layout.num_nodes or np_.state[n] != ON:
            raise ValueError(f"PowerOff({n}): node is not ON")
        if self.free.node_whole[n] != self.layout.node_num_gpus[n]:
            raise ValueError(f"PowerOff({n}): node {self.layout.nodes[n].node_id} has jobs on it")
        self.free.take(self.layout.whole_node(n))
        self._transition(n, SHUTTING_DOWN, np_.model.shutdown_s)

    def power_on(self, n: int) -> None:
        """Start booting node n now; it must be OFF (else ValueError)."""
        np_ = self.node_power
        if np_ is None:
            raise ValueError("PowerOn needs a simulator with a power model")
        if not 0 <= n < self.layout.num_nodes or np_.state[n] != OFF:
            raise ValueError(f"PowerOn({n}): node is not OFF")
        self._transition(n, BOOTING, np_.model.boot_s)

    def _transition(self, n: int, state: int, duration_s: float) -> None:
        np_ = self.node_power
        now = self.env.now
        np_.state[n] = state
        np_.until_s[n] = now + duration_s
        np_.log.append((now, n, state))
        self.env.timeout(duration_s, value=n).callbacks.append(self._on_transition_done)

    def _on_transition_done(self, event: simpy.Event) -> None:
        """A boot or shutdown completes (a SimPy event): the policy is consulted at this instant."""
        n = event.value
        np_ = self.node_power
        now = self.env.now
        if np_.state[n] == BOOTING:
            np_.state[n] = ON
            np_.idle_since_s[n] = now
            self.free.give(self.layout.whole_node(n))
        else:
            np_.state[n] = OFF
        np_.until_s[n] = float("nan")
        np_.log.append((now, n, np_.state[n]))
        self._woken = True

    # -- driving ----------------------------------------------------------------------------------------

    @property
    def now_s(self) -> float:
        return self.env.now

    def advance(self, one_instant: bool = False) -> bool:
        """Process all events of the next instant at which a job waits. False when the run is over.

        The run is over when no event remains (every job done, or queued jobs left that nothing will start).
        `one_instant`: process the next instant only, whatever waits then (`step_instant`).
        """
        env = self.env
        heap, tl = env._queue, self._timeline  # heap[0][0]: env.peek() without the call
        tl.extend((env._now, self._busy_milli, self._busy_tflops_x10k, len(self.queue)))
        while True:
            t = arrival_s = self.next_arrival_s
            if heap and heap[0][0] < t:
                t = heap[0][0]
            if t == _INF:
                return False
            env._now = t
            if t == arrival_s:  # the instant's arrivals first (see the module's docstring)
                self._arrive()
                more = heap and heap[0][0] == t
            else:
                more = True
            # every SimPy event of instant t: env.step() inlined (every event the simulator schedules succeeds,
            # `_ok`, and is no process)
            while more:
                event = heappop(heap)[3]
                callbacks, event.callbacks = event.callbacks, None
                for callback in callbacks:
                    callback(event)
                if not event._ok:
                    raise event._value
                more = heap and heap[0][0] == t
            if one_instant:
                return True
            if self.queue:
                self._woken = False
                return True
            if self._woken:
                self._woken = False
                return True
            tl.extend((t, self._busy_milli, self._busy_tflops_x10k, 0))

    def step_instant(self) -> bool:
        """Process all events of the next instant only (the Gymnasium env accounts reward per instant).

        Returns False, processing nothing, when no event remains.
        """
        return self.advance(True)

    @property
    def jobs_in_system(self) -> int:
        """Arrived, accepted jobs that have not finished (queued or running)."""
        return len(self.queue) + len(self.running)

    @property
    def has_future_events(self) -> bool:
        return self.next_event_s() != _INF

    def next_event_s(self) -> float:
        """When the next event happens (an arrival or a SimPy event: `env.peek()` does not see arrivals); inf
        when none is left."""
        t = self.env.peek()
        return t if t < self.next_arrival_s else self.next_arrival_s

    def view(self) -> View:
        """The policy's snapshot now. Every field but the time is a live object the simulator only mutates in
        place, so the tail is built once (`_view_tail`) and a view costs one tuple."""
        return _tuple_new(View, (self.env._now,) + self._view_tail)  # (faster than (now, *tail))

    def _build_view_tail(self) -> tuple:
        return (
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
            self.progress_s,
            self.attained_gpu_s,
            self.preemptions,
            self.run_start_s,
            self.run_work_start_s,
            self.run_speed,
            self.preempted_at_s,
            self.restore_overhead_s,
            self.queue_key_s,
            self.node_power,
        )

    def start(self, d: Decision) -> None:
        """Start queued job `d.job` on `d.placement` now; raises ValueError if that is not possible."""
        i, p = d
        queue = self.queue
        if i not in queue:
            raise ValueError(f"job {i} is not waiting")
        milli, num, mem_mb, node_set, s, runtime_s, speeds, slot = self._start_row[i]
        gpus, nodes, p_milli, p_mem_mb, t, _, _ = p
        if (
            p_milli != milli
            or len(gpus) != num
            or p_mem_mb != mem_mb
            or not node_set.issuperset(nodes)
            or not self.free.take(p, True)  # (fits, then taken)
        ):
            raise ValueError(f"placement {p} is not free or does not match job {i}'s request")
        del queue[i]
        known = self.queue_key_s[i]
        if self.queue_by_runtime.active:
            self.queue_by_runtime.remove((known, i))
        members = self._members[slot]
        if len(members) == 1:
            del self.queue_by_shape[s]
            self._members[slot] = None
            if self._shape_runtime_live:
                del self.queue_by_shape_runtime[s]
        else:
            members.remove(i)
            if self._shape_runtime_live:
                self.queue_by_shape_runtime[s].remove((known, i))
        env = self.env
        now = env._now
        speed = speeds[2 * t + (len(nodes) > 1)]
        self.placements[i] = p
        self.run_start_s[i] = now
        self.run_speed[i] = speed
        if self.preemptions[i]:  # a restart: restore first, then the remaining work
            overhead = self.restore_overhead_s
            self.run_work_start_s[i] = now + overhead
            duration = overhead + max(runtime_s - self.progress_s[i], 0.0) / speed
            self.duration_s[i] = self._held_s[i] + duration
            est_end = now + overhead + known / speed
        else:
            self.run_work_start_s[i] = now
            duration = runtime_s / speed
            self.start_s[i] = now
            self.duration_s[i] = duration
            est_end = now + known / speed
        self._est_end[i] = est_end
        running = self.running
        entry = (est_end, i)
        k = bisect_right(running, entry)
        running.insert(k, entry)
        self.running_whole_gpus.insert(k, num if milli == FULL else 0)
        self.running_type.insert(k, t)
        share = milli * num
        self._busy_milli += share
        self._busy_tflops_x10k += share * self._type_tflops_x10[t]
        if duration < 0:
            raise ValueError(f"Negative delay {duration}")
        # _Timer(env, now + duration, i, cbs) without its __init__ call
        event = self._event[i] = _object_new(_Timer)
        event.callbacks = self._complete_cbs
        event._value = i
        heappush(env._queue, (now + duration, NORMAL, next(env._eid), event))

    def preempt(self, d: Preempt, sort_queue: bool = True) -> None:
        """Suspend running job `d.job` now (see `Preempt`); raises ValueError if it is not running.

        `sort_queue=False` leaves the queue's arrival order to a later `_sort_queue` (run() restores it once
        after an instant's decisions, not once per preempted job: nothing reads the order in between)."""
        i = d[0]
        events = self._event
        if not 0 <= i < len(events) or events[i] is None:
            raise ValueError(f"job {i} is not running")
        events[i] = None  # its completion timeout fires later and is ignored
        p = self._release(i)
        now = self.env._now
        jt = self.jobs
        progress = self.progress_s[i]
        work_s = now - self.run_work_start_s[i]
        if work_s > 0:
            progress = self.progress_s[i] = min(progress + work_s * self.run_speed[i], jt.runtime_s[i])
        self._account_run(i, now)
        self.preemptions[i] += 1
        self.preempted_at_s[i] = now
        self._closed_runs.append((i, self.run_start_s[i], now, p.gpus, p.type_idx))
        # back in the queue, in arrival order, keyed by its remaining known runtime
        key = self.queue_key_s[i] = max(jt.known_runtime_s[i] - progress, 0.0)
        queue = self.queue
        if queue and next(reversed(queue)) > i:
            self._queue_unsorted = True
        queue[i] = None
        if sort_queue and self._queue_unsorted:
            self._sort_queue()
        if self.queue_by_runtime.active:
            self.queue_by_runtime.add((key, i))
        s, slot = jt.shape[i], jt.shape_slot[i]
        members = self._members[slot]
        live = self._shape_runtime_live
        if members is None:
            self.queue_by_shape[s] = self._members[slot] = SortedList.of_one(i)
            if live:
                self.queue_by_shape_runtime[s] = SortedList.of_one((key, i))
        else:
            members.add(i)
            if live:
                self.queue_by_shape_runtime[s].add((key, i))

    def _sort_queue(self) -> None:
        """Restore the queue's arrival (index) order after preemptions that appended jobs out of it."""
        keys = sorted(self.queue)
        self.queue.clear()
        self.queue.update(dict.fromkeys(keys))
        self._queue_unsorted = False

    def wake_up(self, d: WakeUp) -> None:
        """Make `advance()` stop at `d.at_s` (one SimPy timeout per distinct requested instant)."""
        if d[0] in self._wakeups:  # requested before (a round policy asks at every instant): a later instant
            return
        now = self.env._now
        at = float(d.at_s)
        if not at >= now:
            raise ValueError(f"wake-up at {at} s is in the past (now {now} s)")
        if at == now or at in self._wakeups or at == _INF:
            return
        self._wakeups.add(at)
        self.env.timeout(at - now, value=at).callbacks.append(self._on_wakeup)

    def apply(self, d) -> None:
        """Apply one decision of any kind (`Decision`, `Preempt`, `WakeUp`, `PowerOn`, `PowerOff`); raises
        TypeError for another."""
        kind = type(d)
        if kind is Decision:
            self.start(d)
        elif kind is Preempt:
            self.preempt(d)
        elif kind is WakeUp:
            self.wake_up(d)
        elif kind is PowerOn:
            self.power_on(d.node)
        elif kind is PowerOff:
            self.power_off(d.node)
        else:
            raise TypeError(f"unknown decision kind {kind.__name__}: {d!r}")

    def run(self, policy, progress=None, manager=None) -> None:
        """Run to the end under `policy(view) -> list of decisions` (applied in order); `progress(num_completed)`
        is called now and then. `manager(view) -> decisions` (a power manager, schedulers/power_managers.py) is
        consulted after the policy's decisions are applied, at every decision instant. A policy marked
        `starts_only` is not called at an instant where no GPU share is free (it could start nothing there).

        The objects that exist when the run starts (the workload, the job table, imported modules: most of the
        process) are frozen out of the cyclic garbage collector's full collections until it ends (`gc.freeze`):
        a run allocates several containers per job, which triggers full collections that would otherwise walk
        them all again each time (6 % of a 10,000-job FCFS run's instructions). Nothing is frozen if something
        else already froze objects (its `gc.unfreeze` is its own to call)."""
        freeze = gc.get_freeze_count() == 0
        if freeze:
            gc.freeze()
        try:
            self._run(policy, progress, manager)
        finally:
            if freeze:
                gc.unfreeze()

    def _run(self, policy, progress, manager) -> None:
        n = 0
        start, apply = self.start, self.apply
        self.wake_on_idle = manager is not None
        preempt, wake_up = self.preempt, self.wake_up
        env, tail = self.env, self._view_tail
        free = self.free
        applies = getattr(policy, "starts_only", None)
        skip_when_full = applies is not None and applies(self.jobs)
        while self.advance():
            if skip_when_full and free.free_milli_total <= 0:
                decisions = ()  # (EASY leaves the cluster full at ~45 % of an overloaded run's instants)
            else:
                decisions = policy(_tuple_new(View, (env._now,) + tail))  # self.view(), inline
            for d in decisions:
                kind = type(d)
                if kind is Decision:
                    start(d)
                elif kind is Preempt and type(decisions) is list:  # all decided before any is applied: order
                    preempt(d, False)  # the queue once, after
                elif kind is WakeUp:
                    wake_up(d)
                else:
                    apply(d)
            if self._queue_unsorted:
                self._sort_queue()
            if manager is not None:
                for d in manager(self.view()):
                    apply(d)
            if progress is not None:
                n += 1
                if n % 4096 == 0:
                    progress(self.num_completed)
        if progress is not None:
            progress(self.num_completed)

    # -- results ----------------------------------------------------------------------------------------

    def result(self, scheduler: str, seed: int, preemptive: bool = False) -> RunResult:
        """Outcomes so far: jobs never started or still running are UNFINISHED, never dropped.

        `preemptive` marks a run of a policy that may preempt (its files then carry the preemption columns); a
        run in which some job was preempted is marked whatever it says. A preempted job's `gpu_type` lists the
        types of its runs (`;`-joined, in order, without repeats), its `placement` is its last run's, and its
        `runtime_actual_s` the time it held GPUs over all its runs (restore overheads included)."""
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
            placement.append(layout.placement_label(p.gpus) if p is not None else "")
        runs = self._runs(placement, gpu_type)
        if self._closed_runs:
            types: dict[int, list[str]] = {}
            for i, t in zip(runs.job.tolist(), runs.gpu_type, strict=True):
                seen = types.setdefault(i, [])
                if t not in seen:
                    seen.append(t)
            for i, seen in types.items():
                gpu_type[i] = ";".join(seen)
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
            **self._power_record(),
            runs=runs,
            preemptions=np.asarray(self.preemptions, dtype=np.int64),
            overhead_s=np.asarray(self.overhead_s, dtype=float),
            preemptive=preemptive or bool(self._closed_runs),
        )

    def _runs(self, placement: list[str], gpu_type: list[str]) -> Runs:
        """Every execution interval so far, ordered by (start, job): the closed (preempted) runs and each started
        job's current or last run (end NaN while it runs)."""
        layout = self.layout
        closed = self._closed_runs
        end_s, events = self.end_s, self._event
        current = [
            i
            for i, p in enumerate(self.placements)
            if p is not None and (events[i] is not None or end_s[i] == end_s[i])
        ]
        job = np.array([r[0] for r in closed] + current, dtype=np.int64)
        start_s = np.array([r[1] for r in closed] + [self.run_start_s[i] for i in current], dtype=float)
        ends = np.array([r[2] for r in closed] + [end_s[i] for i in current], dtype=float)
        labels = [layout.placement_label(r[3]) for r in closed] + [placement[i] for i in current]
        types = [layout.type_names[r[4]] for r in closed] + [gpu_type[i] for i in current]
        # by start, then job, then closed runs first (a stable sort of the (start, job) rows, in numpy)
        order = np.lexsort((np.arange(len(job)), job, start_s))
        pick = order.tolist()
        return Runs(
            job=job[order],
            start_s=start_s[order],
            end_s=ends[order],
            placement=tuple(map(labels.__getitem__, pick)),
            gpu_type=tuple(map(types.__getitem__, pick)),
        )

    def _power_record(self) -> dict:
        """RunResult's power fields: the model, each node's initial state and every state change."""
        np_ = self.node_power
        if np_ is None:
            return {}
        log = np.asarray(np_.log, dtype=float).reshape(-1, 3)
        return {
            "power_model": np_.model,
            "power_initial": np_.initial,
            "power_log_t_s": log[:, 0].copy(),
            "power_log_node": log[:, 1].astype(np.int64),
            "power_log_state": log[:, 2].astype(np.int64),
            "end_of_run_s": float(self.env.now),
        }
