"""A synthetic job trace in the CSV format of Tiresias' simulator (github.com/SymbioticLab/Tiresias,
simulator/README.md: `job_id,num_gpu,submit_time,iterations,model_name,duration,interval`), for side-by-side runs
of that simulator and ours (tests/fixtures/tiresias/README.md).

python bench/tiresias_trace.py --num_jobs 480 --load 1.0 --num_gpus 64 --seed 1 > trace.csv

Tiresias' repository ships no generator, only a 60-job example (`60_job.csv`); this one draws integer seconds
(its simulator's clock is whole seconds): GPU count 1/2/4/8 with probability 0.55/0.2/0.15/0.1, duration
round(10^U(2, 4.3)) s (100 s to about 5.5 h), model name uniform among the ten of the example (used by its
memory model only, not by `--scheme=count`), Poisson arrivals at the rate that offers `--load` x the cluster's
GPU-seconds (the expected GPU-seconds per job over the rate's capacity). `iterations` is the duration (it is
not read by the schedulers compared).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

GPU_COUNTS = (1, 2, 4, 8)
GPU_PROBABILITY = (0.55, 0.2, 0.15, 0.1)
DURATION_EXPONENT = (2.0, 4.3)
MODELS = (
    "alexnet",
    "googlenet",
    "inception3",
    "inception4",
    "resnet101",
    "resnet152",
    "resnet50",
    "vgg11",
    "vgg16",
    "vgg19",
)


def expected_gpu_s() -> float:
    """Expected GPUs x duration of one job (log-uniform duration: E[10^U] = (10^b - 10^a) / ((b - a) ln 10))."""
    lo, hi = DURATION_EXPONENT
    mean_duration_s = (10**hi - 10**lo) / ((hi - lo) * np.log(10))
    return float(np.dot(GPU_COUNTS, GPU_PROBABILITY)) * mean_duration_s


def trace_rows(num_jobs: int, load: float, num_gpus: int, rng: np.random.Generator) -> list[tuple]:
    """(job_id, num_gpu, submit_time, iterations, model_name, duration, interval) rows, submit times ascending."""
    mean_gap_s = expected_gpu_s() / (load * num_gpus)
    gaps = np.rint(rng.exponential(mean_gap_s, num_jobs - 1)).astype(int)
    submit = np.concatenate([[0], np.cumsum(gaps)])
    gpus = rng.choice(GPU_COUNTS, size=num_jobs, p=GPU_PROBABILITY)
    duration = np.rint(10 ** rng.uniform(*DURATION_EXPONENT, size=num_jobs)).astype(int)
    model = rng.integers(len(MODELS), size=num_jobs)
    interval = np.append(gaps, 0)
    return [
        (
            i,
            int(gpus[i]),
            int(submit[i]),
            int(duration[i]),
            MODELS[model[i]],
            int(duration[i]),
            int(interval[i]),
        )
        for i in range(num_jobs)
    ]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--num_jobs", type=int, default=480)
    p.add_argument("--load", type=float, default=1.0, help="offered GPU-seconds / the cluster's, per second")
    p.add_argument("--num_gpus", type=int, default=64, help="GPUs of the cluster the load is computed for")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    if a.num_jobs < 1 or not a.load > 0 or a.num_gpus < 1:
        p.error("--num_jobs and --num_gpus must be >= 1 and --load > 0")
    rows = trace_rows(a.num_jobs, a.load, a.num_gpus, np.random.default_rng(a.seed))
    out = sys.stdout
    out.write("job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n")
    for r in rows:
        out.write(",".join(str(v) for v in r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
