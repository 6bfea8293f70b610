"""Tiresias' discretized two-dimensional least-attained-service scheduler (2D-LAS; Gu et al., "Tiresias: A GPU
Cluster Manager for Distributed Deep Learning", NSDI'19, §3.2 and Algorithm 1), for unknown runtimes.

A job's attained service is GPUs x time it has held them (`View.attained_now`, GPU-seconds; a fractional share
counts its fraction). K priority queues split attained service at thresholds: a job is in queue k while its
service lies in [threshold[k-1], threshold[k]) (queue 0 from 0). Every job starts in queue 0 and is demoted as
its service crosses each threshold. Lower queue index = higher priority; within a queue, FIFO by arrival with
running jobs ahead of waiting ones, so a job demoted while running keeps its GPUs in its new queue (the
authors' simulator appends it behind the jobs waiting there instead, which then preempt it:
schedulers/tiresias_original.py replays that). Allocation: schedulers/preemptive.py's rule over that
order. The policy asks for a wake-up at the next instant a running job crosses a threshold that could change a
decision (a job waits in a queue above the level it enters), so demotions happen on time without global ticking.

Starvation (PROMOTEKNOB): a waiting job that has run before is promoted to queue 0 once its wait since it was
preempted reaches `promote_knob` x its executed time (attained service / GPUs); its service counted for queue
levels restarts at 0 for the run that follows such a wait (the paper resets t_J and delta_J on promotion).
This policy is a pure function of the View, so the reset is derived from the last wait alone: a promoted job
that is preempted again before its next threshold and restarted without a qualifying wait counts its whole
attained service again (the paper would keep counting from the promotion).

Defaults, from the authors' simulator (github.com/SymbioticLab/Tiresias, simulator/jobs.py `_TFJobs`: 3 queues
with limits 3250 and 7200 GPU-seconds, `dlas-gpu` = 2D-LAS on GPU-time; run_sim.py runs `dlas-gpu` with
starvation promotion off, and the `dlas-gpu-<N>` variants with PROMOTEKNOB N): THRESHOLDS_GPU_S = (3250,
7200), promotion off. The paper (§3.2) leaves K and the thresholds to the operator and reports K = 2 works well.
"""

from __future__ import annotations

from bisect import bisect_right
from typing import NamedTuple

import numpy as np

from schedulers.gather import VECTOR_MIN, gather
from schedulers.preemptive import allocate, lone_start
from sim.simulator import Decision, Preempt, View, WakeUp

THRESHOLDS_GPU_S = (3250.0, 7200.0)  # authors' simulator, jobs.py `_TFJobs.queue_limit` (3 queues)
PROMOTE_KNOB = 0.0  # 0: no starvation promotion (authors' `dlas-gpu` default)
_VECTOR_MIN = VECTOR_MIN  # a module attribute, so that tests can force the numpy path
_EPS_GPU_S = (
    1e-6  # service within this of a threshold counts as having crossed it (float rounding of wake-ups)
)


