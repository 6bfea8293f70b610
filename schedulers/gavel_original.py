"""Gavel's policies as the authors' own simulator runs them (github.com/stanford-futuredata/gavel at c4fa400,
scheduler/scheduler.py `simulate` with a trace, its policies in scheduler/policies/), replayed round by round:
its `max_min_fairness_perf` (our `gavel`), `max_min_fairness` (`gavel_agnostic`) and the baselines `fifo` and
`fifo_perf`. docs/schedulers.md (Side by side with the authors' simulators) compares it with the default mode
and gives the measured agreement; tests/test_side_by_side.py holds the original's per-job completion times.

One iteration of its loop at time T (the end of the last round, or the next arrival when nothing ran):
1. the round's micro-tasks are accounted: each job's time on its type since the last reset grows by its
   micro-task's end minus the start of the round (the original's `current_round_start_time`, which after an
   idle gap is still the end of the last round that ran); finished jobs leave (an allocation change is due);
2. jobs that arrived by T join (time on every type set to ROUND_S / 2; an allocation change is due);
3. a reset happens when a change is due and T is at least RESET_INTERVAL_S after the last reset (or no reset
   happened at a time > 0 yet): each job's deficit on each type grows by allocation x time since the reset
   minus the time it got, every job's time restarts at ROUND_S / 2, and the allocation is computed for the
   jobs present. Only then: a job that arrived after the last reset has no allocation, is chosen by nobody (it
   still takes a type's GPUs in the walk of step 4, which then stay idle) and waits for the next reset;
4. priorities on type t: allocation / (its time on t / all jobs' time on t), 0 where the allocation or the
   throughput is 0; types in the order V100, P100, K80 (the original's list; other types after them), shuffled
   every round for the policies without "Perf" in their name (max_min_fairness, fifo) by its shuffler; on
   each type its jobs by (priority, deficit, allocation), highest first, ties in arrival order; a job is
   chosen for the first type where it is visited while the type still has GPUs for it (fifo: priority > 0
   only);
5. chosen jobs run for a micro-task (below) or their remaining work on their type (kept where they ran on the
   same type, else preempted and started again, a migration); the round ends when the last of them ends (not
   at a fixed boundary). With nothing chosen, time jumps to the next arrival; once every job has arrived, a
   reset is forced (the original's trace mode) and the iteration repeats once.
Allocations: max-min fairness as the original's cvxpy problem solved by ECOS (the same cone program cvxpy
1.2.3 hands ECOS: maximise min_i sum_j c[i, j] x[i, j], x >= 0, sum_i scale_i x[i, j] <= GPUs of type j, sum_j
x[i, j] <= 1; one stage, so among several optima ECOS's interior point, which spreads a job over the types, as
the original does), c = scale x throughput / the job's throughput with each type's share of the cluster
(`ProportionalPolicy`: GPUs of type j / all GPUs), computed with the original's operations in its order on its
throughputs (steps per second, from the matrix when the policy has it) so that the solver gets the same bits:
jobs of one type have equal allocations up to the solver's rounding, which then decides their order; for the
agnostic policy every throughput is 1. fifo / fifo_perf: the original's FIFOPolicy, including what its code
does rather than what its comments say: fifo_perf gives the first jobs by id (all of them, each time) their
fastest type with GPUs left; fifo keeps earlier assignments and, for a new job, draws a random index among the
types with room for it but assigns the stale loop variable, the last type of its list of types with GPUs left
(name order: V100 while it is listed), even past the type's GPUs; when the assigned type's count reaches
exactly 0 it removes the type at the DRAWN index from that list. So jobs pile onto V100 (time-shared by
priority) until a draw removes V100, then onto P100, and so on. Random draws: the original's own generators
(Python's `random.Random`, the type shuffler seeded with seed + 5, FIFO's with seed, as its Scheduler and
FIFOPolicy seed them), drawn at the same points, so shuffled and FIFO runs match it draw for draw.
Micro-tasks: int(steps/s x ROUND_S) steps, as the original's, when the policy is given the throughput matrix
(their lengths differ by a fraction of a step from job to job, which breaks the ties between equal priorities
as the original's do), else ROUND_S. A job whose micro-task ends before the round's last one keeps running
(and progressing) here until the round ends, where the original idles its GPU: the replay therefore counts
each job's work as the original does (its micro-tasks) and plans from that count; a job that would complete
here while the original still counts work left is preempted once its work here meets that count (its GPU idles
as the original's, at the cost of one preemption), and a job that completed here anyway (fractions of a step)
still holds its place in the original's walk until its count is done, so rounds stay the original's.
Deviations: a job that can never run on FIFO's stale type (a GPU type it does not accept, too little memory,
fewer GPUs of the type than it needs: the original's traces never have one) takes the last listed type with
room that it can run on; a chosen job that finds no room on the real nodes (held by a job that outran its
estimated runtime) is chosen again at the next instant here even when nothing ran; multi-GPU jobs use the
simulator's speeds (a job spread over nodes its unconsolidated throughput,
where the original uses the consolidated one whatever the servers); restore overhead is charged as
`--preempt_overhead_s` says (the original charges none). State: kept between calls of a run
(schedulers/run_state.py); the remaining work comes from the known runtime, so rounds end as the original's
with `--runtime_info oracle` (a job gone here with more than a round of work left in the original's count, a
runtime estimated too long, leaves at once).
"""

