"""Synthetic profiles: published statistics reproduced, legacy unchanged, outcomes, requested times, kill at limit."""

from __future__ import annotations

import gzip
import hashlib
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from config import DIFFICULTIES, RunConfig, UserError, WorkloadConfig
from main import main
from scenario.build import build_scenario, kill_at_estimate
from sim.cluster_spec import parse_cluster_spec
from sim.job import Job, Workload
from sim.load import offered_load_factor
from tests.helpers import run
from tests.test_synthetic import _fits_empty_cluster
from workloads.calibrated import CANCELLED, COMPLETED, FAILED, KILLED, generate_profile
from workloads.estimates import (
    MAX_REQUEST_S,
    REQUEST_POPULARITY,
    REQUEST_VALUES_S,
    RICC_MEDIAN_ACCURACY,
    RICC_SHARE_MAX_REQUEST,
    UNDER_REQUEST_PROB,
    request_from_uniforms,
)
from workloads.profile_stats import compare, measure
from workloads.profiles import HELIOS, ITP, PHILLY, PROFILES

HARD = parse_cluster_spec(DIFFICULTIES["hard"].cluster)
ARRIVAL_ROWS = ("peak_to_trough", "peak_hour_h", "burstiness")
# Rows a profile shows but does not fit: no published value for its trace, or (estimate accuracy) a request
# model fitted to RICC whose accuracy follows the profile's runtimes. Listed so an exception is never silent.
NOT_FITTED = {
    "philly": {"share_jobs_ge_8_gpus", "gpu_time_share_ge_8_gpus"},
    "helios": {
        "share_runtime_le_10min",
        "share_jobs_ge_8_gpus",
        "gpu_time_share_ge_8_gpus",
        "median_estimate_accuracy",
    },
    "itp": {"median_estimate_accuracy"},
}


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_profile_reproduces_its_published_statistics(name):
    """Every fitted row within 15 % (100,000 jobs on the hard cluster, which holds every profile's largest job)."""
    profile = PROFILES[name]
    w = generate_profile(HARD, 100_000, 1.0, np.random.default_rng(0), profile)
    rows = compare(measure(w.jobs), profile)
    assert {r.statistic for r in rows if r.within is None} == NOT_FITTED[name]
    off = [r for r in rows if r.statistic not in ARRIVAL_ROWS and r.within is False]
    assert not off, off


def test_arrival_statistics_match_venus():
    """Peak/trough, peak hour and burstiness need many jobs: the quietest hour's mean count of a bursty process
    (variance/mean 9) has a sampling error near 15 % at 100,000 jobs, 4 % at 400,000."""
    for p in (HELIOS, ITP):  # every profile shares philly's arrival model, so one profile checks all
        assert (p.hourly_rate, p.burst_job_fraction, p.burst_size_min, p.burst_size_max) == (
            PHILLY.hourly_rate,
            PHILLY.burst_job_fraction,
            PHILLY.burst_size_min,
            PHILLY.burst_size_max,
        )
    w = generate_profile(HARD, 400_000, 1.0, np.random.default_rng(0), PHILLY)
    rows = {r.statistic: r for r in compare(measure(w.jobs), PHILLY)}
    for name in ARRIVAL_ROWS:
        assert rows[name].within, rows[
            name
        ]  # the peak hour within 1 h: Venus's 16:00 and 17:00 differ by 0.07 %


