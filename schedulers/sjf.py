"""Shortest-job-first: among waiting jobs that fit now, start the shortest known runtime first (no reservation).

"Runtime" is the known reference runtime (true or estimated, per --runtime_info); ties go to the earlier job.
"""

from __future__ import annotations

from env.placement import place
from env.simulator import Decision, View
from schedulers.plan import Plan


def sjf(view: View) -> list[Decision]:
    jt = view.jobs
    plan = Plan(view.free)
    shape = jt.shape
    no_fit = set()  # capacity only shrinks during the scan: a shape that did not fit will not fit later
    for _, i in view.queue_by_runtime:
        if plan.exhausted():
            break
        key = shape[i]
        if key in no_fit:
            continue
        p = place(plan.free, *key)
        if p is None:
            no_fit.add(key)
        else:
            plan.add(i, p)
    return plan.decisions
