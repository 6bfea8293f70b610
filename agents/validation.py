"""Model selection on validation scenarios: scores each training checkpoint, keeps a copy of the best one."""

from __future__ import annotations

import dataclasses
import json
import math
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from agents.checkpoint import load_checkpoint, save_checkpoint
from agents.files import write_text_atomic
from agents.policy import AgentPolicy
from config import RunConfig
from env.gym_env import run_policy_in_env
from metrics.summary import summarize
from scenario.build import build_scenario


def pending_best_path(best_path: str | os.PathLike) -> Path:
    """Where a run keeps its best model until it completes: <algo>_seed<S>_best.pending.pt."""
    best_path = Path(best_path)
    return best_path.with_name(best_path.stem + ".pending.pt")


def validation_record(path: str | os.PathLike) -> dict[str, Any] | None:
    """The `validation` entry of a best-model checkpoint (score, step, run_id), or None (absent, unreadable,
    or written before best models carried it)."""
    if not Path(path).is_file():
        return None
    try:
        return load_checkpoint(path).get("validation")
    except ValueError:  # UserError: a damaged file is no record
        return None


class BestKeeper:
    """Keeps a training run's best model by a validation score (lower is better): `offer(score, step, checkpoint)` writes
    a checkpoint that beats every earlier offer of the run, with its record in a `validation` entry (`key`: the
    score, global_step, run_id, and what the caller adds), to `<algo>_seed<S>_best.pending.pt` (and
    `.pending.json` for people). `publish()`, called once the run's final checkpoint is written, renames it to
    `<algo>_seed<S>_best.pt` (+ `_best.json`): an earlier run's best model stays until a complete run replaces
    it, so a run killed half-way leaves the previous best and final models (one run's pair) untouched. A resumed
    run continues from its own pending best, or from its published one when a finished run is extended; a record
    of another run, or from later than the resumed checkpoint, is ignored. A run resumed into another models folder
    (`resumed_from`: the resumed checkpoint, in the folder it was written to) carries its best so far over from
    that folder as its pending best, so it still selects as the uninterrupted run.
    """

    def __init__(
        self,
        best_path: Path,
        run_id: str,
        resume_step: int | None = None,
        key: str = "val_avg_jct_s",
        resumed_from: str | os.PathLike | None = None,
    ):
        self.best_path, self.run_id, self.key = Path(best_path), run_id, key
        self.pending_path = pending_best_path(self.best_path)
        self.best_score = math.inf
        self.record: dict[str, Any] | None = None
        self.source: Path | None = None
        """the file holding this run's best so far (pending, or the published one when extending)"""
        if resume_step is None:
            return
        places = [self.pending_path, self.best_path]
        earlier = Path(resumed_from).resolve().parent if resumed_from is not None else None
        if earlier is not None and earlier != self.best_path.resolve().parent:
            places += [earlier / self.pending_path.name, earlier / self.best_path.name]
        for path in places:
            record = validation_record(path)
            if (
                record
                and record.get("run_id") == run_id
                and record["global_step"] <= resume_step
                and key in record
            ):
                self.best_score, self.record, self.source = record[key], record, path
                break
        if self.source is not None and self.source.parent.resolve() != self.best_path.resolve().parent:
            save_checkpoint(
                self.pending_path, load_checkpoint(self.source)
            )  # carried over from the earlier folder
            write_text_atomic(
                self.pending_path.with_suffix(".json"), json.dumps(self.record, indent=1) + "\n"
            )
            self.source = self.pending_path

    def offer(
        self, score: float, global_step: int, checkpoint: Callable[[], dict[str, Any]], **extra: Any
    ) -> bool:
        """Keep the model of `global_step` (`checkpoint()` builds its checkpoint, only when needed) as the run's
        best when `score` beats every earlier one; True if it did."""
        if not score < self.best_score:
            return False
        self.best_score = score
        self.record = {self.key: score, "global_step": global_step, **extra, "run_id": self.run_id}
        checkpoint = dict(checkpoint(), validation=self.record)
        save_checkpoint(self.pending_path, checkpoint)
        write_text_atomic(self.pending_path.with_suffix(".json"), json.dumps(self.record, indent=1) + "\n")
        self.source = self.pending_path
        return True

    def publish(self) -> bool:
        """Make this run's best the published `best_path` (+ .json); False when the run validated nothing."""
        if self.source is None or self.record is None:
            return False
        if self.source == self.pending_path:
            os.replace(self.pending_path, self.best_path)
            self.source = self.best_path
        write_text_atomic(self.best_path.with_suffix(".json"), json.dumps(self.record, indent=1) + "\n")
        self.pending_path.with_suffix(".json").unlink(missing_ok=True)
        return True


class BestCheckpoint(BestKeeper):
    """`eval_fn` for agents.trainer.train: average JCT of the greedy policy on `cfg.validation_seeds`; the best
    checkpoint is kept as BestKeeper says (score key `val_avg_jct_s`).
    Validation seeds must differ from the seeds results are reported on; training seeds never collide
    with them (agents.run_control.TRAIN_SEED_BASE).
    """

    def __init__(
        self,
        cfg: RunConfig,
        best_path: Path,
        run_id: str,
        resume_step: int | None = None,
        resumed_from: str | os.PathLike | None = None,
    ):
        super().__init__(best_path, run_id, resume_step, resumed_from=resumed_from)
        self.cfg = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, reward="jct"))
        self.scenarios = [build_scenario(self.cfg, seed) for seed in cfg.validation_seeds]

    @property
    def best_jct_s(self) -> float:
        return self.best_score

    def __call__(self, policy: AgentPolicy) -> dict[str, float]:
        results = [run_policy_in_env(self.cfg, sc, policy.act, policy.algo) for sc in self.scenarios]
        jct = float(np.mean([summarize(r).avg_jct_s for r in results]))

        def checkpoint() -> dict[str, Any]:
            saved = load_checkpoint(policy.checkpoint_path)
            saved["replay"] = None  # a model to evaluate; runs resume from their own checkpoints
            return saved

        self.offer(
            jct,
            policy.global_step,
            checkpoint,
            copied_from=Path(policy.checkpoint_path).name,
            validation_seeds=list(self.cfg.validation_seeds),
        )
        return {"val_avg_jct_s": jct, "best_val_avg_jct_s": self.best_jct_s}
