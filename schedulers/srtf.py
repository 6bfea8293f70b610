"""Preemptive shortest-remaining-time-first over known runtimes (Schrage 1968; the preemptive oracle baseline of
Tiresias, Gu et al., NSDI'19, §5 "SRTF").

A job's remaining time is its known reference runtime minus the work it has done (`View.progress_now`), in
reference seconds (at speed 1.0; restore overhead not counted): jobs of equal remaining work rank equally
whatever GPU they run on. Priority: shorter remaining time first; ties go to a running job, then to the earlier
job. The allocation step is schedulers/preemptive.py's: waiting jobs in that order start on free capacity, or
preempt the fewest running jobs of strictly longer remaining time when that lets them start. Remaining times of
running jobs shrink while waiting ones stay put, so the order between a waiting and a running job only changes
at arrivals and completions: SRTF needs no wake-ups.
"""

from __future__ import annotations

from bisect import bisect_right

from schedulers.preemptive import allocate, lone_start
from sim.simulator import View

_AFTER_ALL = 1 << 62  # larger than any job index
_SORT_MAX = 64
"""below this many waiting jobs the policy sorts them itself rather than read the simulator's by-runtime index
(see `_by_runtime`; a module attribute, so that tests can force either way)"""


def remaining_s(view: View, job: int) -> float:
    """Known reference seconds of work left (0 for a job that overran its known runtime)."""
    return max(view.jobs.known_runtime_s[job] - view.progress_now(job), 0.0)


def srtf(view: View) -> list:
    lone = lone_start(view)  # one job waits and fits: it starts
    if lone is not None:
        return lone
    running = view.running  # (estimated end, job), by estimated end
    now = view.now_s
    # a running job's remaining work is at most its remaining wall time x the fastest speed (its estimated end
    # counts its restore and its known remaining work at its own speed), so only the jobs ending after
    # now + k / top_speed can have more than k left: the victims of a waiting job of key k are among them
    top_speed = max(1.0, max(view.layout.type_speed))
    known, done, work_from, speed = (
        view.jobs.known_runtime_s,
        view.progress_s,
        view.run_work_start_s,
        view.run_speed,
    )
    cache: list = []

    def lower(key) -> list[int]:
        k = key[0]
        if not cache:  # keys only grow along the walk: the first call's candidates cover every later call's
            cutoff = now + k / top_speed * (1 - 1e-9) - 1e-9  # float slack: the exact test below decides
            by_rem = []
            for _, v in running[bisect_right(running, (cutoff, _AFTER_ALL)) :]:
                r = max(
                    known[v] - done[v] - max(0.0, now - work_from[v]) * speed[v], 0.0
                )  # remaining_s inlined
                if r > k:
                    by_rem.append((r, v))
            by_rem.sort()
            cache.extend(([r for r, _ in by_rem], [v for _, v in by_rem]))
        rems, jobs = cache
        return jobs[bisect_right(rems, k) :][::-1]  # lowest priority (most work left, later job) first

    by_runtime = view.queue_by_runtime
    if len(view.queue) < _SORT_MAX and not getattr(by_runtime, "active", True):
        by_runtime = _by_runtime(view)
    queued = (((k, i), i) for k, i in by_runtime)
    return allocate(view, queued, lower, lambda v: (remaining_s(view, v), v)).decisions


def _by_runtime(view: View) -> list[tuple[float, int]]:
    """`view.queue_by_runtime`'s entries, sorted here: the simulator keeps that index only once a policy has
    read it (then for every arrival, start and preemption), which a short queue does not need."""
    key = view.queue_key_s
    return sorted((key[i], i) for i in view.queue)
