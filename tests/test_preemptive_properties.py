"""Simulator invariants under the preemptive policies (Hypothesis), checked run by run from the records and from
runs.csv re-read as a user would: work is conserved, no GPU is ever over-committed, every accepted job
finishes, the same inputs give the same bytes."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metrics.writers import write_jobs_csv, write_runs_csv
from schedulers import POLICIES, PREEMPTIVE
from sim.catalog import CATALOG
from sim.cluster import FULL, ClusterLayout
from sim.simulator import Simulator
from tests.test_invariants import clusters, workloads

PREEMPTIVE_POLICIES = sorted(PREEMPTIVE)


def _run(spec, workload, policy, overhead_s, known=None) -> tuple[Simulator, ClusterLayout]:
    layout = ClusterLayout(spec)
    sim = Simulator(workload, layout, known, 1.2, overhead_s)
    sim.run(POLICIES[policy])
    return sim, layout


def check_runs(
    sim: Simulator, layout: ClusterLayout, workload, overhead_s: float, factor: float = 1.2
) -> None:
    r = sim.result("x", 0, preemptive=True)
    runs = r.runs
    by_job = defaultdict(list)
    for k, i in enumerate(runs.job.tolist()):
        by_job[i].append(k)
    label_to_gpu = {layout.gpu_label(g): g for g in range(layout.num_gpus)}
    for i, j in enumerate(workload.jobs):
        if r.status[i] == "rejected":
            assert i not in by_job
            continue
        assert r.status[i] == "completed", (i, r.status[i])  # every accepted job finishes
        ks = by_job[i]
        assert len(ks) == r.preemptions[i] + 1
        starts, ends = runs.start_s[ks], runs.end_s[ks]
        assert starts[0] == r.start_s[i] >= j.arrival_s and ends[-1] == r.end_s[i]
        assert np.all(starts[1:] >= ends[:-1]) and np.all(ends >= starts)  # one run at a time, in order
        work = overhead = 0.0
        for n, k in enumerate(ks):
            gpus = [label_to_gpu[x] for x in runs.placement[k].split(";")]
            assert len(gpus) == j.num_gpus and len(set(gpus)) == j.num_gpus
            nodes = {layout.gpu_node[g] for g in gpus}
            gpu_type = runs.gpu_type[k]
            assert {layout.nodes[nd].gpu_type for nd in nodes} == {gpu_type}
            assert not j.gpu_types or gpu_type in j.gpu_types
            assert all(layout.node_mem_mb[nd] >= j.gpu_mem_gb * 1000 for nd in nodes)
            elig = layout.eligible(j.gpu_types, int(round(j.gpu_mem_gb * 1000)))
            if j.num_gpus <= elig.type_max_node[layout.type_names.index(gpu_type)]:
                assert len(nodes) == 1, "a job that fits one node of its type gets one node"
            # work conservation: each run does (its length - restore overhead paid) x its effective speed
            speed = CATALOG[gpu_type].speed if j.speed_scaled else 1.0
            if len(nodes) > 1 and not j.runtime_includes_spread:
                speed /= factor
            length = ends[n] - starts[n]
            paid = min(length, overhead_s) if n > 0 else 0.0
            overhead += paid
            work += (length - paid) * speed
        assert np.isclose(work, j.runtime_s, rtol=1e-6, atol=1e-6), (i, work, j.runtime_s)
        assert np.isclose(r.overhead_s[i], overhead, rtol=1e-9, atol=1e-9)
        assert np.isclose(r.runtime_actual_s[i], float(np.sum(ends - starts)), rtol=1e-9, atol=1e-9)
        assert r.gpu_type[i] == ";".join(dict.fromkeys(runs.gpu_type[k] for k in ks))
    assert sim.free.free_milli_total == FULL * layout.num_gpus and sim.running == []


def check_runs_csv(path, layout: ClusterLayout, workload) -> None:
    """From runs.csv alone: the milli-GPU share held on every GPU never exceeds 1000 at any instant."""
    frame = pd.read_csv(path, dtype={"job_id": str, "placement": str})
    milli = {j.job_id: j.gpu_milli for j in workload.jobs}
    events = defaultdict(list)  # gpu label -> [(time, +-share)]
    for row in frame.itertuples():
        for gpu in row.placement.split(";"):
            events[gpu].append((row.start_time, milli[row.job_id]))
            events[gpu].append((row.end_time, -milli[row.job_id]))
    for gpu, evs in events.items():
        held = 0
        for _, delta in sorted(
            evs, key=lambda e: (e[0], e[1])
        ):  # releases before acquisitions at equal times
            held += delta
            assert 0 <= held <= FULL, f"GPU {gpu} over-committed: {held}"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    clusters(),
    workloads(),
    st.sampled_from(PREEMPTIVE_POLICIES),
    st.sampled_from([0.0, 7.0, 60.0]),
    st.integers(0, 2**32 - 1),
    st.booleans(),
)
def test_preemptive_runs_conserve_work_and_never_over_commit(spec, workload, policy, overhead_s, seed, noisy):
    known = None
    if noisy:
        rng = np.random.default_rng(seed)
        known = np.array([j.runtime_s for j in workload.jobs]) * rng.lognormal(0.4, 0.8, len(workload.jobs))
    sim, layout = _run(spec, workload, policy, overhead_s, known)
    check_runs(sim, layout, workload, overhead_s)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), workloads(), st.sampled_from(PREEMPTIVE_POLICIES), st.sampled_from([0.0, 60.0]))
def test_runs_csv_shows_no_gpu_over_committed_and_runs_are_deterministic(
    tmp_path_factory, spec, workload, policy, overhead_s
):
    out = tmp_path_factory.mktemp("runs")
    texts = []
    for n in range(2):
        sim, layout = _run(spec, workload, policy, overhead_s)
        r = sim.result(policy, 0, preemptive=True)
        write_runs_csv(r, out / f"runs{n}.csv")
        write_jobs_csv(r, out / f"jobs{n}.csv")
        texts.append(((out / f"runs{n}.csv").read_bytes(), (out / f"jobs{n}.csv").read_bytes()))
    assert texts[0] == texts[1]  # same inputs -> byte-identical files
    check_runs_csv(out / "runs0.csv", layout, workload)


def test_runs_csv_catches_an_over_committed_gpu(tmp_path):
    """The checker itself: two whole-GPU runs overlapping on one GPU fail it."""
    from sim.cluster_spec import parse_cluster_spec
    from sim.job import Workload
    from tests.helpers import job

    (tmp_path / "runs.csv").write_text(
        "job_id,start_time,end_time,placement,gpu_type\na,0,10,n0/0,A100-80GB\nb,5,15,n0/0,A100-80GB\n"
    )
    layout = ClusterLayout(parse_cluster_spec("1xA100-80GB:1"))
    workload = Workload("t", (job("a", 0, 10), job("b", 5, 10)))
    try:
        check_runs_csv(tmp_path / "runs.csv", layout, workload)
    except AssertionError as e:
        assert "over-committed" in str(e)
    else:
        raise AssertionError("the checker missed an over-committed GPU")
