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
from workloads.calibrated import (
    BIN_S,
    CANCELLED,
    COMPLETED,
    FAILED,
    KILLED,
    ProfileDraw,
    _on_hours,
    burst_group_sizes,
    draw_profile,
    generate_profile,
    group_arrivals_s,
    log_runtimes,
    outcome_probs,
)
from workloads.estimates import (
    DAY_S,
    MAX_REQUEST_S,
    REQUEST_POPULARITY,
    REQUEST_VALUES_S,
    RICC_MEDIAN_ACCURACY,
    RICC_SHARE_MAX_REQUEST,
    UNDER_REQUEST_PROB,
    request_from_uniforms,
    requested_times_s,
)
from workloads.profile_sources import itp_hourly_rate, itp_jobs, published_values
from workloads.profile_stats import (
    compare,
    count_stats,
    interarrival_cv,
    measure,
    measure_arrays,
    same_instant_share,
)
from workloads.profiles import (
    HELIOS,
    ITP,
    ITP_HOURLY_RATE,
    PHILLY,
    PROFILES,
    VENUS_ARRIVALS,
    VENUS_HOURLY_RATE,
    LogNormal,
    OutcomeModel,
    RuntimeModel,
)

HARD = parse_cluster_spec(DIFFICULTIES["hard"].cluster)
TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
STABLE_JOBS = 400_000
"""jobs per profile for the fitted rows: the quietest hour's mean count and the whole-trace variance/mean of
10-minute counts need them (their sampling error is a few % here, near 15 % at 100,000 jobs)"""
# Rows a profile shows but does not fit: no published value for its trace, or (estimate accuracy) a request
# model fitted to RICC whose accuracy follows the profile's runtimes. Listed so an exception is never silent.
_NO_SIZE_ROWS = {"median_runtime_1_gpu_s", "median_runtime_2_4_gpus_s", "median_runtime_ge_8_gpus_s"}
NOT_FITTED = {
    "philly": {
        "share_jobs_ge_8_gpus",
        "gpu_time_share_ge_8_gpus",
        "interarrival_cv",
        "same_instant_share",
        "median_estimate_accuracy",
        *_NO_SIZE_ROWS,
    },
    "helios": {
        "share_runtime_le_10min",
        "runtime_p75_s",
        "runtime_p90_s",
        "runtime_p95_s",
        "runtime_p99_s",
        "share_jobs_ge_8_gpus",
        "gpu_time_share_ge_8_gpus",
        "interarrival_cv",
        "same_instant_share",
        "median_estimate_accuracy",
        *_NO_SIZE_ROWS,
    },
    "itp": {"peak_hour_h", "median_estimate_accuracy"},
}


def _stats(d: ProfileDraw):
    return measure_arrays(d.runtime_s, d.gpus.astype(float), d.arrival_s, d.status, d.estimate_s)


@pytest.fixture(scope="module")
def stable_draws() -> dict[str, ProfileDraw]:
    return {n: draw_profile(HARD, STABLE_JOBS, 1.0, np.random.default_rng(0), p) for n, p in PROFILES.items()}


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_profile_reproduces_its_published_statistics(name, stable_draws):
    """Every fitted row within 15 % (shares below 5 % within 0.0075, the peak hour within 1 h) on 400,000 jobs
    on the hard cluster, which holds every profile's largest job."""
    profile = PROFILES[name]
    rows = compare(_stats(stable_draws[name]), profile)
    assert {r.statistic for r in rows if r.within is None} == NOT_FITTED[name]
    off = [r for r in rows if r.within is False]
    assert not off, off


def test_measure_of_the_jobs_is_measure_of_the_draw():
    """The bench measures the generated Jobs, the tests the arrays they are built from: the same numbers."""
    for profile in PROFILES.values():
        jobs = generate_profile(HARD, 5000, 1.0, np.random.default_rng(3), profile).jobs
        d = draw_profile(HARD, 5000, 1.0, np.random.default_rng(3), profile)
        np.testing.assert_equal(vars(measure(jobs)), vars(_stats(d)))


def test_philly_and_helios_borrow_or_use_venus_arrivals():
    assert PHILLY.arrivals is VENUS_ARRIVALS and HELIOS.arrivals is VENUS_ARRIVALS
    assert ITP.arrivals.hourly_rate == ITP_HOURLY_RATE


@pytest.mark.skipif(not TRACES.is_dir(), reason=f"shared trace copies absent: {TRACES}")
def test_published_values_are_those_of_the_trace_files():
    """Every value computed from a file (workloads/profile_sources.py) is the one written in profiles.py."""
    for name, values in published_values(TRACES).items():
        for row, value in values.items():
            target = getattr(PROFILES[name].published, row)
            assert target is not None, (name, row)
            assert target.value == pytest.approx(value, rel=5e-4), (name, row)
    assert np.allclose(itp_hourly_rate(itp_jobs(TRACES)), ITP_HOURLY_RATE, atol=5e-5)


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
    assert all(_is_request_value(j.estimate_s) for j in a.jobs)


