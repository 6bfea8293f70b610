"""Bench scripts that need the real traces stop with one `error:` line naming the missing path, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("script", ["trace_table.py", "bench_traces.py", "fit_profiles.py"])
def test_missing_traces_fail_clearly(tmp_path, script):
    missing = tmp_path / "no-traces-here"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--traces", str(missing)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {missing} not found: {script} needs"), proc.stderr
    assert "../shared/traces" in lines[0]


def test_bench_scenario_prints_the_same_fingerprint_for_the_same_scenario():
    """bench_scenario.py times one policy on a main.py scenario; its fingerprint is a pure function of the
    schedule, so repeated runs agree (two in one call, and another call), and another seed differs."""

    def bench(*args: str) -> str:
        proc = subprocess.run(
            [
                sys.executable,
                str(ROOT / "bench" / "bench_scenario.py"),
                "--difficulty",
                "easy",
                "--num_jobs",
                "60",
            ]
            + list(args),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.startswith("cbf: ") and "60/60 completed" in proc.stdout, proc.stdout
        return proc.stdout.split("fingerprint ")[1].split()

    twice = bench("--seed", "4", "--runtime_info", "estimate", "--repeat", "2")
    assert len(twice) == 1  # both runs of the call made the same schedule
    assert bench("--seed", "4", "--runtime_info", "estimate") == twice
    assert bench("--seed", "5", "--runtime_info", "estimate") != twice


def test_bench_scenario_bad_algo_is_one_error_line():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_scenario.py"), "--algo", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("error: unknown --algo 'nope'") and proc.stderr.count("\n") == 1


def test_score_headroom_lower_bound_is_below_every_schedule():
    """score_headroom.py's bound (every job alone on its fastest type from its arrival) is a lower bound: no
    run of the script's scorers or heuristics has a lower average JCT on any seed; and the script runs."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("score_headroom", ROOT / "bench" / "score_headroom.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    from cli.parser import build_parser, config_from_args
    from env.score_env import run_with_scorer
    from scenario.build import build_scenario
    from schedulers import make_policy
    from schedulers.score_rounds import LinearScorer

    args = ["--mode", "eval", "--algo", "las_speed", "--difficulty", "easy", "--num_jobs", "60"]
    cfg = config_from_args(build_parser().parse_args(args))
    for seed in (3, 4):
        sc = build_scenario(cfg, seed)
        bound = mod.no_wait_bound_s(sc)
        assert bound > 0
        for weights, round_s, on_arrival in mod.CANDIDATES.values():
            run = run_with_scorer(
                sc, LinearScorer.from_named(weights), round_s=round_s, on_arrival=on_arrival
            )
            assert mod.avg_jct_s(run) >= bound * (1 - 1e-12)
        for algo in ("sjf", *mod.HEURISTICS):
            sim = sc.simulator()
            sim.run(make_policy(algo, seed=sc.seed, matrix=sc.throughput))
            assert mod.avg_jct_s(sim.result(algo, seed, True)) >= bound * (1 - 1e-12)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "score_headroom.py"), "--seeds", "3", *args[4:]],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "las_speed" in proc.stdout and "lower bound" in proc.stdout


def test_bench_clusters_times_the_run_under_the_commands_collector_threshold(monkeypatch):
    """bench_clusters.py times `Simulator.run` under the young-generation threshold a main.py command runs under
    (cli.command.fewer_collections), or under the threshold outside with `default_gc`; it is restored after."""
    import gc

    from bench import bench_clusters
    from cli.command import YOUNG_COLLECTION_EVERY
    from schedulers import POLICIES

    seen = []

    def probe(view):
        seen.append(gc.get_threshold()[0])
        return POLICIES["fcfs"](view)

    monkeypatch.setitem(bench_clusters.POLICIES, "probe", probe)
    outside = gc.get_threshold()
    assert outside[0] != YOUNG_COLLECTION_EVERY
    r = bench_clusters.run_one("typed", "probe", 40, 0, 1, False)
    assert r["completed"] == 40 and seen and set(seen) == {YOUNG_COLLECTION_EVERY}
    assert gc.get_threshold() == outside
    seen.clear()
    bench_clusters.run_one("typed", "probe", 40, 0, 1, False, default_gc=True)
    assert seen and set(seen) == {outside[0]}
    assert gc.get_threshold() == outside


