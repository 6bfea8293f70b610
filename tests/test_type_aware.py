"""The type-aware heuristics sjf_gate and ect: hand-computed schedules, and decision-for-decision agreement with
the plain implementations of tests/gate_reference.py on random small workloads."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from config import RunConfig, WorkloadConfig
from scenario.build import build_scenario
from schedulers import POLICIES, make_policy
from schedulers.ect import ect
from schedulers.sjf_gate import DEFAULT_GATE_S, sjf_gate
from sim.cluster import ClusterLayout
from sim.cluster_spec import parse_cluster_spec
from sim.job import Workload
from sim.simulator import Simulator
from tests.gate_reference import ect_reference, sjf_gate_reference
from tests.helpers import estimates, job, run, times
from tests.test_invariants import clusters, workloads

TWO_TYPES = "1xA100-80GB:1,1xT4:1"  # speeds 1.0 and 0.2: a job runs 5x longer on the T4


def _run_policy(cluster: str, jobs, policy) -> dict[str, tuple[float, float]]:
    layout = ClusterLayout(parse_cluster_spec(cluster))
    sim = Simulator(Workload("t", tuple(jobs)), layout)
    sim.run(policy)
    return {j.job_id: (float(sim.start_s[i]), float(sim.end_s[i])) for i, j in enumerate(jobs)}


def _three_jobs():
    return [job("A", 0, 1000), job("B", 0, 2000), job("C", 0, 500)]


def test_sjf_gate_holds_jobs_back_from_a_much_slower_gpu():
    # SJF order C(500) A(1000) B(2000). t=0: C -> A100 [0, 500]. A fits only the T4: 1000/0.2 - 1000 = 4000 s
    # extra > 3600 while C runs -> held. B on the T4: 10000 - 2000 = 8000 > 3600 -> held.
    # t=500: A -> A100 [500, 1500]; B held again (A runs). t=1500: B -> A100 [1500, 3500].
    got = _run_policy(TWO_TYPES, _three_jobs(), functools.partial(sjf_gate, gate_s=3600.0))
    assert got == {"C": (0, 500), "A": (500, 1500), "B": (1500, 3500)}
    # plain SJF puts A on the T4 at once: [0, 5000]; B waits for the A100 at 500: [500, 2500]
    _, r = run(TWO_TYPES, _three_jobs(), "sjf")
    assert times(r) == {"C": (0, 500), "A": (0, 5000), "B": (500, 2500)}


def test_sjf_gate_threshold_is_gate_s():
    # gate 5000 s: A's 4000 s extra passes -> T4 [0, 5000]; B's 8000 s does not -> A100 at 500: [500, 2500]
    got = _run_policy(TWO_TYPES, _three_jobs(), functools.partial(sjf_gate, gate_s=5000.0))
    assert got == {"C": (0, 500), "A": (0, 5000), "B": (500, 2500)}
    # exactly at the gate (extra == gate_s) a job starts
    got = _run_policy(TWO_TYPES, _three_jobs(), functools.partial(sjf_gate, gate_s=4000.0))
    assert got["A"] == (0, 5000)
    assert make_policy("sjf_gate", 5000.0).keywords == {"gate_s": 5000.0}
    assert make_policy("sjf_gate") is sjf_gate


def test_sjf_gate_charges_relative_to_the_fastest_type_the_job_can_use_in_this_cluster():
    # X needs 2 GPUs: the one A100 can never hold it, so the T4 node is its fastest option (extra 0): it starts
    # at once although Y holds the A100. Y (1 GPU, 100 s) [0, 100]; X on the T4s: 1000 / 0.2 = 5000 s.
    jobs = [job("Y", 0, 100), job("X", 1, 1000, 2)]
    _, r = run("1xA100-80GB:1,1xT4:2", jobs, "sjf_gate")
    assert times(r) == {"Y": (0, 100), "X": (1, 5001)}
    # gate 0: X still starts (nothing faster exists for it), a 1-GPU job would not
    got = _run_policy(
        "1xA100-80GB:1,1xT4:2", jobs + [job("Z", 2, 10)], functools.partial(sjf_gate, gate_s=0.0)
    )
    assert got == {"Y": (0, 100), "X": (1, 5001), "Z": (100, 110)}


def test_ect_starts_on_a_slow_gpu_only_if_it_finishes_first():
    # L holds the A100 [0, 10000]. M (2000 s) arrives at 1: on the T4 it ends 1 + 10000 = 10001 <= the A100's
    # 10000 + 2000 = 12000 -> ECT starts it on the T4 now. The gate (8000 s extra > 3600) holds it for the A100.
    jobs = [job("L", 0, 10000), job("M", 1, 2000)]
    assert _run_policy(TWO_TYPES, jobs, ect) == {"L": (0, 10000), "M": (1, 10001)}
    gate = functools.partial(sjf_gate, gate_s=3600.0)
    assert _run_policy(TWO_TYPES, jobs, gate) == {"L": (0, 10000), "M": (10000, 12000)}


def test_ect_waits_when_the_faster_gpu_frees_soon_enough_and_ties_start_now():
    # C -> A100 [0, 500]. A on the T4 would end 5000 > 500 + 1000 -> waits; B: 10000 > 500 + 2000 -> waits.
    # t=500: A -> A100 [500, 1500]; B: 500 + 10000 > 1500 + 2000 -> waits; t=1500: B -> A100 [1500, 3500].
    assert _run_policy(TWO_TYPES, _three_jobs(), ect) == {"C": (0, 500), "A": (500, 1500), "B": (1500, 3500)}
    # tie: M (2000 s) arrives at 2000 while L holds the A100 until 10000: T4 end 2000 + 10000 = 12000 equals
    # the A100's 10000 + 2000 -> starts now on the T4
    jobs = [job("L", 0, 10000), job("M", 2000, 2000)]
    assert _run_policy(TWO_TYPES, jobs, ect) == {"L": (0, 10000), "M": (2000, 12000)}


def test_ect_counts_jobs_started_at_the_same_instant_as_releases():
    # t=0: S (100 s) -> A100 [0, 100], a start of this very instant. T (300 s) on the T4 would end 1500;
    # the A100 frees at S's estimated end 100 -> 100 + 300 = 400 < 1500 -> T waits, then A100 [100, 400].
    jobs = [job("S", 0, 100), job("T", 0, 300)]
    assert _run_policy(TWO_TYPES, jobs, ect) == {"S": (0, 100), "T": (100, 400)}


@pytest.mark.parametrize("name", ["sjf_gate", "ect"])
def test_registered(name):
    assert name in POLICIES


def test_gate_default_is_the_config_default():
    from config import PolicyConfig

    assert PolicyConfig().gate_s == DEFAULT_GATE_S == 518_400.0


def _same_schedule(a: Simulator, b: Simulator) -> bool:
    return a.placements == b.placements and np.array_equal(
        np.array(a.start_s), np.array(b.start_s), equal_nan=True
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    clusters(),
    workloads(),
    st.integers(0, 2**32 - 1),
    st.booleans(),
    st.sampled_from([0.0, 30.0, 200.0, 1e9]),
)
def test_type_aware_heuristics_equal_their_plain_references(spec, workload, seed, noisy, gate_s):
    layout = ClusterLayout(spec)
    known = estimates(workload, seed, noisy)
    pairs = [
        (functools.partial(sjf_gate, gate_s=gate_s), functools.partial(sjf_gate_reference, gate_s=gate_s)),
        (ect, ect_reference),
    ]
    for fast_policy, plain_policy in pairs:
        fast, plain = Simulator(workload, layout, known, 1.2), Simulator(workload, layout, known, 1.2)
        fast.run(fast_policy)
        plain.run(plain_policy)
        assert _same_schedule(fast, plain)


@pytest.mark.parametrize("name", ["sjf_gate", "ect"])
def test_asked_again_after_each_start_gives_the_rest(name):
    """The property the env's one start per step relies on, on a medium scenario of 300 jobs."""
    cfg = RunConfig(workload=WorkloadConfig(difficulty="medium", num_jobs=300))
    sim = build_scenario(cfg, 7).simulator()
    policy = POLICIES[name]
    starts = 0
    while sim.advance():
        ds = policy(sim.view())
        for n, d in enumerate(ds):
            sim.start(d)
            assert policy(sim.view()) == ds[n + 1 :], (sim.now_s, n)
        starts += len(ds)
    assert starts == 300 - sim.num_rejected
