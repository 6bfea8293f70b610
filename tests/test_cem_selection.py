"""`--algo cem` model selection on validation seeds: the generation whose mean scores best on the validation
scenarios is kept as `cem_seed<S>_best.pt`, beside the final model, across resumes; the report shows both."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

import agents.score_search
from agents.checkpoint import load_checkpoint
from main import main

torch.set_num_threads(1)

TINY = ["--difficulty", "easy", "--num_jobs", "20", "--no_progress", "--cem_population", "3", "--cem_scenarios",
        "2", "--cem_workers", "1", "--checkpoint_every", "1", "--keep_checkpoints", "0"]  # fmt: skip
VALIDATION = (200, 201)
SJF_JCT_S = 100.0


def train(tmp_path, *extra: str, models: str = "models", log: str = "log") -> int:
    return main(["--mode", "train", "--algo", "cem", "--seed", "4", *TINY, "--validation_seeds", "200,201",
                 "--models_dir", str(tmp_path / models), "--log_dir", str(tmp_path / log), *extra])  # fmt: skip


def stub(validation_jct_s: list[float]):
    """avg_jct stand-in: SJF 100 s everywhere; training candidates 100 s + their weights' sum (any value does);
    the mean of generation g (1, 2, ...) scores validation_jct_s[g - 1] on every validation seed."""
    validated = [0]

    def avg_jct(cfg, seed, weights):
        if weights is None:
            return SJF_JCT_S
        if seed in VALIDATION:
            validated[0] += 1
            return validation_jct_s[(validated[0] - 1) // len(VALIDATION)]
        return 100.0 + abs(float(np.sum(weights)))

    return avg_jct


def test_the_best_generation_on_validation_is_kept_beside_the_final_model(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(agents.score_search, "avg_jct", stub([120.0, 90.0, 110.0]))
    assert train(tmp_path, "--total_steps", "3") == 0
    models = tmp_path / "models"
    best, final = (
        load_checkpoint(models / "cem_seed4_best.pt"),
        load_checkpoint(models / "cem_seed4_final.pt"),
    )
    record = best["validation"]
    assert record["global_step"] == 2 and best["global_step"] == 2
    assert record["val_objective"] == pytest.approx(math.log(90.0 / 100.0), rel=1e-12)
    assert record["val_avg_jct_s"] == 90.0 and record["validation_seeds"] == list(VALIDATION)
    # the kept model is generation 2's mean (the periodic checkpoint of generation 2), not the final one
    assert best["scorer"]["weights"] == load_checkpoint(models / "cem_seed4_ep2.pt")["scorer"]["weights"]
    assert final["global_step"] == 3 and final["scorer"]["weights"] != best["scorer"]["weights"]
    assert final["validation_history"] == pytest.approx([math.log(1.2), math.log(0.9), math.log(1.1)])
    assert not (models / "cem_seed4_best.pending.pt").exists()
    assert "generation 2" in capsys.readouterr().out


@pytest.mark.parametrize("into", ["models", "moved"])
@pytest.mark.parametrize(("values", "expected"), [([90.0, 120.0, 110.0], 1), ([120.0, 90.0, 110.0], 2)])
def test_a_resumed_run_selects_as_the_uninterrupted_one(tmp_path, monkeypatch, values, expected, into):
    """1 generation, then a resume to 3: the resumed run starts from the first call's best score (so a worse later
    generation never replaces it) and ends with the straight run's choice; also when it is resumed into another
    --models_dir (`moved`), which carries the first call's best over."""
    monkeypatch.setattr(agents.score_search, "avg_jct", stub(values))
    assert train(tmp_path, "--total_steps", "3", models="straight", log="s") == 0
    monkeypatch.setattr(agents.score_search, "avg_jct", stub(values))
    assert train(tmp_path, "--total_steps", "1") == 0
    first = load_checkpoint(tmp_path / "models" / "cem_seed4_best.pt")
    assert first["global_step"] == 1
    monkeypatch.setattr(agents.score_search, "avg_jct", stub(values[1:]))
    final = str(tmp_path / "models" / "cem_seed4_final.pt")
    assert train(tmp_path, "--total_steps", "3", "--resume", final, models=into, log="r") == 0
    resumed = load_checkpoint(tmp_path / into / "cem_seed4_best.pt")
    assert not (tmp_path / into / "cem_seed4_best.pending.pt").exists()
    straight = load_checkpoint(tmp_path / "straight" / "cem_seed4_best.pt")
    assert resumed["global_step"] == straight["global_step"] == expected
    assert resumed["scorer"] == straight["scorer"] and resumed["validation"]["run_id"] == first["run_id"]
    drop = ("run_id",)
    assert {k: v for k, v in resumed["validation"].items() if k not in drop} == {
        k: v for k, v in straight["validation"].items() if k not in drop
    }


