"""Arithmetic on the run timeline's step functions: exact integrals over windows and time-binned averages.

A timeline is a pair (t_s, value) with t_s non-decreasing; value[i] holds on [t_s[i], t_s[i+1]), the last value
holds after t_s[-1], and the function is 0 before t_s[0] (nothing is running before the first event).
When several samples share one instant the last of them is the state after that instant.
"""

from __future__ import annotations

import numpy as np


def check_timeline(t_s: np.ndarray, value: np.ndarray, name: str = "timeline") -> None:
    """Raise ValueError unless `t_s` and `value` are 1-D, equally long and `t_s` is finite and non-decreasing."""
    if t_s.ndim != 1 or value.ndim != 1 or len(t_s) != len(value):
        raise ValueError(
            f"{name}: t_s and values must be 1-D arrays of equal length, got {t_s.shape} and {value.shape}"
        )
    if len(t_s) and (not np.all(np.isfinite(t_s)) or np.any(np.diff(t_s) < 0)):
        raise ValueError(f"{name}: t_s must be finite and non-decreasing")


def step_cumulative(t_s: np.ndarray, value: np.ndarray, at_s: np.ndarray) -> np.ndarray:
    """Integral of the step function from -inf (where it is 0) up to each point of `at_s` (value x seconds)."""
    t_s = np.asarray(t_s, dtype=float)
    value = np.asarray(value, dtype=float)
    at_s = np.asarray(at_s, dtype=float)
    check_timeline(t_s, value)
    if len(t_s) == 0:
        return np.zeros_like(at_s)
    # area accumulated up to each sample time: area_at_sample[i] = integral from t_s[0] to t_s[i]
    area_at_sample = np.concatenate(([0.0], np.cumsum(value[:-1] * np.diff(t_s))))
    k = np.searchsorted(t_s, at_s, side="right") - 1  # last sample at or before each point
    inside = k >= 0
    kk = np.where(inside, k, 0)
    return np.where(inside, area_at_sample[kk] + value[kk] * (at_s - t_s[kk]), 0.0)


def step_integral(t_s: np.ndarray, value: np.ndarray, start_s: float, end_s: float) -> float:
    """Exact integral of the step function over [start_s, end_s] (value x seconds); 0 if end_s <= start_s."""
    if not end_s > start_s:
        return 0.0
    lo, hi = step_cumulative(t_s, value, np.array([start_s, end_s]))
    return float(hi - lo)


def step_bin_means(
    t_s: np.ndarray, value: np.ndarray, start_s: float, end_s: float, num_bins: int
) -> tuple[np.ndarray, np.ndarray]:
    """Time-weighted mean of the step function over `num_bins` equal bins of [start_s, end_s].

    Returns (bin_edges_s of length num_bins + 1, means of length num_bins). Used to downsample long timelines
    for plotting without aliasing: each bin's mean is exact, whatever the number of samples inside it.
    """
    if num_bins < 1 or not end_s > start_s:
        raise ValueError(f"need num_bins >= 1 and end_s > start_s, got {num_bins}, [{start_s}, {end_s}]")
    edges_s = np.linspace(start_s, end_s, num_bins + 1)
    area = step_cumulative(t_s, value, edges_s)
    return edges_s, np.diff(area) / np.diff(edges_s)
