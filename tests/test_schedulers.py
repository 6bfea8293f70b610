"""Hand-computed schedules for FCFS, SJF and EASY, and the placement rules they share."""

from __future__ import annotations

import math

import pytest

from schedulers import POLICIES
from schedulers.easy import easy_backfill
from sim.cluster import ClusterLayout, Placement
from sim.cluster_spec import parse_cluster_spec
from sim.job import Workload
from sim.simulator import Decision, Simulator
from tests.easy_reference import easy_reference
from tests.helpers import job, run, times
from tests.sjf_reference import sjf_reference


def _refuse_case():
    # 1 node x 4 GPUs. A holds 3 GPUs until 100. B needs all 4: its reservation is t=100.
    # C (1 GPU, 200 s) fits now but would still hold a GPU at 100 -> EASY must refuse it.
    # D (1 GPU, 50 s) ends at 53 <= 100 -> EASY must backfill it.
    return [job("A", 0, 100, 3), job("B", 1, 10, 4), job("C", 2, 200, 1), job("D", 3, 50, 1)]


def test_fcfs_head_blocks_everyone():
    _, r = run("1xA100:4", _refuse_case(), "fcfs")
    assert times(r) == {"A": (0, 100), "B": (100, 110), "C": (110, 310), "D": (110, 160)}


def test_sjf_starts_shortest_fitting_job_without_reservation():
    _, r = run("1xA100:4", _refuse_case(), "sjf")
    # t=2: C is the only waiting job that fits -> starts; t=3: D does not fit (A 3 + C 1);
    # t=100: D (50) before B (10, needs 4 and does not fit); B waits for C to end at 202.
    assert times(r) == {"A": (0, 100), "C": (2, 202), "D": (100, 150), "B": (202, 212)}


def test_easy_refuses_backfill_that_delays_reservation_and_takes_one_that_does_not():
    _, r = run("1xA100:4", _refuse_case(), "easy")
    assert times(r) == {"A": (0, 100), "D": (3, 53), "B": (100, 110), "C": (110, 310)}


def test_easy_backfills_long_jobs_onto_extra_gpus():
    # 1 node x 8. A holds 6 until 100; B needs 4 -> shadow t=100 with 8 free, 4 extra.
    # C and D (1 GPU, 500 s) outlast the shadow time but leave >= 4 GPUs for B -> backfilled.
    # E cannot start: no GPU free now.
    jobs = [job("A", 0, 100, 6), job("B", 1, 10, 4), job("C", 2, 500), job("D", 3, 500), job("E", 4, 500)]
    _, r = run("1xA100:8", jobs, "easy")
    assert times(r) == {"A": (0, 100), "B": (100, 110), "C": (2, 502), "D": (3, 503), "E": (100, 600)}


def test_easy_extra_gpus_are_consumed_by_earlier_backfills():
    # Like above but 1 extra GPU only: A holds 5 of 8 until 100, B needs 7. C (long) takes the extra one;
    # D (long) would then leave 6 < 7 for B at t=100 -> refused; F (short) still backfills. At 100 B takes
    # the 7 free GPUs (C still holds one), so D starts when B ends.
    jobs = [
        job("A", 0, 100, 5),
        job("B", 1, 10, 7),
        job("C", 2, 500),
        job("D", 3, 500),
        job("F", 4, 20),
    ]
    _, r = run("1xA100:8", jobs, "easy")
    assert times(r) == {"A": (0, 100), "B": (100, 110), "C": (2, 502), "F": (4, 24), "D": (110, 610)}


def test_easy_backfills_a_later_short_job_of_the_same_shape_as_a_refused_long_one():
    # A holds 6 of 8 GPUs until 100; B (head) needs all 8 at t=100, so nothing may outlast t=100. C, D and E
    # arrive together with the same shape: C (500 s) is refused, D and E (50 s, 30 s) end in time and start.
    jobs = [
        job("A", 0, 100, 6),
        job("B", 1, 10, 8),
        job("C", 2, 500),
        job("D", 2, 50),
        job("E", 2, 30),
    ]
    _, r = run("1xA100:8", jobs, "easy")
    assert times(r) == {"A": (0, 100), "B": (100, 110), "C": (110, 610), "D": (2, 52), "E": (2, 32)}


