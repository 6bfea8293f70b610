"""How long a job runs on a placement: the one duration rule every part of the simulator uses.

A job's `runtime_s` is its duration on the reference type (A100, speed 1.0). On a GPU type of relative speed v it
runs `runtime_s / v`, and `multi_node_factor` times longer when its GPUs span several nodes. Two exceptions come
from the job (workloads/job.py): a job whose runtime already includes its spreading (`runtime_includes_spread`:
every trace job, whose recorded duration was measured on the recorded placement) never gets the factor, and a job
whose lifetime does not depend on GPU speed (`speed_scaled=False`: an inference service such as an openb LS pod)
runs `runtime_s` on every type.
"""

from __future__ import annotations

from collections.abc import Iterable

from workloads.job import Job


class DurationRule:
    """The duration rule of one class of jobs; equal classes share one object (it is part of a job's shape)."""

    __slots__ = ("speed_scaled", "multi_node_factor")

    def __init__(self, speed_scaled: bool, multi_node_factor: float):
        self.speed_scaled = speed_scaled
        self.multi_node_factor = multi_node_factor
        """the factor this class pays when spread over nodes (1.0 when its runtime already includes spreading)"""

    def speed(self, type_speed: float, multi_node: bool) -> float:
        """Effective speed: a reference runtime r runs r / speed(...) seconds on a GPU type of speed `type_speed`,
        spread over several nodes if `multi_node`."""
        v = type_speed if self.speed_scaled else 1.0
        if multi_node:
            v /= self.multi_node_factor
        return v

    def duration_s(self, runtime_s: float, type_speed: float, multi_node: bool) -> float:
        """Seconds a job of reference runtime `runtime_s` runs on a GPU type of speed `type_speed`."""
        return runtime_s / self.speed(type_speed, multi_node)

    def __repr__(self) -> str:
        return f"DurationRule(speed_scaled={self.speed_scaled}, multi_node_factor={self.multi_node_factor})"


def duration_rules(jobs: Iterable[Job], multi_node_runtime_factor: float) -> list[DurationRule]:
    """Each job's rule under the run's multi-node factor (at most four distinct objects)."""
    cache: dict[tuple[bool, bool], DurationRule] = {}
    out = []
    for j in jobs:
        key = (j.speed_scaled, j.runtime_includes_spread)
        r = cache.get(key)
        if r is None:
            factor = 1.0 if j.runtime_includes_spread else multi_node_runtime_factor
            r = cache[key] = DurationRule(j.speed_scaled, factor)
        out.append(r)
    return out
