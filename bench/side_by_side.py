"""The authors' own simulators and ours on the same trace, compared job by job: Tiresias
(github.com/SymbioticLab/Tiresias, simulator/run_sim.py) and Gavel (github.com/stanford-futuredata/gavel,
scheduler/scripts/drivers/simulate_scheduler_with_trace.py).

python bench/side_by_side.py tiresias --trace T.csv --num_gpus 64 --schedule dlas-gpu \
    (--theirs OUT/job.csv | --reference TIRESIAS_CHECKOUT --python PYTHON2.7)
python bench/side_by_side.py gavel --trace T.trace --cluster 12:12:12 --policy max_min_fairness_perf \
    --window 500,1000 (--theirs STDOUT.txt | --reference GAVEL_CHECKOUT --python PYTHON3.8)

`--theirs` reads a finished run of the original (Tiresias' `job.csv`, Gavel's standard output with its
`Job i: <completion time>` lines); `--reference` runs it first (the checkout is read, never changed; its output
goes to a temporary folder, or to `--keep DIR`). The reference code is not part of this project: fetch it
yourself (docs/schedulers.md, Side by side with the authors' simulators, gives the commits and the setup).
For each of our policies that stands for the original's (`--schedule`/`--policy` decides which), one line:
mean JCT theirs and ours and their difference, how many jobs end at exactly the same time, the median and 90th
percentile of the per-job JCT difference |ours - theirs| / theirs, and the Pearson correlation of the JCTs.
`--per_job FILE` writes one row per job with every variant's JCT. Ours runs with the runtimes known (the
originals know them) and no restore overhead (neither original charges one).
"""

from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from schedulers import POLICIES  # noqa: E402
from schedulers.gavel_original import (  # noqa: E402
    AGNOSTIC,
    AWARE,
    FIFO,
    FIFO_PERF,
    ROUND_S,
    make_gavel_original,
)
from schedulers.tiresias_original import make_tiresias_original  # noqa: E402
from sim.cluster import ClusterLayout  # noqa: E402
from sim.cluster_spec import parse_cluster_spec  # noqa: E402
from sim.simulator import Simulator  # noqa: E402
from sim.throughput import load_matrix  # noqa: E402
from workloads.sim_traces import load_gavel_trace, load_tiresias_trace  # noqa: E402

TIRESIAS_SCHEDULES = ("dlas-gpu", "fifo", "shortest")
"""the original's `--schedule` values compared (and dlas-gpu-<knob>, 2D-LAS with starvation promotion)"""
GAVEL_POLICIES = (AWARE, AGNOSTIC, FIFO_PERF, FIFO)
GAVEL_TYPES = ("V100", "P100", "K80")  # the order of Gavel's `-c v100:p100:k80`
_GAVEL_JOB_LINE = re.compile(r"^Job (\d+): ([0-9.eE+-]+)\s*$")


def tiresias_variants(schedule: str) -> dict:
    """Our policies standing for the original's `schedule`: name -> policy."""
    if schedule == "fifo":
        return {"fcfs": POLICIES["fcfs"]}
    if schedule == "shortest":
        return {"srtf": POLICIES["srtf"]}
    knob = _knob(schedule)
    out = {} if knob else {"tiresias": POLICIES["tiresias"]}
    out["tiresias_original"] = make_tiresias_original(promote_knob=knob)
    return out


def _knob(schedule: str) -> float:
    if schedule == "dlas-gpu":
        return 0.0
    m = re.fullmatch(r"dlas-gpu-(\d+)", schedule)
    if not m:
        raise ValueError(
            f"--schedule {schedule!r}: one of {', '.join(TIRESIAS_SCHEDULES)} or dlas-gpu-<knob>"
        )
    digits = m.group(1)  # the original reads "05" as 0.5, "2" as 2
    return float(digits) / 10 if digits.startswith("0") else float(digits)


def gavel_variants(policy: str, seed: int, matrix) -> dict:
    """Our policies standing for Gavel's `policy`: name -> policy."""
    default = {AWARE: "gavel", AGNOSTIC: "gavel_agnostic", FIFO: "fcfs", FIFO_PERF: "fcfs"}[policy]
    return {
        default: POLICIES[default],
        f"gavel_original({policy})": make_gavel_original(policy, seed, matrix),
    }


