"""The per-row MLP scorer of `--algo es` (agents/es.py): one score per (job, GPU type) feature row, torch, float64."""

from __future__ import annotations

import numpy as np
import torch

from schedulers.score_features import NUM_FEATURES
from schedulers.score_rounds import LinearScorer


def num_params(hidden: int) -> int:
    """Length of RowMLP's flat parameter vector: w (features), W (hidden x features), b (hidden), v (hidden)."""
    return NUM_FEATURES + hidden * NUM_FEATURES + 2 * hidden


class RowMLP:
    """s(x) = x . w + v . tanh(W x + b) for every feature row x on its own (any number of rows, in any order: each
    row's score depends on that row only). The flat parameters are w, W (row-major), b, v.

    The linear part is LinearScorer(w) itself and the hidden part adds v . tanh(W x + b), so with v = 0, or with W
    and b all zero, the scores are exactly LinearScorer(w)'s (tanh(0) = 0): the same schedule, bit for bit. Torch,
    float64, one thread."""

    def __init__(self, params: np.ndarray, hidden: int):
        p = np.asarray(params, dtype=float)
        if hidden < 1 or p.shape != (num_params(hidden),):
            raise ValueError(
                f"a RowMLP of {hidden} hidden units needs {num_params(max(hidden, 1))} parameters, got shape {p.shape}"
            )
        if not np.isfinite(p).all():
            raise ValueError("RowMLP parameters must be finite")
        torch.set_num_threads(1)  # tiny matrices: more threads only contend on a shared machine
        f, h = NUM_FEATURES, hidden
        self.params, self.hidden = p, hidden
        self.linear = LinearScorer(p[:f])
        W = p[f : f + h * f].reshape(h, f)
        self.W_HF = torch.from_numpy(W.copy())
        self.b_H = torch.from_numpy(p[f + h * f : f + h * f + h].copy())
        self.v_H = torch.from_numpy(p[f + h * f + h :].copy())
        self.active = bool(np.any(self.v_H.numpy()) and (np.any(W) or np.any(self.b_H.numpy())))

    def __call__(self, features: np.ndarray) -> np.ndarray:
        scores = self.linear(features)
        if not self.active or not len(features):
            return scores
        with torch.no_grad():
            x_NF = torch.from_numpy(np.ascontiguousarray(features, dtype=np.float64))
            h_NH = torch.tanh(torch.addmm(self.b_H, x_NF, self.W_HF.T))
            return scores + (h_NH @ self.v_H).numpy()

    def __repr__(self) -> str:
        return f"RowMLP(hidden={self.hidden}, linear={self.linear.named()})"