def test_easy_reservation_respects_gpu_type():
    # Head B only accepts V100; the A100 node frees first but does not help B. C (long) may use the A100
    # node since it cannot delay B's reservation on the V100 node.
    jobs = [
        job("A", 0, 100, 4, gpu_types=("V100-16GB",)),
        job("B", 1, 10, 4, gpu_types=("V100-16GB",)),
        job("C", 2, 1000, 4, gpu_types=("A100-80GB",)),
    ]
    _, r = run("1xA100:4,1xV100:4", jobs, "easy", uniform_speed=True)
    assert times(r) == {"A": (0, 100), "B": (100, 110), "C": (2, 1002)}


def test_easy_backfills_on_another_type_when_the_preferred_one_would_delay_the_head():
    # a holds 3 of the 4 A100s until 100, b 2 of the 4 V100s until 100 (50 s at speed 0.5); the head h
    # needs the whole A100 node -> shadow time 100. c (any type, 1,000 s) would go to the free A100 GPU and
    # hold it past 100 -> refused there; on a V100 it leaves the A100 node to h -> backfilled at 2 and runs
    # 1000 / 0.5 = 2000 s (without alternative placements it waited until 100 and ended at 2,100)
    jobs = [
        job("a", 0, 100, 3, gpu_types=("A100-80GB",)),
        job("b", 0, 50, 2, gpu_types=("V100-32GB",)),
        job("h", 1, 10, 4, gpu_types=("A100-80GB",)),
        job("c", 2, 1000, 1),
    ]
    _, r = run("1xA100-80GB:4,1xV100-32GB:4", jobs, "easy")
    assert times(r) == {"a": (0, 100), "b": (0, 100), "h": (100, 110), "c": (2, 2002)}
    assert r["c"][3] == "V100-32GB"


def test_easy_backfills_on_another_node_of_the_same_type():
    # 2 nodes x 4 A100s. A (3 GPUs) goes to n0 until 100, B (2 GPUs) to n1 until 1000. The head H needs a whole
    # node -> n0 at 100. C (1 GPU, 500 s) best-fits onto n0's last GPU, which would delay H; on n1 it leaves n0
    # to H -> backfilled there at 2 (type-only alternatives would have refused it until 100).
    jobs = [job("A", 0, 100, 3), job("B", 0, 1000, 2), job("H", 1, 10, 4), job("C", 2, 500, 1)]
    _, r = run("2xA100-80GB:4", jobs, "easy")
    assert times(r) == {"A": (0, 100), "B": (0, 1000), "H": (100, 110), "C": (2, 502)}
    assert r["C"][4] == "n1/2" and r["H"][4] == "n0/0;n0/1;n0/2;n0/3"


def test_easy_counts_every_gpu_released_at_the_shadow_instant_as_spare():
    # a and b (3 GPUs each) both end at 100; the head h needs 4 -> shadow time 100 with all 8 free,
    # 4 spare. c (2 GPUs, 1,000 s) fits now and leaves 6 >= 4 for h -> backfilled at 2 (without alternative placements only a
    # was released: 5 free, 3 after c -> refused until 100)
    jobs = [job("a", 0, 100, 3), job("b", 0, 100, 3), job("h", 1, 10, 4), job("c", 2, 1000, 2)]
    _, r = run("1xA100-80GB:8", jobs, "easy")
    assert times(r) == {"a": (0, 100), "b": (0, 100), "h": (100, 110), "c": (2, 1002)}


@pytest.mark.parametrize("first", ["small", "large"])
def test_easy_reservation_does_not_depend_on_job_order_at_equal_ends(first):
    # The two running jobs (2 and 4 GPUs) end together at 100; the head needs 4 of 8 -> 8 free then, 4 spare,
    # whichever of the two comes first in the workload: c (2 GPUs, long) is backfilled at 2 either way.
    a, b = job("a", 0, 100, 2), job("b", 0, 100, 4)
    jobs = [a, b] if first == "small" else [b, a]
    jobs += [job("h", 1, 10, 4), job("c", 2, 1000, 2)]
    _, r = run("1xA100-80GB:8", jobs, "easy")
    assert times(r) == {"a": (0, 100), "b": (0, 100), "h": (100, 110), "c": (2, 1002)}