def run_tiresias_reference(args, out_dir: Path) -> Path:
    """Run the original on the trace; returns its job.csv."""
    sim_dir = Path(args.reference) / "simulator"
    if not (sim_dir / "run_sim.py").is_file():
        raise SystemExit(f"error: {sim_dir}/run_sim.py not found (--reference is a Tiresias checkout)")
    nodes, rest = divmod(args.num_gpus, args.gpus_per_node)
    if rest:
        raise SystemExit("error: --num_gpus must be a multiple of --gpus_per_node")
    spec = out_dir / "cluster.csv"
    spec.write_text(
        f"num_switch,num_node_p_switch,num_gpu_p_node,num_cpu_p_node,mem_p_node\n1,{nodes},"
        f"{args.gpus_per_node},128,254\n"
    )
    # run_sim.py imports the LP scheme's solver (cplex) at the top; --scheme=count never calls it
    stub = out_dir / "stub" / "cplex"
    stub.mkdir(parents=True, exist_ok=True)
    (stub / "__init__.py").write_text("")
    (stub / "exceptions.py").write_text("class CplexError(Exception):\n    pass\n")
    env_path = ":".join([*args.pythonpath, str(out_dir / "stub")])
    log = out_dir / "run"
    cmd = [
        args.python,
        "run_sim.py",
        f"--cluster_spec={spec}",
        "--scheme=count",
        f"--trace_file={Path(args.trace).resolve()}",
        f"--schedule={args.schedule}",
        f"--log_path={log}",
    ]
    _run(cmd, sim_dir, {"PYTHONPATH": env_path}, out_dir / "stdout.txt")
    return log / "job.csv"


def run_gavel_reference(args, out_dir: Path) -> Path:
    """Run the original on the trace; returns the file holding its standard output."""
    sched = Path(args.reference) / "scheduler"
    driver = "scripts/drivers/simulate_scheduler_with_trace.py"
    if not (sched / driver).is_file():
        raise SystemExit(f"error: {sched}/{driver} not found (--reference is a Gavel checkout)")
    cmd = [
        args.python,
        driver,
        "-t",
        str(Path(args.trace).resolve()),
        "-p",
        args.policy,
        "-c",
        args.cluster,
        "--num_gpus_per_server",
        "1:1:1",
        "--seed",
        str(args.seed),
        "--time_per_iteration",
        str(int(ROUND_S)),
    ]
    out = out_dir / "stdout.txt"
    _run(cmd, sched, {}, out)
    return out


def _run(cmd: list[str], cwd: Path, env: dict, stdout: Path) -> None:
    import os  # imported here: only a reference run needs the environment

    t0 = time.time()
    with stdout.open("w") as f, (stdout.parent / "stderr.txt").open("w") as e:
        rc = subprocess.call(cmd, cwd=cwd, env={**os.environ, **env}, stdout=f, stderr=e)
    if rc:
        tail = (stdout.parent / "stderr.txt").read_text(errors="replace").strip().splitlines()[-3:]
        raise SystemExit(f"error: the reference exited {rc}: {' | '.join(tail)}")
    print(f"reference: {' '.join(cmd[1:3])} ... {time.time() - t0:.0f} s wall", file=sys.stderr)


def tiresias_theirs(path: Path, job_ids: list[str], arrival_s: np.ndarray) -> np.ndarray:
    """Their JCT per job (NaN: not in their output)."""
    with path.open(newline="") as f:
        end = {r["job_id"]: float(r["end_time"]) for r in csv.DictReader(f)}
    return np.array([end.get(j, np.nan) for j in job_ids]) - arrival_s


def gavel_theirs(path: Path, num_jobs: int) -> np.ndarray:
    """Their JCT per job from the driver's `Job i: <JCT>` lines (NaN: not printed)."""
    jct = np.full(num_jobs, np.nan)
    for line in path.read_text().splitlines():
        m = _GAVEL_JOB_LINE.match(line)
        if m and int(m.group(1)) < num_jobs:
            jct[int(m.group(1))] = float(m.group(2))
    return jct


def ours_jct(workload, layout, matrix, policy) -> tuple[np.ndarray, float]:
    """Our JCT per job (NaN: unfinished) and the run's CPU seconds."""
    sim = Simulator(workload, layout, None, 1.2, 0.0, matrix)
    t0 = time.process_time()
    sim.run(policy)
    cpu_s = time.process_time() - t0
    r = sim.result("side_by_side", 0, preemptive=True)
    return np.asarray(r.end_s, dtype=float) - np.array([j.arrival_s for j in workload.jobs]), cpu_s


