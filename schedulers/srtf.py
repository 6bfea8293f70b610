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

from env.simulator import View
from schedulers.preemptive import allocate


def remaining_s(view: View, job: int) -> float:
    """Known reference seconds of work left (0 for a job that overran its known runtime)."""
    return max(view.jobs.known_runtime_s[job] - view.progress_now(job), 0.0)


def srtf(view: View) -> list:
    running = view.running
    if running:
        # no running job has more work left than this bound: its remaining wall time x the fastest speed
        top_speed = max(1.0, max(view.layout.type_speed))
        bound = max(running[-1][0] - view.now_s, 0.0) * top_speed * (1 + 1e-9) + 1e-9  # float slack
    else:
        bound = -1.0
    cache: list = []

    def lower(key) -> list[int]:
        if key[0] >= bound:  # cheap exit: nothing runs that long
            return []
        if not cache:
            by_rem = sorted((remaining_s(view, v), v) for _, v in running)
            cache.append(([r for r, _ in by_rem], [v for _, v in by_rem]))
        rems, jobs = cache[0]
        return jobs[bisect_right(rems, key[0]) :][::-1]

    queued = (((k, i), i) for k, i in view.queue_by_runtime)
    return allocate(view, queued, lower).decisions