def test_validation_on_the_reports_test_seeds_is_refused(tmp_path, capsys):
    code = main(["--mode", "train", "--algo", "cem", *TINY, "--validation_seeds", "200,905", "--models_dir",
                 str(tmp_path / "m"), "--log_dir", str(tmp_path / "l")])  # fmt: skip
    assert code == 2
    err = capsys.readouterr().err
    assert "--validation_seeds 905" in err and "Traceback" not in err


def test_the_report_shows_the_final_and_the_selected_checkpoint(tmp_path):
    """Real simulations (no stub): 2 generations with validation; the report's table has a final and a best row
    for cem, and each best evaluation equals an eval of the best file."""
    assert train(tmp_path, "--total_steps", "2") == 0
    log = tmp_path / "report"
    assert main(["--mode", "report", "--models_dir", str(tmp_path / "models"), "--num_jobs", "20",
                 "--no_progress", "--seeds", "900", "--report_sets", "medium", "--log_dir", str(log),
                 "--plots", "none"]) == 0  # fmt: skip
    table = pd.read_csv(log / "report.csv")
    cem = table[table["policy"] == "cem"]
    assert sorted(cem["checkpoint"]) == ["best", "final"]
    ev = tmp_path / "eval"
    assert main(["--mode", "eval", "--algo", "cem", "--checkpoint", str(tmp_path / "models" / "cem_seed4_best.pt"),
                 "--seed", "900", "--difficulty", "medium", "--num_jobs", "20", "--no_progress", "--log_dir",
                 str(ev), "--plots", "none"]) == 0  # fmt: skip
    evaluations = pd.read_csv(log / "evaluations.csv")
    mine = evaluations[(evaluations["policy"] == "cem") & (evaluations["checkpoint"] == "best")][
        "avg_jct_s"
    ].item()
    assert mine == pytest.approx(pd.read_csv(ev / "summary.csv")["avg_jct_s"].item(), rel=1e-9)
    assert "Not held out" not in (log / "report.md").read_text()


def test_a_report_on_the_best_checkpoints_validation_seeds_says_its_best_rows_are_not_held_out(
    tmp_path, capsys
):
    assert train(tmp_path, "--total_steps", "1") == 0
    best = tmp_path / "models" / "cem_seed4_best.pt"
    capsys.readouterr()
    log = tmp_path / "report"
    assert main(["--mode", "report", "--models_dir", str(tmp_path / "models"), "--num_jobs", "20",
                 "--no_progress", "--seeds", "201,900", "--report_sets", "medium", "--log_dir", str(log),
                 "--plots", "none"]) == 0  # fmt: skip
    warned = [line for line in capsys.readouterr().err.splitlines() if "not held out" in line]
    assert warned == [
        f"warning: {best} was selected on validation seeds 201, which are also cases of this report (--seeds): "
        "its `best` rows are not held out"
    ]  # (the final checkpoint was not selected on anything: no warning)
    assert (
        f"**Not held out**: these `best` checkpoints were selected on validation seeds that are also cases of "
        f"this report, so their `best` rows are biased: `{best}` (seeds 201)."
        in (log / "report.md").read_text()
    )


def test_a_best_model_of_another_run_than_the_final_one_is_flagged_once(tmp_path, capsys):
    assert train(tmp_path, "--total_steps", "1") == 0
    # a later run without validation replaces the final model; the earlier run's best stays beside it
    assert train(tmp_path, "--total_steps", "1", "--validation_seeds", "none", "--overwrite", log="log2") == 0
    capsys.readouterr()
    models = tmp_path / "models"
    run = [
        "--seed",
        "4",
        "--difficulty",
        "easy",
        "--num_jobs",
        "20",
        "--no_progress",
        "--models_dir",
        str(models),
    ]
    assert (
        main(["--mode", "eval", "--algo", "cem", *run, "--model", "best", "--log_dir", str(tmp_path / "e")])
        == 0
    )
    warned = [line for line in capsys.readouterr().err.splitlines() if "not one run's models" in line]
    best = models / "cem_seed4_best.pt"
    assert len(warned) == 1 and warned[0].startswith(f"warning: {best} was selected in")
    assert main(["--mode", "compare", "--algos", "sjf,cem", "--seeds", "1,2", *run, "--model", "best",
                 "--log_dir", str(tmp_path / "c")]) == 0  # fmt: skip
    assert sum("not one run's models" in line for line in capsys.readouterr().err.splitlines()) == 1
    # the final model: no warning
    assert main(["--mode", "eval", "--algo", "cem", *run, "--log_dir", str(tmp_path / "f")]) == 0
    assert "not one run's models" not in capsys.readouterr().err
    assert main(["--mode", "report", "--models_dir", str(models), "--num_jobs", "20", "--no_progress", "--seeds",
                 "900", "--report_sets", "medium", "--log_dir", str(tmp_path / "r"), "--plots", "none"]) == 0  # fmt: skip
    assert sum("not one run's models" in line for line in capsys.readouterr().err.splitlines()) == 1