def test_runtime_depends_on_gpu_type_and_fastest_type_goes_first():
    jobs = [job("a", 0, 100), job("b", 0, 100), job("c", 0, 100)]
    _, r = run("1xH100:1,1xA100:1,1xV100:1", jobs, "fcfs")
    assert {k: (v[3], float(v[1])) for k, v in r.items()} == {
        "a": ("H100", 50.0),
        "b": ("A100-80GB", 100.0),
        "c": ("V100-16GB", 200.0),
    }
    _, r = run("1xH100:1,1xA100:1,1xV100:1", jobs, "fcfs", uniform_speed=True)
    assert {float(v[1]) for v in r.values()} == {100.0}


def test_best_fit_picks_fullest_node_of_the_type():
    # n0 has 4 free, n1 has 1 free after the first two jobs; a 1-GPU job goes to n1 (best fit).
    jobs = [job("x", 0, 100, 3), job("y", 0, 100, 4), job("z", 1, 10, 1)]
    _, r = run("2xA100:4", jobs, "fcfs")
    assert r["x"][4] == "n0/0;n0/1;n0/2"
    assert r["y"][4] == "n1/0;n1/1;n1/2;n1/3"
    assert r["z"][4] == "n0/3"


def test_job_that_fits_one_node_waits_rather_than_spreading():
    jobs = [job("a", 0, 100, 2), job("b", 0, 100, 2), job("c", 1, 10, 4)]
    _, r = run("2xA100:4", jobs, "fcfs")
    # a on n0, b best-fits onto n0 as well (2 free there), so n1 is free for c at once
    assert r["c"][4].startswith("n1/") and float(r["c"][0]) == 1.0
    jobs = [job("a", 0, 100, 3), job("b", 0, 100, 3), job("c", 1, 10, 4)]
    _, r = run("2xA100:4", jobs, "fcfs")
    assert float(r["c"][0]) == 100.0  # 1+1 free GPUs on two nodes do not make a 4-GPU slot


def test_multi_node_job_spans_nodes_of_one_type_with_slowdown():
    # 8 GPUs, 100 s reference: spread over the two A100 nodes 100 x 1.2 = 120 s; one V100 node 100 / 0.5 = 200 s
    # -> the spread finishes first (without speed-aware placement the job took the V100 node because it "fits one node")
    jobs = [job("big", 0, 100, 8)]
    _, r = run("2xA100:4,1xV100:8", jobs, "fcfs", factor=1.2)
    assert r["big"][3] == "A100-80GB" and float(r["big"][1]) == pytest.approx(120.0)
    assert r["big"][4].count("n0/") == 4 and r["big"][4].count("n1/") == 4
    # with a 2.5x multi-node factor the spread takes 250 s > 200 s: one V100 node
    _, r = run("2xA100:4,1xV100:8", jobs, "fcfs", factor=2.5)
    assert r["big"][3] == "V100-16GB" and float(r["big"][1]) == 200.0
    # equal durations (factor 2.0: 200 s either way) -> one node before a spread
    _, r = run("2xA100:4,1xV100:8", jobs, "fcfs", factor=2.0)
    assert r["big"][3] == "V100-16GB" and float(r["big"][1]) == 200.0
    jobs = [job("big", 0, 100, 8, gpu_types=("A100-80GB",))]
    _, r = run("2xA100:4,1xV100:8", jobs, "fcfs", factor=1.2)
    assert r["big"][4].count("n0/") == 4 and r["big"][4].count("n1/") == 4
    assert float(r["big"][1]) == pytest.approx(120.0)


def test_multi_node_spread_over_faster_type_beats_one_slow_node_issue_case():
    # on 2xA100-80GB:4,1xT4:8 an 8-GPU job of 1,000 reference seconds ran 5,000 s on the T4 node
    # (speed 0.2); over the two A100 nodes it runs 1,000 x 1.2 = 1,200 s
    _, r = run("2xA100-80GB:4,1xT4:8", [job("big", 0, 1000, 8)], "fcfs", factor=1.2)
    assert r["big"][3] == "A100-80GB" and float(r["big"][1]) == pytest.approx(1200.0)


def test_placement_takes_a_free_option_rather_than_waiting_for_a_faster_busy_one():
    # A holds one A100 node until 100: the 8-GPU job B cannot spread over the A100s now, so it starts at once
    # on the T4 node (ends 1 + 1000 / 0.2 = 5001) although waiting would end at 100 + 1200 = 1300: the
    # placement rule never waits; reservations are a policy's business
    jobs = [job("A", 0, 100, 4, gpu_types=("A100-80GB",)), job("B", 1, 1000, 8)]
    _, r = run("2xA100-80GB:4,1xT4:8", jobs, "fcfs", factor=1.2)
    assert r["B"][3] == "T4" and times(r)["B"] == (1.0, 5001.0)


