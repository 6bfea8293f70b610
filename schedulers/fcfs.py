"""Strict first-come-first-served: start jobs in arrival order; the first that does not fit blocks the rest."""

from __future__ import annotations

from schedulers.plan import Plan
from sim.placement import place
from sim.simulator import Decision, View


def fcfs(view: View) -> list[Decision]:
    jt = view.jobs
    plan = Plan(view.free)
    for i in view.queue:
        p = place(plan.free, *jt.shape[i])
        if p is None:
            break
        plan.add(i, p)
    return plan.decisions
