"""A finished episode's grade in [0, 1] between a trivial policy's objective (0) and a reference's (1): the record
the server returns and the two clipped linear maps (an objective to lower, one to raise)."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Grade:
    """A finished episode's score: 1 at the reference's objective or better, 0 at the trivial policy's or worse,
    linear in between; never increases when the objective gets worse."""

    score: float
    objective: str
    """what is scored, e.g. avg_jct_s (lower is better)"""
    value: float
    """the episode's objective"""
    trivial_value: float
    """the objective of `trivial_policy` on the same scenario (score 0)"""
    reference_value: float
    """the objective of `reference_policy` on the same scenario (score 1)"""
    trivial_policy: str
    reference_policy: str


def grade_lower_better(value: float, trivial: float, reference: float) -> float:
    """(trivial - value) / (trivial - reference) clipped to [0, 1]: 0 at the trivial objective or worse, 1 at
    the reference or better; when the reference is no better than the trivial policy, 1 iff value <= reference."""
    if not math.isfinite(value):
        return 0.0
    if reference >= trivial:
        return 1.0 if value <= reference else 0.0
    return float(min(1.0, max(0.0, (trivial - value) / (trivial - reference))))


def grade_higher_better(value: float, trivial: float, reference: float) -> float:
    """(value - trivial) / (reference - trivial) clipped to [0, 1]; when the reference is no better than the
    trivial anchor, 1 iff value >= reference. Non-decreasing in `value`."""
    if not math.isfinite(value):
        return 0.0
    if reference <= trivial:
        return 1.0 if value >= reference else 0.0
    return float(min(1.0, max(0.0, (value - trivial) / (reference - trivial))))
