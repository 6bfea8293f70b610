"""Fairness metrics (metrics/fairness.py): hand-computed Jain's index, max slowdown and Themis' rho on a tiny run,
and a plain second implementation of rho (a loop over jobs) on random runs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from metrics.fairness import fairness, ftf_rho, jain_index, write_fairness_csv
from schedulers import POLICIES
from sim.cluster import ClusterLayout
from sim.simulator import Simulator
from tests.helpers import job, run
from tests.test_invariants import clusters, workloads


def test_jain_index_extremes():
    assert jain_index(np.array([2.0, 2.0, 2.0])) == pytest.approx(1.0)
    assert jain_index(np.array([1.0, 0.0, 0.0, 0.0])) == pytest.approx(0.25)  # 1 / n
    assert np.isnan(jain_index(np.array([])))


def test_hand_computed_fcfs_run(tmp_path):
    """2 A100 GPUs (speed 1), FCFS. a (t=0, 100 s, 2 GPUs) runs 0-100; b (t=0, 100 s, 1 GPU) waits, runs 100-200;
    c (t=50, 10 s, 1 GPU) is blocked behind b, runs 100-110; d (4 GPUs) never fits: rejected, not counted.
    JCT a 100, b 200, c 60; bounded slowdown 1, 2, 6 -> Jain (1+2+6)^2 / (3 (1+4+36)) = 81/123, max 6.
    Jobs in system at arrival: a, b: 2 (a, b); c: 3 (a, b running/queued, c). G = 2.
    T_independent: a 100 x max(1, 2x2/2) = 200; b 100 x max(1, 2x1/2) = 100; c 10 x max(1, 3x1/2) = 15.
    rho: a 100/200 = 0.5, b 200/100 = 2, c 60/15 = 4 -> avg 6.5/3, max 4, 2 of 3 above 1."""
    jobs = [job("a", 0, 100, 2), job("b", 0, 100, 1), job("d", 0, 10, 4), job("c", 50, 10, 1)]
    sim, by_id = run("1xA100:2", jobs, "fcfs")
    assert [by_id[k][:2] for k in "abc"] == [(0.0, 100.0), (100.0, 200.0), (100.0, 110.0)]
    result = sim.result("fcfs", 0)
    assert np.allclose(ftf_rho(result), [0.5, 2.0, np.nan, 4.0], equal_nan=True)
    row = fairness(result)
    assert row.completed == 3 and row.ftf_jobs == 3
    assert row.jain_slowdown == pytest.approx(81 / 123)
    assert row.max_slowdown == pytest.approx(6.0)
    assert row.avg_ftf_rho == pytest.approx(6.5 / 3)
    assert row.max_ftf_rho == pytest.approx(4.0)
    assert row.frac_ftf_rho_above_1 == pytest.approx(2 / 3)
    text = write_fairness_csv([row], tmp_path / "fairness.csv").read_text().splitlines()
    assert text[0].startswith("scheduler,workload,seed,completed,jain_slowdown,max_slowdown,ftf_jobs")
    assert text[1].startswith("fcfs,t,0,3,0.6585365853658")


def _plain_rho(result) -> list[float]:
    """Themis' rho by a loop over jobs: count who is in the system at each arrival."""
    g = result.total_gpus
    out = []
    for i, j in enumerate(result.jobs):
        if result.status[i] != "completed" or not result.runtime_actual_s[i] > 0:
            out.append(float("nan"))
            continue
        n = 0
        for k, o in enumerate(result.jobs):
            end = result.end_s[k] if result.end_s[k] == result.end_s[k] else float("inf")
            if result.status[k] != "rejected" and o.arrival_s <= j.arrival_s < end:
                n += 1
        t_ind = result.runtime_actual_s[i] * max(1.0, n * j.gpu_demand / g)
        out.append((result.end_s[i] - j.arrival_s) / t_ind)
    return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads())
def test_rho_equals_a_plain_loop(spec, workload):
    sim = Simulator(workload, ClusterLayout(spec))
    sim.run(POLICIES["easy"])
    r = sim.result("easy", 0)
    assert np.allclose(ftf_rho(r), _plain_rho(r), equal_nan=True, rtol=1e-12)


def test_compare_writes_one_fairness_row_per_run_at_the_top(tmp_path):
    """compare's top-level fairness.csv holds every run's row (as in its <algo>_seed<S>/fairness.csv), in the
    order of summary.csv, so policies can be compared on fairness from one file."""
    import pandas as pd

    from main import main

    out = tmp_path / "cmp"
    argv = [
        "--mode",
        "compare",
        "--algos",
        "fcfs,srtf",
        "--seeds",
        "0,1",
        "--num_jobs",
        "60",
        "--difficulty",
        "hard",
    ]
    assert main([*argv, "--log_dir", str(out), "--no_progress"]) == 0
    top = pd.read_csv(out / "fairness.csv")
    summary = pd.read_csv(out / "summary.csv")
    assert top[["scheduler", "seed"]].values.tolist() == summary[["scheduler", "seed"]].values.tolist()
    assert len(top) == 4
    for _, row in top.iterrows():
        own = pd.read_csv(out / f"{row.scheduler}_seed{row.seed}" / "fairness.csv")
        assert own.iloc[0].to_dict() == row.to_dict()
