"""Themis' finish-time-fairness allocation (Mahajan et al., "Themis: Fair and Efficient GPU Cluster Scheduling",
NSDI'20, §3), without its auction: GPUs go to the jobs whose estimated finish-time fairness rho is worst, and a
running job gives its GPUs up only at the end of a lease.

rho of job i now (the paper's T_shared / T_id, estimated from the known runtime):
    rho_i = (now - arrival_i + remaining_i) / (known_i x max(1, N x d_i / G))
with remaining_i = known runtime - work done (`View.progress_now`, reference seconds, restore overhead not
counted, as srtf), N the jobs in the system now (waiting and running), d_i the job's GPU demand and G the
cluster's GPUs: the denominator is the time alone on a 1/N share of the cluster, the same T_independent that
metrics/fairness.py uses (with N counted now instead of at arrival). A job of 0 known runtime has rho = inf.

Rule, at every instant the policy is consulted:
- Priority: larger rho first; on equal rho a running job ranks first, then the earlier job.
- The filter (the paper's fairness knob f): only the jobs among the ceil((1 - f) x N) worst rho (every job whose
  rho reaches the rho of the last of them, so ties are all in) may take GPUs from a running job.
- A running job's lease ends every `lease_s` seconds after its run started (run_start + k x lease_s, k >= 1); only
  at such an instant may it be preempted, and only for a considered waiting job of strictly larger rho that then
  starts (schedulers/preemptive.py's rule: the fewest victims, lowest priority first; never for a tie). A lease
  not taken away is renewed for another `lease_s`.
- Free GPUs go to the waiting jobs in priority order whatever the filter (work conserving, this project's choice:
  the filter only limits who may take GPUs from a running job), on the placement rule's placement
  (sim/placement.py).
The policy asks for a wake-up at the next lease end of a running job while some job waits; between lease ends
and events (arrivals, completions) nothing can change.

Simplifications (docs/schedulers.md): no auction (no bids, no partial allocations, no placement-sensitive
valuations): a considered job's bid is its rho, and it gets the placement rule's placement or nothing; one job
per app; rho is estimated from the known runtime (oracle or estimate, `--runtime_info`).
Defaults: LEASE_S = 300 s and FAIRNESS_KNOB = 0.2 are the defaults of the authors' YARN prototype
(`ThemisConfiguration`: `themis.lease.mins` 5.0, `themis.fairness.knob` 0.2); the knob's meaning (1 - f of the
apps, those of worst rho, see the offer) is the paper's §3.3. Neither value was checked against the paper's text
in this project (docs/schedulers.md).
"""

from __future__ import annotations

import math
from bisect import bisect_left

import numpy as np

from schedulers.gather import VECTOR_MIN, gather
from schedulers.preemptive import allocate, lone_start
from sim.simulator import Decision, Preempt, View, WakeUp

LEASE_S = 300.0  # authors' YARN prototype, ThemisConfiguration `themis.lease.mins` = 5.0
FAIRNESS_KNOB = 0.2  # same file, `themis.fairness.knob`: the worst 1 - f of the jobs may preempt
_EPS_S = 1e-6  # an instant within this of a lease end is that lease end (float rounding of wake-ups)


def lease_ended(now: float, run_start: float, lease_s: float) -> bool:
    """Whether `now` is a lease end of a run started at `run_start` (run_start + k x lease_s, k >= 1)."""
    k = round((now - run_start) / lease_s)
    return k >= 1 and abs(now - (run_start + k * lease_s)) <= _EPS_S


def next_lease_end(now: float, run_start: float, lease_s: float) -> float:
    """The first lease end of that run strictly after `now` (by more than the float slack)."""
    k = math.floor((now - run_start) / lease_s) + 1
    t = run_start + k * lease_s
    while t <= now + _EPS_S:
        k += 1
        t = run_start + k * lease_s
    return t


