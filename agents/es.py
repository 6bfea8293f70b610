"""`--algo es`: a torch per-row MLP scorer for the score rounds (agents/row_mlp.py, RowMLP) trained by antithetic evolution strategies
(OpenAI-ES: Salimans et al. 2017, "Evolution Strategies as a Scalable Alternative to Reinforcement Learning"); the
generation loop, objective, checkpoints, resume and model selection are agents/score_search.py's, shared with cem.

One generation: `pairs` noise vectors e_k ~ N(0, I) over the flattened parameters theta; the candidates theta, then
theta + sigma e_k, then theta - sigma e_k (k = 1..pairs) all run on the same training scenarios; the 2 x pairs
perturbed candidates' objectives (lower is better) become utilities u = -(centred rank) in [-0.5, 0.5]; the gradient
estimate sum_k (u+_k - u-_k) e_k / (2 pairs sigma) moves theta by one Adam step of `learning_rate`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from agents.cem import initial_mean
from agents.row_mlp import num_params
from agents.run_control import TrainResult
from agents.score_search import check_budget, search_options, train_search
from config import CEMConfig, ESConfig, RunConfig, UserError
from schedulers.score_features import NUM_FEATURES

ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


def check_es_config(c: ESConfig) -> None:
    """UserError for a setting out of range (the option names are the CLI's)."""
    if c.pairs < 1:
        raise UserError(f"--es_pairs must be >= 1 antithetic pair per generation, got {c.pairs}")
    check_budget("es", c)
    if c.hidden < 1:
        raise UserError(f"--es_hidden must be >= 1 unit, got {c.hidden}")
    for name in ("sigma", "learning_rate", "init_scale"):
        value = getattr(c, name)
        if not (math.isfinite(value) and value > 0):
            raise UserError(f"es: {name} must be a finite number > 0, got {value}")
    if c.init not in ("las_speed", "zero"):
        raise UserError(f"es: init must be las_speed or zero, got {c.init!r}")


def centred_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks of x scaled to [-0.5, 0.5] (the smallest -0.5; ties in index order); one value: 0."""
    if len(x) < 2:
        return np.zeros(len(x))
    ranks = np.empty(len(x))
    ranks[np.argsort(x, kind="stable")] = np.arange(len(x))
    return ranks / (len(x) - 1) - 0.5


class EvolutionStrategies:
    """OpenAI-ES with Adam over RowMLP's flat parameters: search {theta, adam_m, adam_v, adam_t}."""

    algo = "es"

    def __init__(self, config: ESConfig):
        self.config = config
        self.size = num_params(config.hidden)

    def initial_search(self, rng: np.random.Generator) -> dict[str, np.ndarray]:
        c, f, h = self.config, NUM_FEATURES, self.config.hidden
        theta = np.zeros(self.size)
        theta[:f] = initial_mean(CEMConfig(init=c.init))
        theta[f : f + h * f] = rng.normal(0.0, c.init_scale / math.sqrt(f), h * f)
        zeros = np.zeros(self.size)
        return {"theta": theta, "adam_m": zeros, "adam_v": zeros.copy(), "adam_t": np.zeros(1)}

    def propose(self, search: dict[str, np.ndarray], rng: np.random.Generator) -> np.ndarray:
        noise = rng.standard_normal((self.config.pairs, self.size))
        theta, sigma = search["theta"], self.config.sigma
        return np.vstack([theta, theta + sigma * noise, theta - sigma * noise])

    def update(
        self, search: dict[str, np.ndarray], candidates: np.ndarray, objective: np.ndarray
    ) -> dict[str, np.ndarray]:
        c, n = self.config, self.config.pairs
        theta = search["theta"]
        noise = (candidates[1 : 1 + n] - theta) / c.sigma
        utility = -centred_ranks(objective[1:])
        gradient = (utility[:n] - utility[n:]) @ noise / (2 * n * c.sigma)
        t = search["adam_t"] + 1
        b1, b2 = ADAM_BETAS
        m = b1 * search["adam_m"] + (1 - b1) * gradient
        v = b2 * search["adam_v"] + (1 - b2) * gradient**2
        step = c.learning_rate * (m / (1 - b1 ** t[0])) / (np.sqrt(v / (1 - b2 ** t[0])) + ADAM_EPS)
        return {"theta": theta + step, "adam_m": m, "adam_v": v, "adam_t": t}

    def model(self, search: dict[str, np.ndarray]) -> np.ndarray:
        return search["theta"]

    def scorer_entry(self, params: np.ndarray) -> dict[str, Any]:
        return {"kind": "mlp", "hidden": self.config.hidden, "params": [float(x) for x in params]}


def train_es(cfg: RunConfig, seed: int, **options: Any) -> TrainResult:
    """Evolution strategies of cfg.es (agents/score_search.py, train_search, says the rest: the budget, the files
    and their layout, model selection). The checkpoint's `search` is {theta, adam_m, adam_v, adam_t}; its `scorer`
    {kind "mlp", hidden, params: theta, the trained scorer}."""
    check_es_config(cfg.es)
    return train_search(cfg, EvolutionStrategies(cfg.es), seed, **search_options(options))
