"""Shortest-job-first: among waiting jobs that fit now, start the shortest known runtime first (no reservation)."""

from __future__ import annotations

from env.placement import place
from env.simulator import Decision, View


def sjf(view: View) -> list[Decision]:
    jt = view.jobs
    free = view.free
    out: list[Decision] = []
    copied = False
    for _, i in view.queue_by_runtime:
        if free.free_milli_total == 0:
            break
        p = place(free, jt.elig[i], jt.num_gpus[i], jt.milli[i], jt.mem_mb[i])
        if p is None:
            continue
        if not copied:
            free = free.copy()
            copied = True
        free.take(p)
        out.append(Decision(i, p))
    return out
