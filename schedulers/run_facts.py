"""Facts about the run a policy is called in, computed once per run: whether some job is fractional, and whether
every runtime estimate is the true runtime (jobs then end exactly where a policy expects them to, which is what
lets EASY and CBF keep what they computed from one decision instant to the next; in a run with fractional jobs
CBF also keeps each job's previous reservation, which can change its decisions: schedulers/cbf.py)."""

from __future__ import annotations

from sim.cluster import FULL

_RUN_FACTS: dict[int, tuple[object, bool, bool]] = {}


def run_facts(jt) -> tuple[bool, bool]:
    """(some job of the run is fractional, every estimate is the true runtime) for JobTable `jt`. Only the
    latest run is remembered; the facts choose how much a policy recomputes, and whether CBF keeps slots."""
    hit = _RUN_FACTS.get(id(jt))
    if hit is None or hit[0] is not jt:
        _RUN_FACTS.clear()
        frac = any(m < FULL for m in jt.milli)
        exact = all(a == b for a, b in zip(jt.known_runtime_s, jt.runtime_s, strict=True))
        hit = _RUN_FACTS[id(jt)] = (jt, frac, exact)
    return hit[1], hit[2]
