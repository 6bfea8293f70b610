"""Per-job values as numpy arrays, for the policies' vectorised paths (the same floats as their scalar loops)."""

from __future__ import annotations

import numpy as np

VECTOR_MIN = 64
"""from this many jobs on, a policy's per-job arithmetic runs in numpy (below it, the Python loop is cheaper)"""


def gather(values: list, jobs: list[int]) -> np.ndarray:
    """values[j] for j in jobs, as a float array."""
    return np.fromiter(map(values.__getitem__, jobs), float, len(jobs))
