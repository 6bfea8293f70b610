"""Benchmark: simulation throughput of the non-preemptive heuristics on realistic cluster shapes, and how it scales.

Workloads (generated here from --seed; nothing is read from disk):
- `typed`: a type-constrained cluster of 16 nodes of mixed GPU types and sizes (172 GPUs of 4 types: H100,
  A100-80GB, V100-32GB, T4; nodes of 4 to 16 GPUs), the shape of the peer simulator gpu-choochoo's clusters.
  Jobs of 1 to 16 GPUs each accept a random subset of the types (a quarter accept any), log-normal runtimes,
  Poisson arrivals at a load of 1.0 by capacity (reference GPU-seconds per second of the cluster's summed speed);
- `overload`: the same at load 1.5: the queue grows without bound;
- `nodes1` / `nodes8`: the same 25,000 A100 GPUs as 25,000 one-GPU nodes or as 3,125 eight-GPU nodes, the
  jobs of `main.py --mode eval --cluster 25000xA100-80GB:1 --num_jobs N` (the default synthetic profile and load);
- `sim100k`: bench_sim.py's workload (64xA100-80GB:8,64xH100:8, load 0.9).

Only `Simulator.run` is timed, in CPU seconds of this process (best of --repeat), one policy per process, inside
`cli.command.fewer_collections` (the cyclic garbage collector's young-generation threshold a `main.py` command
runs under, as a user's run gets it; `--default_gc` times it under Python's default threshold instead).
Without --case, every case runs in its own child process and a table is printed, with the exponent of CPU time
against the number of jobs fitted by least squares over the sizes given (log-log).

python bench/bench_clusters.py --case typed --algo easy --num_jobs 100000 --repeat 3   # one run
python bench/bench_clusters.py                              # every case x fcfs,sjf,easy,cbf (long: 1M jobs)
python bench/bench_clusters.py --cases typed,overload --sizes 1000,10000,100000 --algos easy
python bench/bench_clusters.py --case typed --algo easy --num_jobs 3000 --fingerprint     # schedule's hash
python bench/bench_clusters.py --cases typed,overload --sizes 3000 --algos easy,cbf --fingerprint  # a hash column
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import resource
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bench.arguments import at_least, counts, fail, names, user_errors  # noqa: E402
from bench.bench_scenario import fingerprint  # noqa: E402
from cli.command import fewer_collections  # noqa: E402
from cli.parser import build_parser, config_from_args  # noqa: E402
from scenario.build import build_scenario  # noqa: E402
from schedulers import POLICIES  # noqa: E402
from sim.catalog import CATALOG  # noqa: E402
from sim.cluster import ClusterLayout  # noqa: E402
from sim.cluster_spec import ClusterSpec, NodeSpec, parse_cluster_spec  # noqa: E402
from sim.job import Job, Workload  # noqa: E402
from sim.simulator import Simulator  # noqa: E402
from workloads.synthetic import generate_synthetic  # noqa: E402

# the type-constrained cluster: (GPU type, GPUs per node) per node; 16 nodes, 172 GPUs
TYPED_NODES = (
    ("H100", 8), ("H100", 8), ("H100", 4),
    ("A100-80GB", 16), ("A100-80GB", 8), ("A100-80GB", 8), ("A100-80GB", 8), ("A100-80GB", 4),
    ("V100-32GB", 16), ("V100-32GB", 16), ("V100-32GB", 8), ("V100-32GB", 8),
    ("T4", 16), ("T4", 16), ("T4", 16), ("T4", 12),
)  # fmt: skip
TYPED_GPUS = (1, 2, 4, 8, 16)  # GPUs per job ...
TYPED_GPU_PROBS = (0.55, 0.2, 0.13, 0.08, 0.04)  # ... and their probabilities
TYPED_ANY_TYPE = 0.25  # share of jobs that accept every type
RUNTIME_MEDIAN_S = 1800.0  # reference seconds (A100), log-normal
RUNTIME_SIGMA = 1.5
RUNTIME_RANGE_S = (60.0, 48 * 3600.0)

CASES = ("typed", "overload", "nodes1", "nodes8", "sim100k")
DEFAULT_SIZES = {"typed": "1000,10000,100000,1000000", "overload": "1000,10000,100000,1000000",
                 "nodes1": "50000", "nodes8": "50000", "sim100k": "100000"}  # fmt: skip


def typed_cluster() -> ClusterSpec:
    nodes = tuple(NodeSpec(f"n{i}", t, k, CATALOG[t].mem_gb) for i, (t, k) in enumerate(TYPED_NODES))
    return ClusterSpec("typed16", nodes)


def typed_workload(spec: ClusterSpec, num_jobs: int, load: float, rng: np.random.Generator) -> Workload:
    """Jobs that fit only some types: each accepts one to three random types (TYPED_ANY_TYPE accept all) among
    those with enough GPUs for it; arrivals are Poisson at `load` by capacity."""
    types = sorted({n.gpu_type for n in spec.nodes})
    type_gpus = np.array([sum(n.num_gpus for n in spec.nodes if n.gpu_type == t) for t in types])
    capacity = sum(CATALOG[n.gpu_type].speed * n.num_gpus for n in spec.nodes)  # reference GPUs
    k = rng.choice(np.array(TYPED_GPUS), size=num_jobs, p=TYPED_GPU_PROBS)
    runtime = np.clip(
        np.round(RUNTIME_MEDIAN_S * np.exp(RUNTIME_SIGMA * rng.standard_normal(num_jobs))), *RUNTIME_RANGE_S
    )
    any_type = rng.random(num_jobs) < TYPED_ANY_TYPE
    num_types = rng.integers(1, 4, size=num_jobs)
    order = np.argsort(rng.random((num_jobs, len(types))), axis=1)  # a random permutation of types per job
    gaps = rng.exponential(1.0, size=num_jobs)
    work = float(np.sum(k * runtime))
    arrival = np.cumsum(gaps) * (work / (load * capacity)) / gaps.sum()
    arrival -= arrival[0]
    jobs = []
    for i in range(num_jobs):
        ki = int(k[i])
        if any_type[i]:
            accept: tuple[str, ...] = ()
        else:
            ok = [types[t] for t in order[i] if type_gpus[t] >= ki]
            accept = tuple(sorted(ok[: int(num_types[i])]))
        jobs.append(Job(f"j{i}", float(arrival[i]), float(runtime[i]), ki, gpu_types=accept))
    return Workload(f"typed-{num_jobs}-load{load}", tuple(jobs))


def build(case: str, num_jobs: int, seed: int) -> tuple[Workload, ClusterLayout]:
    rng = np.random.default_rng(seed)
    if case in ("typed", "overload"):
        spec = typed_cluster()
        return typed_workload(spec, num_jobs, 1.0 if case == "typed" else 1.5, rng), ClusterLayout(spec)
    if case == "sim100k":
        spec = parse_cluster_spec("64xA100-80GB:8,64xH100:8")
        return generate_synthetic(spec, num_jobs, 0.9, rng), ClusterLayout(spec)
    # what `main.py --mode eval --cluster C --num_jobs N` runs (the default synthetic profile and load): the
    # generator sees GPUs per type only, so both node shapes get the same jobs
    cluster = "25000xA100-80GB:1" if case == "nodes1" else "3125xA100-80GB:8"
    args = ["--mode", "eval", "--cluster", cluster, "--num_jobs", str(num_jobs), "--seed", str(seed)]
    with user_errors():  # main.py's checks of its options
        sc = build_scenario(config_from_args(build_parser().parse_args(args)), seed)
    return sc.workload, sc.layout


def run_one(
    case: str,
    algo: str,
    num_jobs: int,
    seed: int,
    repeat: int,
    want_fingerprint: bool,
    default_gc: bool = False,
) -> dict:
    wl, layout = build(case, num_jobs, seed)
    collections = contextlib.nullcontext if default_gc else fewer_collections
    best = math.inf
    prints = set()
    for _ in range(repeat):
        sim = Simulator(wl, layout)
        gc.collect()  # the previous run's cyclic garbage is freed here, not inside the timed run
        with collections():  # (what a main.py command runs under, unless --default_gc)
            c0 = time.process_time()
            sim.run(POLICIES[algo])
            best = min(best, time.process_time() - c0)
        if want_fingerprint:
            prints.add(fingerprint(sim.result(algo, seed)))
        instants = len(sim._timeline) // 4  # four values per instant
        max_queue = max(sim._timeline[3::4], default=0)
        done = sim.num_completed
        del sim
    return {
        "case": case,
        "algo": algo,
        "num_jobs": num_jobs,
        "cpu_s": best,
        "jobs_per_s": num_jobs / best,
        "completed": done,
        "instants": instants,
        "max_queue": max_queue,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "fingerprint": " ".join(sorted(prints)),
    }


def exponent(rows: list[dict]) -> float:
    """Least-squares slope of log(CPU s) against log(jobs)."""
    if len(rows) < 2:
        return math.nan
    x = np.log([r["num_jobs"] for r in rows])
    y = np.log([r["cpu_s"] for r in rows])
    return float(np.polyfit(x, y, 1)[0])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--case", choices=CASES, help="run one case in this process (else: every case, children)")
    p.add_argument("--algo", default="easy", help="with --case: the policy")
    p.add_argument("--num_jobs", type=int, default=10_000, help="with --case: the number of jobs")
    p.add_argument("--cases", default=",".join(CASES), help="without --case: the cases to run")
    p.add_argument("--algos", default="fcfs,sjf,easy,cbf", help="without --case: the policies to run")
    p.add_argument("--sizes", default=None, help="without --case: numbers of jobs (default per case)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=3, help="runs per process; the best CPU time counts")
    p.add_argument("--max_repeat_jobs", type=int, default=100_000, help="larger runs are timed once")
    p.add_argument(
        "--fingerprint",
        action="store_true",
        help="print a hash of each run's schedule (without --case: a column)",
    )
    p.add_argument("--json", action="store_true", help="with --case: one JSON line")
    p.add_argument(
        "--default_gc", action="store_true", help="time the run under Python's default collector threshold"
    )
    a = p.parse_args()
    at_least("--repeat", a.repeat)
    at_least("--seed", a.seed, 0)
    if a.case:
        names("--algo", a.algo, POLICIES)
        at_least("--num_jobs", a.num_jobs)
        r = run_one(a.case, a.algo, a.num_jobs, a.seed, a.repeat, a.fingerprint, a.default_gc)
        if a.json:
            print(json.dumps(r))
        else:
            print(
                f"{r['case']} {r['algo']} {r['num_jobs']:,} jobs: {r['jobs_per_s']:,.0f} jobs/s ({r['cpu_s']:.2f} "
                f"CPU s), {r['completed']:,} completed, {r['instants']:,} instants, max queue {r['max_queue']:,}, "
                f"peak RSS {r['peak_rss_mb']:.0f} MB"
                + (f", fingerprint {r['fingerprint']}" if a.fingerprint else "")
            )
        return 0
    cases = names("--cases", a.cases, CASES)
    algos = names("--algos", a.algos, POLICIES)
    sizes_of = {case: counts("--sizes", a.sizes or DEFAULT_SIZES[case]) for case in cases}
    extra = (" fingerprint |", " --- |") if a.fingerprint else ("", "")
    print("| case | policy | jobs | jobs/s (CPU) | CPU s | max queue | peak RSS MB | exponent |" + extra[0])
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |" + extra[1])
    for case in cases:
        sizes = sizes_of[case]
        for algo in algos:
            rows = []
            for n in sizes:
                cmd = [sys.executable, __file__, "--case", case, "--algo", algo, "--num_jobs", str(n),
                       "--seed", str(a.seed), "--repeat", str(a.repeat if n <= a.max_repeat_jobs else 1), "--json"]  # fmt: skip
                cmd += ["--default_gc"] if a.default_gc else []
                cmd += ["--fingerprint"] if a.fingerprint else []
                proc = subprocess.run(cmd, capture_output=True, text=True)
                if proc.returncode != 0:
                    tail = proc.stderr.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
                    fail(f"{case} {algo} {n:,} jobs failed: {tail[0]}")
                rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
                r = rows[-1]
                fitted = f"{exponent(rows):.3f}" if len(rows) == len(sizes) > 1 else ""
                print(
                    f"| {case} | {algo} | {n:,} | {r['jobs_per_s']:,.0f} | {r['cpu_s']:.2f} | {r['max_queue']:,} "
                    f"| {r['peak_rss_mb']:.0f} | {fitted} |"
                    + (f" {r['fingerprint']} |" if a.fingerprint else ""),
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
