"""`--algo cem`: a linear score-round scorer (schedulers/score_rounds.py) found by the cross-entropy method; the
generation loop, checkpoints, resume and model selection are agents/score_search.py's, the scorer's loading
agents/scorers.py's.

The search: a Gaussian over the weights of the score features (one per FEATURE_NAMES column), starting at las_speed's
hand-set weights (CEMConfig.init). Each generation draws `population` candidates, runs every candidate and the
current mean on the same `scenarios` training scenarios, and refits the Gaussian to the `elite_frac` best by the
objective (score_search.log_ratios: the mean ln(avg JCT / SJF's), lower is better).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from agents.run_control import TrainResult
from agents.score_search import check_budget, search_options, train_search
from config import CEMConfig, RunConfig, UserError
from schedulers.score_features import NUM_FEATURES
from schedulers.score_rounds import LAS_SPEED_WEIGHTS, LinearScorer

INITS = ("las_speed", "zero")


def check_cem_config(c: CEMConfig) -> None:
    """UserError for a search setting out of range (the option names are the CLI's)."""
    if c.population < 2:
        raise UserError(f"--cem_population must be >= 2 candidates per generation, got {c.population}")
    check_budget("cem", c)
    if not 0 < c.elite_frac <= 1 or not 0 < c.smoothing <= 1:
        raise UserError(
            f"cem: elite_frac and smoothing must lie in (0, 1], got {c.elite_frac}, {c.smoothing}"
        )
    if not (c.init_std > 0 and math.isfinite(c.init_std)):
        raise UserError(f"--cem_init_std must be a finite number > 0, got {c.init_std}")
    if not c.min_std >= 0:
        raise UserError(f"cem: min_std must be >= 0, got {c.min_std}")
    if c.init not in INITS:
        raise UserError(f"cem: init must be one of {', '.join(INITS)}, got {c.init!r}")


def initial_mean(c: CEMConfig) -> np.ndarray:
    if c.init == "zero":
        return np.zeros(NUM_FEATURES)
    return LinearScorer.from_named(LAS_SPEED_WEIGHTS).weights.copy()


class CrossEntropy:
    """The cross-entropy method over linear weights (de Boer et al. 2005, sec. 3.1): search {mean, std}."""

    algo = "cem"

    def __init__(self, config: CEMConfig):
        self.config = config
        self.n_elite = max(1, round(config.elite_frac * config.population))

    def initial_search(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        return {"mean": initial_mean(self.config), "std": np.full(NUM_FEATURES, self.config.init_std)}

    def propose(self, search: dict[str, np.ndarray], rng: np.random.Generator) -> np.ndarray:
        noise = rng.standard_normal((self.config.population, NUM_FEATURES))
        return np.vstack([search["mean"], search["mean"] + search["std"] * noise])

    def update(
        self, search: dict[str, np.ndarray], candidates: np.ndarray, objective: np.ndarray
    ) -> dict[str, np.ndarray]:
        elite = candidates[np.argsort(objective, kind="stable")[: self.n_elite]]
        a = self.config.smoothing
        return {
            "mean": a * elite.mean(axis=0) + (1 - a) * search["mean"],
            "std": np.maximum(a * elite.std(axis=0) + (1 - a) * search["std"], self.config.min_std),
        }

    def model(self, search: dict[str, np.ndarray]) -> np.ndarray:
        return search["mean"]

    def scorer_entry(self, params: np.ndarray) -> dict[str, Any]:
        return {"kind": "linear", "weights": [float(x) for x in params]}


def train_cem(cfg: RunConfig, seed: int, **options: Any) -> TrainResult:
    """The cross-entropy search of cfg.cem (agents/score_search.py, train_search, says the rest: the budget, the
    files and their layout, model selection). The checkpoint's `search` is {mean, std}; its `scorer` {kind
    "linear", weights: the search mean, the trained scorer}."""
    check_cem_config(cfg.cem)
    return train_search(cfg, CrossEntropy(cfg.cem), seed, **search_options(options))
