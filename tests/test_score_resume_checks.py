"""`--resume` of a score-round learner's checkpoint (cem, es) through the command line: a damaged search state
(missing, of another shape, not finite, a broken generator state or step count) is one `error:` line naming the
file before any folder is made, and extending a finished run says so once, in generations."""

from __future__ import annotations

import copy

import pytest
import torch

from agents.checkpoint import load_checkpoint, save_checkpoint
from main import main

torch.set_num_threads(1)

TINY = ["--difficulty", "easy", "--num_jobs", "20", "--no_progress", "--validation_seeds", "none"]
SEARCH = {
    "cem": ["--cem_population", "2", "--cem_scenarios", "1", "--cem_workers", "1"],
    "es": ["--es_pairs", "1", "--es_scenarios", "1", "--es_workers", "1", "--es_hidden", "2"],
}


def train_args(algo: str, folder, *extra: str) -> list[str]:
    return ["--mode", "train", "--algo", algo, "--seed", "3", *TINY, *SEARCH[algo], "--models_dir",
            str(folder / "models"), "--log_dir", str(folder / "log"), *extra]  # fmt: skip


@pytest.fixture(scope="module")
def finals(tmp_path_factory) -> dict[str, dict]:
    """A one-generation run of each learner: its final checkpoint."""
    out = {}
    for algo in SEARCH:
        folder = tmp_path_factory.mktemp(algo)
        assert main(train_args(algo, folder, "--total_steps", "1")) == 0
        out[algo] = load_checkpoint(folder / "models" / f"{algo}_seed3_final.pt")
    return out


def _damage(checkpoint: dict, how: str) -> dict:
    c = copy.deepcopy(checkpoint)
    first = next(iter(c["search"]))  # cem: mean; es: theta
    if how == "no_search":
        del c["search"]
    elif how == "short_search":
        c["search"][first] = c["search"][first][:3]
    elif how == "nan_search":
        c["search"][first] = [float("nan")] * len(c["search"][first])
    elif how == "no_history":
        del c["history"]
    elif how == "no_rng":
        c["rng"] = None
    elif how == "other_rng":
        c["rng"] = {"numpy": {"bit_generator": "MT19937", "state": {}}}
    elif how == "text_step":
        c["global_step"] = "one"
    elif how == "no_algo":
        del c["algo"]
    elif how == "unknown_setting":
        c["config"]["warp_speed"] = 9
    elif how == "garbage_run_config":  # would otherwise train on the default workload, silently
        c["run_config"] = {"garbage": 1}
    elif how == "without_workload_run_config":
        del c["run_config"]["workload"]
    return c


@pytest.mark.parametrize("algo", ["cem", "es"])
@pytest.mark.parametrize(
    "how",
    ["no_search", "short_search", "nan_search", "no_history", "no_rng", "other_rng", "text_step", "no_algo",
     "unknown_setting", "garbage_run_config", "without_workload_run_config"],
)  # fmt: skip
def test_a_damaged_checkpoint_to_resume_is_one_error_line_and_nothing_is_written(
    tmp_path, capsys, finals, algo, how
):
    bad = tmp_path / f"{algo}_seed3_final.pt"
    save_checkpoint(bad, _damage(finals[algo], how))
    capsys.readouterr()
    if how.endswith("run_config"):  # as a user resumes: the run's settings are taken from the checkpoint
        args = ["--mode", "train", "--algo", algo, "--resume", str(bad), "--total_steps", "2", "--no_progress",
                "--models_dir", str(tmp_path / "models"), "--log_dir", str(tmp_path / "log")]  # fmt: skip
    else:
        args = train_args(algo, tmp_path, "--resume", str(bad), "--total_steps", "2")
    code = main(args)
    err = capsys.readouterr().err.strip()
    assert code == 2 and "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and str(bad) in lines[0], err
    assert not (tmp_path / "log").exists() and not (tmp_path / "models").exists()


def test_extending_a_finished_run_is_said_once_in_generations_and_not_when_the_resume_is_refused(
    tmp_path, capsys, finals
):
    final = tmp_path / "cem_seed3_final.pt"
    save_checkpoint(final, finals["cem"])
    capsys.readouterr()
    assert main(train_args("cem", tmp_path, "--resume", str(final), "--total_steps", "2")) == 0
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("extending")]
    assert said == [f"extending the finished run of {final} from 1 to 2 generations"]
    refused = ["--mode", "train", "--algo", "cem", "--resume", str(final), "--total_steps", "3", "--cem_population",
               "5", "--no_progress", "--models_dir", str(tmp_path / "models"), "--log_dir", str(tmp_path / "log2")]  # fmt: skip
    assert main(refused) == 2
    out = capsys.readouterr()
    assert "extending the finished run" not in out.out + out.err and "--cem_population 5" in out.err


def test_a_torch_file_with_a_format_but_no_observation_spec_is_one_error_line_for_every_agent(
    tmp_path, capsys
):
    bad = tmp_path / "handmade.pt"
    save_checkpoint(bad, {"format": 2, "algo": "d3qn"})
    for algo in ("cem", "d3qn"):
        capsys.readouterr()
        code = main(["--mode", "eval", "--algo", algo, *TINY[:5], "--checkpoint", str(bad), "--log_dir",
                     str(tmp_path / algo)])  # fmt: skip
        err = capsys.readouterr().err.strip()
        assert code == 2 and "Traceback" not in err
        assert err.splitlines()[-1].startswith(f"error: {bad}") and "obs_spec" in err


@pytest.mark.parametrize(("saved", "asked", "message"), [("es", "cem", "holds an es agent, not cem"),
                                                         ("cem", "es", "holds a cem agent, not es")])  # fmt: skip
def test_a_scorer_of_the_other_learner_is_one_error_line_naming_both(
    tmp_path, capsys, finals, saved, asked, message
):
    path = tmp_path / f"{saved}_seed3_final.pt"
    save_checkpoint(path, finals[saved])
    capsys.readouterr()
    code = main(["--mode", "eval", "--algo", asked, *TINY[:5], "--checkpoint", str(path), "--log_dir",
                 str(tmp_path / "e")])  # fmt: skip
    err = capsys.readouterr().err.strip()
    assert code == 2 and "Traceback" not in err and not (tmp_path / "e").exists()
    assert err.splitlines()[-1] == f"error: checkpoint {path} {message}"
