"""Tune sjf_gate's gate (seconds) on validation seeds only: mean avg JCT per gate value, with SJF and ECT beside.

    python bench/tune_gate.py [--difficulty medium] [--seeds 500-509] [--runtime_info oracle]
                              [--gates 0,600,1800,3600,7200,14400,28800,inf]

Never pass the report seeds (900+): a gate chosen on them would be tuned on the test set. Prints one row per
policy (mean and per-seed avg JCT) and the gate with the lowest mean; BENCHMARKS.md, *sjf_gate*, keeps the table.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from config import RunConfig, SimConfig, WorkloadConfig  # noqa: E402
from metrics.summary import summarize  # noqa: E402
from scenario.build import build_scenario  # noqa: E402
from schedulers import make_policy  # noqa: E402


def _seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--difficulty", default="medium")
    ap.add_argument("--profile", default=WorkloadConfig().synthetic_profile)
    ap.add_argument("--seeds", type=_seeds, default=_seeds("500-509"))
    ap.add_argument("--runtime_info", default="oracle", choices=("oracle", "estimate"))
    ap.add_argument("--gates", default="0,600,1800,3600,7200,14400,28800,inf")
    a = ap.parse_args()
    if any(s >= 900 for s in a.seeds):
        sys.exit("error: seeds >= 900 are the report seeds; tune on validation seeds only")
    cfg = RunConfig(
        workload=WorkloadConfig(difficulty=a.difficulty, synthetic_profile=a.profile),
        sim=dataclasses.replace(SimConfig(), runtime_info=a.runtime_info),
    )
    gates = [float(g) for g in a.gates.split(",")]
    rows: list[tuple[str, list[float]]] = []
    start = time.perf_counter()
    scenarios = [build_scenario(cfg, seed) for seed in a.seeds]
    candidates = [("sjf", make_policy("sjf")), ("ect", make_policy("ect"))]
    candidates += [(f"sjf_gate {g:g}", make_policy("sjf_gate", g)) for g in gates]
    for name, policy in candidates:
        jcts = []
        for sc in scenarios:
            sim = sc.simulator()
            sim.run(policy)
            jcts.append(summarize(sim.result(name, sc.seed)).avg_jct_s)
        rows.append((name, jcts))
    print(
        f"{a.difficulty} ({a.profile}), runtime_info {a.runtime_info}, seeds {a.seeds[0]}-{a.seeds[-1]}: "
        "mean avg JCT (s) over seeds"
    )
    print("| policy | mean avg JCT (s) | vs SJF | per seed |\n| --- | ---: | ---: | --- |")
    sjf_mean = float(np.mean(rows[0][1]))
    for name, jcts in rows:
        mean = float(np.mean(jcts))
        print(
            f"| {name} | {mean:,.0f} | {mean / sjf_mean - 1:+.1%} | {' '.join(f'{x:,.0f}' for x in jcts)} |"
        )
    gated = [(float(np.mean(j)), n) for n, j in rows if n.startswith("sjf_gate")]
    print(f"best gate: {min(gated)[1].split()[1]} s ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
