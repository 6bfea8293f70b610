"""The replays of the authors' simulators as command-line policies: a CLI run of each is the factory's run on the
same scenario, with the scenario's seed for Gavel's generators and the run's throughput matrix (docs/cli.md,
docs/schedulers.md, Side by side with the authors' simulators)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli.parser import build_parser, config_from_args
from main import main
from metrics.writers import write_jobs_csv
from scenario.build import build_scenario
from schedulers import GAVEL_REPLAYS, POLICIES, PREEMPTIVE, REPLAYS, make_policy
from schedulers.gavel_original import AGNOSTIC, AWARE, FIFO, FIFO_PERF, make_gavel_original
from schedulers.tiresias_original import make_tiresias_original
from tests.test_throughput import needs_gavel

# a tiny Gavel-typed workload: synthetic jobs given job types of Gavel's matrix, on its three GPU types
TINY = [
    "--difficulty", "easy", "--num_jobs", "24", "--load_factor", "1.5", "--job_types", "gavel",
    "--cluster", "2xV100:2,2xP100:2,2xK80:2", "--runtime_info", "oracle", "--plots", "none", "--no_progress",
]  # fmt: skip
FACTORY = {
    "gavel_original": lambda seed, m: make_gavel_original(AWARE, seed, m),
    "gavel_original_agnostic": lambda seed, m: make_gavel_original(AGNOSTIC, seed, m),
    "gavel_fifo": lambda seed, m: make_gavel_original(FIFO, seed, m),
    "gavel_fifo_perf": lambda seed, m: make_gavel_original(FIFO_PERF, seed, m),
    "tiresias_original": lambda seed, m: make_tiresias_original(),
}


def _direct_jobs_csv(
    algo: str, seed: int, out: Path, matrix: bool = True, gavel_seed: int | None = None
) -> bytes:
    """jobs.csv of the factory's run on the scenario the CLI builds from TINY (Gavel's generators seeded with
    `gavel_seed`, default the scenario's seed; `matrix` False: the factory without the throughput matrix)."""
    cfg = config_from_args(
        build_parser().parse_args(["--mode", "eval", "--algo", algo, "--seed", str(seed), *TINY])
    )
    sc = build_scenario(cfg, seed)
    sim = sc.simulator()
    sim.run(FACTORY[algo](seed if gavel_seed is None else gavel_seed, sc.throughput if matrix else None))
    write_jobs_csv(sim.result(algo, seed, preemptive=True), out)
    return out.read_bytes()


def test_every_replay_is_a_preemptive_policy_of_the_cli():
    assert set(FACTORY) == REPLAYS == {*GAVEL_REPLAYS, "tiresias_original"}
    assert REPLAYS <= set(POLICIES) and REPLAYS <= PREEMPTIVE
    # each call builds a new replay (its per-run state its own); the other policies are the registered ones
    assert make_policy("gavel_fifo", seed=3) is not make_policy("gavel_fifo", seed=3)
    assert make_policy("tiresias_original") is not POLICIES["tiresias_original"]
    assert all(make_policy(p) is POLICIES[p] for p in POLICIES if p not in REPLAYS and p != "sjf_gate")


@needs_gavel
@pytest.mark.parametrize("algo", sorted(REPLAYS))
def test_a_cli_run_of_a_replay_is_the_factorys_run(algo, tmp_path, capsys):
    seed = 7
    log = tmp_path / "cli"
    assert main(["--mode", "eval", "--algo", algo, "--seed", str(seed), *TINY, "--log_dir", str(log)]) == 0
    capsys.readouterr()
    cli = (log / "jobs.csv").read_bytes()
    assert cli == _direct_jobs_csv(algo, seed, tmp_path / "direct.csv")


@needs_gavel
def test_the_cli_passes_the_scenarios_seed_and_matrix_to_gavels_replays(tmp_path, capsys):
    # the comparisons above can fail: without the matrix (micro-tasks of a whole round) Gavel's aware replay
    # schedules these jobs differently, and the shuffled policies follow the seed of Gavel's generators
    seed = 7
    log = tmp_path / "cli"
    assert (
        main(
            ["--mode", "eval", "--algo", "gavel_original", "--seed", str(seed), *TINY, "--log_dir", str(log)]
        )
        == 0
    )
    capsys.readouterr()
    assert (log / "jobs.csv").read_bytes() != _direct_jobs_csv(
        "gavel_original", seed, tmp_path / "m.csv", False
    )
    shuffled = _direct_jobs_csv("gavel_original_agnostic", seed, tmp_path / "a.csv")
    assert shuffled != _direct_jobs_csv(
        "gavel_original_agnostic", seed, tmp_path / "b.csv", gavel_seed=seed + 1
    )


def test_a_compare_run_takes_every_replay_beside_the_default_policies(tmp_path, capsys):
    # without --job_types: every job's throughput is its GPU type's speed, each micro-task a whole round
    log = tmp_path / "cmp"
    algos = ",".join(["gavel", "tiresias", *sorted(REPLAYS)])
    argv = [
        "--mode",
        "compare",
        "--algos",
        algos,
        "--seeds",
        "1,2",
        "--difficulty",
        "easy",
        "--num_jobs",
        "12",
    ]
    assert main([*argv, "--plots", "none", "--no_progress", "--log_dir", str(log)]) == 0
    capsys.readouterr()
    assert all((log / f"{a}_seed{s}" / "jobs.csv").is_file() for a in algos.split(",") for s in (1, 2))