def test_fractional_jobs_share_a_gpu_within_share_and_memory():
    jobs = [
        job("a", 0, 100, 1, gpu_milli=400),
        job("b", 0, 100, 1, gpu_milli=400),
        job("c", 0, 100, 1, gpu_milli=400),  # 3 x 400 > 1000 -> waits
    ]
    _, r = run("1xV100:1", jobs, "fcfs", uniform_speed=True)
    assert times(r) == {"a": (0, 100), "b": (0, 100), "c": (100, 200)}
    jobs = [
        job("a", 0, 100, 1, gpu_milli=300, gpu_mem_gb=10),
        job("b", 0, 100, 1, gpu_milli=300, gpu_mem_gb=10),  # 20 GB > 16 GB -> waits
    ]
    _, r = run("1xV100:1", jobs, "fcfs", uniform_speed=True)
    assert times(r) == {"a": (0, 100), "b": (100, 200)}


def test_fractional_best_fit_packs_shared_gpu_first():
    jobs = [job("a", 0, 100, 1, gpu_milli=500), job("b", 1, 100, 1, gpu_milli=300)]
    _, r = run("1xA100:2", jobs, "fcfs")
    assert r["a"][4] == r["b"][4] == "n0/0"


def test_jobs_that_can_never_fit_are_rejected_with_a_reason():
    jobs = [job("ok", 0, 10), job("big", 0, 10, 16), job("h100", 0, 10, gpu_types=("H100",))]
    sim, r = run("1xA100:8", jobs, "easy")
    assert [r[k][2] for k in ("ok", "big", "h100")] == ["completed", "rejected", "rejected"]
    assert "16 GPUs" in sim.reject_reason[1]
    assert "acceptable GPU type" in sim.reject_reason[2]
    assert sim.num_rejected == 2


def test_easy_with_estimates_uses_known_runtime_not_truth():
    # B's reservation is computed from A's *estimated* end (50) although A really runs 100 s.
    # C (estimate 40, true 40) ends by 2+40=42 <= 50 -> backfilled.  D (estimate 60) would end at 63 > 50 and
    # there is no extra GPU -> refused until B has run.
    jobs = [job("A", 0, 100, 3), job("B", 1, 10, 4), job("C", 2, 40), job("D", 3, 60)]
    known = [50.0, 10.0, 40.0, 60.0]
    import numpy as np

    _, r = run("1xA100:4", jobs, "easy", known=np.array(known))
    t = times(r)
    assert t["C"] == (2, 42) and t["A"] == (0, 100) and t["B"] == (100, 110) and t["D"][0] == 110


def test_policy_that_never_starts_leaves_jobs_unfinished_without_hanging():
    sim = Simulator(
        Workload("t", (job("a", 0, 10), job("b", 5, 10))), ClusterLayout(parse_cluster_spec("1xA100:1"))
    )
    sim.run(lambda view: [])
    r = sim.result("idle", 0)
    assert r.status == ("unfinished", "unfinished") and all(math.isnan(x) for x in r.start_s)


def test_fractional_job_prefers_the_fastest_type():
    _, r = run("1xT4:1,1xH100:1", [job("half", 0, 100, 1, gpu_milli=500)], "fcfs")
    assert r["half"][3] == "H100" and float(r["half"][1]) == 50.0


def test_invalid_hand_built_job_is_refused():
    with pytest.raises(ValueError, match="num_gpus >= 1"):
        run("1xA100:4", [job("zero", 0, 10, 0)], "fcfs")


def _instants_reasked(cluster: str, jobs, policy) -> list[tuple[float, list, list[list]]]:
    """Run `policy` natively; at each instant (time, its decisions, and for each start in turn the decisions of
    the policy asked again right after it): what the env's one-start-per-step driver sees."""
    sim = Simulator(Workload("t", tuple(jobs)), ClusterLayout(parse_cluster_spec(cluster)))
    out = []
    while sim.advance():
        ds = policy(sim.view())
        again = []
        for d in ds:
            sim.start(d)
            again.append(policy(sim.view()))
        out.append((sim.now_s, ds, again))
    return out