from __future__ import annotations

import random

import numpy as np

from schedulers.plan import Plan
from schedulers.run_state import RunStates
from sim.cluster import gb_to_mb
from sim.placement import effective_speed, place, spans_nodes_on
from sim.simulator import View, WakeUp
from sim.throughput import MEASURED_COLUMN, ThroughputError, ThroughputMatrix

ROUND_S = 360.0
"""the original's `time_per_iteration` default (Scheduler and both drivers)"""
RESET_INTERVAL_S = 1920.0
"""the original's `minimum_time_between_allocation_resets` default (Scheduler.__init__)"""
_DONE_TOL = 1e-9  # relative: work left below this counts as none (float sums of micro-tasks)
_NEW_JOB_PRIORITY = 1e9  # allocation x 1e9 where the type has no time recorded yet

AWARE, AGNOSTIC, FIFO, FIFO_PERF = "max_min_fairness_perf", "max_min_fairness", "fifo", "fifo_perf"
_GAVEL_ORDER = ("v100", "p100", "k80")
_SHUFFLED = frozenset({AGNOSTIC, FIFO})  # names without "Perf"/"Packing": the original shuffles the types


class _Run:
    """The original simulator's bookkeeping for one run (its names in comments)."""

    def __init__(self, view: View, seed: int, matrix: ThroughputMatrix | None):
        self.matrix = matrix
        self.steps_per_s: dict[tuple[int, int], float] = {}  # (job, type) -> steps/s, 0: not known
        # The original's own generators, Python's Mersenne Twister seeded as its Scheduler seeds them
        # (`_worker_type_shuffler`: seed + 5; FIFOPolicy's `_rng`: seed), so that every draw is the same.
        self.shuffler = random.Random(seed + 5)
        self.fifo_rng = random.Random(seed)
        layout = view.layout
        self.num_types = len(layout.type_names)
        # the original's sorted(cluster_spec): its LP columns and FIFO's type order (k80, p100, v100)
        names = [MEASURED_COLUMN.get(n, n.lower()) for n in layout.type_names]  # the original's names
        self.by_name = sorted(range(self.num_types), key=lambda t: names[t])
        # the original's round order before its shuffle: its hard-coded ["v100", "p100", "k80"] (the types it
        # knows), other types after them in the layout's order
        known = [names.index(n) for n in _GAVEL_ORDER if n in names]
        self.round_order = known + [t for t in range(self.num_types) if t not in known]
        self.added: dict[int, None] = {}  # _jobs, in arrival order
        self.job_time: dict[int, np.ndarray] = {}  # _job_time_so_far
        self.worker_time = np.zeros(self.num_types)  # _worker_time_so_far
        self.deficit: dict[int, np.ndarray] = {}  # _deficits
        self.done: dict[
            int, float
        ] = {}  # work done in the original's count (its steps, as reference seconds)
        self.alloc: dict[int, np.ndarray] = {}  # _allocation
        self.fifo: dict[int, int] = {}  # FIFOPolicy._allocation: job -> type
        self.last_reset_s = 0.0  # _last_reset_time
        self.need_update = False  # _need_to_update_allocation
        self.round_start_s = 0.0  # current_round_start_time
        self.round_end_prev_s: float | None = None  # current_round_end_time
        # this round's micro-tasks: job -> (type, end, work in reference seconds)
        self.round: dict[int, tuple[int, float, float]] = {}
        self.round_end_s: float | None = None  # when the last micro-task ends (None: nothing ran)
        self.stops: dict[int, float] = {}  # job -> when it is preempted (its micro-task's end), see _realise
        # a chosen job found no room on the real nodes (held by a job the original no longer counts, one that
        # outran its estimated runtime): the next instant here is an iteration even when nothing ran
        self.blocked = False
        self.now = -np.inf
        self.speeds = _speeds(view)  # job x type: fixed by the run's jobs and layout
        jt = view.jobs  # the last arrival of a job the simulator accepts (the original's trace has no other)
        self.last_arrival_s = max(
            (jt.arrival_s[i] for i in range(len(jt.jobs)) if jt.reject_reason(i) is None), default=0.0
        )


