"""Shortest-job-first: among waiting jobs that fit now, start the shortest known runtime first (no reservation).

"Runtime" is the known reference runtime (true or estimated, per --runtime_info); ties go to the earlier job.
"""

from __future__ import annotations

from schedulers.plan import Plan
from sim.simulator import Decision, View


def sjf(view: View) -> list[Decision]:
    jt = view.jobs
    plan = Plan(view.free)
    shape = jt.shape
    for _, i in view.queue_by_runtime:
        if plan.exhausted():
            break
        p = plan.place(shape[i])
        if p is not None:
            plan.add(i, p)
    return plan.decisions