def _is_request_value(estimate_s: float) -> bool:
    """One of RICC's round values, or whole days beyond its 72 h maximum."""
    return estimate_s in REQUEST_VALUES_S or (estimate_s > MAX_REQUEST_S and estimate_s % DAY_S == 0)


def test_small_cluster_truncates_job_sizes():
    w = generate_profile(parse_cluster_spec("1xT4:2"), 2000, 0.5, np.random.default_rng(6), HELIOS)
    assert {j.num_gpus for j in w.jobs} == {1, 2}
    assert w.report["max_gpus_per_job"] == 2


def test_only_under_requesters_run_past_their_request():
    """philly holds jobs longer than RICC's 72 h maximum: they request whole days, and the only jobs that run
    past their request are the under-requesters, RICC's 1.6 % of all jobs."""
    w = generate_profile(HARD, 20_000, 1.0, np.random.default_rng(4), PHILLY)
    assert sum(j.runtime_s > MAX_REQUEST_S for j in w.jobs) > 50
    assert all(_is_request_value(j.estimate_s) for j in w.jobs)
    over = [j for j in w.jobs if j.runtime_s > j.estimate_s]
    # an under-requester asks for the RICC value below the runtime it meant to run (its runtime if completed)
    assert all(j.estimate_s in REQUEST_VALUES_S for j in over)
    done_over = [j for j in over if j.trace_status == COMPLETED]
    assert all(j.estimate_s == REQUEST_VALUES_S[REQUEST_VALUES_S < j.runtime_s].max() for j in done_over)
    assert len(over) == pytest.approx(UNDER_REQUEST_PROB * 20_000, abs=4 * np.sqrt(20_000 * 0.016))


def test_requested_times_draw_under_requesters_among_jobs_that_can_overrun():
    """Held times below the value under their intended runtime cannot overrun: the others take their share."""
    intended = np.full(100_000, 5000.0)  # the value below is 3600 s
    held = np.where(np.arange(100_000) % 4 == 0, 4000.0, 1000.0)  # a quarter can overrun 3600 s
    req = requested_times_s(intended, np.random.default_rng(0), held_s=held)
    over = held > req
    assert np.all(req[over] == 3600.0) and np.all(held[over] == 4000.0)
    assert np.mean(over) == pytest.approx(UNDER_REQUEST_PROB, abs=4 * np.sqrt(0.016 / 100_000))


def test_request_from_uniforms_hand_cases():
    intended = np.array([1000.0, 1000.0, 1000.0, 1000.0, 200.0, 300_000.0, 7200.0])  # 300,000 s = 83 h
    u_kind = np.array([0.5, 0.5, 0.1, 0.01, 0.01, 0.5, 0.5])
    u_value = np.array([0.0, 0.999999, 0.3, 0.3, 0.0, 0.3, 0.0])
    got = request_from_uniforms(intended, u_kind, u_value).tolist()
    assert got == [
        1200.0,  # popular draw: the smallest value >= 1000 s at u_value 0
        48 * 3600.0,  # ... the largest value below the maximum at u_value -> 1
        MAX_REQUEST_S,  # 0.016 <= u_kind < 0.474: the maximum
        900.0,  # u_kind < 0.016: the largest value below the runtime
        300.0,  # an under-requester with nothing below 200 s requests as usual
        4 * DAY_S,  # nothing popular covers 83 h, nor does the 72 h maximum: whole days
        7200.0,  # a value equal to the runtime covers it
    ]
    # past the maximum: the maximum's takers ask for whole days too, an under-requester for 72 h
    assert request_from_uniforms(
        np.array([300_000.0, 300_000.0, 3 * DAY_S]), np.array([0.1, 0.01, 0.1]), np.array([0.5, 0.5, 0.5])
    ).tolist() == [4 * DAY_S, MAX_REQUEST_S, MAX_REQUEST_S]
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


def test_log_runtimes_hand_case():
    """The uniform picks the component by its GPU count's weights; z moves along that component."""
    model = RuntimeModel(
        components=(LogNormal(100.0, 1.0), LogNormal(1000.0, 0.5)),
        weights_by_size=((1.0, 0.0), (0.25, 0.75)),
        size_factors=(1.0, 2.0),
        min_s=1.0,
        max_s=1e9,
    )
    got = log_runtimes(model, np.array([0, 1, 1]), np.array([0.9, 0.2, 0.3]), np.array([0.0, 0.0, 1.0]))
    assert np.exp(got) == pytest.approx([100.0, 200.0, 2000.0 * np.exp(0.5)])


def test_runtimes_are_truncated_at_the_minimum_not_clipped():
    """ITP holds no job under 600 s: draws below are redrawn, so none piles up at 600 s (the burst jitter
    alone may clip a few)."""
    d = draw_profile(HARD, 50_000, 1.0, np.random.default_rng(2), ITP)
    assert d.runtime_s.min() == 600.0
    single = d.group_sizes[d.group_of_job] == 1
    assert np.mean(d.runtime_s[single] == 600.0) < 1e-3


