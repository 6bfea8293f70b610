"""Benchmark: a 210-run heuristic study (3 policies x 7 loads x 10 seeds, easy preset, 200 jobs per run) with
1 and 2 local workers and with a local Ray; prints wall times, per-run overhead of each backend, the measured
scaling and an estimate for a larger Ray cluster.

python bench/bench_sweep.py                         # 210 runs: 1 worker, 2 workers, Ray with 2 CPUs
python bench/bench_sweep.py --num_jobs 50 --seeds 2 --no_ray      # quick look

Per-run overhead of a backend = wall x workers / runs - compute, where compute is the mean time of one run
executed in this process (sweep.worker.execute, no new process). The estimate for C Ray CPUs is
ray_start + ceil(runs / C) x (compute + ray overhead) + tables: the runs are independent, so it assumes perfect
packing and measured per-run costs; it ignores a remote cluster's network and shared-filesystem latency.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STUDY = """name = "bench_sweep"
[options]
difficulty = "easy"
num_jobs = {num_jobs}
[grid]
algo = ["fcfs", "sjf", "easy"]
load_factor = [0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1]
seed = [{seeds}]
"""


def _sweep(study: Path, out: Path, *extra: str) -> float:
    t0 = time.perf_counter()
    cmd = [sys.executable, "main.py", "--mode", "sweep", "--study", str(study), "--log_dir", str(out)]
    proc = subprocess.run([*cmd, "--no_progress", *extra], cwd=ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(cmd + list(extra))} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return wall


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--num_jobs", type=int, default=200)
    p.add_argument("--seeds", type=int, default=10)
    p.add_argument("--sample", type=int, default=12, help="runs timed in this process for the compute figure")
    p.add_argument("--no_ray", action="store_true")
    p.add_argument(
        "--ray_only", action="store_true", help="only the Ray backend (and the in-process compute)"
    )
    a = p.parse_args()

    from sweep.cli import run_argv
    from sweep.study import load_study
    from sweep.worker import execute

    tmp = Path(tempfile.mkdtemp(prefix="bench_sweep_"))
    study_path = tmp / "bench_sweep.toml"
    study_path.write_text(STUDY.format(num_jobs=a.num_jobs, seeds=", ".join(map(str, range(a.seeds)))))
    study = load_study(study_path)
    runs = len(study.runs)

    step = max(1, runs // a.sample)
    sample = study.runs[::step][: a.sample]
    execute(sample[0].name, run_argv(study, sample[0], tmp / "warm"))  # imports, first-plot font cache
    t0 = time.perf_counter()
    for spec in sample:
        out = execute(spec.name, run_argv(study, spec, tmp / "inproc"))
        assert out.status == "ok", out.error
    compute = (time.perf_counter() - t0) / len(sample)

    results: dict[str, tuple[float, int]] = {}
    if not a.ray_only:
        results["local, 1 worker"] = (_sweep(study_path, tmp / "w1", "--workers", "1"), 1)
        results["local, 2 workers"] = (_sweep(study_path, tmp / "w2", "--workers", "2"), 2)
    ray_start = math.nan
    if not a.no_ray:
        try:
            import ray
        except ImportError:
            sys.exit("error: Ray absent: pip install -r requirements-ray.txt (or pass --no_ray)")
        t0 = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        ray.shutdown()
        ray_start = time.perf_counter() - t0
        results["Ray (local, 2 CPUs)"] = (
            _sweep(study_path, tmp / "ray", "--backend", "ray", "--workers", "2"),
            2,
        )

    same = (
        len({(tmp / d / "results.csv").read_bytes() for d in ("w1", "w2", "ray") if (tmp / d).exists()}) == 1
    )
    print(
        f"study: {runs} runs (3 policies x 7 loads x {a.seeds} seeds, easy preset, {a.num_jobs} jobs per run)"
    )
    print(f"compute per run, in this process (simulation + the run's CSVs and 3 plots): {compute:.3f} s")
    if not math.isnan(ray_start):
        print(f"Ray start-up + shutdown (local, 2 CPUs): {ray_start:.1f} s")
    print("| backend | wall (s) | runs/s | overhead per run (s) |")
    print("| --- | --- | --- | --- |")
    for name, (wall, workers) in results.items():
        overhead = wall * workers / runs - compute
        print(f"| {name} | {wall:.1f} | {runs / wall:.2f} | {overhead:.3f} |")
    if not a.ray_only:
        w1, w2 = results["local, 1 worker"][0], results["local, 2 workers"][0]
        print(f"scaling 1 -> 2 local workers: speed-up {w1 / w2:.2f}x (efficiency {w1 / w2 / 2:.0%})")
    if len(results) > 1:
        print(f"results.csv byte-identical across backends: {same}")
    if "Ray (local, 2 CPUs)" in results:
        ray_wall = results["Ray (local, 2 CPUs)"][0]
        per_run = (ray_wall - ray_start) * 2 / runs  # compute + Ray's per-task cost (fresh worker process)
        fixed = ray_start
        print(f"Ray per run (compute + task overhead): {per_run:.3f} s; fixed cost (start-up): {fixed:.1f} s")
        for cpus in (16, 64, 256):
            est = fixed + math.ceil(runs / cpus) * per_run
            print(f"estimate on a Ray cluster with {cpus} CPUs: {est:.1f} s for these {runs} runs")
    print(f"(outputs in {tmp})")


if __name__ == "__main__":
    main()