def make_gavel_original(policy: str, seed: int = 0, matrix: ThroughputMatrix | None = None):
    """The policy `policy` (AWARE, AGNOSTIC, FIFO or FIFO_PERF) of the original simulator; `seed` seeds the
    generators of its type shuffles and FIFO's draws (as the original's `--seed`) at the start of every run.
    `matrix`: the run's throughput matrix (--job_types), whose steps per second make each micro-task a whole
    number of steps as in the original; without it (or for a job without a job type) a micro-task is
    ROUND_S."""
    if policy not in (AWARE, AGNOSTIC, FIFO, FIFO_PERF):
        raise ValueError(f"unknown Gavel policy {policy!r}")
    runs: RunStates[_Run] = RunStates()

    def gavel_original(view: View) -> list:
        st = runs.get(view, lambda v: _Run(v, seed, matrix))
        now = view.now_s
        if now == st.now:
            return []  # asked again at an instant already handled
        if st.round_end_s is not None:
            if now < st.round_end_s:
                return _stop(view, st)  # mid-round: the micro-tasks run on
        elif not st.blocked and not any(i not in st.added for i in view.queue):
            return []  # idle, and no job arrived: not an iteration of the original
        st.now = now
        speeds = st.speeds
        plan = _iteration(view, st, policy, speeds)
        if not st.round and now >= st.last_arrival_s:
            # trace mode: every job arrived (the finished ones too: the original's `queued_jobs` of the trace is
            # empty) and nothing ran: reset at once
            st.last_reset_s = 0.0
            plan = _iteration(view, st, policy, speeds)
        wake = [] if st.round_end_s is None else [WakeUp(st.round_end_s)]
        wake += [WakeUp(t) for t in sorted(set(st.stops.values()))]
        return [*plan.decisions, *wake]

    gavel_original.__name__ = f"gavel_original_{policy}"
    return gavel_original


def _iteration(view: View, st: _Run, policy: str, speeds: np.ndarray) -> Plan:
    """Steps 1-5 of the module docstring at view.now_s; returns the plan (preemptions and starts)."""
    now = view.now_s
    running = {j for _, j in view.running}
    waiting = view.queue
    if st.round:
        if st.round_end_prev_s is not None:
            st.round_start_s = st.round_end_prev_s
        st.round_end_prev_s = now
        for j, (t, end_s, work_s) in st.round.items():
            if j in st.job_time:
                st.job_time[j][t] += end_s - st.round_start_s
                st.worker_time[t] += end_s - st.round_start_s
                st.done[j] += work_s
    known = view.jobs.known_runtime_s
    full_round_s = ROUND_S * float(np.max(speeds)) if speeds.size else 0.0
    for j in list(st.added):
        left = known[j] - st.done[j]
        if left <= _DONE_TOL * max(1.0, known[j]) or (
            j not in running and j not in waiting and left > full_round_s
        ):  # finished in the original's count; or gone here with more than a round left (a misestimate)
            del st.added[j], st.job_time[j], st.deficit[j], st.done[j]
            st.need_update = True
    arrival = view.jobs.arrival_s
    for j in sorted(j for j in waiting if j not in st.added and arrival[j] <= now):
        st.added[j] = None
        st.job_time[j] = np.full(st.num_types, ROUND_S / 2)
        st.deficit[j] = np.zeros(st.num_types)
        st.done[j] = 0.0
        st.need_update = True
    if st.need_update and (now - st.last_reset_s >= RESET_INTERVAL_S or st.last_reset_s == 0):
        _reset(st, now)
        st.alloc = _allocation(view, st, policy, speeds)
        st.need_update = False
    chosen = _choose(view, st, policy, speeds)
    return _realise(view, st, chosen, speeds)


