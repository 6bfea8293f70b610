"""Strict first-come-first-served: start jobs in arrival order; the first that does not fit blocks the rest."""

from __future__ import annotations

from env.placement import place
from env.simulator import Decision, View


def fcfs(view: View) -> list[Decision]:
    jt = view.jobs
    free = view.free
    out: list[Decision] = []
    copied = False
    for i in view.queue:
        p = place(free, jt.elig[i], jt.num_gpus[i], jt.milli[i], jt.mem_mb[i])
        if p is None:
            break
        if not copied:
            free = free.copy()
            copied = True
        free.take(p)
        out.append(Decision(i, p))
    return out