def _ids(jobs, ds) -> list[tuple[str, int]]:
    return [(jobs[d.job].job_id, d.placement.type_idx) for d in ds]


@pytest.mark.parametrize("plain", [False, True])
def test_easy_asked_again_after_each_of_its_starts_gives_the_rest(plain):
    # The old root cause of the env-vs-native divergence (philly/easy seed 7, job 17), in miniature: a (2 A100s
    # until 100); h needs the whole A100 node -> shadow 100. At 2, c (1,000 s, any type), d (50 s), e (40 s)
    # arrive. c's preferred GPU is a free A100, which would delay h; on a V100 it does not -> c backfills there
    # (alternative placement), then d and e end by 100 on the two free A100s. Before the alternatives,
    # c was refused at its turn, then d and e filled the A100s, and EASY asked again (the env's one start per
    # step) found c's preferred GPU a V100 and started it at 2: a decision the native scan never made.
    jobs = [
        job("a", 0, 100, 2, gpu_types=("A100-80GB",)),
        job("h", 1, 10, 4, gpu_types=("A100-80GB",)),
        job("c", 2, 1000, 1),
        job("d", 2, 50, 1),
        job("e", 2, 40, 1),
    ]
    policy = easy_reference if plain else easy_backfill
    instants = _instants_reasked("1xA100-80GB:4,1xV100-32GB:4", jobs, policy)
    at_2 = next(x for x in instants if x[0] == 2.0)
    assert _ids(jobs, at_2[1]) == [("c", 1), ("d", 0), ("e", 0)]
    for t, ds, again in instants:
        for n, rest in enumerate(again):
            assert rest == ds[n + 1 :], (t, n)


@pytest.mark.parametrize("plain", [False, True])
def test_easy_backfills_a_spread_that_keeps_the_heads_node_and_asked_again_gives_the_rest(plain):
    # 3 nodes x 8 A100s, free 7/6/3 at t=2 (x holds 1 GPU of n0 until 100; y, z hold 2 of n1 and 5 of n2 for
    # long). h needs one whole node -> n0 at 100 (shadow: n0 8, n1 6, n2 3 free). j (9 GPUs, 1,000 x 1.2 s) can
    # only spread: its first spread (most-free nodes: n0 7 + n1 2) leaves no node for h; the spread that keeps
    # h's node n0 (n0 gives at most 8 - 8 = 0 GPUs) is n1 6 + n2 3 -> j starts at 2 there. a1 (7 GPUs, 50 s)
    # then takes n0's 7 free GPUs until 52 <= 100 (a). h starts at 100 on n0. (Before every spread was tried,
    # j was refused and started only once h and a1 were done.)
    jobs = [
        job("x", 0, 100, 1),
        job("f7", 0, 1, 7),
        job("y", 0, 5000, 2),
        job("f6", 0, 1, 6),
        job("z", 0, 5000, 5),
        job("h", 2, 10, 8),
        job("j", 2, 1000, 9),
        job("a1", 2, 50, 7),
    ]
    instants = _instants_reasked("3xA100-80GB:8", jobs, easy_reference if plain else easy_backfill)
    at_2 = next(x for x in instants if x[0] == 2.0)
    assert [(jobs[d.job].job_id, d.placement.nodes, d.placement.node_counts) for d in at_2[1]] == [
        ("j", (1, 2), (6, 3)),
        ("a1", (0,), ()),
    ]
    # the fixed point: asked again after each start, EASY gives the rest (before every spread was tried, it
    # refused j at t=2, and asked again after a1 had filled n0 it spread j over n1 and n2 and started it)
    for t, ds, again in instants:
        for n, rest in enumerate(again):
            assert rest == ds[n + 1 :], (t, _ids(jobs, ds), n, _ids(jobs, rest))
    _, r = run("3xA100-80GB:8", jobs, "easy")
    assert times(r)["j"] == (2, 1202) and times(r)["a1"] == (2, 52) and times(r)["h"] == (100, 110)


