"""Paired comparison of two policies over the same test cases: mean relative difference with bootstrap and t CIs."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from metrics.t_quantile import T975, Z975, t975  # noqa: F401  (re-exported: evaluation's and sweep's name)

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
"""the bootstrap's own generator: the same numbers give the same interval, run after run"""


@dataclass(frozen=True)
class PairedDiff:
    """learner vs baseline on n paired cases; differences are relative, (learner - baseline) / baseline, so
    negative means the learner's average JCT is lower (better)."""

    n: int
    mean_rel: float
    boot_lo: float
    """95 % percentile-bootstrap interval of the mean (cases resampled with replacement, pairs kept together);
    NaN, as the t interval, for one case (the verdict is then "one case: no interval")"""
    boot_hi: float
    t_lo: float
    """95 % Student's t interval of the mean: mean +- t_{0.975, n-1} s / sqrt(n)"""
    t_hi: float
    wins: int
    """cases where the learner is strictly better"""
    losses: int
    """cases where the learner is strictly worse"""

    @property
    def below_zero(self) -> bool:
        """Whether both intervals lie below 0 (the learner significantly better). Both, because the percentile
        bootstrap is too narrow on a few cases: on 2 or 3 it is about the range of the differences, so any
        same-signed ones would pass it alone, where the t interval still spans 0."""
        return self.boot_hi < 0 and self.t_hi < 0

    @property
    def above_zero(self) -> bool:
        """Whether both intervals lie above 0 (the learner significantly worse)."""
        return self.boot_lo > 0 and self.t_lo > 0

    @property
    def verdict(self) -> str:
        if self.n < 2:
            return "one case: no interval"
        if self.below_zero:
            return "better"
        if self.above_zero:
            return "worse"
        return "no significant difference"


def paired_relative_difference(
    learner: np.ndarray, baseline: np.ndarray, resamples: int = BOOTSTRAP_RESAMPLES
) -> PairedDiff:
    """Compare per-case scores (lower is better) of a learner and a baseline on the same cases."""
    learner, baseline = np.asarray(learner, dtype=float), np.asarray(baseline, dtype=float)
    if learner.shape != baseline.shape or learner.ndim != 1 or len(learner) == 0:
        raise ValueError(f"need two equally long 1-D score arrays, got {learner.shape} and {baseline.shape}")
    d = (learner - baseline) / baseline
    n = len(d)
    mean = float(d.mean())
    if n > 1:
        rng = np.random.default_rng(BOOTSTRAP_SEED)
        means = d[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
        boot_lo, boot_hi = (float(x) for x in np.quantile(means, [0.025, 0.975]))
        half = t975(n - 1) * float(d.std(ddof=1)) / math.sqrt(n)
    else:  # resampling one case gives it back every time: no interval, and no verdict, from one case
        boot_lo = boot_hi = half = math.nan
    return PairedDiff(
        n, mean, boot_lo, boot_hi, mean - half, mean + half, int((d < 0).sum()), int((d > 0).sum())
    )