_VECTOR_MIN = VECTOR_MIN  # a module attribute, so that tests can force the numpy path


def _leases(
    now: float, starts: list[float], jobs: list[int], lease_s: float
) -> tuple[list[float], list[int]]:
    """(next lease end after now of each run started at `starts`, the jobs whose lease ends now): the per-job
    `next_lease_end` and `lease_ended`, inlined."""
    floor, eps = math.floor, _EPS_S
    ends = []
    expired = []
    for v, s in zip(jobs, starts, strict=True):
        k = round((now - s) / lease_s)
        if k >= 1 and abs(now - (s + k * lease_s)) <= eps:
            expired.append(v)
        t = s + (floor((now - s) / lease_s) + 1) * lease_s
        if t <= now + eps:
            t = next_lease_end(now, s, lease_s)
        ends.append(t)
    return ends, expired


def _leases_np(
    now: float, starts: np.ndarray, jobs: list[int], lease_s: float
) -> tuple[list[float], list[int]]:
    """`_leases` by numpy: the same floats (round half to even as Python's round, floor, IEEE arithmetic)."""
    k = np.round((now - starts) / lease_s)
    ended = (k >= 1) & (np.abs(now - (starts + k * lease_s)) <= _EPS_S)
    ends = starts + (np.floor((now - starts) / lease_s) + 1) * lease_s
    late = np.flatnonzero(ends <= now + _EPS_S)  # float rounding: the loop of next_lease_end decides
    for r in late.tolist():
        ends[r] = next_lease_end(now, float(starts[r]), lease_s)
    return ends.tolist(), [jobs[r] for r in np.flatnonzero(ended).tolist()]


