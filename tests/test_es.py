"""`--algo es`: the per-row MLP scorer (RowMLP) by hand and against the linear scorer it contains, the antithetic ES
update by hand, and train -> checkpoint -> eval -> resume through the command line."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

import agents.score_search
from agents.checkpoint import load_checkpoint, save_checkpoint
from agents.es import EvolutionStrategies, centred_ranks
from agents.row_mlp import RowMLP, num_params
from config import ESConfig, RunConfig, WorkloadConfig, run_config_from_dict
from env.score_env import run_with_scorer
from main import main
from metrics.summary import summarize
from schedulers.score_features import FEATURE_NAMES, NUM_FEATURES
from schedulers.score_rounds import LAS_SPEED_WEIGHTS, LinearScorer

torch.set_num_threads(1)

TINY = ["--difficulty", "easy", "--num_jobs", "20", "--no_progress", "--es_pairs", "1", "--es_scenarios", "2",
        "--es_hidden", "4", "--es_workers", "1", "--validation_seeds", "200"]  # fmt: skip
LAS = LinearScorer.from_named(LAS_SPEED_WEIGHTS).weights


def flat(w, W, b, v) -> np.ndarray:
    return np.concatenate([np.ravel(w), np.ravel(W), np.ravel(b), np.ravel(v)])


def features(n: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(0.0, 3.0, (n, NUM_FEATURES))


# ---- the scorer ----------------------------------------------------------------------------------------------


def test_with_zero_hidden_weights_the_mlp_is_exactly_the_linear_scorer():
    h = 5
    rng = np.random.default_rng(1)
    x = features(40)
    zero_W = RowMLP(flat(LAS, np.zeros((h, NUM_FEATURES)), np.zeros(h), rng.normal(size=h)), h)
    zero_v = RowMLP(flat(LAS, rng.normal(size=(h, NUM_FEATURES)), rng.normal(size=h), np.zeros(h)), h)
    for mlp in (zero_W, zero_v):
        assert mlp(x).tolist() == LinearScorer(LAS)(x).tolist()
    # the same schedule, bit for bit, as las_speed's weights
    cfg = RunConfig(workload=WorkloadConfig(difficulty="medium", num_jobs=40))
    a, b = run_with_scorer(cfg, zero_W, seed=2), run_with_scorer(cfg, LinearScorer(LAS), seed=2)
    assert a.start_s.tolist() == b.start_s.tolist() and a.gpu_type == b.gpu_type


def test_one_hidden_unit_by_hand():
    # w = 0; W reads feature 3 (x3), b = 0.5, v = 2: s = 2 tanh(x3 + 0.5); plus w on feature 0 weighted -1
    W = np.zeros((1, NUM_FEATURES))
    W[0, 3] = 1.0
    w = np.zeros(NUM_FEATURES)
    w[0] = -1.0
    mlp = RowMLP(flat(w, W, [0.5], [2.0]), 1)
    x = features(6, seed=3)
    expected = [-row[0] + 2.0 * math.tanh(row[3] + 0.5) for row in x]
    assert mlp(x) == pytest.approx(expected, rel=1e-12, abs=1e-12)
    # each row scores the same alone as in the batch
    assert [mlp(x[i : i + 1])[0] for i in range(6)] == pytest.approx(mlp(x).tolist(), rel=1e-12, abs=1e-12)


def test_bad_parameters_are_value_errors():
    with pytest.raises(ValueError, match="parameters"):
        RowMLP(np.zeros(7), 2)
    with pytest.raises(ValueError, match="finite"):
        RowMLP(np.full(num_params(2), np.nan), 2)


# ---- the update ----------------------------------------------------------------------------------------------


def test_centred_ranks_by_hand():
    assert centred_ranks(np.array([3.0, 1.0, 2.0])).tolist() == [0.5, -0.5, 0.0]
    assert centred_ranks(np.array([1.0, np.inf])).tolist() == [-0.5, 0.5]  # finished nothing: the worst
    assert centred_ranks(np.array([7.0])).tolist() == [0.0]


def test_one_antithetic_pair_moves_every_parameter_by_the_step_size_towards_the_better_side():
    """One pair: +e scored 0.1, -e scored 0.3 (lower is better). Utilities +0.5 and -0.5, so the gradient estimate
    is e / (2 sigma); Adam's first step is lr x g / (|g| + eps) = lr x sign(e) per coordinate (up to eps)."""
    es = EvolutionStrategies(ESConfig(pairs=1, hidden=2, sigma=0.1, learning_rate=0.01))
    search = es.initial_search(np.random.default_rng(0))
    theta = search["theta"]
    assert theta[:NUM_FEATURES].tolist() == LAS.tolist() and not theta[-4:].any()  # b = 0, v = 0: las_speed
    candidates = es.propose(search, np.random.default_rng(1))
    e = (candidates[1] - theta) / 0.1
    assert candidates[2] == pytest.approx(theta - 0.1 * e) and candidates[0].tolist() == theta.tolist()
    new = es.update(search, candidates, np.array([0.2, 0.1, 0.3]))
    assert new["theta"] - theta == pytest.approx(0.01 * np.sign(e), abs=1e-6)
    assert new["adam_t"].tolist() == [1.0]
    swapped = es.update(search, candidates, np.array([0.2, 0.3, 0.1]))
    assert swapped["theta"] - theta == pytest.approx(-0.01 * np.sign(e), abs=1e-6)


# ---- through the command line --------------------------------------------------------------------------------


