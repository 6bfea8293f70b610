"""The scorers the score-round learners train (a linear score for `cem`, a per-row MLP for `es`): built from a
parameter vector during training and from a checkpoint's `scorer` entry afterwards, with the checks that make a
bad file one error line."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from config import SCORER_ALGOS, RunConfig, UserError, a_or_an
from schedulers.score_features import FEATURE_NAMES, NUM_FEATURES
from schedulers.score_rounds import ROUND_S, LinearScorer, Scorer

SCORES_ACTION = "scores"
"""a scorer checkpoint's action_space type: one score per (job, GPU type) row of the score features"""


def scorer_from_params(cfg: RunConfig, params: np.ndarray) -> Scorer:
    """cfg.algo's scorer of the parameter vector `params` (a training candidate)."""
    if cfg.algo == "es":
        from agents.row_mlp import RowMLP  # lazy: torch's scorer, for es runs only

        return RowMLP(params, cfg.es.hidden)
    return LinearScorer(params)


def check_scorer_features(path: str | Path, checkpoint: dict[str, Any]) -> None:
    """UserError when a scorer checkpoint was trained on other score features than this version's."""
    action = checkpoint.get("action_space") or {}
    saved = list(action.get("features") or ())
    if action.get("type") != SCORES_ACTION or saved != list(FEATURE_NAMES):
        raise UserError(
            f"{path} holds {a_or_an(checkpoint.get('algo'))} scorer of {len(saved)} features ({', '.join(saved[:3])}, ...), "
            f"but this version scores {NUM_FEATURES} ({', '.join(FEATURE_NAMES[:3])}, ...): retrain it with this version"
        )


class TrainedScorer(NamedTuple):
    """What a scorer checkpoint holds (`load_scorer`)."""

    algo: str
    scorer: Scorer
    round_s: float
    """the round length it was trained at (its run config's; ROUND_S for a checkpoint that records none)"""
    on_arrival: bool = False
    """whether it was trained with a round at every arrival too (False for a checkpoint that records none)"""

    def round_for(self, cfg: RunConfig) -> float:
        """The round length it runs at: --round_s when the command line gives it, else its trained one."""
        return cfg.policy.round_s if "round_s" in cfg.explicit_options else self.round_s

    def on_arrival_for(self, cfg: RunConfig) -> bool:
        """Whether it runs with rounds at arrivals: --round_on_arrival when given, else as it was trained."""
        return cfg.policy.round_on_arrival if "round_on_arrival" in cfg.explicit_options else self.on_arrival

    def run(self, sc, cfg: RunConfig):
        """Its run of the score rounds on scenario `sc` (a RunResult named after its algo), natively as
        `las_speed` runs: at `round_for(cfg)`, with `on_arrival_for(cfg)` and cfg's `score_preempt`."""
        from env.score_env import run_with_scorer  # lazy: the env module (gymnasium) only where a scorer runs

        return run_with_scorer(
            sc,
            self.scorer,
            round_s=self.round_for(cfg),
            name=self.algo,
            preempt=cfg.policy.score_preempt,
            on_arrival=self.on_arrival_for(cfg),
        )


def load_scorer(path: str | Path) -> TrainedScorer:
    """The trained scorer of a scorer checkpoint; a file that is not one, or holds unusable parameters or round
    length, is a UserError naming it."""
    from agents.checkpoint import load_checkpoint

    checkpoint = load_checkpoint(path)
    algo = checkpoint.get("algo")
    if algo not in SCORER_ALGOS:
        raise UserError(
            f"{path} holds {a_or_an(algo)} agent, not a score-round scorer ({', '.join(SCORER_ALGOS)})"
        )
    check_scorer_features(path, checkpoint)
    entry = checkpoint.get("scorer") or {}
    policy = (checkpoint.get("run_config") or {}).get("policy") or {}
    round_s = policy.get("round_s", ROUND_S)
    if not (isinstance(round_s, (int, float)) and math.isfinite(round_s) and round_s > 0):
        raise UserError(f"{path}: unusable round length {round_s!r} in its run config (seconds > 0)")
    on_arrival = policy.get("round_on_arrival", False)
    if not isinstance(on_arrival, bool):
        raise UserError(f"{path}: unusable round_on_arrival {on_arrival!r} in its run config (true or false)")
    try:
        if entry.get("kind") == "mlp":
            from agents.row_mlp import RowMLP  # lazy: torch's scorer, for es checkpoints only

            scorer = RowMLP(np.asarray(entry.get("params"), dtype=float), int(entry.get("hidden")))
        else:
            scorer = LinearScorer(np.asarray(entry.get("weights"), dtype=float))
    except (TypeError, ValueError) as err:
        raise UserError(f"{path}: unusable scorer weights ({err})") from None
    return TrainedScorer(algo, scorer, float(round_s), on_arrival)
