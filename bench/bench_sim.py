"""Benchmark: simulation throughput (jobs/s) of each heuristic on a large synthetic workload, and peak memory.

Throughput is printed from wall time and from the process's CPU time (the steadier figure on a shared machine),
with a fingerprint of each policy's schedule (bench_scenario.py's) to check that two versions decide the same.

python bench/bench_sim.py                       # 100,000 jobs on 64xA100-80GB:8,64xH100:8 at load 0.9
python bench/bench_sim.py --num_jobs 20000 --cluster 8xA100-80GB:8 --load_factor 1.0 --algos easy
python bench/bench_sim.py --num_jobs 20000 --power none,always_on,idle_off:600   # power model overhead
python bench/bench_sim.py --algos srtf,tiresias   # the preemptive policies (restore overhead 60 s)
python bench/bench_sim.py --algos las_speed --repeat 5 --cpu_time   # score rounds with fixed weights (target >= 20,000)
python bench/bench_sim.py --num_jobs 20000 --algos easy,cbf --runtime_info estimate   # policies see noisy estimates
python bench/bench_sim.py --algos easy,cbf --cpu_time   # CPU seconds instead of wall (a shared machine)
"""

from __future__ import annotations

import argparse
import gc
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from bench.arguments import at_least, names, user_errors  # noqa: E402
from bench.bench_scenario import fingerprint  # noqa: E402
from config import SimConfig  # noqa: E402
from metrics.energy import energy_report  # noqa: E402
from scenario.build import known_runtimes  # noqa: E402
from schedulers import POLICIES, PREEMPTIVE, make_policy  # noqa: E402
from schedulers.power_managers import make_manager, parse_manager  # noqa: E402
from sim.cluster import ClusterLayout  # noqa: E402
from sim.cluster_spec import parse_cluster_spec  # noqa: E402
from sim.power import PowerModel  # noqa: E402
from sim.prices import synthetic_curve  # noqa: E402
from sim.simulator import Simulator  # noqa: E402
from workloads.synthetic import generate_synthetic  # noqa: E402


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--num_jobs", type=int, default=100_000)
    p.add_argument("--cluster", default="64xA100-80GB:8,64xH100:8")
    p.add_argument("--load_factor", type=float, default=0.9)
    p.add_argument("--algos", default="fcfs,sjf,easy")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument(
        "--power",
        default="none",
        help="comma-separated: none (no power model) | a --power manager; timed with its energy integral",
    )
    p.add_argument("--preempt_overhead_s", type=float, default=SimConfig().preempt_overhead_s)
    p.add_argument(
        "--runtime_info",
        default="oracle",
        choices=("oracle", "estimate"),
        help="what policies know of runtimes (as main.py's --runtime_info; estimates drawn after the jobs)",
    )
    p.add_argument(
        "--round_on_arrival",
        action="store_true",
        help="las_speed: a score round at every arrival too (as main.py's --round_on_arrival yes)",
    )
    p.add_argument(
        "--cpu_time",
        action="store_true",
        help="time with this process's CPU time instead of wall time (steadier on a shared machine)",
    )
    a = p.parse_args()
    algos = names("--algos", a.algos, POLICIES)
    at_least("--num_jobs", a.num_jobs)
    at_least("--repeat", a.repeat)
    at_least("--seed", a.seed, 0)
    with user_errors():  # a bad cluster spec, load or manager: one error line
        managers = {power: None if power == "none" else parse_manager(power) for power in a.power.split(",")}
        spec = parse_cluster_spec(a.cluster)
        t0 = time.perf_counter()
        rng = np.random.default_rng(a.seed)
        wl = generate_synthetic(spec, a.num_jobs, a.load_factor, rng)
    clock = time.process_time if a.cpu_time else time.perf_counter
    known = known_runtimes(wl, SimConfig(runtime_info=a.runtime_info), rng)
    print(f"generate {a.num_jobs} jobs: {time.perf_counter() - t0:.2f} s")
    layout = ClusterLayout(spec)
    for algo in algos:
        for spec in managers.values():
            best = best_cpu = float("inf")
            for _ in range(a.repeat):
                model = None if spec is None else PowerModel()
                sim = Simulator(wl, layout, known, 1.2, a.preempt_overhead_s, power=model)
                manager = None if spec is None else make_manager(spec, synthetic_curve())
                gc.collect()  # the previous runs' cyclic garbage is freed here, not inside the timed run
                t0, c0 = clock(), time.process_time()
                policy = make_policy(algo, round_on_arrival=True) if a.round_on_arrival else POLICIES[algo]
                sim.run(policy, manager=manager)
                if spec is not None:
                    energy_report(sim.result(algo, a.seed), synthetic_curve())
                best = min(best, clock() - t0)
                best_cpu = min(best_cpu, time.process_time() - c0)
            r = sim.result(algo, a.seed)
            done = int((np.asarray(r.status) == "completed").sum())
            waits = r.start_s - np.array([j.arrival_s for j in wl.jobs])
            label = algo if spec is None else f"{algo}+{spec.label}"
            print(
                f"{label:5s}: {a.num_jobs / best:9.0f} jobs/s  ({best:.2f} s; {a.num_jobs / best_cpu:.0f} jobs/s "
                f"of CPU time, {best_cpu:.2f} s; {done} completed, "
                f"mean wait {np.nanmean(waits):.0f} s, {len(r.timeline_t_s)} decision instants"
                + (f", {int(r.preemptions.sum())} preemptions" if algo in PREEMPTIVE else "")
                + f"; fingerprint {fingerprint(sim.result(algo, a.seed, algo in PREEMPTIVE))})"
            )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