def _reset(st: _Run, now: float) -> None:
    """_reset_time_run_so_far: deficits grow by what each job should have got minus what it got."""
    elapsed = now - st.last_reset_s
    st.worker_time[:] = 0.0
    for j in st.added:
        should = st.alloc[j] * elapsed if j in st.alloc else 0.0
        st.deficit[j] += should - (st.job_time[j] - ROUND_S / 2)
        st.job_time[j][:] = ROUND_S / 2
        st.worker_time += ROUND_S / 2
    st.last_reset_s = now


def _speeds(view: View) -> np.ndarray:
    """Job x type speed (reference seconds per second; 0 where the job cannot run), as the default mode's."""
    jt = view.jobs
    layout = view.layout
    table = np.empty((len(jt.shape), len(layout.type_names)))
    for i, (elig, k, milli, _, pace) in enumerate(jt.shape):
        table[i] = [
            effective_speed(v, spans_nodes_on(elig, k, milli, t), pace) if t in elig.types else 0.0
            for t, v in enumerate(layout.type_speed)
        ]
    return table


def _allocation(view: View, st: _Run, policy: str, speeds: np.ndarray) -> dict[int, np.ndarray]:
    """The policy's allocation for the jobs present (their ids ascending, as the original sorts them)."""
    jobs = sorted(st.added)
    if not jobs:
        return {}
    scale = np.array([view.jobs.num_gpus[j] for j in jobs], dtype=float)
    gpus = np.asarray(view.layout.type_num_gpus, dtype=float)
    if policy in (FIFO, FIFO_PERF):
        return _fifo(st, jobs, scale, speeds, gpus, perf=policy == FIFO_PERF)
    cols = st.by_name
    m = len(jobs)
    if policy == AWARE:
        thr = np.array([[_steps_per_s(view, st, j, t) or speeds[j, t] for t in cols] for j in jobs])
    else:
        thr = np.ones((m, len(cols)))  # MaxMinFairnessPolicy hands every throughput as 1.0 to the aware one
    # MaxMinFairnessPolicyWithPerf's coefficients with its operations in its order (the solver sees the same
    # bits): ProportionalPolicy's share of each type, the proportional throughput, weight
    # 1 / (priority weight 1 x proportional throughput), times the scale factor
    share = np.array([[gpus[t] / m for t in cols] for _ in range(m)])
    share = share / np.sum(share, axis=1).max()
    proportional = np.sum(np.multiply(thr, share), axis=1).reshape((m, 1))
    weights = np.multiply(np.ones((m, 1)), 1.0 / np.where(proportional > 0, proportional, 1.0))
    coef = np.multiply(thr * weights.reshape((m, 1)), np.repeat(scale[:, None], len(cols), axis=1))
    x = np.zeros((len(jobs), st.num_types))
    x[:, cols] = max_min_ecos(coef, scale, gpus[cols])
    return {j: x[k] for k, j in enumerate(jobs)}


def max_min_ecos(coef_JT: np.ndarray, scale_J: np.ndarray, gpus_T: np.ndarray) -> np.ndarray:
    """x maximising min_i sum_j coef[i, j] x[i, j] subject to x >= 0, sum_i scale[i] x[i, j] <= gpus[j] and
    sum_j x[i, j] <= 1, solved by ECOS on the cone program cvxpy 1.2.3 builds for the original's
    `cp.Maximize(cp.min(cp.sum(cp.multiply(coef, x), axis=1)))` (variables: the epigraph bound, then x column
    by column; rows: the m epigraph rows, -x <= 0, the capacity rows, the row sums), clipped to [0, 1] as the
    original clips it."""
    import ecos  # imported here: only the original Gavel mode needs it
    from scipy.sparse import coo_matrix

    m, n = coef_JT.shape
    var = 1 + np.arange(n)[None, :] * m + np.arange(m)[:, None]  # x[i, j] -> its column (column-major)
    rows = np.concatenate(
        [
            np.arange(m),
            np.repeat(np.arange(m), n),
            m + np.arange(m * n),
            m + m * n + np.tile(np.arange(n), m),
            m + m * n + n + np.repeat(np.arange(m), n),
        ]
    )
    cols = np.concatenate([np.zeros(m, dtype=int), var.ravel(), var.T.ravel(), var.ravel(), var.ravel()])
    vals = np.concatenate(
        [-np.ones(m), -coef_JT.ravel(), -np.ones(m * n), np.repeat(scale_J, n), np.ones(m * n)]
    )
    num_rows = m + m * n + n + m
    g = coo_matrix((vals, (rows, cols)), shape=(num_rows, 1 + m * n)).tocsc()
    h = np.concatenate([np.zeros(m + m * n), gpus_T, np.ones(m)])
    c = np.zeros(1 + m * n)
    c[0] = 1.0
    sol = ecos.solve(c, g, h, {"l": num_rows, "q": [], "e": 0}, verbose=False)
    x = np.asarray(sol["x"][1:]).reshape(n, m).T
    return np.clip(x, 0.0, 1.0)