def make_themis(lease_s: float = LEASE_S, fairness_knob: float = FAIRNESS_KNOB):
    """A Themis policy with this lease (seconds) and fairness knob f in [0, 1)."""
    lease_s = float(lease_s)
    f = float(fairness_knob)
    if not lease_s > 0:
        raise ValueError(f"lease_s must be > 0, got {lease_s}")
    if not 0.0 <= f < 1.0:
        raise ValueError(f"fairness_knob must be in [0, 1), got {fairness_knob}")

    def themis(view: View) -> list:
        lone = lone_start(view)  # one job waits and fits: it starts, and no job is left waiting
        if lone is not None:
            return lone
        now = view.now_s
        jt = view.jobs
        known, arrival, demand = jt.known_runtime_s, jt.arrival_s, jt.gpu_demand
        done, work_from, speed, run_start = (
            view.progress_s,
            view.run_work_start_s,
            view.run_speed,
            view.run_start_s,
        )
        running = [v for _, v in view.running]
        queue = list(view.queue)
        n = len(queue) + len(running)
        if not n:
            return []
        share = n / view.layout.num_gpus
        inf = math.inf
        # rho (see the module docstring), inlined: the hot loop of a loaded cluster; the waiting jobs in priority
        # order (larger rho, then the earlier job), as keys for `allocate`
        if len(queue) < _VECTOR_MIN:
            rho_wait = []
            for i in queue:
                k = known[i]
                x = share * demand[i]
                t_id = k * x if x > 1.0 else k * 1.0
                left = k - done[i]
                rho_wait.append(
                    (now - arrival[i] + (left if left > 0.0 else 0.0)) / t_id if t_id > 0 else inf
                )
            queued = sorted(((-r, 1, i), i) for i, r in zip(queue, rho_wait, strict=True))
        else:  # the same floats and order by numpy, the keys produced as the walk reaches them
            k = gather(known, queue)
            x = share * gather(demand, queue)
            t_id = np.where(x > 1.0, k * x, k * 1.0)
            left = k - gather(done, queue)
            top = now - gather(arrival, queue) + np.where(left > 0.0, left, 0.0)
            rho_wait = np.where(t_id > 0, top / np.where(t_id > 0, t_id, 1.0), inf)
            order = np.lexsort((np.arange(len(queue)), -rho_wait))  # queue is in index order
            ranked = zip((-rho_wait[order]).tolist(), [queue[r] for r in order.tolist()], strict=True)
            queued = (((r, 1, i), i) for r, i in ranked)
        runtime = jt.runtime_s
        rho_run: dict[int, float] = {}  # computed for a running job only when a decision needs it

        def rho_of(v: int) -> float:
            r = rho_run.get(v)
            if r is None:
                k = known[v]
                x = share * demand[v]
                t_id = k * x if x > 1.0 else k * 1.0
                ran = now - work_from[v]
                progress = done[v] + (ran if ran > 0.0 else 0.0) * speed[v]
                if progress > runtime[v]:
                    progress = runtime[v]
                left = k - progress
                r = rho_run[v] = (
                    (now - arrival[v] + (left if left > 0.0 else 0.0)) / t_id if t_id > 0 else inf
                )
            return r

        leases: list = []  # the running jobs' next lease ends and the expired ones, once per instant

        def lease_table() -> list:
            if not leases:
                if len(running) < _VECTOR_MIN:
                    leases.extend(_leases(now, [run_start[v] for v in running], running, lease_s))
                else:
                    leases.extend(_leases_np(now, gather(run_start, running), running, lease_s))
            return leases

        considered: list[float] = []

        def rho_considered() -> float:
            """The rho of the last of the ceil((1 - f) x N) worst-off jobs (every rho is needed here)."""
            if not considered:
                m = max(1, math.ceil((1.0 - f) * n - 1e-9))
                if len(running) < _VECTOR_MIN and len(queue) < _VECTOR_MIN:
                    considered.append(sorted([*rho_wait, *map(rho_of, running)], reverse=True)[m - 1])
                else:  # the same floats by numpy (elementwise IEEE arithmetic; the m-th largest is exact)
                    rho = np.concatenate([np.asarray(rho_wait, dtype=float), _rho_running()])
                    considered.append(float(-np.partition(-rho, m - 1)[m - 1]))
            return considered[0]

        def _rho_running() -> np.ndarray:
            """rho_of for every running job, as numpy computes the same expression elementwise."""
            g = running
            k = gather(known, g)
            x = share * gather(demand, g)
            t_id = np.where(x > 1.0, k * x, k * 1.0)
            ran = now - gather(work_from, g)
            progress = gather(done, g) + np.where(ran > 0.0, ran, 0.0) * gather(speed, g)
            cap = gather(runtime, g)
            progress = np.where(progress > cap, cap, progress)
            left = k - progress
            top = now - gather(arrival, g) + np.where(left > 0.0, left, 0.0)
            return np.where(t_id > 0, top / np.where(t_id > 0, t_id, 1.0), inf)

        cache: list = []

        def lower(key) -> list[int]:
            r = -key[0]
            if not cache:  # expired running jobs, lowest priority first: smallest rho, then the later job
                expired = sorted((rho_of(v), -v) for v in lease_table()[1])
                cache.extend(([x for x, _ in expired], [-mv for _, mv in expired]))
            exp_rho, exp_jobs = cache
            if not exp_jobs or r < rho_considered():  # no lease ends now, or job not among the worst off
                return []
            return exp_jobs[: bisect_left(exp_rho, r)]

        decisions = allocate(view, queued, lower, lambda v: (-rho_of(v), 1, v)).decisions
        started = {d.job for d in decisions if type(d) is Decision}
        preempted = {d.job for d in decisions if type(d) is Preempt}
        if all(i in started for i in queue) and preempted <= started:
            return decisions
        wake = now + lease_s if started else inf
        for v, t in zip(running, lease_table()[0], strict=True):
            if t < wake and v not in preempted:
                wake = t
        if wake < inf:
            decisions.append(WakeUp(wake))
        return decisions

    return themis


themis = make_themis()
