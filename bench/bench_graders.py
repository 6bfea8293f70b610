"""Do the server's graders rank? Scores of random play and of each reference policy on every preset.

For each task and preset, over --seeds scenario seeds: the grade (mean and range) of --players uniform-random
legal episodes per seed (their own draws, default_rng([seed, 1000 + j]), not the anchor's), of FCFS, SJF and EASY (scheduling: run natively, the same records as
through the env) or of each reference node manager (power, autoscaling), and of the best of the suite (1 by
construction). Prints a markdown table (docs/server.md).

python bench/bench_graders.py                          # every task and preset, seeds 0-2
python bench/bench_graders.py --task scheduling --presets easy medium --seeds 2
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from env.grade import grade_higher_better, grade_lower_better  # noqa: E402
from env.gym_env import run_policy_in_env  # noqa: E402
from env.node_tasks import (  # noqa: E402
    NODE_SUITE,
    node_anchors,
    random_legal,
    random_play_return,
    run_node_policy,
    task_scenario_config,
)
from scenario.build import build_scenario  # noqa: E402
from server.tasks import (  # noqa: E402
    _heuristic_jct_s,
    avg_jct_s,
    make_task_env,
    scheduling_anchors,
)

PLAYER_SEED = 1000
"""random play's draws in the table: default_rng([seed, 1000 + j]), none of them one of the anchor's rollouts"""


def scheduling_scores(preset: str, seed: int, players: int) -> dict[str, list[float]]:
    cfg = make_task_env("scheduling", {"difficulty": preset}).unwrapped.config
    random_jct, best, best_jct = scheduling_anchors(cfg, seed)
    sc = build_scenario(cfg, seed)
    played = [
        avg_jct_s(
            run_policy_in_env(cfg, sc, random_legal(np.random.default_rng([seed, PLAYER_SEED + j])), "r")
        )
        for j in range(players)
    ]
    scores = {"random": [grade_lower_better(v, random_jct, best_jct) for v in played]}
    for algo in ("fcfs", "sjf", "easy"):
        scores[algo] = [grade_lower_better(_heuristic_jct_s(cfg, seed, algo), random_jct, best_jct)]
    scores[f"best ({best})"] = [grade_lower_better(best_jct, random_jct, best_jct)]
    return scores


def node_scores(task: str, preset: str, seed: int, players: int) -> dict[str, list[float]]:
    """The scores of random play, of NODE_SUITE's managers (the table's columns) and of the best of the task's
    suite (power's is larger: env.node_tasks.SUITES)."""
    options = {"preset": preset} if task == "autoscaling" else {"difficulty": preset}
    cfg = make_task_env(task, options).unwrapped.run_config
    random_return, best, best_return = node_anchors(cfg, seed)
    sc = build_scenario(task_scenario_config(cfg), seed)
    played = [
        random_play_return(cfg, sc, np.random.default_rng([seed, PLAYER_SEED + j])) for j in range(players)
    ]
    scores = {"random": [grade_higher_better(v, random_return, best_return) for v in played]}
    for m in NODE_SUITE:
        ret = run_node_policy(cfg, sc, None, m).episode_return
        scores[m] = [grade_higher_better(ret, random_return, best_return)]
    scores[f"best ({best})"] = [grade_higher_better(best_return, random_return, best_return)]
    return scores


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--task", choices=("scheduling", "power", "autoscaling"), nargs="*")
    p.add_argument("--presets", nargs="*", default=["easy", "medium", "hard"])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--players", type=int, default=3, help="random episodes per seed")
    a = p.parse_args()
    for task in a.task or ("scheduling", "power", "autoscaling"):
        for preset in a.presets:
            t0 = time.process_time()
            rows = [
                scheduling_scores(preset, s, a.players)
                if task == "scheduling"
                else node_scores(task, preset, s, a.players)
                for s in range(a.seeds)
            ]
            cells = []
            for name in rows[0]:
                values = [v for r in rows for k in r if k.split(" ")[0] == name.split(" ")[0] for v in r[k]]
                label = name if not name.startswith("best") else "best"
                cells.append(f"{label} {np.mean(values):.2f} [{min(values):.2f}, {max(values):.2f}]")
            bests = sorted({k[6:-1] for r in rows for k in r if k.startswith("best")})
            print(
                f"| {task} | {preset} | {' | '.join(cells)} | best: {', '.join(bests)} | "
                f"{time.process_time() - t0:.0f} s CPU |",
                flush=True,
            )


if __name__ == "__main__":
    main()
