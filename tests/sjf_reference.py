"""The plain SJF scan (the rule is in schedulers/sjf.py's docstring), kept unoptimised as the reference the
shape-by-shape schedulers/sjf.py must match decision for decision: every waiting job tested in (runtime, job)
order on the capacity left."""

from __future__ import annotations

from schedulers.plan import Plan
from sim.placement import place
from sim.simulator import Decision, View


def sjf_reference(view: View) -> list[Decision]:
    jt = view.jobs
    plan = Plan(view.free)
    for _, i in sorted((jt.known_runtime_s[i], i) for i in view.queue):
        p = place(plan.free, *jt.shape[i])
        if p is not None:
            plan.add(i, p)
    return plan.decisions
