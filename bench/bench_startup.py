"""Benchmark: what a small command costs from a cold process - `import main`, and a 30-job eval with and without
its PNG figures. Each is a fresh Python process; best of --repeat, wall clock and CPU (user + system).

python bench/bench_startup.py                  # best of 7
python bench/bench_startup.py --repeat 15
python bench/bench_startup.py --root ../other-checkout --cases "import main,eval 30 jobs (PNGs)"

The processes run as a user's would: with Python's bytecode cache (PYTHONDONTWRITEBYTECODE is removed from their
environment and one untimed run of each fills the cache first; a fresh checkout's very first command also
compiles the project's modules, about 0.35 s more). Targets: `import main` <= 0.3 s and the 30-job eval with
`--plots none` <= 0.5 s wall on a quiet 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NoReturn

ROOT = Path(__file__).resolve().parents[1]
EVAL_30 = ["main.py", "--mode", "eval", "--algo", "fcfs", "--num_jobs", "30", "--difficulty", "easy"]
TARGETS_S = {"import main": 0.3, "eval 30 jobs --plots none": 0.5}


def _child_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(
    argv: list[str], repeat: int, env: dict[str, str], log_dir: Path | None, root: Path = ROOT
) -> tuple[float, float]:
    """(best wall s, best CPU s) of `python argv` over `repeat` runs after one untimed run; each run of an eval
    writes into a fresh folder under `log_dir`."""
    best_wall, best_cpu = float("inf"), float("inf")
    for i in range(repeat + 1):
        extra = ["--log_dir", str(log_dir / f"run{i}")] if log_dir is not None else []
        cpu0, t0 = _child_cpu_s(), time.perf_counter()
        proc = subprocess.run(
            [sys.executable, *argv, *extra], cwd=root, env=env, capture_output=True, text=True
        )
        wall, cpu = time.perf_counter() - t0, _child_cpu_s() - cpu0
        if proc.returncode != 0:
            raise SystemExit(f"error: {' '.join(argv)} failed:\n{proc.stderr}")
        if i > 0:  # the first run fills the bytecode cache
            best_wall, best_cpu = min(best_wall, wall), min(best_cpu, cpu)
    return best_wall, best_cpu


def _fail(message: str) -> NoReturn:
    """One `error:` line and status 2 (this script imports nothing of the project: it may time another checkout)."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repeat", type=int, default=7, help="timed runs per command (best is reported)")
    p.add_argument("--root", type=Path, default=ROOT, help="the checkout whose main.py is measured")
    p.add_argument("--cases", default=None, help="comma-separated names of the cases to run (default: all)")
    a = p.parse_args()
    if a.repeat < 1:
        _fail(f"--repeat must be >= 1, got {a.repeat}")
    if not (a.root / "main.py").is_file():
        _fail(f"--root {a.root}: no main.py there (a checkout of this project)")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cases = {
        "python -c pass": (["-c", "pass"], False),
        "import main": (["-c", "import main"], False),
        "eval 30 jobs --plots none": ([*EVAL_30, "--plots", "none"], True),
        "eval 30 jobs (PNGs)": (EVAL_30, True),
    }
    if a.cases is not None:
        unknown = [name for name in a.cases.split(",") if name not in cases]
        if unknown:
            _fail(f"unknown case {unknown[0]!r}; the cases are {', '.join(map(repr, cases))}")
        cases = {name: cases[name] for name in a.cases.split(",")}
    print(f"best of {a.repeat} fresh processes, {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    print(f"{'command':<28} {'wall s':>7} {'CPU s':>7}  target")
    with tempfile.TemporaryDirectory() as tmp:
        for k, (name, (argv, writes)) in enumerate(cases.items()):
            wall, cpu = measure(argv, a.repeat, env, Path(tmp) / str(k) if writes else None, a.root)
            target = TARGETS_S.get(name)
            verdict = (
                "" if target is None else f"<= {target} s wall: {'met' if wall <= target else 'NOT met'}"
            )
            print(f"{name:<28} {wall:7.3f} {cpu:7.3f}  {verdict}")


if __name__ == "__main__":
    main()