def make_tiresias(thresholds_gpu_s: tuple[float, ...] = THRESHOLDS_GPU_S, promote_knob: float = PROMOTE_KNOB):
    """A Tiresias policy with these queue thresholds (ascending GPU-seconds; K = len + 1 queues) and knob."""
    thresholds = tuple(float(t) for t in thresholds_gpu_s)
    if any(b <= a for a, b in zip(thresholds, thresholds[1:], strict=False)) or any(
        t <= 0 for t in thresholds
    ):
        raise ValueError(f"thresholds must be positive and ascending, got {thresholds_gpu_s}")
    knob = float(promote_knob)
    if not knob >= 0:
        raise ValueError(f"promote_knob must be >= 0, got {promote_knob}")

    def tiresias(view: View) -> list:
        lone = lone_start(view)  # one job waits and fits: it starts, and nothing waits to be woken for
        if lone is not None:
            return lone
        now = view.now_s
        demand = view.jobs.gpu_demand
        attained = view.attained_gpu_s
        preemptions = view.preemptions
        preempted_at = view.preempted_at_s
        run_start = view.run_start_s

        def promoted(i: int, since_s: float) -> bool:
            """Whether job i's wait (from its last preemption to `since_s`) reached the knob x executed time."""
            return bool(
                knob and preemptions[i] and since_s >= preempted_at[i] + knob * attained[i] / demand[i]
            )

        def waiting_service(i: int) -> float:
            return 0.0 if promoted(i, now) else attained[i]

        def run_base(i: int) -> float:
            """Service counted at the start of running job i's current run."""
            return 0.0 if promoted(i, run_start[i]) else attained[i]

        def running_service(i: int) -> float:
            return (now - run_start[i]) * demand[i] + run_base(i)

        def level(service: float) -> int:
            return bisect_right(thresholds, service + _EPS_GPU_S)

        queued = _Waiting(view, level, waiting_service, len(thresholds) + 1, bool(knob))
        levels: list = []
        victims: dict[int, list[int]] = {}
        # without promotion, from VECTOR_MIN running jobs on: their levels (and, in _next_wakeup, their crossing
        # instants) in numpy, the same floats as the loops below
        vector = not knob and len(view.running) >= _VECTOR_MIN

        def running() -> list[tuple[int, int]]:
            """(level, job) of every running job, in `view.running`'s order: computed only when a decision needs
            it, once per instant."""
            if not levels:
                if knob:
                    levels.append([(level(running_service(v)), v) for _, v in view.running])
                else:  # running_service and level inlined: the hot loop of a loaded cluster
                    eps = _EPS_GPU_S
                    first = thresholds[0]
                    got = []
                    for _, v in view.running:
                        service = attained[v] + (now - run_start[v]) * demand[v] + eps
                        got.append((0 if service < first else bisect_right(thresholds, service), v))
                    levels.append(got)
            return levels[0]

        arrays: list = []

        def running_arrays() -> _Running:
            if not arrays:
                ids = [v for _, v in view.running]
                att, start, d = gather(attained, ids), gather(run_start, ids), gather(demand, ids)
                lv = np.searchsorted(thresholds, att + (now - start) * d + _EPS_GPU_S, side="right")
                arrays.append(_Running(np.array(ids), lv, att, start, d))
            return arrays[0]

        def lower(key) -> list[int]:
            """Running jobs of a level above key's, lowest priority (highest level, then later job) first."""
            lv = key[0]
            hit = victims.get(lv)
            if hit is None:
                if vector:
                    r = running_arrays()
                    sel = np.flatnonzero(r.level > lv)
                    hit = r.jobs[sel][np.lexsort((-r.jobs[sel], -r.level[sel]))].tolist()
                else:
                    hit = [v for _, v in sorted((e for e in running() if e[0] > lv), reverse=True)]
                victims[lv] = hit
            return hit

        plan = allocate(view, queued, lower, lambda v: (level(view.attained_now(v)), v))
        decisions = plan.decisions
        wake = _next_wakeup(
            view,
            decisions,
            queued,
            running_arrays if vector else running,
            waiting_service,
            run_base,
            thresholds,
            knob,
        )
        if wake is not None:
            decisions.append(WakeUp(wake))
        return decisions

    return tiresias