def _fifo(
    st: _Run, jobs: list[int], scale: np.ndarray, speeds: np.ndarray, gpus: np.ndarray, perf: bool
) -> dict:
    """FIFOPolicy.get_allocation (base mode: fifo; 'perf' mode: fifo_perf), its stale-variable pick
    included."""
    present = set(jobs)
    scale_of = dict(zip(jobs, scale.tolist(), strict=True))
    if perf:
        st.fifo = {}
    available = {t: float(gpus[t]) for t in st.by_name}  # the cluster's types in name order
    queue = [j for j in jobs if j not in st.fifo]
    for j in sorted(st.fifo):
        t = st.fifo[j]
        if j not in present:  # completed: its type goes to the head of the queue if it fits there
            if queue and scale_of[queue[0]] <= available[t] and speeds[queue[0], t] > 0:
                head = queue.pop(0)
                st.fifo[head] = t
                available[t] -= scale_of[head]
            del st.fifo[j]
        else:
            available[t] -= scale_of[j]
    types = [t for t in st.by_name if available[t] > 0]  # sorted by name, as available_worker_types.sort()
    while queue and types:
        j = queue.pop(0)
        fits = [(k, t) for k, t in enumerate(types) if available[t] >= scale_of[j]]
        if not fits:
            break
        if perf:
            best, pick = -1.0, 0
            for k, (_, t) in enumerate(fits):
                if speeds[j, t] > best:
                    best, pick = speeds[j, t], k
            t = fits[pick][1]
        else:
            pick = st.fifo_rng.randrange(len(fits))
            t = types[
                -1
            ]  # the loop variable left from `for i, worker_type in enumerate(available_worker_types)`
            if speeds[j, t] <= 0 or gpus[t] < scale_of[j]:
                # a type the job can never run on (not accepted, too little memory, fewer GPUs in all than it
                # needs), never met in the original's domain (its stale pick is K80 only once V100 and P100 have
                # left the list, and then the few jobs of throughput 0 on K80 have no other type): here the last
                # listed type with room that the job can run on, else it would wait for ever on a type it can
                # never use; the draw and the type removed stay the original's
                t = next((u for _, u in reversed(fits) if speeds[j, u] > 0), t)
        if speeds[j, t] > 0:
            st.fifo[j] = t
            available[t] -= scale_of[j]
            if available[t] == 0:
                types.pop(fits[pick][0])
    out = {}
    for j in jobs:
        row = np.zeros(st.num_types)
        if j in st.fifo:
            row[st.fifo[j]] = 1.0
        out[j] = row
    return out


def _choose(view: View, st: _Run, policy: str, speeds: np.ndarray) -> dict[int, int]:
    """Steps 4 (priorities, the walk over the types) and the original's rule that a job without an allocation
    gets no workers: job -> type."""
    order = list(st.round_order)
    if policy in _SHUFFLED:
        st.shuffler.shuffle(order)
    left = list(view.layout.type_num_gpus)
    gpus = view.jobs.num_gpus
    scheduled: dict[int, int] = {}
    fifo = policy in (FIFO, FIFO_PERF)
    for t in order:
        entries = []
        for j in st.added:
            a = st.alloc[j][t] if j in st.alloc else 0.0
            prio = 0.0
            if j in st.alloc and a != 0.0 and speeds[j, t] != 0.0:
                w = st.worker_time[t]
                frac = st.job_time[j][t] / w if w != 0.0 else 0.0
                prio = a / frac if frac > 0.0 else a * _NEW_JOB_PRIORITY
            entries.append((j, prio, st.deficit[j][t], a))
        entries = sorted(entries, key=lambda e: (e[1], e[2], e[3]), reverse=True)
        for j, prio, _, _ in entries:
            if left[t] == 0:
                break
            if j in scheduled or speeds[j, t] <= 0 or (fifo and prio <= 0.0) or gpus[j] > left[t]:
                continue
            left[t] -= gpus[j]
            scheduled[j] = t
    return {j: t for j, t in scheduled.items() if j in st.alloc}