def agreement(theirs: np.ndarray, ours: np.ndarray) -> dict:
    """The figures of one line (module docstring) over the jobs both finished."""
    ok = ~np.isnan(theirs) & ~np.isnan(ours)
    t, o = theirs[ok], ours[ok]
    rel = np.abs(o - t) / np.where(t > 0, t, 1.0)
    return {
        "jobs": int(ok.sum()),
        "unfinished": int((~ok).sum()),
        "theirs_s": float(t.mean()),
        "ours_s": float(o.mean()),
        "diff_pct": 100.0 * (o.mean() / t.mean() - 1.0),
        "identical": int((np.abs(o - t) <= 1e-6 * np.maximum(1.0, np.abs(t))).sum()),
        "median_pct": 100.0 * float(np.median(rel)),
        "p90_pct": 100.0 * float(np.percentile(rel, 90)),
        "pearson": float(np.corrcoef(t, o)[0, 1]) if len(t) > 1 and t.std() > 0 and o.std() > 0 else 1.0,
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="sim", required=True)
    for name in ("tiresias", "gavel"):
        s = sub.add_parser(name)
        s.add_argument("--trace", required=True)
        src = s.add_mutually_exclusive_group(required=True)
        src.add_argument("--theirs", help="a finished run of the original (see the module docstring)")
        src.add_argument("--reference", help="the original's checkout, to run it first")
        s.add_argument("--python", default="python", help="the interpreter that runs the original")
        s.add_argument("--keep", help="folder for the original's output (default: a temporary one)")
        s.add_argument("--per_job", help="write a CSV: job, arrival, their JCT, each variant's JCT")
        s.add_argument("--window", default=None, help="LO,HI: compare jobs with index in [LO, HI) only")
    t = sub.choices["tiresias"]
    t.add_argument(
        "--num_gpus", type=int, required=True, help="GPUs of the cluster (one count, --scheme=count)"
    )
    t.add_argument(
        "--gpus_per_node", type=int, default=4, help="the original's cluster spec (count: no effect)"
    )
    t.add_argument("--schedule", default="dlas-gpu")
    t.add_argument(
        "--pythonpath", default=[], action="append", help="extra PYTHONPATH for the original (numpy)"
    )
    g = sub.choices["gavel"]
    g.add_argument("--cluster", default="12:12:12", help="Gavel's -c: V100:P100:K80 GPUs, one per server")
    g.add_argument("--policy", default=AWARE, choices=GAVEL_POLICIES)
    g.add_argument(
        "--node_gpus",
        type=int,
        default=1,
        help="GPUs per node of OUR cluster (the original runs one per server but always at the consolidated "
        "throughput; nodes as large as each type make ours consolidated too)",
    )
    g.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)

    if a.sim == "tiresias":
        try:
            variants = tiresias_variants(a.schedule)
        except ValueError as e:
            p.error(str(e))
        workload = load_tiresias_trace(a.trace)
        layout = ClusterLayout(parse_cluster_spec(f"1xA100:{a.num_gpus}"))
        matrix = None
    else:
        counts = a.cluster.split(":")
        if len(counts) != 3 or not all(c.isdigit() for c in counts):
            p.error("--cluster is V100:P100:K80 GPU counts, e.g. 12:12:12")
        matrix = load_matrix("gavel")
        variants = gavel_variants(a.policy, a.seed, matrix)
        workload = load_gavel_trace(a.trace, matrix)
        if a.node_gpus < 1 or any(int(c) % a.node_gpus for c in counts):
            p.error("--node_gpus must be >= 1 and divide every count of --cluster")
        layout = ClusterLayout(
            parse_cluster_spec(
                ",".join(
                    f"{int(c) // a.node_gpus}x{t}:{a.node_gpus}"
                    for c, t in zip(counts, GAVEL_TYPES, strict=True)
                    if c != "0"
                )
            )
        )
    arrival_s = np.array([j.arrival_s for j in workload.jobs])

    theirs_file = Path(a.theirs) if a.theirs else None
    if theirs_file is None:
        with tempfile.TemporaryDirectory() as tmp:
            out_dir = Path(a.keep) if a.keep else Path(tmp)
            out_dir.mkdir(parents=True, exist_ok=True)
            ran = (run_tiresias_reference if a.sim == "tiresias" else run_gavel_reference)(a, out_dir)
            theirs = _theirs(a.sim, ran, workload, arrival_s)
    else:
        theirs = _theirs(a.sim, theirs_file, workload, arrival_s)

    sl = slice(None)
    if a.window:
        lo, hi = (int(v) for v in a.window.split(","))
        sl = slice(lo, hi)
    label = a.schedule if a.sim == "tiresias" else a.policy
    print(
        f"{a.sim} {label} on {Path(a.trace).name}: {len(workload.jobs)} jobs, compared {sl.start or 0}.."
        f"{sl.stop or len(workload.jobs)}"
    )
    columns = {}
    for name, policy in variants.items():
        jct, cpu_s = ours_jct(workload, layout, matrix, policy)
        columns[name] = jct
        f = agreement(theirs[sl], jct[sl])
        print(
            f"  {name:34s} mean JCT theirs {f['theirs_s']:10.1f} s ours {f['ours_s']:10.1f} s "
            f"({f['diff_pct']:+6.2f} %)  identical {f['identical']:4d}/{f['jobs']}  per job median "
            f"{f['median_pct']:5.2f} % p90 {f['p90_pct']:6.2f} %  pearson {f['pearson']:.4f}  "
            f"unfinished {f['unfinished']}  ({cpu_s:.1f} s CPU)"
        )
    if a.per_job:
        with open(a.per_job, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(["job_id", "arrival_s", "theirs_jct_s", *(f"{n}_jct_s" for n in columns)])
            for i, j in enumerate(workload.jobs):
                w.writerow(
                    [
                        j.job_id,
                        repr(j.arrival_s),
                        repr(float(theirs[i])),
                        *(repr(float(c[i])) for c in columns.values()),
                    ]
                )
    return 0


def _theirs(sim: str, path: Path, workload, arrival_s: np.ndarray) -> np.ndarray:
    if not path.is_file():
        raise SystemExit(f"error: {path} not found")
    if sim == "tiresias":
        return tiresias_theirs(path, [j.job_id for j in workload.jobs], arrival_s)
    return gavel_theirs(path, len(workload.jobs))


if __name__ == "__main__":
    sys.exit(main())