def _next_wakeup(view, decisions, queued, running, waiting_service, run_base, thresholds, knob):
    """The earliest instant after now at which a demotion or a promotion could change this policy's decisions,
    or None: only while some job still waits after these decisions. A running job's demotion into level l'
    matters only if a job of level < l' waits (it may then preempt it): the first such crossing is watched
    (levels of running jobs only grow, those of waiting ones change only by promotion, also watched)."""
    now = view.now_s
    demand = view.jobs.gpu_demand
    started = {d.job for d in decisions if type(d) is Decision}
    preempted = {d.job for d in decisions if type(d) is Preempt}
    level = {i: lv for (lv, i), _ in queued.seen}

    def requeued_service(v: int) -> float:  # a job preempted now: its whole attained service counts
        return view.attained_now(v)

    for v in preempted:
        level[v] = bisect_right(thresholds, requeued_service(v) + _EPS_GPU_S)
    # the waiting jobs: those visited but not started (visited in priority order), the preempted ones, and the
    # ones the walk never reached (of no higher priority than the next one the source would give)
    tops = [lv for (lv, i), _ in queued.seen if i not in started][:1]
    tops += [level[v] for v in preempted if v not in started]
    if not tops:
        nxt = queued.peek()
        if nxt is None:
            return None
        tops.append(nxt[0][0])
    top_waiting = min(tops)
    k_last = len(thresholds)
    best = float("inf")
    # the crossing instant is computed from the run's start and the service counted at that start, not from now,
    # so it does not depend on when the policy was consulted
    run_start = view.run_start_s
    attained = view.attained_gpu_s
    base_of = run_base if knob else attained.__getitem__
    eps = _EPS_GPU_S
    ranked = running()
    if type(ranked) is _Running:  # the same floats in numpy
        watch = np.maximum(ranked.level, top_waiting)
        watched = watch < k_last
        if preempted:
            watched &= ~np.isin(ranked.jobs, list(preempted))
        if watched.any():
            w, d = watch[watched], ranked.demand[watched]
            t = ranked.start[watched] + (np.asarray(thresholds)[w] - ranked.attained[watched]) / d
            soonest = now + eps / d
            best = float(np.where(soonest > t, soonest, t).min())
        ranked = ()
    for lv, v in ranked:  # the running jobs (min is order-free: the same float whatever the order)
        # its first crossing into a level below which some job waits
        watch = lv if lv > top_waiting else top_waiting
        if watch >= k_last or v in preempted:
            continue
        d = demand[v]
        t = run_start[v] + (thresholds[watch] - base_of(v)) / d
        soonest = now + eps / d
        if soonest > t:  # max(t, soonest)
            t = soonest
        if t < best:  # min(best, t)
            best = t
    for j in started:
        watch = max(level[j], top_waiting)
        if watch < k_last:
            base = requeued_service(j) if j in preempted else waiting_service(j)
            best = min(best, max(now + (thresholds[watch] - base) / demand[j], now + eps / demand[j]))
    if knob:
        for (lv, i), _ in queued:  # produce the rest: every waiting job's promotion instant counts
            level[i] = lv
        waiting = [i for (_, i), _ in queued.seen if i not in started] + [
            v for v in preempted if v not in started
        ]
        for i in waiting:
            if i in preempted:
                got = requeued_service(i)
                if got > 0:
                    best = min(best, now + knob * got / demand[i])
            elif level[i] > 0 and view.preemptions[i]:
                at = view.preempted_at_s[i] + knob * view.attained_gpu_s[i] / demand[i]
                best = min(best, max(at, now + _EPS_GPU_S))
    return best if best < float("inf") else None


class _Running(NamedTuple):
    """The running jobs (in `View.running`'s order) with their level, attained service at the start of their run,
    run start and GPU demand."""

    jobs: np.ndarray
    level: np.ndarray
    attained: np.ndarray
    start: np.ndarray
    demand: np.ndarray


class _Waiting:
    """The waiting jobs as ((level, job), job) in priority order, produced lazily: without promotion a waiting
    job's level is that of its attained service (0 for one that never ran), so one pass in arrival order yields
    queue 0 at once and keeps the few others for after it, and the walk over them usually stops early. With
    promotion every level is computed and sorted up front. `seen` lists what was produced, `peek` the next."""

    def __init__(self, view: View, level, waiting_service, num_levels: int, full: bool):
        self.seen: list = []
        self._peeked = None
        if full:
            self._source = iter(sorted(((level(waiting_service(i)), i), i) for i in view.queue))
        else:
            self._source = self._lazy(view, level, num_levels)

    @staticmethod
    def _lazy(view: View, level, num_levels: int):
        attained = view.attained_gpu_s
        later: list[list[int]] = [[] for _ in range(num_levels)]
        for i in view.queue:
            a = attained[i]
            lv = level(a) if a else 0
            if lv:
                later[lv].append(i)
            else:
                yield (0, i), i
        for lv in range(1, num_levels):
            for i in later[lv]:
                yield (lv, i), i

    def __iter__(self):
        while True:
            if self._peeked is not None:
                e, self._peeked = self._peeked, None
            else:
                e = next(self._source, None)
                if e is None:
                    return
            self.seen.append(e)
            yield e

    def peek(self):
        if self._peeked is None:
            self._peeked = next(self._source, None)
        return self._peeked


tiresias = make_tiresias()
