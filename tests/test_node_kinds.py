"""Node kinds (sim/node_kinds.py): their power figures in hand-computed runs, the spec and CSV forms, bad input."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from env.node_heuristics import run_manager, threshold
from env.power_env import GPUClusterPowerEnv
from main import main
from metrics.energy import energy_report
from metrics.writers import write_cluster_csv
from schedulers import POLICIES
from schedulers.power_managers import make_manager, parse_manager
from sim.cluster import ClusterLayout
from sim.cluster_spec import load_cluster_csv, parse_cluster_spec
from sim.job import Workload
from sim.node_kinds import NODE_KINDS
from sim.power import GPU_POWER, PowerModel
from sim.prices import PriceCurve
from sim.simulator import Simulator
from tests.helpers import job
from tests.node_env_reference import energy_cost_eur
from tests.test_invariants import workloads
from tests.test_node_envs import tiny_scenario

ROOT = Path(__file__).resolve().parents[1]
FLAT = PriceCurve("flat", 3600.0, np.array([100.0]), np.array([250.0]))
STEP = PriceCurve("step", 900.0, np.array([50.0, 150.0, 80.0]), np.array([100.0, 300.0, 200.0]))


def _run(cluster, jobs, model, manager=None):
    sim = Simulator(
        Workload("t", tuple(jobs)), ClusterLayout(parse_cluster_spec(cluster)), None, 1.2, power=model
    )
    sim.run(POLICIES["fcfs"], manager=manager)
    return sim.result("fcfs", 0)


def test_dgx_a100_node_against_a_plain_node_hand_computed():
    # One job on 2 A100-80GB GPUs for 3600 s, PUE 1.5, price 100 EUR/MWh.
    # Plain node: 300 W + 8 x 50 W idle = 700 W; the job adds 2 x (400 - 50) = 700 W -> 1400 W x 1 h = 1.4 kWh IT.
    # DGX-A100: base 6500 - 8 x 400 = 3300 W, idle GPU with a context 50 + 38 = 88 W: 3300 + 8 x 88 = 4004 W;
    # the job adds 2 x (400 - 88) = 624 W -> 4628 W x 1 h = 4.628 kWh IT, 6.942 kWh facility, EUR 0.6942.
    # The job's share: 2 x (400 + 3300 / 8) = 1625 W x 1.5 = 2.4375 kWh (plain: 2 x (400 + 37.5) x 1.5 = 1.3125).
    model = PowerModel(pue=1.5)
    jobs = [job(0, 0, 3600, 2)]
    plain = energy_report(_run("1xA100-80GB:8", jobs, model), FLAT)
    dgx = energy_report(_run("1xA100-80GB:8@DGX-A100", jobs, model), FLAT)
    assert plain.it_energy_kwh == pytest.approx(1.4, rel=1e-12)
    assert plain.job_energy_kwh.tolist() == pytest.approx([1.3125], rel=1e-12)
    assert dgx.it_energy_kwh == pytest.approx(4.628, rel=1e-12)
    assert dgx.facility_energy_kwh == pytest.approx(6.942, rel=1e-12)
    assert dgx.cost_eur == pytest.approx(0.6942, rel=1e-12)
    assert dgx.job_energy_kwh.tolist() == pytest.approx([2.4375], rel=1e-12)
    # the power curve: 4628 W while the job runs, then the idle node's 4004 W from the window's end on
    assert dgx.it_power_w.tolist() == pytest.approx([4628.0, 4004.0], rel=1e-12)


def test_a_job_across_a_dgx_and_a_plain_node_draws_each_nodes_figures():
    # A 16-GPU job fills a DGX-A100 node and a plain A100 node: every GPU is at 400 W whatever its idle figure, so
    # IT power = 3300 + 8 x 400 + 300 + 8 x 400 = 10,000 W (the DGX's 6.5 kW datasheet maximum + 3.5 kW), and
    # the job is attributed all of it: 8 x (400 + 3300 / 8) + 8 x (400 + 300 / 8) = 10,000 W.
    model = PowerModel(pue=1.0)
    r = _run("1xA100-80GB:8@DGX-A100,1xA100-80GB:8", [job(0, 0, 100, 16)], model)
    span_s = float(r.end_s[0] - r.start_s[0])
    assert r.start_s[0] == 0.0 and span_s >= 100.0
    e = energy_report(r, FLAT)
    # then both idle: 3300 + 8 x 88 + 300 + 8 x 50 = 4704 W
    assert e.it_power_w.tolist() == pytest.approx([10_000.0, 4704.0], rel=1e-12)
    assert e.it_energy_kwh * 3.6e6 == pytest.approx(10_000.0 * span_s, rel=1e-12)
    assert e.job_energy_kwh.tolist() == pytest.approx([e.it_energy_kwh], rel=1e-12)


def test_a_shut_down_kind_node_draws_its_idle_figure_while_in_transition():
    # idle_off:100:0 on one T4-SERVER node: idle 300 + 4 x 23.2 = 392.8 W; a busy GPU adds 70 - 23.2 = 46.8 W.
    # j0 runs 0..50, the node idles to 150, shuts down 150..210 (idle draw), is OFF at 210 when j1 arrives, boots
    # 210..470 (idle draw) and j1 runs 470..670. Window [0, 670]; the node draws 392.8 W except OFF (never here
    # for a positive length), plus 46.8 W for 50 s and 200 s.
    model = PowerModel(pue=1.0, boot_s=260.0, shutdown_s=60.0)
    jobs = [job(0, 0, 10, 1), job(1, 210, 40, 1)]  # T4 speed 0.2: 10 s reference = 50 s, 40 s = 200 s
    r = _run("1xT4:4@T4-SERVER", jobs, model, make_manager(parse_manager("idle_off:100:0")))
    assert r.start_s.tolist() == [0.0, 470.0] and r.end_s.tolist() == [50.0, 670.0]
    e = energy_report(r, FLAT)
    idle = 300.0 + 4 * 23.2
    expected = idle * (150 + 60) + 46.8 * 50 + idle * (260 + 200) + 46.8 * 200
    assert e.it_energy_kwh * 3.6e6 == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    ("kind", "published_max_w"),
    [("DGX-A100", 6500.0), ("DGX-H100", 10200.0), ("HGX-V100", 3500.0)],
)
def test_a_full_dgx_node_draws_its_datasheet_maximum(kind, published_max_w):
    k = NODE_KINDS[kind]
    for gpu_type in k.gpu_types:
        w = PowerModel().node_watts(gpu_type, kind)
        assert w.base_w + k.num_gpus * w.gpu_max_w == published_max_w
        # an idle GPU with a context draws more than a bare one, far less than at full load
        assert GPU_POWER[gpu_type].idle_w < w.gpu_idle_w < w.gpu_max_w / 2


def test_without_a_kind_the_generic_figures_are_unchanged():
    m = PowerModel(node_base_w=250.0)
    for t, g in GPU_POWER.items():
        assert m.node_watts(t) == (250.0, g.idle_w, g.max_w)
    assert all(n.kind == "" for n in parse_cluster_spec("2xA100-80GB:8,1xT4:4").nodes)


def test_spec_and_csv_give_the_same_cluster(tmp_path):
    spec = parse_cluster_spec(
        "2xA100-40GB:8@DGX-A100, 1xH100:8@dgx_h100,1xV100-32GB:8@HGX-V100,1xT4:4@T4-Server,1xT4:4"
    )
    csv = tmp_path / "c.csv"
    csv.write_text(
        "node_id,gpu_type,num_gpus,kind\n"
        "n0,A100-40GB,8,DGX-A100\nn1,A100-40G,8,dgx-a100\nn2,H100,8,DGX-H100\nn3,V100-32GB,8,HGX_V100\n"
        "n4,T4,4,T4-SERVER\nn5,T4,4,\n"
    )
    assert load_cluster_csv(csv).nodes == spec.nodes
    assert [n.kind for n in spec.nodes] == ["DGX-A100"] * 2 + ["DGX-H100", "HGX-V100", "T4-SERVER", ""]


def test_cluster_csv_output_carries_the_kinds_and_reads_back(tmp_path):
    r = _run("1xA100-80GB:8@DGX-A100,1xA100-80GB:8", [job(0, 0, 10, 1)], PowerModel())
    back = load_cluster_csv(write_cluster_csv(r, tmp_path / "cluster.csv"))
    assert [(n.node_id, n.gpu_type, n.num_gpus, n.kind) for n in back.nodes] == [
        ("n0", "A100-80GB", 8, "DGX-A100"),
        ("n1", "A100-80GB", 8, ""),
    ]
    plain = _run("1xA100-80GB:8", [job(0, 0, 10, 1)], PowerModel())
    header = write_cluster_csv(plain, tmp_path / "plain.csv").read_text().splitlines()[0]
    assert header == "node_id,gpu_type,num_gpus,gpu_mem_gb,speed"


def test_power_env_on_kind_nodes_matches_the_reference_and_the_metric():
    """The power task's energy cost on a cluster mixing kind and plain nodes of one GPU type (a job spanning both,
    fractional jobs) equals a per-GPU reference integration and metrics/energy.py's cost."""
    jobs = [
        job(0, 0, 600, 16),
        job(1, 10, 300, 1, gpu_milli=250),
        job(2, 20, 900, 4),
        job(3, 700, 1200, 1, gpu_milli=500),
        job(4, 2500, 400, 8),
        job(5, 2600, 300, 2),
    ]
    sc = tiny_scenario("1xA100-80GB:8@DGX-A100,1xA100-80GB:8,1xT4:4@T4-SERVER", jobs)
    e = GPUClusterPowerEnv(scenario=sc, prices=STEP, jct_weight_eur_per_job_h=0.0)
    e.reset(seed=0)
    ret = run_manager(e, threshold(300.0, 0))
    r = e.sim.result("x", 0)
    assert (np.asarray(r.status) == "completed").all()
    assert len(r.power_log_t_s) > 0 and {p.split("/")[0] for p in r.placement[0].split(";")} == {"n0", "n1"}
    reference = energy_cost_eur(r, e.power_model, STEP, float(np.nanmax(r.end_s)))
    assert e.energy_cost_eur == pytest.approx(reference, rel=1e-9)
    assert e.energy_cost_eur == pytest.approx(energy_report(r, STEP).cost_eur, rel=1e-9)
    assert math.isclose(ret, -e.energy_cost_eur, rel_tol=1e-9)