def train_args(tmp_path, *extra: str, models: str = "models", log: str = "log") -> list[str]:
    return ["--mode", "train", "--algo", "es", "--seed", "2", *TINY, "--models_dir", str(tmp_path / models),
            "--log_dir", str(tmp_path / log), *extra]  # fmt: skip


def state(path) -> tuple:
    c = load_checkpoint(path)
    return (
        c["global_step"],
        c["search"],
        c["history"],
        c["rng"]["numpy"],
        c["scorer"],
        c["validation_history"],
    )


def test_train_checkpoint_eval_resume_and_same_seed_same_run(tmp_path, capsys):
    models = tmp_path / "models"
    assert main(train_args(tmp_path, "--total_steps", "1")) == 0
    final = models / "es_seed2_final.pt"
    checkpoint = load_checkpoint(final)
    assert checkpoint["algo"] == "es" and checkpoint["scorer"]["kind"] == "mlp"
    assert checkpoint["scorer"]["params"] == checkpoint["search"]["theta"]
    assert len(checkpoint["scorer"]["params"]) == num_params(4)
    assert checkpoint["action_space"]["features"] == list(FEATURE_NAMES)
    assert (models / "es_seed2_best.pt").exists()
    assert "es seed 2" in capsys.readouterr().out

    # eval runs the checkpoint's scorer in the score rounds, as run_with_scorer does
    out = tmp_path / "eval"
    assert main(["--mode", "eval", "--algo", "es", "--seed", "2", "--difficulty", "easy", "--num_jobs", "20",
                 "--no_progress", "--plots", "none", "--models_dir", str(models), "--log_dir", str(out)]) == 0  # fmt: skip
    cfg = run_config_from_dict(checkpoint["run_config"])
    direct = run_with_scorer(cfg, RowMLP(np.asarray(checkpoint["scorer"]["params"]), 4), seed=2)
    assert pd.read_csv(out / "summary.csv")["avg_jct_s"].item() == pytest.approx(
        summarize(direct).avg_jct_s, rel=1e-9
    )

    # resume to 2 generations == a straight 2-generation run == another straight run with the same seed
    assert main(train_args(tmp_path, "--resume", str(final), "--total_steps", "2", log="log2")) == 0
    for name in ("straight", "again"):
        assert main(train_args(tmp_path, "--total_steps", "2", models=name, log=name)) == 0
    resumed = state(final)
    assert resumed[0] == 2
    assert resumed == state(tmp_path / "straight" / "es_seed2_final.pt")
    assert state(tmp_path / "again" / "es_seed2_final.pt") == state(
        tmp_path / "straight" / "es_seed2_final.pt"
    )
    assert resumed[1]["theta"] != checkpoint["search"]["theta"]  # the second generation moved the parameters


def test_a_bad_es_checkpoint_and_bad_options_are_one_error_line(tmp_path, capsys):
    assert main(train_args(tmp_path, "--total_steps", "1")) == 0
    checkpoint = load_checkpoint(tmp_path / "models" / "es_seed2_final.pt")
    checkpoint["scorer"]["params"] = checkpoint["scorer"]["params"][:-1]
    bad = tmp_path / "bad.pt"
    save_checkpoint(bad, checkpoint)
    capsys.readouterr()
    assert main(["--mode", "eval", "--algo", "es", "--difficulty", "easy", "--num_jobs", "20", "--checkpoint",
                 str(bad), "--log_dir", str(tmp_path / "e")]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert "Traceback" not in err and str(bad) in err and "parameters" in err
    assert main(train_args(tmp_path, "--es_pairs", "0", models="m2", log="l2")) == 2
    assert "--es_pairs must be >= 1" in capsys.readouterr().err
    assert main(["--mode", "train", "--algo", "cem", "--es_pairs", "3", "--no_progress"]) == 2
    assert "--es_pairs" in capsys.readouterr().err


def test_ctrl_c_keeps_the_last_whole_generation_and_the_resume_finishes_the_same_run(
    tmp_path, monkeypatch, capsys
):
    calls = [0]
    real = agents.score_search.avg_jct

    def stop_in_generation_two(*args):
        calls[0] += 1
        # generation 0: SJF on the validation seed, 2 SJF + 3 candidates x 2 training runs, 1 validation run; the
        # 3rd simulation of generation 1 is cut
        if calls[0] == 1 + 8 + 1 + 3:
            raise KeyboardInterrupt
        return real(*args)

    with monkeypatch.context() as patch:
        patch.setattr(agents.score_search, "avg_jct", stop_in_generation_two)
        code = main(train_args(tmp_path, "--total_steps", "3"))
    err = capsys.readouterr().err
    assert code == 130 and "Traceback" not in err
    assert "interrupted at generation 1 of 3: wrote" in err  # (generations, not env steps)
    interrupted = tmp_path / "models" / "es_seed2_interrupted.pt"
    assert load_checkpoint(interrupted)["global_step"] == 1
    command = [line for line in err.splitlines() if line.startswith("resume with: ")][0].split()[4:]
    assert main(command) == 0 and not interrupted.exists()
    assert main(train_args(tmp_path, "--total_steps", "3", models="straight", log="s")) == 0
    assert state(tmp_path / "models" / "es_seed2_final.pt") == state(
        tmp_path / "straight" / "es_seed2_final.pt"
    )
    best = [load_checkpoint(tmp_path / m / "es_seed2_best.pt")["scorer"] for m in ("models", "straight")]
    assert best[0] == best[1]
