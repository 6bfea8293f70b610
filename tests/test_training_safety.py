"""Training never loses a user's models: atomic writes, one training per seed, Ctrl-C checkpoints, honest resumes."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

import agents.trainer
from agents.checkpoint import load_checkpoint, save_checkpoint
from agents.files import TrainingLock, atomic_write, temp_path
from agents.replay import ReplayBuffer
from config import EnvConfig, RunConfig, SACConfig, WorkloadConfig, run_config_from_dict
from env.gym_env import GPUClusterEnv
from main import main

torch.set_num_threads(1)

# tiny runs: 20 jobs per episode, no demonstrations, learning never starts (learning_starts 2000)
TINY = ["--difficulty", "easy", "--num_jobs", "20", "--no_progress"]  # eval refuses training options


def train_args(tmp_path: Path, *extra: str, algo: str = "d3qn", seed: int = 3, log: str = "log") -> list[str]:
    return ["--mode", "train", "--algo", algo, "--seed", str(seed), *TINY, "--demo_policy", "none", "--models_dir",
            str(tmp_path / "models"), "--log_dir", str(tmp_path / log), *extra]  # fmt: skip


def run_id_of(path: Path) -> str:
    return load_checkpoint(path)["run_id"]


def fail_at_env_step(monkeypatch, step: int, error: BaseException) -> None:
    """GPUClusterEnv.step raises `error` on its `step`-th call (once)."""
    real_step, calls = GPUClusterEnv.step, [0]

    def step_or_fail(self, action):
        calls[0] += 1
        if calls[0] == step:
            raise error
        return real_step(self, action)

    monkeypatch.setattr(GPUClusterEnv, "step", step_or_fail)


# ---- atomic writes under unique names -------------------------------------------------------------------


def test_temp_names_are_unique_hidden_and_never_look_like_finished_files(tmp_path):
    target = tmp_path / "d3qn_seed0_final.replay.npz"
    names = {temp_path(target).name for _ in range(100)}
    assert len(names) == 100
    assert all(n.startswith(".d3qn_seed0_final.replay.npz.") and n.endswith(".tmp") for n in names)
    assert all(f".{os.getpid()}-" in n for n in names)


def test_an_interrupted_write_leaves_the_old_file_and_no_temp_file(tmp_path):
    target = tmp_path / "model.pt"
    target.write_bytes(b"old complete model")

    def write_half_then_ctrl_c(file) -> None:
        file.write(b"half a new")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, write_half_then_ctrl_c)
    assert target.read_bytes() == b"old complete model"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.pt"]


def test_concurrent_saves_of_one_replay_file_never_collide(tmp_path):
    """Two writers of the same buffer file (formerly `<file>.tmp.npz` for both: FileNotFoundError)."""
    target = str(tmp_path / "d3qn_seed0_final.replay.npz")
    errors: list[BaseException] = []

    def writer(fill: float) -> None:
        buffer = ReplayBuffer(8, 3, 2, np.random.default_rng(0), 0.99)
        for _ in range(5):
            buffer.add(
                np.full(3, fill), 0, fill, np.full(3, fill), False, False, np.ones(2, bool), np.ones(2, bool)
            )
        try:
            for _ in range(30):
                buffer.save(target)
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(fill,)) for fill in (1.0, 2.0, 3.0)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    loaded = ReplayBuffer(8, 3, 2, np.random.default_rng(0), 0.99)
    loaded.load(target)  # one writer's complete file
    assert len(loaded) == 5 and len(set(loaded.rewards[:5])) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["d3qn_seed0_final.replay.npz"]


# ---- one training per algo + seed ------------------------------------------------------------------------


def test_a_second_training_of_the_same_seed_is_refused_naming_the_holder(tmp_path, capsys):
    lock_file = tmp_path / "models" / "d3qn_seed3.lock"
    with TrainingLock(lock_file, "d3qn seed 3"):
        code = main(train_args(tmp_path, "--total_steps", "50", "--validation_seeds", "none"))
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("error: ") and err.count("\n") == 1
        assert str(lock_file) in err and f"pid {os.getpid()}" in err and "Traceback" not in err
        assert sorted(p.name for p in lock_file.parent.iterdir()) == ["d3qn_seed3.lock"]  # nothing written
        # another seed is another set of files: allowed meanwhile
        assert (
            main(train_args(tmp_path, "--total_steps", "50", "--validation_seeds", "none", seed=4, log="b"))
            == 0
        )
    assert not lock_file.exists()  # released


def test_a_lock_left_by_a_dead_training_is_taken_over(tmp_path):
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    lock_file = tmp_path / "models" / "d3qn_seed3.lock"
    lock_file.parent.mkdir()
    lock_file.write_text(f"pid {int(dead.stdout)}, started 2026-01-01 00:00:00\n")
    assert main(train_args(tmp_path, "--total_steps", "50", "--validation_seeds", "none")) == 0
    assert (tmp_path / "models" / "d3qn_seed3_final.pt").exists() and not lock_file.exists()


def test_the_lock_is_held_by_another_process_until_it_exits(tmp_path):
    lock_file = tmp_path / "d3qn_seed0.lock"
    code = (
        "import sys, time; sys.path.insert(0, sys.argv[1]); from agents.files import TrainingLock\n"
        "lock = TrainingLock(sys.argv[2], 'd3qn seed 0'); lock.acquire(); print('held', flush=True); time.sleep(60)"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(Path(__file__).resolve().parents[1]), str(lock_file)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ValueError, match=f"pid {holder.pid}"):
            TrainingLock(lock_file, "d3qn seed 0").acquire()
    finally:
        holder.kill()  # SIGKILL: no clean-up runs, the file stays behind
        holder.wait()
    assert lock_file.exists()
    with TrainingLock(lock_file, "d3qn seed 0"):
        assert lock_file.read_text().startswith(f"pid {os.getpid()},")


# ---- old models survive until a complete new run replaces them ------------------------------------------


def test_old_best_and_final_survive_a_killed_or_interrupted_run_until_a_complete_run_replaces_them(
    tmp_path, monkeypatch, capsys
):
    models = tmp_path / "models"
    validated = ["--validation_seeds", "200", "--checkpoint_every", "1"]
    assert main(train_args(tmp_path, "--total_steps", "120", *validated, log="a")) == 0
    best, final = models / "d3qn_seed3_best.pt", models / "d3qn_seed3_final.pt"
    old = {path: path.read_bytes() for path in (best, final, models / "d3qn_seed3_best.json")}
    old_run = run_id_of(final)
    assert (
        run_id_of(best) == old_run and json.loads(old[models / "d3qn_seed3_best.json"])["run_id"] == old_run
    )

    # a fresh run that crashes (as a kill would) after its first checkpoints: the earlier pair is untouched
    with monkeypatch.context() as patch:
        fail_at_env_step(patch, 150, RuntimeError("power cut"))
        with pytest.raises(RuntimeError, match="power cut"):
            main(train_args(tmp_path, "--total_steps", "400", *validated, "--overwrite", log="b"))
    assert {path: path.read_bytes() for path in old} == old
    assert run_id_of(models / "d3qn_seed3_best.pending.pt") != old_run  # the crashed run's own best so far

    # a fresh run stopped by Ctrl-C: the same, plus a checkpoint to resume from
    capsys.readouterr()
    with monkeypatch.context() as patch:
        fail_at_env_step(patch, 150, KeyboardInterrupt())
        assert main(train_args(tmp_path, "--total_steps", "400", *validated, "--overwrite", log="c")) == 130
    assert {path: path.read_bytes() for path in old} == old
    interrupted = models / "d3qn_seed3_interrupted.pt"
    new_run = run_id_of(interrupted)
    assert new_run != old_run
    # eval --model best meanwhile loads the old run's best, which matches the final beside it: no warning
    eval_args = ["--mode", "eval", "--algo", "d3qn", "--seed", "3", *TINY, "--models_dir", str(models)]
    assert main([*eval_args, "--model", "best", "--log_dir", str(tmp_path / "e1")]) == 0
    assert "warning" not in capsys.readouterr().err

    # the resumed run completes: now best and final are both the new run's, and its leftovers are gone
    assert main(train_args(tmp_path, "--resume", str(interrupted), log="c")) == 0
    assert run_id_of(final) == run_id_of(best) == new_run
    assert json.loads((models / "d3qn_seed3_best.json").read_text())["run_id"] == new_run
    assert load_checkpoint(best)["validation"]["run_id"] == new_run
    left = {p.name for p in models.iterdir()}
    assert not left & {
        "d3qn_seed3_interrupted.pt",
        "d3qn_seed3_best.pending.pt",
        "d3qn_seed3_best.pending.json",
    }
    assert not [name for name in left if name.endswith(".tmp") or name.endswith(".lock")]


def test_best_model_of_another_run_than_final_is_kept_but_flagged(tmp_path, capsys):
    models = tmp_path / "models"
    assert main(train_args(tmp_path, "--total_steps", "60", "--validation_seeds", "200", log="a")) == 0
    first_best = (models / "d3qn_seed3_best.pt").read_bytes()
    capsys.readouterr()
    # a later run without validation replaces final but has no best of its own: the old best stays, flagged
    assert main(train_args(tmp_path, "--total_steps", "60", "--validation_seeds", "none", log="b")) == 0
    assert (models / "d3qn_seed3_best.pt").read_bytes() == first_best
    assert "is from run" in capsys.readouterr().out
    eval_args = ["--mode", "eval", "--algo", "d3qn", "--seed", "3", *TINY, "--models_dir", str(models)]
    assert main([*eval_args, "--model", "best", "--log_dir", str(tmp_path / "e")]) == 0
    err = capsys.readouterr().err
    assert "warning:" in err and "d3qn_seed3_best.pt" in err and "not one run's models" in err
    # a best model written before run ids existed cannot be matched to the final one: said as well
    old_format = load_checkpoint(models / "d3qn_seed3_best.pt")
    del old_format["run_id"]
    save_checkpoint(models / "d3qn_seed3_best.pt", old_format)
    assert main([*eval_args, "--model", "best", "--log_dir", str(tmp_path / "e2")]) == 0
    assert "predates run ids" in capsys.readouterr().err
    # a report over several cases says it once, before its evaluations, not once per case
    report = ["--mode", "report", "--models_dir", str(models), "--num_jobs", "20", "--no_progress", "--seeds",
              "900,901", "--report_sets", "medium", "--log_dir", str(tmp_path / "r"), "--plots", "none"]  # fmt: skip
    assert main(report) == 0
    assert sum("predates run ids" in line for line in capsys.readouterr().err.splitlines()) == 1


def test_run_settings_round_trip_through_a_checkpoint():
    cfg = RunConfig(
        mode="train",
        algo="sac",
        validation_seeds=(7, 8),
        workload=WorkloadConfig(difficulty="easy", num_jobs=20, trace_start_s=5.0),
        env=EnvConfig(window=8, reward="jct"),
        sac=SACConfig(demo_policy="", hidden=16),
    )
    saved = torch.load(_saved(dataclasses.asdict(cfg)), weights_only=True)
    assert run_config_from_dict(saved) == cfg
    # fields a checkpoint lacks keep their defaults; fields this version does not know are dropped
    saved["workload"].pop("num_jobs")
    saved["env"]["a_future_option"] = 1
    assert run_config_from_dict(saved) == dataclasses.replace(
        cfg, workload=dataclasses.replace(cfg.workload, num_jobs=None)
    )


def _saved(value) -> io.BytesIO:
    buffer = io.BytesIO()
    torch.save(value, buffer)
    buffer.seek(0)
    return buffer


def test_a_fresh_run_never_writes_over_another_runs_checkpoints_unless_overwrite(tmp_path, capsys):
    models = tmp_path / "models"
    every = ["--validation_seeds", "none", "--checkpoint_every", "1"]
    assert main(train_args(tmp_path, "--total_steps", "120", *every, log="a")) == 0
    periodic = sorted(p.name for p in models.glob("d3qn_seed3_ep*.pt"))
    assert len(periodic) >= 3  # 20-job episodes: several in 120 steps
    before = {p.name: p.read_bytes() for p in models.iterdir()}
    capsys.readouterr()
    fresh = train_args(tmp_path, "--total_steps", "60", "--validation_seeds", "none", "--checkpoint_every", "2",
                       log="b")  # fmt: skip
    assert main(fresh) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "holds checkpoints of an earlier d3qn seed 3 training (d3qn_seed3_ep1.pt" in err
    assert f"--resume {models / periodic[-1]}" in err and "--overwrite" in err
    assert {p.name: p.read_bytes() for p in models.iterdir()} == before  # nothing touched
    assert not (tmp_path / "b").exists()  # refused before its run folder was made
    # --overwrite starts over without the earlier run's periodic files (final/best wait for completion)
    assert main([*fresh, "--overwrite"]) == 0
    assert "--overwrite removed" in capsys.readouterr().out
    new_run = run_id_of(models / "d3qn_seed3_final.pt")
    assert all(run_id_of(p) == new_run for p in models.glob("d3qn_seed3_ep*.pt"))
    # a resume of the run is no fresh run: allowed
    resume = ["--resume", str(models / "d3qn_seed3_final.pt"), "--total_steps", "100"]
    assert main([*train_args(tmp_path, log="b")[:-2], "--log_dir", str(tmp_path / "b"), *resume]) == 0


# ---- Ctrl-C -----------------------------------------------------------------------------------------------


def test_ctrl_c_writes_a_checkpoint_prints_the_resume_command_and_resuming_it_finishes_the_run(
    tmp_path, monkeypatch, capsys
):
    models = tmp_path / "models"
    args = train_args(tmp_path, "--total_steps", "150", "--validation_seeds", "none", "--reward", "jct")
    with monkeypatch.context() as patch:
        fail_at_env_step(patch, 70, KeyboardInterrupt())
        code = main(args)
    out, err = capsys.readouterr()
    assert code == 130 and "Traceback" not in err and "KeyboardInterrupt" not in err
    checkpoint = load_checkpoint(models / "d3qn_seed3_interrupted.pt")
    assert checkpoint["global_step"] == 69 and checkpoint["total_steps"] == 150  # step 70 was cut short
    assert (models / "d3qn_seed3_interrupted.replay.npz").exists()
    assert not (models / "d3qn_seed3_final.pt").exists()  # an unfinished run is no final model
    hint = [line for line in err.splitlines() if line.startswith("resume with: ")]
    assert len(hint) == 1
    command = shlex.split(hint[0].removeprefix("resume with: "))
    assert command[:2] == ["python", "main.py"] and command[-2:] == [
        "--resume",
        str(models / "d3qn_seed3_interrupted.pt"),
    ]
    assert (
        main(command[2:]) == 0
    )  # exactly what the user would type (workload and reward come from the checkpoint)
    final = load_checkpoint(models / "d3qn_seed3_final.pt")
    assert final["global_step"] == 150 and final["run_id"] == checkpoint["run_id"]
    assert final["run_config"]["env"]["reward"] == "jct" and final["run_config"]["workload"]["num_jobs"] == 20
    assert not (models / "d3qn_seed3_interrupted.pt").exists()


def test_ctrl_c_stops_at_a_step_boundary_and_a_second_one_while_saving_is_ignored(
    tmp_path, monkeypatch, capsys
):
    """Real SIGINTs: the first at env step 40 (the step completes), the second while the checkpoint is written."""
    real_step, real_save, calls = GPUClusterEnv.step, agents.trainer.save_checkpoint, [0]

    def step_then_ctrl_c(self, action):
        calls[0] += 1
        result = real_step(self, action)
        if calls[0] == 40:
            os.kill(os.getpid(), signal.SIGINT)
        return result

    def ctrl_c_while_saving(path, checkpoint):
        os.kill(os.getpid(), signal.SIGINT)
        real_save(path, checkpoint)

    handler_before = signal.getsignal(signal.SIGINT)
    monkeypatch.setattr(GPUClusterEnv, "step", step_then_ctrl_c)
    monkeypatch.setattr(agents.trainer, "save_checkpoint", ctrl_c_while_saving)
    code = main(train_args(tmp_path, "--total_steps", "150", "--validation_seeds", "none"))
    err = capsys.readouterr().err
    assert code == 130 and "Ctrl-C is ignored until it is complete" in err and "Traceback" not in err
    assert load_checkpoint(tmp_path / "models" / "d3qn_seed3_interrupted.pt")["global_step"] == 40
    assert signal.getsignal(signal.SIGINT) is handler_before  # restored


def test_ctrl_c_before_the_first_step_writes_nothing(tmp_path, monkeypatch, capsys):
    def interrupted_env(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr("cli.train.GPUClusterEnv", interrupted_env)
    assert main(train_args(tmp_path, "--total_steps", "50", "--validation_seeds", "none")) == 130
    assert "no checkpoint written" in capsys.readouterr().err
    assert not list((tmp_path / "models").glob("*.pt"))


# ---- --resume continues the same run ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def unfinished_run(tmp_path_factory) -> Path:
    """An interrupted d3qn seed 3 run (150-step target, window 16, reward jct, 20 jobs) to resume from."""
    tmp_path = tmp_path_factory.mktemp("unfinished")
    real_step, calls = GPUClusterEnv.step, [0]

    def step_or_stop(self, action):
        calls[0] += 1
        if calls[0] == 70:
            raise KeyboardInterrupt
        return real_step(self, action)

    GPUClusterEnv.step = step_or_stop
    try:
        assert (
            main(
                train_args(tmp_path, "--total_steps", "150", "--validation_seeds", "none", "--reward", "jct")
            )
            == 130
        )
    finally:
        GPUClusterEnv.step = real_step
    return tmp_path / "models" / "d3qn_seed3_interrupted.pt"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--window", "8"], "--window 8 (the checkpoint's run has 16)"),
        (["--algo", "sac"], "--algo sac (the checkpoint's run has d3qn)"),
        (["--seed", "4"], "--seed 4 (the checkpoint's run has 3)"),
        (["--total_steps", "300"], "--total_steps 300 (the checkpoint's run targets 150)"),
        (["--reward", "delay"], "--reward delay (the checkpoint's run has jct)"),
        (["--num_jobs", "25"], "--num_jobs 25 (the checkpoint's run has 20)"),
        (["--difficulty", "medium"], "--difficulty medium (the checkpoint's run has easy)"),
        (["--demo_policy", "sjf"], "--demo_policy sjf (the checkpoint's run has none)"),
        (["--validation_seeds", "200"], "--validation_seeds 200 (the checkpoint's run has none)"),
    ],
)
def test_resume_rejects_an_option_that_contradicts_the_checkpoint(
    unfinished_run, extra, message, tmp_path, capsys
):
    args = ["--mode", "train", "--algo", "d3qn", "--resume", str(unfinished_run), "--models_dir",
            str(tmp_path / "m"), "--log_dir", str(tmp_path / "l"), "--no_progress", *extra]  # fmt: skip
    if "--algo" in extra:
        args = args[:2] + args[4:]
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2 and message in err and "Traceback" not in err and err.count("\n") == 1
    assert not (tmp_path / "m").exists()


def test_resume_of_a_finished_run_needs_a_larger_target(tmp_path, capsys):
    assert main(train_args(tmp_path, "--total_steps", "40", "--validation_seeds", "none")) == 0
    final = str(tmp_path / "models" / "d3qn_seed3_final.pt")
    assert main(train_args(tmp_path, "--resume", final, log="b")) == 2
    assert "already finished its 40 steps" in capsys.readouterr().err
    assert main(train_args(tmp_path, "--resume", final, "--total_steps", "30", log="c")) == 2
    assert (
        main(train_args(tmp_path, "--resume", final, "--total_steps", "80", log="d")) == 0
    )  # explicit extension
    assert load_checkpoint(final)["global_step"] == 80


# ---- clear errors before any work ------------------------------------------------------------------------


def bad_checkpoints(tmp_path: Path) -> dict[str, Path]:
    good = tmp_path / "good.pt"
    save_checkpoint(good, {"format": 1, "weights": torch.zeros(2000)})
    files = {
        "empty": tmp_path / "empty.pt",
        "truncated": tmp_path / "truncated.pt",
        "text": tmp_path / "notes.pt",
        "directory": tmp_path / "folder.pt",
        "foreign": tmp_path / "foreign.pt",
    }
    files["empty"].write_bytes(b"")
    files["truncated"].write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    files["text"].write_text("these are not weights\n")
    files["directory"].mkdir()
    torch.save([1, 2, 3], files["foreign"])
    return files


EXPECTED = {
    "empty": "empty file",
    "truncated": "not a readable checkpoint",
    "text": "not a readable checkpoint",
    "directory": "is a directory",
    "foreign": "not a checkpoint written by this program",
}


@pytest.mark.parametrize("kind", sorted(EXPECTED))
@pytest.mark.parametrize("mode", ["eval", "resume"])
def test_a_bad_checkpoint_file_is_one_error_line(tmp_path, capsys, kind, mode):
    path = bad_checkpoints(tmp_path)[kind]
    if mode == "eval":
        args = [
            "--mode",
            "eval",
            "--algo",
            "d3qn",
            "--checkpoint",
            str(path),
            *TINY,
            "--log_dir",
            str(tmp_path / "o"),
        ]
    else:
        args = train_args(tmp_path, "--resume", str(path))
    code = main(args)
    err = capsys.readouterr().err
    assert code == 2 and EXPECTED[kind] in err and str(path) in err
    assert "Traceback" not in err and [line for line in err.splitlines() if line.startswith("error:")] == [
        err.strip().splitlines()[-1]
    ]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--checkpoint_every", "0"], "--checkpoint_every must be > 0 episodes, got 0"),
        (["--checkpoint_every", "-3"], "--checkpoint_every must be > 0 episodes, got -3"),
        (
            ["--validation_seeds", "-1"],
            "--validation_seeds must be >= 0 (numpy seeds are non-negative), got -1",
        ),
        (["--validation_seeds", "5,1000000001"], "got 1000000001 ("),
    ],
)
def test_bad_training_options_fail_before_any_work(tmp_path, capsys, extra, message):
    assert main(train_args(tmp_path, "--total_steps", "50", *extra)) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "models").exists() and not (tmp_path / "log").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_device_cuda_without_cuda_is_a_clear_error(tmp_path, capsys):
    assert main(train_args(tmp_path, "--total_steps", "50", "--device", "cuda")) == 2
    err = capsys.readouterr().err
    assert "--device cuda" in err and "use --device cpu or auto" in err and "Traceback" not in err
    assert not (tmp_path / "models").exists()


# ---- progress ---------------------------------------------------------------------------------------------


def test_demonstrations_and_pretraining_show_progress_and_count_in_steps_per_s(tmp_path, capsys):
    from agents.toy_env import ToySJFEnv
    from config import D3QNConfig

    def toy_sjf(env) -> int:  # start the shortest visible job when the machine is idle
        toy = env.unwrapped
        return (
            toy.window
            if toy.running_left_s > 0 or not toy.queue_s
            else int(np.argmin(toy.queue_s[: toy.window]))
        )

    cfg = D3QNConfig(demo_policy="toy-sjf", demo_episodes=3, demo_pretrain_updates=40, batch_size=8)
    result = agents.trainer.train(
        "d3qn", lambda seed: ToySJFEnv(window=4), cfg, seed=0, total_steps=16, device="cpu",
        models_dir=str(tmp_path / "m"), run_dir=str(tmp_path / "r"), progress=True, demonstrator=toy_sjf,
    )  # fmt: skip
    err = capsys.readouterr().err
    assert "demonstrations (toy-sjf)" in err and "3/3" in err
    assert "pre-training on demonstrations" in err and "40/40" in err
    assert 0 < result.setup_s < result.wall_s
    assert result.steps_per_s == pytest.approx(16 / result.wall_s)


def test_a_models_dir_that_is_a_file_is_a_clear_error(tmp_path, capsys):
    (tmp_path / "models").write_text("not a folder")
    assert main(train_args(tmp_path, "--total_steps", "50", "--validation_seeds", "none")) == 2
    err = capsys.readouterr().err
    assert "--models_dir" in err and "is a file, not a folder" in err and "Traceback" not in err


def test_a_replay_buffer_that_does_not_belong_to_its_checkpoint_is_not_used(tmp_path):
    """A kill between writing the buffer and its checkpoint leaves a newer buffer beside an older checkpoint."""
    from agents.checkpoint import replay_path
    from agents.toy_env import ToySJFEnv
    from config import D3QNConfig

    def run(total_steps: int, resume: str | None = None):
        cfg = D3QNConfig(demo_policy="", learning_starts=10_000)
        return agents.trainer.train(
            "d3qn", lambda seed: ToySJFEnv(window=4), cfg, seed=0, total_steps=total_steps, device="cpu",
            models_dir=str(tmp_path / "m"), run_dir=str(tmp_path / "r"), progress=False, resume=resume,
        )  # fmt: skip

    first = run(32)
    stale = ReplayBuffer(D3QNConfig().buffer_size, 4 * 2 + 3, 5, np.random.default_rng(0), 0.95)
    for _ in range(40):  # 40 transitions where the checkpoint recorded 32
        stale.add(np.zeros(11), 0, 0.0, np.zeros(11), False, False, np.ones(5, bool), np.ones(5, bool))
    stale.save(str(replay_path(first.final_checkpoint)))
    with pytest.warns(UserWarning, match="does not match"):
        second = run(48, resume=first.final_checkpoint)
    assert second.global_step == 48
    assert (
        load_checkpoint(second.final_checkpoint)["replay"]["size"] == 16
    )  # refilled from empty, not 40 + 16


def test_a_warning_during_training_is_one_line(unfinished_run, tmp_path, capsys):
    """Resuming a copy of a checkpoint without its replay buffer warns, as one `warning:` line."""
    copy = tmp_path / "copy.pt"
    copy.write_bytes(unfinished_run.read_bytes())
    args = ["--mode", "train", "--algo", "d3qn", "--resume", str(copy), "--models_dir", str(tmp_path / "m"),
            "--log_dir", str(tmp_path / "l"), "--no_progress"]  # fmt: skip
    assert main(args) == 0
    err = capsys.readouterr().err
    assert f"warning: {copy}: no replay buffer saved; refilling" in err
    assert "UserWarning" not in err and "train(" not in err and err.count("\n") == 1
