"""Benchmark: trace load times, an EASY replay of RICC-2010 end to end, and peak memory.

python bench/bench_traces.py [--traces ../shared/traces]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.arguments import at_least  # noqa: E402
from bench.trace_dir import DEFAULT_TRACES, require_paths  # noqa: E402
from config import WorkloadConfig  # noqa: E402
from main import main as cli_main  # noqa: E402
from workloads.traces import load_trace  # noqa: E402


def timed_load(kind: str, path: Path) -> None:
    t0 = time.perf_counter()
    t = load_trace(WorkloadConfig(workload_type=kind, workload_path=str(path)))
    r = t.workload.report
    print(
        f"load {kind:8s} {path.name:34s}: {time.perf_counter() - t0:6.2f} s  "
        f"({r['rows_read']:,} rows -> {r['jobs_loaded']:,} jobs)"
    )


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--traces", default=str(DEFAULT_TRACES))
    p.add_argument("--log_dir", default="logs/bench_ricc_easy")
    p.add_argument("--max_jobs", type=int, default=None, help="replay only the first N RICC jobs")
    a = p.parse_args()
    if a.max_jobs is not None:
        at_least("--max_jobs", a.max_jobs)
    t = Path(a.traces)
    ricc = t / "swf-pwa" / "RICC-2010-2.swf.gz"
    google, openb = t / "google-2011", t / "alibaba-openb-gpu-2023" / "openb_pod_list_default.csv"
    itp = t / "microsoft-itp-elasticflow-2021"
    require_paths(t, ricc, google, openb, itp)
    timed_load("swf", ricc)
    timed_load("google", google)
    timed_load("alibaba", openb)
    timed_load("itp", itp)
    t0 = time.perf_counter()
    limit = ["--max_jobs", str(a.max_jobs)] if a.max_jobs else []
    code = cli_main(["--mode", "eval", "--algo", "easy", "--workload_type", "swf", "--workload_path", str(ricc),
                     "--log_dir", a.log_dir, "--overwrite", "--no_progress", *limit])  # fmt: skip
    if code:  # (main.py said why on stderr): no time for a replay that did not run
        sys.exit(code)
    what = f"first {a.max_jobs:,} jobs" if a.max_jobs else "all jobs"
    print(f"RICC-2010 EASY replay ({what}), CLI end to end: {time.perf_counter() - t0:.1f} s")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")


if __name__ == "__main__":
    main()
