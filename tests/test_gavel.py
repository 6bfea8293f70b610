"""Gavel: the max-min fairness LPs on hand-computed 2-job / 2-type cases, and the round-based policy."""

from __future__ import annotations

import numpy as np

from schedulers.gavel_lp import agnostic_allocation, aware_allocation, equal_share, max_min_fair

ONES = np.ones(2)


def test_max_min_fair_equalises_throughput_over_two_types():
    # 1 V100 + 1 K80; job A runs 4/1 (V100/K80), B 2/1. With a = A's V100 share, b its K80 share, c and d B's:
    # full use needs a + b = 1, c = 1 - a, d = a, so A = 4a + 1 - a = 1 + 3a and B = 2(1 - a) + a = 2 - a;
    # equal at a = 1/4: both get 1.75. (B >= 1.75 with c + d <= 1 forces c >= 3/4, so a <= 1/4; A >= 1.75
    # forces a >= 1/4: the optimum is unique.)
    x = max_min_fair(np.array([[4.0, 1.0], [2.0, 1.0]]), ONES, ONES, np.ones((2, 2), dtype=bool))
    assert np.allclose(x, [[0.25, 0.75], [0.75, 0.25]], atol=1e-6)


def test_agnostic_gives_equal_time_and_respects_types_a_job_cannot_use():
    # B cannot run on the V100: max-min of total time gives B the whole K80 and A the whole V100 (t = 1).
    runnable = np.array([[True, True], [False, True]])
    x = agnostic_allocation(runnable, ONES, ONES)
    assert np.allclose(x, [[1.0, 0.0], [0.0, 1.0]], atol=1e-6)


def test_equal_share_splits_each_type_over_the_jobs_that_can_use_it():
    # 2 V100s shared by A (scale 1) and B (scale 2): 2 / 3 of the time each; 1 K80 only A can use: 1, capped
    # so that A's row sums to 1: A = (2/3, 1) / (5/3) = (0.4, 0.6), B = (2/3, 0).
    x = equal_share(np.array([[True, True], [True, False]]), np.array([1.0, 2.0]), np.array([2.0, 1.0]))
    assert np.allclose(x, [[0.4, 0.6], [2 / 3, 0.0]])


def test_aware_gives_the_fast_type_to_the_job_that_gains_from_it():
    # A runs 4/1 on V100/K80, B 1/1. Equal shares (1/2 of each type): A's throughput 2.5, B's 1. Normalised
    # coefficients A (1.6, 0.4), B (1, 1). Full use: A = 1.6a + 0.4(1 - a) = 0.4 + 1.2a, B = (1 - a) + a = 1,
    # so the minimum is 1 for every a >= 1/2; the second stage maximises the sum 1.4 + 1.2a -> a = 1:
    # A gets the V100 (normalised 1.6), B the K80 (1.0), where the agnostic split leaves both at 1.
    x = aware_allocation(np.array([[4.0, 1.0], [1.0, 1.0]]), ONES, ONES)
    assert np.allclose(x, [[1.0, 0.0], [0.0, 1.0]], atol=1e-5)


def test_scale_counts_gpus_held():
    # One type with 4 GPUs; A needs 4 GPUs (scale 4), B 1; coefficients = scale. t <= 4 x_A and t <= x_B <= 1,
    # so t = 1 with x_B = 1 and x_A >= 1/4; capacity 4 x_A + x_B <= 4 -> x_A <= 3/4, and the second stage
    # (maximise 4 x_A + x_B) takes x_A = 3/4.
    x = max_min_fair(
        np.array([[4.0], [1.0]]), np.array([4.0, 1.0]), np.array([4.0]), np.ones((2, 1), dtype=bool)
    )
    assert np.allclose(x, [[0.75], [1.0]], atol=1e-5)
