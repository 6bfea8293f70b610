"""Benchmark: wall and CPU time of one Gavel run (scenario built as `main.py --mode eval` builds it), with a
fingerprint of its schedule (bench_scenario.py's, printed as `outputs sha256`) so that a speed change can be checked
to leave the schedule unchanged.

python bench/bench_gavel.py                                   # 10,000 jobs on 1,024 GPUs (the speed target: <= 10 s)
python bench/bench_gavel.py --num_jobs 2000 --cluster 8xV100:8,8xP100:8,8xK80:8 --algo gavel_agnostic
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.arguments import at_least, user_errors  # noqa: E402
from bench.bench_scenario import fingerprint  # noqa: E402
from cli.parser import build_parser, config_from_args  # noqa: E402
from cli.runner import run_heuristic  # noqa: E402
from scenario.build import build_scenario  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--num_jobs", type=int, default=10_000)
    p.add_argument("--cluster", default="43xV100:8,43xP100:8,42xK80:8")
    p.add_argument("--algo", default="gavel", choices=("gavel", "gavel_agnostic"))
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    at_least("--num_jobs", a.num_jobs)
    at_least("--seed", a.seed, 0)
    argv = ["--mode", "eval", "--algo", a.algo, "--job_types", "gavel", "--cluster", a.cluster]
    argv += ["--num_jobs", str(a.num_jobs), "--seed", str(a.seed), "--no_progress"]
    cfg = config_from_args(build_parser().parse_args(argv))
    with user_errors():  # main.py's checks of the cluster
        sc = build_scenario(cfg, a.seed)
    t0, c0 = time.perf_counter(), time.process_time()
    r = run_heuristic(sc, a.algo)
    wall_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    print(
        f"{a.algo}: {a.num_jobs} jobs on {a.cluster}: run {wall_s:.1f} s wall ({cpu_s:.1f} s CPU), "
        f"{int(r.preemptions.sum())} preemptions, outputs sha256 {fingerprint(r)}"
    )


if __name__ == "__main__":
    main()
