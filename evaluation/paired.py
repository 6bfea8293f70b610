"""Paired comparison of two policies over the same test cases: mean relative difference with bootstrap and t CIs."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# Two-sided 95 % Student's t critical values t_{0.975, df}, df = 1..30 (standard tables).
T975 = (
    12.706204736, 4.302652730, 3.182446305, 2.776445105, 2.570581836, 2.446911851, 2.364624252, 2.306004135,
    2.262157163, 2.228138852, 2.200985160, 2.178812830, 2.160368656, 2.144786688, 2.131449546, 2.119905299,
    2.109815578, 2.100922040, 2.093024054, 2.085963447, 2.079613845, 2.073873068, 2.068657610, 2.063898562,
    2.059538553, 2.055529439, 2.051830516, 2.048407142, 2.045229642, 2.042272456,
)  # fmt: skip
Z975 = 1.959963984540054

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
"""the bootstrap's own generator: the same numbers give the same interval, run after run"""


def t975(df: int) -> float:
    """t_{0.975, df}: the table up to 30, then the Cornish-Fisher expansion around the normal (error < 1e-5)."""
    if df < 1:
        return math.nan
    if df <= len(T975):
        return T975[df - 1]
    z = Z975
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
        + (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / (92160 * df**4)
    )


@dataclass(frozen=True)
class PairedDiff:
    """learner vs baseline on n paired cases; differences are relative, (learner - baseline) / baseline, so
    negative means the learner's average JCT is lower (better)."""

    n: int
    mean_rel: float
    boot_lo: float
    """95 % percentile-bootstrap interval of the mean (cases resampled with replacement, pairs kept together)"""
    boot_hi: float
    t_lo: float
    """95 % Student's t interval of the mean: mean +- t_{0.975, n-1} s / sqrt(n)"""
    t_hi: float
    wins: int
    """cases where the learner is strictly better"""
    losses: int
    """cases where the learner is strictly worse"""

    @property
    def verdict(self) -> str:
        if self.boot_hi < 0:
            return "better"
        if self.boot_lo > 0:
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
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    means = d[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    boot_lo, boot_hi = (float(x) for x in np.quantile(means, [0.025, 0.975]))
    if n > 1:
        half = t975(n - 1) * float(d.std(ddof=1)) / math.sqrt(n)
    else:
        half = math.nan
    return PairedDiff(
        n, mean, boot_lo, boot_hi, mean - half, mean + half, int((d < 0).sum()), int((d > 0).sum())
    )