def test_start_refuses_a_placement_that_is_taken_or_does_not_match_the_job():
    # 2 nodes: n0 = A100 x 4 (GPUs 0-3), n1 = V100 x 2 (GPUs 4-5). At t=0 a (2 GPUs) and b (1 GPU, A100 only),
    # c (half a GPU) wait. The simulator must reject every wrong start with the same ValueError, change
    # nothing, and still accept the right ones afterwards.
    from sim.cluster import FULL, Placement
    from sim.simulator import Decision

    jobs = [
        job("a", 0, 10, 2),
        job("b", 0, 10, 1, gpu_types=("A100-80GB",)),
        job("c", 0, 10, 1, gpu_milli=500, gpu_mem_gb=4),
    ]
    sim = Simulator(Workload("t", tuple(jobs)), ClusterLayout(parse_cluster_spec("1xA100:4,1xV100:2")))
    assert sim.advance()
    whole = Placement((0, 1), (0,), FULL, 0, 0, 0)
    sim.start(Decision(0, whole))
    free_before = (sim.free.free_milli.tolist(), list(sim.free.node_whole), list(sim.free.node_free_bits))
    bad = {
        "GPU 1 is a's": Decision(1, Placement((1,), (0,), FULL, 0, 0, 1)),
        "GPU 1 is a's (listed, not a range)": Decision(1, Placement((1,), (0,), FULL, 0, 0, -1)),
        "2 GPUs for a 1-GPU job": Decision(1, Placement((2, 3), (0,), FULL, 0, 0, 2)),
        "a V100 node for an A100-only job": Decision(1, Placement((4,), (1,), FULL, 0, 1, 4)),
        "a whole GPU for a half-GPU job": Decision(2, Placement((2,), (0,), FULL, 0, 0, 2)),
        "half a GPU of a's": Decision(2, Placement((0,), (0,), 500, 4000, 0)),
        "a is not waiting": Decision(0, Placement((2, 3), (0,), FULL, 0, 0, 2)),
    }
    for why, d in bad.items():
        message = "job 0 is not waiting" if d.job == 0 else "is not free or does not match"
        with pytest.raises(ValueError, match=message):
            sim.start(d)
        now = (sim.free.free_milli.tolist(), list(sim.free.node_whole), list(sim.free.node_free_bits))
        assert now == free_before, why
    sim.start(Decision(1, Placement((3,), (0,), FULL, 0, 0, 3)))
    sim.start(Decision(2, Placement((2,), (0,), 500, 4000, 0)))
    # GPUs 0, 1, 3 whole-taken and GPU 2 half-taken: node 0 has no completely free GPU left (bits 0)
    assert sim.free.free_milli.tolist()[:4] == [0, 0, 500, 0] and sim.free.node_free_bits == [0, 0b11]


def test_easy_backfills_a_spread_that_leaves_the_head_its_node_with_a_kept_shadow():
    """Five nodes of 8 GPUs; long fillers leave 3, 3, 3, 3, 2 GPUs free, and r1 (1 GPU on n0) ends at 100. At
    0.5: H (4 GPUs on one node) is blocked; its reservation is t=100 on n0 (3 free + r1's GPU; the other nodes
    keep at most 3). S (10 GPUs, a spread): its first spread (n0-n2 and 1 of n3) leaves n0 1 GPU at t=100; the
    spread that keeps n0 for H (n0 gives at most 4 - 4 = 0) takes n1-n3 and 1 of n4 -> S starts at 0.5. X (3
    GPUs, ends by 100) is then backfilled on n0 (a). At 1 (Y arrives, nothing completed) nothing changes, and
    the next calls (the kept shadow) agree with the plain scan. (When one spread per type was tried, S was
    refused at 0.5 and started at 1, once X had moved its first spread off n0.)"""
    spec = parse_cluster_spec("5xA100-80GB:8")
    fillers = [(0, 4), (1, 5), (2, 5), (3, 5), (4, 6)]  # (node, GPUs), each for 10,000 s
    jobs = [job(f"L{n}", 0, 10_000, k) for n, k in fillers]
    jobs += [job("r1", 0, 100, 1), job("H", 0.5, 50, 4), job("S", 0.5, 5000, 10), job("X", 0.5, 60, 3)]
    jobs += [job("Y", 1, 10, 8)]
    workload = Workload("spread-retry", tuple(jobs))
    layout = ClusterLayout(spec)
    runs = []
    for policy in (POLICIES["easy"], easy_reference):
        sim = Simulator(workload, layout)
        sim.advance()  # t = 0: the fillers and r1 go where the case needs them
        for i, (n, k) in enumerate([*fillers, (0, 1)]):
            a = layout.node_first_gpu[n] + (4 if i == 5 else 0)
            sim.start(Decision(i, Placement(tuple(range(a, a + k)), (n,), 1000, 0, 0, a)))
        while sim.advance():
            for d in policy(sim.view()):
                sim.start(d)
        runs.append(sim)
    fast, plain = runs
    assert plain.start_s[6:9] == [100.0, 0.5, 0.5]  # H at its reservation, S and X at once
    assert (plain.placements[7].nodes, plain.placements[7].node_counts) == ((1, 2, 3, 4), (3, 3, 3, 1))
    assert fast.start_s == plain.start_s and fast.placements == plain.placements


