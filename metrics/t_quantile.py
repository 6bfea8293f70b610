"""Student's t critical value t_{0.975, df} of 95 % confidence intervals of a mean."""

from __future__ import annotations

import math

# Two-sided 95 % Student's t critical values t_{0.975, df}, df = 1..30 (standard tables).
T975 = (
    12.706204736, 4.302652730, 3.182446305, 2.776445105, 2.570581836, 2.446911851, 2.364624252, 2.306004135,
    2.262157163, 2.228138852, 2.200985160, 2.178812830, 2.160368656, 2.144786688, 2.131449546, 2.119905299,
    2.109815578, 2.100922040, 2.093024054, 2.085963447, 2.079613845, 2.073873068, 2.068657610, 2.063898562,
    2.059538553, 2.055529439, 2.051830516, 2.048407142, 2.045229642, 2.042272456,
)  # fmt: skip
Z975 = 1.959963984540054


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
