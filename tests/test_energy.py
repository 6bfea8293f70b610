"""Energy, cost and carbon integrals (hand-computed tiny cases) and the price-curve loader."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from metrics.energy import ENERGY_FIELDS, energy_report, node_states_over_time
from schedulers import POLICIES
from schedulers.power_managers import make_manager, parse_manager
from sim.cluster import ClusterLayout
from sim.cluster_spec import parse_cluster_spec
from sim.job import Workload
from sim.power import PowerModel
from sim.prices import PriceCurve, PriceFileError, load_price_csv, synthetic_curve
from sim.simulator import Simulator
from tests.helpers import job


def _run(cluster, jobs, model, manager=None, algo="fcfs"):
    sim = Simulator(
        Workload("t", tuple(jobs)), ClusterLayout(parse_cluster_spec(cluster)), None, 1.2, power=model
    )
    sim.run(POLICIES[algo], manager=manager)
    return sim.result(algo, 0)


def _curve(prices, carbon, step_s):
    return PriceCurve("test", step_s, np.asarray(prices, float), np.asarray(carbon, float))


def test_one_node_one_job_with_a_price_step():
    # 1 A100 node of 8 GPUs: base 300 W + 8 x 50 W idle = 700 W. One job on 2 GPUs for 3600 s adds
    # 2 x (400 - 50) = 700 W. Window [0, 3600]: IT 1400 W x 3600 s = 1.4 kWh; PUE 1.5 -> facility 2.1 kWh.
    # Price 100 EUR/MWh on [0, 1800), 200 on [1800, 3600): 1.05 kWh x 0.1 + 1.05 kWh x 0.2 = 0.315 EUR;
    # carbon 100 then 300 g/kWh: 1.05 x 100 + 1.05 x 300 = 420 g.
    # The job: 2 GPUs x (400 + 300 / 8) W = 875 W x 1.5 = 1312.5 W facility -> 1.3125 kWh over the hour;
    # cost 0.65625 kWh x 0.1 + 0.65625 kWh x 0.2 = 0.196875 EUR.
    model = PowerModel(node_base_w=300.0, pue=1.5)
    r = _run("1xA100-80GB:8", [job(0, 0, 3600, 2)], model)
    e = energy_report(r, _curve([100, 200], [100, 300], 1800.0))
    assert (e.window_start_s, e.window_end_s) == (0.0, 3600.0)
    assert e.it_energy_kwh == pytest.approx(1.4)
    assert e.facility_energy_kwh == pytest.approx(2.1)
    assert e.cost_eur == pytest.approx(0.315)
    assert e.carbon_kg == pytest.approx(0.42)
    assert e.avg_power_kw == pytest.approx(2.1)
    assert e.energy_per_gpu_hour_kwh == pytest.approx(2.1 / 2)
    assert e.node_hours_off == 0.0
    assert e.job_energy_kwh.tolist() == pytest.approx([1.3125])
    assert e.job_cost_eur.tolist() == pytest.approx([0.196875])


def test_two_jobs_fractional_share_and_idle_tail():
    # 1 T4 node of 4 GPUs: 300 + 4 x 10 = 340 W idle. j0: 500 milli of one GPU for 100 s -> 0.5 x 60 = 30 W;
    # j1: 1 whole GPU from 50 to 250 -> 60 W (arrives 50; T4 speed 0.2 -> 40 s reference = 200 s).
    # Window [0, 250]: 340 x 250 + 30 x 100 + 60 x 200 = 85000 + 3000 + 12000 = 100000 J (PUE 1).
    # Constant 90 EUR/MWh: 100000 / 3.6e9 x 90 = 0.0025 EUR.
    model = PowerModel(node_base_w=300.0, pue=1.0)
    jobs = [job(0, 0, 20, 1, gpu_milli=500), job(1, 50, 40, 1)]
    r = _run("1xT4:4", jobs, model)
    assert r.end_s.tolist() == [100.0, 250.0]
    e = energy_report(r, _curve([90, 90], [250, 250], 3600.0))
    assert e.it_energy_kwh * 3.6e6 == pytest.approx(100000.0)
    assert e.cost_eur == pytest.approx(0.0025)
    # j0: 0.5 x (70 + 300 / 4) = 72.5 W x 100 s; j1: 1 x 145 W x 200 s
    assert (e.job_energy_kwh * 3.6e6).tolist() == pytest.approx([7250.0, 29000.0])


def test_power_states_hand_computed():
    # The idle_off:100:0 run of tests/test_power_states.py: n1 on 0..100, shutting down 100..160, off after;
    # n0 on 0..150, shutting down 150..210, off 210..400, booting 400..660, on 660..670. Idle draw 700 W per
    # node whenever not OFF: n1 160 s + n0 (210 + 270) s = 640 s x 700 W = 448000 J. Jobs: 8 x 350 W x 50 s +
    # 8 x 350 W x 10 s = 168000 J. Window [0, 670]: 616000 J. OFF: n1 510 s + n0 190 s = 700 s.
    model = PowerModel(node_base_w=300.0, pue=1.0, boot_s=260.0, shutdown_s=60.0)
    jobs = [job(0, 0, 50, 8), job(1, 400, 10, 8)]
    r = _run("2xA100-80GB:8", jobs, model, make_manager(parse_manager("idle_off:100:0")))
    e = energy_report(r, _curve([100, 100], [0, 0], 3600.0))
    assert e.it_energy_kwh * 3.6e6 == pytest.approx(616000.0)
    assert e.node_hours_off * 3600 == pytest.approx(700.0)
    assert e.cost_eur == pytest.approx(616000.0 / 3.6e9 * 100)
    always = energy_report(_run("2xA100-80GB:8", jobs, model), _curve([100, 100], [0, 0], 3600.0))
    # always on: 2 x 700 W x 410 s (window [0, 410]: j1 starts at 400) + 168000 J
    assert always.it_energy_kwh * 3.6e6 == pytest.approx(2 * 700 * 410 + 168000)
    t, counts = node_states_over_time(r)
    assert t.tolist() == [0, 100, 150, 160, 210, 400, 660, 770, 830]
    assert counts[-1].tolist() == [0, 2, 0, 0] and counts[5].tolist() == [0, 1, 1, 0]


def test_integral_matches_a_fine_riemann_sum():
    curve = synthetic_curve(offset_s=1234.0)
    a, b = 1000.0, 200000.0
    exact = float(curve.price_integral(b) - curve.price_integral(a))
    grid = np.arange(a, b, 1.0) + 0.5
    riemann = sum(curve.price_at(t) for t in grid[::60]) * 60.0
    assert exact == pytest.approx(riemann, rel=1e-3)
    assert curve.min_price(0.0, 86400.0) == 60.0
    assert curve.price_at(18 * 3600 - 1234.0) == 120.0


def _write(tmp_path, text):
    path = tmp_path / "prices.csv"
    path.write_text(text)
    return path


def test_loads_a_regular_series_and_maps_the_clock(tmp_path):
    path = _write(
        tmp_path,
        "timestamp,price,carbon\n2024-01-01T00:00:00Z,50,100\n2024-01-01T00:15:00Z,70,200\n"
        "2024-01-01T00:30:00Z,30,300\n",
    )
    c = load_price_csv(path, offset_s=900.0)
    assert c.step_s == 900.0 and c.period_s == 2700.0
    assert c.price_at(0.0) == 70.0 and c.carbon_at(0.0) == 200.0  # sim 0 = 00:15 on the series
    assert c.price_at(1800.0) == 50.0  # wraps: 00:45 -> the first slot again
    two = load_price_csv(_write(tmp_path, "timestamp,price_eur_per_mwh\n0,10\n3600,20\n"))
    assert two.carbon_at(0.0) == 250.0


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("time,price\n0,1\n", ":1: header"),
        ("timestamp,price_eur_per_kwh\n0,0.1\n3600,0.2\n", ":1: wrong units"),
        ("timestamp,price\n0,10\n3600,20\n10800,30\n", ":4: a gap"),
        ("timestamp,price\n0,10\n3600,20\n1800,30\n", ":4: timestamp 1800 is not after"),
        ("timestamp,price\n0,10\n3600,-5\n", ":3: price -5 must be"),
        ("timestamp,price\n0,10\n3600,\n", ":3: missing price"),
        ("timestamp,price\n0,0.05\n3600,0.07\n", "wrong units: every price is below 2"),
        ("timestamp,price\n0,10\n7200,20\n", ":3: step 7200 s"),
        ("timestamp,price\n0,10\n", "needs at least 2 rows"),
        ("timestamp,price,carbon\n0,10,300000\n3600,20,300000\n", "wrong units: carbon"),
        ("timestamp,price\nyesterday,10\n3600,20\n", ":2: timestamp 'yesterday'"),
    ],
)
def test_bad_price_files_name_the_line(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(PriceFileError, match=message) as err:
        load_price_csv(path)
    assert str(path) in str(err.value)


def test_run_prices_is_the_file_or_the_synthetic_day_and_a_bad_file_is_a_user_error(tmp_path):
    from config import UserError
    from sim.prices import run_prices

    day = run_prices(None, 7200.0)
    assert day.name == "synthetic" and day.offset_s == 7200.0
    assert np.array_equal(day.price_eur_per_mwh, synthetic_curve().price_eur_per_mwh)
    good = _write(tmp_path, "timestamp,price\n0,10\n3600,20\n")
    assert run_prices(str(good), 60.0).price_eur_per_mwh.tolist() == [10.0, 20.0]
    assert run_prices(str(good), 60.0).offset_s == 60.0
    bad = tmp_path / "bad.csv"
    bad.write_text("time,price\n0,1\n")
    with pytest.raises(UserError, match=":1: header") as err:  # (one `error:` line wherever it is loaded)
        run_prices(str(bad))
    assert str(bad) in str(err.value)


def test_cli_compare_with_power_managers_is_deterministic(tmp_path):
    from main import main

    args = ["--mode", "compare", "--algos", "easy", "--difficulty", "easy", "--num_jobs", "30"]
    args += ["--power", "always_on,idle_off:300:1", "--no_progress"]
    for name in ("a", "b"):
        assert main([*args, "--log_dir", str(tmp_path / name)]) == 0
    a = tmp_path / "a"
    summary = pd.read_csv(a / "summary.csv")
    assert summary.scheduler.tolist() == ["easy+always_on", "easy+idle_off:300:1"]
    assert list(summary.columns[-7:]) == list(ENERGY_FIELDS)
    assert np.allclose(summary.facility_energy_kwh, summary.it_energy_kwh * 1.58, rtol=1e-9)
    on, off = summary.facility_energy_kwh
    assert off < on and summary.node_hours_off[1] > 0 == summary.node_hours_off[0]
    jobs = pd.read_csv(a / "easy+idle_off-300-1_seed0" / "jobs.csv")
    assert list(jobs.columns[-2:]) == ["energy_kwh", "energy_cost_eur"] and (jobs.energy_kwh > 0).all()
    for f in ("power.png", "power_states.png"):
        assert (a / "easy+idle_off-300-1_seed0" / f).is_file()
    assert (a / "jct_vs_cost.png").is_file()
    for f in ("summary.csv", "compare.csv", "easy+idle_off-300-1_seed0/jobs.csv"):
        assert (a / f).read_bytes() == (tmp_path / "b" / f).read_bytes()


def test_without_power_no_energy_columns(tmp_path):
    from main import main

    assert (
        main(["--difficulty", "easy", "--num_jobs", "20", "--no_progress", "--log_dir", str(tmp_path)]) == 0
    )
    assert "energy" not in (tmp_path / "summary.csv").read_text()
    assert "energy" not in (tmp_path / "jobs.csv").read_text().splitlines()[0]
    assert not (tmp_path / "power.png").exists()