def test_legacy_profile_reproduces_the_original_generator_byte_for_byte():
    """Fingerprints of build_scenario's jobs computed with the generator before profiles existed (6dca959)."""
    expected = {
        "easy": "9112d4079dc6e04648129d596a526e9270d3f9911e8535d1472832feef98a881",
        "medium": "992f7c68afae05d99413f9ceccbd19ab5a3502ebb34a8fe6d85c0571f8a5dc92",
        "hard": "995e41817a739fbc211f3ed4d0eb33e07a2b3492983c6066fc0c52ac9e595102",
    }
    for difficulty, digest in expected.items():
        cfg = RunConfig(workload=WorkloadConfig(difficulty=difficulty, synthetic_profile="legacy"))
        jobs = build_scenario(cfg, 3).workload.jobs
        text = "\n".join(
            f"{j.job_id},{j.arrival_s!r},{j.runtime_s!r},{j.num_gpus},{j.gpu_mem_gb!r},{j.gpu_milli},"
            f"{'|'.join(j.gpu_types)},{j.priority}"
            for j in jobs
        )
        assert hashlib.sha256(text.encode()).hexdigest() == digest, difficulty
        assert all(j.estimate_s is None and j.trace_status == "" for j in jobs)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_profile_jobs_fit_offer_the_target_load_and_repeat_with_the_seed(name):
    cluster = parse_cluster_spec(DIFFICULTIES["medium"].cluster)
    a = generate_profile(cluster, 3000, 0.8, np.random.default_rng(1), PROFILES[name])
    assert a.jobs == generate_profile(cluster, 3000, 0.8, np.random.default_rng(1), PROFILES[name]).jobs
    assert a.jobs != generate_profile(cluster, 3000, 0.8, np.random.default_rng(2), PROFILES[name]).jobs
    assert offered_load_factor(a.jobs, cluster.num_gpus) == pytest.approx(0.8, rel=1e-9)
    assert all(_fits_empty_cluster(j, cluster) for j in a.jobs)
    assert [j.job_id for j in a.jobs] == [str(i) for i in range(3000)]
    assert a.jobs[0].arrival_s == 0.0 and all(
        x.arrival_s <= y.arrival_s for x, y in zip(a.jobs, a.jobs[1:], strict=False)
    )
    assert {j.trace_status for j in a.jobs} == {COMPLETED, FAILED, CANCELLED}
    assert a.report["status_counts"] == {
        s: sum(j.trace_status == s for j in a.jobs) for s in a.report["status_counts"]
    }
    assert all(j.estimate_s in REQUEST_VALUES_S for j in a.jobs)


def test_small_cluster_truncates_job_sizes():
    w = generate_profile(parse_cluster_spec("1xT4:2"), 2000, 0.5, np.random.default_rng(6), HELIOS)
    assert {j.num_gpus for j in w.jobs} == {1, 2}
    assert w.report["max_gpus_per_job"] == 2


def test_requests_of_completed_jobs_cover_their_runtime_except_under_requesters():
    w = generate_profile(HARD, 20_000, 1.0, np.random.default_rng(4), PHILLY)
    done = [j for j in w.jobs if j.trace_status == COMPLETED]
    short = [j for j in done if j.estimate_s < j.runtime_s]
    over_max = sum(j.runtime_s > MAX_REQUEST_S for j in done)
    # under-requesters (RICC: 1.6 %) plus jobs longer than the 72 h maximum
    assert len(short) - over_max == pytest.approx(
        UNDER_REQUEST_PROB * len(done), abs=4 * np.sqrt(len(done) * 0.016)
    )
    assert all(
        j.estimate_s == REQUEST_VALUES_S[REQUEST_VALUES_S < j.runtime_s].max() or j.runtime_s > MAX_REQUEST_S
        for j in short
    )


def test_request_from_uniforms_hand_cases():
    intended = np.array([1000.0, 1000.0, 1000.0, 1000.0, 200.0, 300_000.0, 7200.0])
    u_kind = np.array([0.5, 0.5, 0.1, 0.01, 0.01, 0.5, 0.5])
    u_value = np.array([0.0, 0.999999, 0.3, 0.3, 0.0, 0.3, 0.0])
    got = request_from_uniforms(intended, u_kind, u_value).tolist()
    assert got == [
        1200.0,  # popular draw: the smallest value >= 1000 s at u_value 0
        48 * 3600.0,  # ... the largest value below the maximum at u_value -> 1
        MAX_REQUEST_S,  # 0.016 <= u_kind < 0.474: the maximum
        900.0,  # u_kind < 0.016: the largest value below the runtime
        300.0,  # an under-requester with nothing below 200 s requests as usual
        MAX_REQUEST_S,  # nothing popular covers 83 h: the maximum
        7200.0,  # a value equal to the runtime covers it
    ]
    # Popularity restricted to values >= 1000 s (1200 s .. 48 h, mass 0.4750): 1200 s holds 0.0022 of it.
    assert (
        request_from_uniforms(np.array([1000.0]), np.array([0.5]), np.array([0.0022 / 0.4750 - 1e-6]))[0]
        == 1200.0
    )
    assert (
        request_from_uniforms(np.array([1000.0]), np.array([0.5]), np.array([0.0022 / 0.4750 + 1e-6]))[0]
        == 1800.0
    )


