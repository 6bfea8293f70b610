"""Runs FCFS/SJF/EASY on each shared real trace and prints the trace table's rows (docs/results.md) (avg JCT, wait, util).

python bench/trace_table.py [--traces ../shared/traces]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.trace_dir import DEFAULT_TRACES, require_paths  # noqa: E402
from cli.parser import build_parser, config_from_args  # noqa: E402
from cli.runner import run_heuristic  # noqa: E402
from metrics.summary import summarize  # noqa: E402
from scenario.build import build_scenario  # noqa: E402

CASES = (
    (
        "alibaba openb",
        "--workload_type alibaba --workload_path {t}/alibaba-openb-gpu-2023/openb_pod_list_default.csv "
        "--cluster_path {t}/alibaba-openb-gpu-2023/openb_node_list_gpu_node.csv",
    ),
    (
        "alibaba 2017",
        "--workload_type alibaba --workload_path {t}/alibaba-v2017-batch-task/batch_task.csv.gz",
    ),
    ("google 2011, per task", "--workload_type google --workload_path {t}/google-2011"),
    ("google 2011, gangs", "--workload_type google --workload_path {t}/google-2011 --google_unit job"),
    (
        "itp cluster04",
        "--workload_type itp --workload_path {t}/microsoft-itp-elasticflow-2021/cluster04.csv --cluster 40xV100:8",
    ),
    ("swf NASA", "--workload_type swf --workload_path {t}/swf-pwa/NASA-iPSC-1993-3.1-cln.swf.gz"),
    (
        "swf RICC (first 5,000 jobs)",
        "--workload_type swf --workload_path {t}/swf-pwa/RICC-2010-2.swf.gz --max_jobs 5000",
    ),
)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--traces", default=str(DEFAULT_TRACES))
    a = p.parse_args()
    require_paths(
        Path(a.traces),
        *(Path(x) for _, opts in CASES for x in opts.format(t=a.traces).split() if x.startswith(a.traces)),
    )
    print("| trace | command options | jobs | offered load | FCFS avg JCT / wait / util | SJF | EASY |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, opts in CASES:
        argv = opts.format(t=a.traces).split()
        cfg = config_from_args(build_parser().parse_args(["--mode", "compare", *argv]))
        t0 = time.perf_counter()
        sc = build_scenario(cfg, 0)
        cells = []
        for algo in ("fcfs", "sjf", "easy"):
            r = summarize(run_heuristic(sc, algo))
            if not cells:
                cells.append(f"{r.load_factor:.3f}")
            cells.append(f"{r.avg_jct_s:,.0f} s / {r.avg_wait_s:,.0f} s / {r.gpu_utilization:.3f}")
        shown = opts.format(t="…").replace("…/", "")
        print(
            f"| {name} | `{shown}` | {len(sc.workload.jobs):,} | "
            + " | ".join(cells)
            + f" |  <!-- {time.perf_counter() - t0:.0f} s -->"
        )


if __name__ == "__main__":
    main()
