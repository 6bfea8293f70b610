"""Model selection on validation scenarios: scores each training checkpoint, keeps a copy of the best one."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np

from agents.checkpoint import copy_checkpoint
from agents.policy import AgentPolicy
from config import RunConfig
from env.gym_env import run_policy_in_env
from env.scenario import build_scenario
from metrics.summary import summarize


class BestCheckpoint:
    """`eval_fn` for agents.trainer.train: average JCT of the greedy policy on `cfg.validation_seeds`.

    Whenever a checkpoint scores better than every earlier one of the run, it is copied to `best_path`, and
    its step and score go to `<best_path>.json` (read back on `--resume`, so a resumed run keeps its best).
    Validation seeds must differ from the seeds results are reported on; training seeds never collide
    with them (agents.trainer.TRAIN_SEED_BASE).
    """

    def __init__(self, cfg: RunConfig, best_path: Path, resume: bool):
        self.cfg = dataclasses.replace(cfg, env=dataclasses.replace(cfg.env, reward="jct"))
        self.scenarios = [build_scenario(self.cfg, seed) for seed in cfg.validation_seeds]
        self.best_path = Path(best_path)
        self.record_path = self.best_path.with_suffix(".json")
        self.best_jct_s = math.inf
        if resume and self.record_path.exists() and self.best_path.exists():
            self.best_jct_s = json.loads(self.record_path.read_text())["val_avg_jct_s"]

    def __call__(self, policy: AgentPolicy) -> dict[str, float]:
        results = [run_policy_in_env(self.cfg, sc, policy.act, policy.algo) for sc in self.scenarios]
        jct = float(np.mean([summarize(r).avg_jct_s for r in results]))
        if jct < self.best_jct_s:
            self.best_jct_s = jct
            copy_checkpoint(policy.checkpoint_path, self.best_path)
            record = {
                "val_avg_jct_s": jct,
                "global_step": policy.global_step,
                "copied_from": Path(policy.checkpoint_path).name,
                "validation_seeds": list(self.cfg.validation_seeds),
            }
            self.record_path.write_text(json.dumps(record, indent=1) + "\n")
        return {"val_avg_jct_s": jct, "best_val_avg_jct_s": self.best_jct_s}
