"""Measures end-to-end training steps/s of D3QN and SAC on the toy env: `python -m agents.bench`."""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
from pathlib import Path

from agents.toy_env import ToySJFEnv
from agents.trainer import train
from config import D3QNConfig, SACConfig


def measure(algo: str, window: int, steps: int, **overrides) -> float:
    """Steps/s of `steps` training steps (default config, learning from step 1000), one thread, CPU."""
    cfg = D3QNConfig() if algo == "d3qn" else SACConfig()
    cfg = dataclasses.replace(cfg, learning_starts=1000, demo_policy="", **overrides)
    num_jobs = min(window, 20)
    with tempfile.TemporaryDirectory() as tmp:
        result = train(
            algo,
            lambda seed: ToySJFEnv(window=window, num_jobs=num_jobs, max_runtime_s=max(10, num_jobs)),
            cfg,
            seed=0,
            total_steps=steps,
            device="cpu",
            models_dir=str(Path(tmp) / "models"),
            run_dir=str(Path(tmp) / "run"),
            checkpoint_every_episodes=10**6,
            progress=False,
        )
    return result.steps_per_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20_000)
    args = parser.parse_args()
    variants = [
        ("d3qn", {}),
        ("d3qn", {"n_step": 3, "prioritized": True}),
        ("sac", {}),
    ]
    for window in (4, 16):
        for algo, overrides in variants:
            sps = measure(algo, window, args.steps, **overrides)
            print(f"{algo:5s} K={window:2d} {str(overrides):40s} {sps:7.0f} steps/s")


if __name__ == "__main__":
    main()