@pytest.mark.parametrize("algo", ["sjf", "easy"])
def test_a_spread_waits_until_its_type_has_its_gpus_and_starts_then(algo):
    """Three A100 nodes of 4 GPUs and one V100 node of 8 (half the speed). At 0: a, b, c fill the A100 nodes
    (until 10, 20 and 1,000), v the V100 node (500 s: until 1,000). H (8 V100s) waits for v; S (8 A100s: a
    spread, every A100 node being smaller) and d (2 A100s) arrive. At 10 (a ends: 4 A100s free) d starts on
    n0, S does not fit; at 15 (d ends: 4 free) S still does not; at 20 (b ends: 8 free) S spreads over n0 and
    n1 (100 x 1.2 s; under EASY it ends by H's reservation at 1,000). Between instants SJF and EASY look again
    only at shapes that may fit where GPUs were released, a spread when its type has its GPUs free: S must be
    among them at 20."""
    a100 = {"gpu_types": ("A100-80GB",)}
    jobs = [
        job("a", 0, 10, 4, **a100),
        job("b", 0, 20, 4, **a100),
        job("c", 0, 1000, 4, **a100),
        job("v", 0, 500, 8, gpu_types=("V100-32GB",)),
        job("H", 1, 10, 8, gpu_types=("V100-32GB",)),
        job("S", 1.5, 100, 8, **a100),
        job("d", 2, 5, 2, **a100),
    ]
    cluster = "3xA100-80GB:4,1xV100-32GB:8"
    _, r = run(cluster, jobs, algo)
    got = times(r)
    assert got["d"] == (10, 15) and got["S"] == (20, 140) and got["H"] == (1000, 1020)
    reference = easy_reference if algo == "easy" else sjf_reference
    layout = ClusterLayout(parse_cluster_spec(cluster))
    fast, plain = (Simulator(Workload("t", tuple(jobs)), layout) for _ in range(2))
    fast.run(POLICIES[algo])
    plain.run(reference)
    assert fast.start_s == plain.start_s and fast.placements == plain.placements
    assert fast.placements[5].nodes == (0, 1)


def test_run_freezes_objects_only_while_it_runs_and_never_unfreezes_someone_elses():
    # run() moves the objects that exist when it starts out of the cyclic GC's full collections and back when
    # it ends, also when the policy raises; objects frozen by someone else before the run stay frozen
    import gc

    jobs = [job("a", 0, 10, 2), job("b", 1, 10, 8)]
    layout = ClusterLayout(parse_cluster_spec("1xA100:8"))
    seen = []

    def fcfs_noting_freeze(view):
        seen.append(gc.get_freeze_count())
        return POLICIES["fcfs"](view)

    assert gc.get_freeze_count() == 0
    Simulator(Workload("t", tuple(jobs)), layout).run(fcfs_noting_freeze)
    assert min(seen) > 0 and gc.get_freeze_count() == 0

    def failing(view):
        raise RuntimeError("policy failed")

    with pytest.raises(RuntimeError, match="policy failed"):
        Simulator(Workload("t", tuple(jobs)), layout).run(failing)
    assert gc.get_freeze_count() == 0

    marker = [object()]  # frozen below: it must still be when the run is over
    gc.freeze()
    try:
        before = gc.get_freeze_count()
        seen.clear()
        Simulator(Workload("t", tuple(jobs)), layout).run(fcfs_noting_freeze)
        # (frozen objects that die leave the count: it can only have shrunk)
        assert 0 < max(seen) <= before and 0 < gc.get_freeze_count() <= before
        assert not any(o is marker for o in gc.get_objects())
    finally:
        gc.unfreeze()
    assert any(o is marker for o in gc.get_objects())