MIXED = "2xA100-80GB:8@DGX-A100,1xA100-80GB:8,1xV100-32GB:8@HGX-V100,1xT4:4@T4-SERVER,1xT4:4"


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(wl=workloads())
def test_energy_on_mixed_kind_nodes_matches_a_per_gpu_reference(wl):
    """Random workloads on kind and plain nodes, nodes switched off and on by idle_off: metrics/energy.py's cost
    equals a plain per-GPU, per-segment integration (tests/node_env_reference.py) over the same window."""
    model = PowerModel(pue=1.3, boot_s=40.0, shutdown_s=10.0)
    r = _run(MIXED, wl.jobs, model, make_manager(parse_manager("idle_off:20:0")))
    e = energy_report(r, STEP)
    if e.window_end_s <= e.window_start_s:
        return
    reference = energy_cost_eur(r, model, STEP, e.window_end_s)
    assert e.cost_eur == pytest.approx(reference, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("1xA100-80GB:8@DGX-B200", "unknown node kind 'DGX-B200'; known kinds: DGX-A100, DGX-H100"),
        ("1xA100-80GB:4@DGX-A100", "node kind DGX-A100 has 8 GPUs of type A100-40GB or A100-80GB, not 4 of"),
        ("1xH100:8@DGX-A100", "not 8 of type H100"),
        ("1xT4:4@", "bad cluster spec item '1xT4:4@'; expected COUNTxTYPE:GPUS_PER_NODE[@KIND]"),
        ("1xT4:4@T4-SERVER@T4-SERVER", "bad cluster spec item"),
    ],
)
def test_bad_kind_in_a_spec_names_the_item(spec, message):
    with pytest.raises(ValueError, match="bad cluster spec item") as e:
        parse_cluster_spec(f"1xK80:4,{spec}")
    assert message in str(e.value)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("b,H100,8,DGX-B200", ":3: unknown node kind 'DGX-B200'"),
        ("b,T4,8,T4-SERVER", ":3: node kind T4-SERVER has 4 GPUs of type T4, not 8 of type T4"),
        (
            "b,V100,8,DGX-A100",
            ":3: node kind DGX-A100 has 8 GPUs of type A100-40GB or A100-80GB, not 8 of type V100-16GB",
        ),
    ],
)
def test_bad_kind_in_a_csv_names_the_line(row, message, tmp_path):
    path = tmp_path / "c.csv"
    path.write_text(f"node_id,gpu_type,num_gpus,kind\na,A100,8,DGX-A100\n{row}\n")
    with pytest.raises(ValueError) as e:
        load_cluster_csv(path)
    assert str(e.value).startswith(f"{path}{message}")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--cluster", "1xT4:8@T4-SERVER"],
            "error: bad cluster spec item '1xT4:8@T4-SERVER': node kind T4-SERVER has 4 GPUs of type T4, not 8 of "
            "type T4",
        ),
        (
            [
                "--workload_type",
                "csv",
                "--workload_path",
                "examples/jobs.csv",
                "--cluster_path",
                "{tmp}/c.csv",
            ],
            "error: {tmp}/c.csv:2: unknown node kind 'DGX-Z'; known kinds: DGX-A100, DGX-H100, HGX-V100, T4-SERVER",
        ),
    ],
)
def test_cli_bad_kind_is_one_error_line(argv, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    (tmp_path / "c.csv").write_text("node_id,gpu_type,num_gpus,kind\na,A100,8,DGX-Z\n")
    args = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code = main(["--no_progress", *args, "--log_dir", str(tmp_path / "out")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [message.replace("{tmp}", str(tmp_path))]
    assert not (tmp_path / "out").exists()


def test_the_example_cluster_with_kinds_reads():
    spec = load_cluster_csv(ROOT / "examples" / "cluster_kinds.csv")
    assert [(n.gpu_type, n.num_gpus, n.kind) for n in spec.nodes] == [
        ("A100-80GB", 8, "DGX-A100"),
        ("A100-80GB", 8, "DGX-A100"),
        ("V100-32GB", 8, "HGX-V100"),
        ("T4", 4, "T4-SERVER"),
        ("T4", 4, ""),
    ]
