"""Strict first-come-first-served: start jobs in arrival order; the first that does not fit blocks the rest.

Between instants: a call remembers the job that blocked it and the free state it left (the live state once
its decisions are applied). While that job is still first and the free state has not changed since (no take
or give but those decisions, each applied with its placement: `FreeState.version` counts them), it still does
not fit, so such a call (an instant of arrivals only, say) returns at once.
"""

from __future__ import annotations

from weakref import ref

from schedulers.plan import Plan
from sim.placement import place
from sim.simulator import Decision, View, starts_only


@starts_only
def fcfs(view: View) -> list[Decision]:
    free = view.free
    queue = view.queue
    if not queue:
        return []
    head = next(iter(queue))
    free_ref, version, blocked, applied = _last
    if blocked == head and version == free.version and free_ref() is free:
        placements = view.placements
        if all(placements[i] is p for i, p in applied):
            return []
    shape = view.jobs.shape
    plan = Plan(free)
    for i in queue:
        p = place(plan.free, *shape[i])
        if p is None:
            decisions = plan.decisions
            _last[:] = [ref(free), free.version + len(decisions), i, tuple(decisions)]
            break
        plan.add(i, p)
    return plan.decisions


def _dead() -> None:
    return None


# the last call that met a job that did not fit: (a weak reference to the live free state, its version once the
# call's decisions are applied, that job, the decisions)
_last: list = [_dead, -1, -1, ()]