def _steps_per_s(view: View, st: _Run, j: int, t: int) -> float:
    """Job j's steps per second on type t as the original knows them (its single-job throughput for the job's
    type and scale factor, consolidated: it never uses the `_unconsolidated` entries); 0 where not known (no
    matrix, no job type, no entry)."""
    key = (j, t)
    hit = st.steps_per_s.get(key)
    if hit is None:
        hit = 0.0
        job = view.jobs.jobs[j]
        if st.matrix is not None and job.job_type:
            m = st.matrix
            try:
                col = m.column_of(view.layout.type_names[t])
                hit = m.solo_thr.get((col, job.job_type, m.scale_for(job.job_type, job.num_gpus)), 0.0)
            except ThroughputError:
                hit = 0.0
        st.steps_per_s[key] = hit
    return hit


def _micro_task_s(view: View, st: _Run, j: int, t: int) -> float:
    """The length of a full micro-task of job j on type t: int(steps/s x ROUND_S) steps (the original's
    `_get_num_steps`), ROUND_S where the steps per second are not known."""
    thr = _steps_per_s(view, st, j, t)
    return int(thr * ROUND_S) / thr if thr > 0 else ROUND_S


def _realise(view: View, st: _Run, chosen: dict[int, int], speeds: np.ndarray) -> Plan:
    """Step 5: keep, preempt and start; the micro-tasks and the round's end."""
    now = view.now_s
    jt = view.jobs
    placements = view.placements
    plan = Plan(view.free)
    running = {j for _, j in view.running}
    for j in sorted(running):
        if j in st.added and chosen.get(j) != placements[j].type_idx:
            plan.preempt(j, placements[j])  # (a job the original counts as finished runs on to its end here)
    waiting = view.queue
    st.round = {}
    st.blocked = False
    work_from: dict[int, float] = {}  # jobs running here this round -> when their work starts
    for j, t in chosen.items():
        # the remaining work in the original's count, which may be less here (see the module docstring)
        left_s = (jt.known_runtime_s[j] - st.done[j]) / speeds[j, t]
        task_s = min(_micro_task_s(view, st, j, t), left_s)
        if (j in running and placements[j].type_idx == t) or (j not in running and j not in waiting):
            st.round[j] = (t, now + task_s, task_s * speeds[j, t])  # kept, or finished here: its GPU idles
            if j in running:
                work_from[j] = now
            continue
        _, k_gpus, milli, mem_mb, pace = jt.shape[j]
        elig_t = view.layout.eligible((view.layout.type_names[t],), gb_to_mb(jt.jobs[j].gpu_mem_gb))
        p = place(plan.free, elig_t, k_gpus, milli, mem_mb, pace)
        if p is None:  # the original counts GPUs per type; here the nodes are real (fragmentation): it waits
            st.blocked = True
            continue
        plan.add(j, p)
        overhead_s = view.restore_overhead_s if view.preemptions[j] or j in running else 0.0
        end_s = now + min(_micro_task_s(view, st, j, t), overhead_s + left_s)
        st.round[j] = (t, end_s, max(0.0, end_s - now - overhead_s) * speeds[j, t])
        work_from[j] = now + overhead_s
    st.round_end_s = max((end for _, end, _ in st.round.values()), default=None)
    # A job running here to the round's end would complete although the original still counts work left
    # for it (the fractions of steps it gained in its earlier rounds' tails): it is preempted instead once
    # its work here equals the original's count after this micro-task, its GPU idling as the original's, so
    # that it ends when the original says.
    st.stops = {}
    known = jt.known_runtime_s
    for j, start_s in work_from.items():
        t, end_s, work_s = st.round[j]
        if known[j] - st.done[j] - work_s > _DONE_TOL * max(1.0, known[j]) and (
            st.round_end_s - start_s
        ) * speeds[j, t] >= known[j] - view.progress_now(j) - _DONE_TOL * max(1.0, known[j]):
            # when its work here reaches the original's count after this micro-task (at or before its end)
            st.stops[j] = max(start_s, start_s + (st.done[j] + work_s - view.progress_now(j)) / speeds[j, t])
    return plan


def _stop(view: View, st: _Run) -> list:
    """Mid-round: preempt the jobs whose stop (see _realise) is due."""
    due = [j for j, at_s in st.stops.items() if at_s <= view.now_s]
    if not due:
        return []
    plan = Plan(view.free)
    running = {j for _, j in view.running}
    for j in due:
        del st.stops[j]
        if j in running:
            plan.preempt(j, view.placements[j])
    return plan.decisions