def _bench(script: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    "script, args, message",
    [
        ("bench_sim.py", ["--algos", "fcfs,nope"], "unknown --algos 'nope'"),
        ("bench_sim.py", ["--cluster", "bogus"], "bad cluster spec item 'bogus'"),
        ("bench_sim.py", ["--num_jobs", "0"], "--num_jobs must be >= 1"),
        ("bench_sim.py", ["--num_jobs", "50", "--repeat", "0"], "--repeat must be >= 1"),
        ("bench_sim.py", ["--num_jobs", "50", "--power", "bogus"], "unknown power manager 'bogus'"),
        ("bench_sim.py", ["--num_jobs", "50", "--load_factor", "-1"], "load_factor must be > 0"),
        ("bench_clusters.py", ["--case", "typed", "--algo", "nope"], "unknown --algo 'nope'"),
        ("bench_clusters.py", ["--case", "typed", "--num_jobs", "0"], "--num_jobs must be >= 1"),
        (
            "bench_clusters.py",
            ["--case", "typed", "--num_jobs", "50", "--repeat", "0"],
            "--repeat must be >= 1",
        ),
        (
            "bench_clusters.py",
            ["--case", "nodes1", "--num_jobs", "50", "--seed", "-1"],
            "--seed must be >= 0",
        ),
        ("bench_clusters.py", ["--cases", "typed,bogus", "--sizes", "50"], "unknown --cases 'bogus'"),
        (
            "bench_clusters.py",
            ["--cases", "typed", "--algos", "nope", "--sizes", "50"],
            "unknown --algos 'nope'",
        ),
        (
            "bench_clusters.py",
            ["--cases", "typed", "--sizes", "1k"],
            "--sizes must be comma-separated integers",
        ),
        ("bench_env.py", ["--steps", "0"], "--steps must be >= 1"),
        ("bench_env.py", ["--steps", "10", "--repeat", "0"], "--repeat must be >= 1"),
        ("bench_env.py", ["--steps", "10", "--window", "0"], "--window must be >= 1"),
        ("bench_gavel.py", ["--num_jobs", "0"], "--num_jobs must be >= 1"),
        ("bench_gavel.py", ["--num_jobs", "50", "--cluster", "bogus"], "bad cluster spec item 'bogus'"),
        ("bench_startup.py", ["--repeat", "0"], "--repeat must be >= 1"),
        ("bench_startup.py", ["--root", "no-such-checkout"], "--root no-such-checkout: no main.py there"),
        ("bench_scenario.py", ["--difficulty", "easy", "--seed", "-1"], "--seed must be >= 0"),
    ],
)
def test_a_bad_argument_of_a_scoreboard_script_is_one_error_line(script, args, message):
    """The scripts BENCHMARKS.md's scoreboard runs refuse a bad value with one `error:` line and status 2,
    before any work (nothing on stdout), never a traceback."""
    proc = _bench(script, *args)
    assert proc.returncode == 2 and proc.stdout == "", (proc.stdout, proc.stderr)
    assert proc.stderr.startswith(f"error: {message}") and proc.stderr.count("\n") == 1, proc.stderr


def test_bench_clusters_table_prints_each_runs_fingerprint_with_the_flag():
    """Without --case, --fingerprint adds a column: each run's hash, the one `--case ... --fingerprint` prints."""
    table = _bench("bench_clusters.py", "--cases", "typed", "--sizes", "120", "--algos", "easy", "--repeat", "1",
                   "--fingerprint")  # fmt: skip
    assert table.returncode == 0, table.stderr
    head, _, row = table.stdout.splitlines()
    assert head.endswith("| exponent | fingerprint |")
    one = _bench("bench_clusters.py", "--case", "typed", "--algo", "easy", "--num_jobs", "120", "--repeat", "1",
                 "--fingerprint")  # fmt: skip
    assert one.returncode == 0, one.stderr
    assert row.startswith("| typed | easy | 120 |")
    assert row.split("|")[-2].strip() == one.stdout.split("fingerprint ")[1].strip()


def test_bench_traces_gives_no_replay_time_when_the_replay_fails(monkeypatch, capsys):
    """A replay that main.py refuses (its own error line) ends the script with main's status and no time line."""
    import bench.bench_traces as bench_traces

    monkeypatch.setattr(bench_traces, "require_paths", lambda *paths: None)
    monkeypatch.setattr(bench_traces, "timed_load", lambda kind, path: None)
    monkeypatch.setattr(bench_traces, "cli_main", lambda argv: 2)
    monkeypatch.setattr(sys, "argv", ["bench_traces.py", "--max_jobs", "30"])
    with pytest.raises(SystemExit) as stop:
        bench_traces.main()
    assert stop.value.code == 2 and "replay" not in capsys.readouterr().out
    monkeypatch.setattr(sys, "argv", ["bench_traces.py", "--max_jobs", "0"])
    with pytest.raises(SystemExit) as stop:
        bench_traces.main()
    assert stop.value.code == 2 and capsys.readouterr().err == "error: --max_jobs must be >= 1, got 0\n"