def test_kill_at_estimate_hand_case_replays_the_request():
    jobs = (
        Job("over", 0.0, 100.0, 1, estimate_s=50.0),
        Job("within", 0.0, 30.0, 1, estimate_s=50.0),
        Job("none", 0.0, 80.0, 1),
    )
    killed = kill_at_estimate(Workload("w", jobs))
    assert [(j.runtime_s, j.trace_status) for j in killed.jobs] == [(50.0, KILLED), (30.0, ""), (80.0, "")]
    assert killed.report["killed_at_estimate"] == 1
    _, by_id = run("1xA100-80GB:4", killed.jobs, "fcfs")
    assert {k: (v[0], v[1]) for k, v in by_id.items()} == {
        "over": (0, 50),
        "within": (0, 30),
        "none": (0, 80),
    }
    with pytest.raises(UserError, match="no requested times"):
        kill_at_estimate(Workload("w", (jobs[2],)))


def test_kill_at_estimate_on_a_profile_scenario_caps_every_overrun():
    cfg = RunConfig(workload=WorkloadConfig(synthetic_profile="philly"))
    plain = build_scenario(cfg, 0).workload.jobs
    capped = build_scenario(
        replace(cfg, workload=replace(cfg.workload, kill_at_estimate=True)), 0
    ).workload.jobs
    for a, b in zip(plain, capped, strict=True):
        if a.runtime_s > a.estimate_s:
            assert (b.runtime_s, b.trace_status) == (a.estimate_s, KILLED)
        else:
            assert b == a
    assert sum(b.trace_status == KILLED for b in capped) > 0


def test_cli_profile_kill_and_status_in_jobs_csv(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["--mode", "eval", "--algo", "easy", "--difficulty", "easy", "--no_progress"]
    assert main([*args, "--synthetic_profile", "itp", "--kill_at_estimate", "--log_dir", str(out)]) == 0
    jobs = pd.read_csv(out / "jobs.csv", keep_default_na=False)
    assert set(jobs["trace_status"]) <= {COMPLETED, FAILED, CANCELLED, KILLED}
    assert (jobs["status"] == "completed").all() or set(jobs["status"]) <= {"completed", "unfinished"}
    legacy = ["--synthetic_profile", "legacy", "--log_dir", str(tmp_path / "legacy")]
    assert main([*args, "--kill_at_estimate", *legacy]) == 2
    assert "error: --kill_at_estimate" in capsys.readouterr().err
    with pytest.raises(SystemExit) as e:
        main([*args, "--synthetic_profile", "pai", "--log_dir", str(tmp_path / "x")])
    assert e.value.code == 2


RICC = Path(__file__).resolve().parents[2] / "shared" / "traces" / "swf-pwa" / "RICC-2010-2.swf.gz"


@pytest.mark.skipif(not RICC.is_file(), reason=f"shared trace copy absent: {RICC}")
def test_request_model_constants_match_the_ricc_log():
    """The constants of workloads/estimates.py, recomputed from the log (fields 4 run time, 9 requested time)."""
    with gzip.open(RICC, "rt") as f:
        cols = np.loadtxt(f, comments=";", usecols=(3, 8))
    run_s, req_s = cols[cols[:, 1] > 0].T
    assert run_s.size == 447_792
    assert np.median(run_s / req_s) == pytest.approx(RICC_MEDIAN_ACCURACY, abs=5e-5)
    assert np.mean(req_s == MAX_REQUEST_S) == pytest.approx(RICC_SHARE_MAX_REQUEST, abs=5e-5)
    assert np.mean(run_s > req_s) == pytest.approx(UNDER_REQUEST_PROB, abs=5e-4)
    for value_s, share in REQUEST_POPULARITY:
        assert np.mean(req_s == value_s) == pytest.approx(share, abs=5e-5), value_s