def test_outcome_probs_hand_cases():
    even = OutcomeModel(failed=(0.0, 0.0), cancelled=(0.0, 0.0))
    p_f, p_c = outcome_probs(even, np.array([0.01, 1.0, 500.0]))
    assert p_f.tolist() == pytest.approx([1 / 3] * 3) and p_c.tolist() == pytest.approx([1 / 3] * 3)
    model = OutcomeModel(failed=(np.log(2.0), 0.0), cancelled=(0.0, 1.0))
    p_f, p_c = outcome_probs(model, np.array([1.0, np.e]))  # x = ln(GPU-hours) = 0, 1
    assert p_f.tolist() == pytest.approx([2 / 4, 2 / (3 + np.e)])
    assert p_c.tolist() == pytest.approx([1 / 4, np.e / (3 + np.e)])


@pytest.mark.parametrize("name", ["philly", "helios"])
def test_failed_and_cancelled_jobs_hold_their_published_share_of_gpu_time(name, stable_draws):
    """Outcomes depend on GPU time: a job share and a GPU-time share that differ (as published) both hold."""
    d = stable_draws[name]
    gpu_time = d.gpus * d.runtime_s
    pub = PROFILES[name].published
    for status, jobs, time in (
        (FAILED, pub.failed_share, pub.failed_gpu_time_share),
        (CANCELLED, pub.cancelled_share, pub.cancelled_gpu_time_share),
    ):
        assert np.mean(d.status == status) == pytest.approx(jobs.value, rel=0.15)
        assert gpu_time[d.status == status].sum() / gpu_time.sum() == pytest.approx(time.value, rel=0.15)


def test_burst_group_sizes_hold_the_burst_share_and_size_law():
    model = replace(ITP.arrivals, burst_job_fraction=0.3, burst_size_max=5, burst_size_exponent=1.0)
    sizes = burst_group_sizes(200_000, model, np.random.default_rng(0))
    assert sizes.sum() == 200_000 and sizes.min() >= 1 and sizes.max() <= 5
    bursts = sizes[sizes > 1]
    assert bursts.sum() / 200_000 == pytest.approx(0.3, abs=0.01)
    law = np.array([1 / 2, 1 / 3, 1 / 4, 1 / 5])
    assert np.bincount(bursts, minlength=6)[2:] / bursts.size == pytest.approx(law / law.sum(), abs=0.01)


def test_on_hours_have_the_off_share_and_run_length():
    on = _on_hours(300_000, 0.4, 3.0, np.random.default_rng(0))
    assert on.size == 300_000 and np.mean(~on) == pytest.approx(0.4, abs=0.01)
    starts = np.flatnonzero(np.diff(on.astype(int)) == -1) + 1  # on -> off
    ends = np.flatnonzero(np.diff(on.astype(int)) == 1) + 1
    ends = ends[ends > starts[0]][: starts.size - 1]
    assert np.mean(ends - starts[: ends.size]) == pytest.approx(3.0, rel=0.03)


def test_group_arrivals_follow_the_hourly_rate_and_pin_both_ends():
    """No factors: the share of arrivals in each hour of day is that hour's share of the rate; an hour with
    rate 0 gets none."""
    rate = tuple(0.0 if h < 3 else float(h) for h in range(24))
    model = replace(ITP.arrivals, hourly_rate=rate, day_cv=0.0, hour_cv=0.0, bin_cv=0.0, off_hour_share=0.0)
    t = group_arrivals_s(300_002, 100 * DAY_S + 1234.0, model, np.random.default_rng(1))
    assert t[0] == 0.0 and t[-1] == 100 * DAY_S + 1234.0 and np.all(np.diff(t) >= 0)
    hours = np.bincount(((t[1:-1] % DAY_S) // 3600).astype(int), minlength=24)
    assert hours[:3].sum() == 0
    expected = np.array(rate) / sum(rate) * 300_000
    assert np.all(np.abs(hours - expected) < 5 * np.sqrt(expected) + 1)


def test_arrival_statistics_hand_cases():
    t = np.array([0.0, 0.0, 10.0, 30.0])
    assert same_instant_share(t) == 0.5
    assert interarrival_cv(t) == pytest.approx(np.std([0, 10, 20]) / 10)
    by_day = np.zeros((2, 144))
    by_day[0, :6] = 2.0  # day 0: 12 jobs in hour 0; day 1: 6 jobs, one per hour 0..5
    by_day[1, [0, 6, 12, 18, 24, 30]] = 1.0
    c = count_stats(by_day)
    assert c.peak_to_trough == float("inf") and c.peak_hour_h == 0.0
    day0 = np.var(by_day[0]) / np.mean(by_day[0])
    day1 = np.var(by_day[1]) / np.mean(by_day[1])
    assert c.burstiness == pytest.approx((day0 + day1) / 2)
    assert c.count_var_over_mean == pytest.approx(by_day.var() / by_day.mean())
    assert c.daily_count_cv == pytest.approx(np.std([12, 6]) / 9)
    assert len(VENUS_HOURLY_RATE) == len(ITP_HOURLY_RATE) == 24 and BIN_S == 600.0
