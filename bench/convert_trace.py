"""A trace of Tiresias' or Gavel's simulator as our jobs CSV (workloads/sim_traces.py reads it, writes the CSV).

python bench/convert_trace.py --format gavel TRACE.trace OUT.csv      # then: --jobs_csv OUT.csv --job_types gavel
python bench/convert_trace.py --format tiresias TRACE.csv OUT.csv

Gavel's lines become typed jobs (`job_type` = the model; their runtimes from the `gavel` throughput matrix,
so runs of the CSV need `--job_types gavel`); Tiresias' rows jobs whose runtime is the same on any GPU
(`runtime_includes_spread`, as its `--scheme=count` runs them). OUT must not exist (an input or another run's
file is never overwritten).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sim.throughput import ThroughputError, load_matrix  # noqa: E402
from workloads.sim_traces import load_gavel_trace, load_tiresias_trace, write_jobs_csv  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--format", required=True, choices=("gavel", "tiresias"))
    p.add_argument(
        "--job_types", default="gavel", help="throughput matrix for a Gavel trace (default: gavel)"
    )
    p.add_argument("trace")
    p.add_argument("out")
    a = p.parse_args(argv)
    src, out = Path(a.trace), Path(a.out)
    if not src.is_file():
        p.error(f"{src} not found")
    if out.exists():
        p.error(f"{out} exists; name a new file")
    try:
        if a.format == "gavel":
            workload = load_gavel_trace(src, load_matrix(a.job_types))
        else:
            workload = load_tiresias_trace(src)
    except (ValueError, ThroughputError) as e:
        p.error(str(e))
    write_jobs_csv(workload, out)
    print(f"{out}: {len(workload.jobs)} jobs from {src} ({a.format})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
