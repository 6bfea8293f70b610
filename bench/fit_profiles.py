"""Fit the synthetic profiles' model parameters to their published values and print them (workloads/profiles.py).

    python bench/fit_profiles.py [--profiles philly,helios,itp] [--parts runtime,outcomes,arrivals] [--traces DIR]

Three independent fits per profile, each by least squares on the relative errors of the rows it controls,
with common random numbers (one fixed sample) so that the objective is a smooth function of the parameters:

- runtime (RuntimeModel): the runtime rows and runtime by GPU count, on a sample stratified by GPU count
  (every count drawn equally often, weighted by its probability). philly: three log-normal components and
  one size exponent; helios: the two components' medians and the size exponent (its sigmas and long share are
  assumptions: Helios publishes no percentiles); itp: two components, and per GPU count a runtime factor and
  the long component's weight, fitted to each count's median and mean in the ITP files.
- outcomes (OutcomeModel): the four logit coefficients, from the expected job and GPU-time shares over a
  draw of the generator itself (the fitted runtimes, on the hard cluster).
- arrivals (ArrivalModel): the Cox process's factors (and for Venus the bursts, which it does not publish), by
  Nelder-Mead on the mean of the arrival rows over 6 draws of 400,000 jobs' instants at the profile's jobs per
  day on the hard cluster at load 1. ITP's bursts come from its files (share of jobs sharing their instant,
  largest group, the size-law exponent with the files' mean group size).

It starts from the parameters in workloads/profiles.py and prints the fitted ones as Python to paste there;
`python bench/synthetic_stats.py` then checks every row on generated jobs.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
from scipy.optimize import brentq, least_squares, minimize

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.trace_dir import DEFAULT_TRACES, require_paths  # noqa: E402
from config import DIFFICULTIES  # noqa: E402
from sim.cluster_spec import parse_cluster_spec  # noqa: E402
from workloads import synthetic as legacy  # noqa: E402
from workloads.calibrated import (  # noqa: E402
    GPU_HOUR_S,
    burst_group_sizes,
    draw_profile,
    group_arrivals_s,
    log_runtimes,
    outcome_probs,
)
from workloads.profile_sources import ARRIVAL_ROWS, itp_jobs, philly_runtimes_s  # noqa: E402
from workloads.profile_stats import (  # noqa: E402
    count_stats,
    day_counts,
    interarrival_cv,
    same_instant_share,
)
from workloads.profiles import (  # noqa: E402
    PROFILES,
    ArrivalModel,
    LogNormal,
    OutcomeModel,
    RuntimeModel,
    SyntheticProfile,
)

HARD = parse_cluster_spec(DIFFICULTIES["hard"].cluster)
PER_SIZE = 60_000  # runtime sample per GPU count
SEED = 12345
CANDIDATES = 6
ARRIVAL_SEEDS = tuple(range(SEED, SEED + 6))
QUANTILES = {
    "median_runtime_s": 50,
    "runtime_p75_s": 75,
    "runtime_p90_s": 90,
    "runtime_p95_s": 95,
    "runtime_p99_s": 99,
}
PHILLY_GRID = (5, 10, 15, 20, 25, 30, 40, 50, 60, 70, 75, 80, 85, 90, 92.5, 95, 97.5, 99, 99.5)
ITP_GRID = (10, 25, 50, 75, 90, 95, 99)
ITP_POOLED_ROWS = (
    *QUANTILES,
    "mean_over_median_runtime",
    "runtime_weighted_mean_gpus",
    "gpu_time_share_ge_8_gpus",
    "median_runtime_1_gpu_s",
    "median_runtime_2_4_gpus_s",
    "median_runtime_ge_8_gpus_s",
)


def _weighted_quantile(x: np.ndarray, w: np.ndarray, q: float) -> float:
    order = np.argsort(x)
    cum = np.cumsum(w[order])
    return float(x[order][np.searchsorted(cum, q / 100 * cum[-1])])


class RuntimeSample:
    """Common random numbers for the runtime fit: PER_SIZE jobs per GPU count, weighted by its probability."""

    def __init__(self, profile: SyntheticProfile, rng: np.random.Generator):
        n = len(profile.gpu_count_choices)
        self.choice = np.repeat(np.arange(n), PER_SIZE)
        self.gpus = np.array(profile.gpu_count_choices, dtype=float)[self.choice]
        self.weight = np.array(profile.gpu_count_probs)[self.choice] / PER_SIZE
        # CANDIDATES draws per job: the first at or above min_s is used (the generator redraws below it)
        self.u = rng.random((CANDIDATES, self.choice.size))
        self.z = rng.standard_normal((CANDIDATES, self.choice.size))
        # bursts hold burst_job_fraction of the jobs and jitter their runtimes
        in_burst = rng.random(self.choice.size) < profile.arrivals.burst_job_fraction
        self.jitter = np.where(
            in_burst, legacy.BURST_RUNTIME_SIGMA * rng.standard_normal(self.choice.size), 0.0
        )

    def runtimes_s(self, model: RuntimeModel) -> np.ndarray:
        log_s = log_runtimes(model, self.choice, self.u[0], self.z[0])
        for u, z in zip(self.u[1:], self.z[1:], strict=True):
            low = log_s < np.log(model.min_s)
            if not low.any():
                break
            log_s[low] = log_runtimes(model, self.choice[low], u[low], z[low])
        log_s = log_s + self.jitter
        return np.clip(np.exp(log_s), model.min_s, model.max_s)

    def rows(self, model: RuntimeModel) -> dict[str, float]:
        r, w = self.runtimes_s(model), self.weight
        out = {name: _weighted_quantile(r, w, q) for name, q in QUANTILES.items()}
        out["mean_over_median_runtime"] = float(np.sum(w * r) / out["median_runtime_s"])
        out["share_runtime_le_10min"] = float(np.sum(w * (r <= 600.0)))
        out["runtime_weighted_mean_gpus"] = float(np.sum(w * self.gpus * r) / np.sum(w * r))
        return out


def _size_rows(r: np.ndarray, sample: RuntimeSample) -> dict[str, float]:
    """GPU-time share and median runtime of the size classes, on the weighted sample."""
    gpus, w = sample.gpus, sample.weight
    big, mid = gpus >= 8, (gpus >= 2) & (gpus <= 4)
    gpu_time = w * gpus * r
    return {
        "gpu_time_share_ge_8_gpus": float(gpu_time[big].sum() / gpu_time.sum()),
        "median_runtime_1_gpu_s": _weighted_quantile(r[gpus == 1], w[gpus == 1], 50),
        "median_runtime_2_4_gpus_s": _weighted_quantile(r[mid], w[mid], 50),
        "median_runtime_ge_8_gpus_s": _weighted_quantile(r[big], w[big], 50),
    }


def _residuals(got: dict[str, float], profile: SyntheticProfile, rows: tuple[str, ...]) -> list[float]:
    """ln(generated / published) of each row that the profile publishes and fits."""
    out = []
    for name in rows:
        target = getattr(profile.published, name)
        if target is not None and target.fitted and target.value >= 0.05:
            out.append(float(np.log(got[name] / target.value)))
    return out


def _runtime_model_philly(theta: np.ndarray, base: RuntimeModel) -> RuntimeModel:
    m = np.exp(theta[:6])
    w = np.exp(np.concatenate(([0.0], theta[6:8])))
    w /= w.sum()
    comps = tuple(LogNormal(float(m[2 * i]), float(m[2 * i + 1])) for i in range(3))
    factors = tuple(float(k) ** float(theta[8]) for k in (1, 2, 4, 8, 16, 32, 64))
    return replace(base, components=comps, weights_by_size=(tuple(w.tolist()),) * 7, size_factors=factors)


def _theta_philly(model: RuntimeModel) -> np.ndarray:
    w = np.array(model.weights_by_size[0])
    return np.concatenate(
        (
            np.log([v for c in model.components for v in (c.median_s, c.sigma)]),
            np.log(w[1:] / w[0]),
            [np.log(model.size_factors[1]) / np.log(2.0)],
        )
    )


def _runtime_model_helios(theta: np.ndarray, base: RuntimeModel) -> RuntimeModel:
    short, long_ = base.components
    comps = (
        replace(short, median_s=float(np.exp(theta[0]))),
        replace(long_, median_s=float(np.exp(theta[1]))),
    )
    return replace(
        base,
        components=comps,
        size_factors=tuple(float(k) ** float(theta[2]) for k in (1, 2, 4, 8, 16, 32, 64)),
    )


def _theta_helios(model: RuntimeModel) -> np.ndarray:
    return np.array(
        [
            np.log(model.components[0].median_s),
            np.log(model.components[1].median_s),
            np.log(model.size_factors[1]) / np.log(2.0),
        ]
    )


def fit_runtime(profile: SyntheticProfile, traces: Path) -> RuntimeModel:
    sample = RuntimeSample(profile, np.random.default_rng(SEED))
    base = profile.runtime
    rows = (*QUANTILES, "mean_over_median_runtime", "share_runtime_le_10min", "runtime_weighted_mean_gpus")
    if profile.name == "itp":
        return _fit_runtime_itp(profile, sample, traces)
    if profile.name == "helios":
        res = least_squares(
            lambda th: _residuals(sample.rows(_runtime_model_helios(th, base)), profile, rows),
            _theta_helios(base),
            diff_step=1e-3,
        )
        return _runtime_model_helios(res.x, base)
    # philly: the file's whole quantile curve, not only the rows (three components could otherwise put the
    # short jobs anywhere below 10 minutes)
    require_paths(traces / "philly-partial")
    real_s = philly_runtimes_s(traces)
    grid = np.array(PHILLY_GRID)
    real_q = np.maximum(np.percentile(real_s, grid), 1.0)

    def residuals(th: np.ndarray) -> list[float]:
        model = _runtime_model_philly(th, base)
        r = sample.runtimes_s(model)
        got_q = np.array([_weighted_quantile(r, sample.weight, q) for q in grid])
        rest = _residuals(
            sample.rows(model), profile, ("mean_over_median_runtime", "runtime_weighted_mean_gpus")
        )
        return [*np.log(got_q / real_q).tolist(), *rest]

    res = least_squares(residuals, _theta_philly(base), diff_step=1e-3)
    return _runtime_model_philly(res.x, base)


def _fit_runtime_itp(profile: SyntheticProfile, sample: RuntimeSample, traces: Path) -> RuntimeModel:
    """Three components (short, body, long) with weights and a runtime factor (1 for one GPU) per GPU count,
    to each count's quantile curve (ITP_GRID) and mean in the files, weighted by the square root of the
    count's job share, and to the pooled rows."""
    require_paths(traces / "microsoft-itp-elasticflow-2021")
    jobs = np.concatenate([f[["duration", "num_gpu"]].to_numpy(float) for f in itp_jobs(traces)])
    sizes = np.array(profile.gpu_count_choices)
    scale = np.sqrt(np.array(profile.gpu_count_probs))
    n = sizes.size
    real = [jobs[jobs[:, 1] == k, 0] for k in sizes]
    real_q = [np.percentile(x, ITP_GRID) for x in real]
    base = profile.runtime
    of_size = [sample.choice == i for i in range(n)]

    def unpack(th: np.ndarray) -> RuntimeModel:
        comps = tuple(LogNormal(float(np.exp(th[2 * c])), float(np.exp(th[2 * c + 1]))) for c in range(3))
        factors = (1.0, *np.exp(th[6 : 6 + n - 1]).tolist())
        logits = np.concatenate((np.zeros((n, 1)), th[6 + n - 1 :].reshape(n, 2)), axis=1)
        w = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
        return replace(
            base, components=comps, size_factors=factors, weights_by_size=tuple(map(tuple, w.tolist()))
        )

    def residuals(th: np.ndarray) -> np.ndarray:
        model = unpack(th)
        r = sample.runtimes_s(model)
        out = []
        for i in range(n):
            x = r[of_size[i]]
            out.extend(scale[i] * np.log(np.percentile(x, ITP_GRID) / real_q[i]))
            out.append(scale[i] * np.log(x.mean() / real[i].mean()))
        pooled = sample.rows(model) | _size_rows(r, sample)
        # the class medians, rows of the table made of few jobs' curves, weigh 3
        rows = _residuals(pooled, profile, ITP_POOLED_ROWS)
        return np.array(out + rows[:-3] + [3 * v for v in rows[-3:]])

    w0 = np.maximum(np.array(base.weights_by_size), 1e-3)  # a dead component could not revive
    theta0 = np.concatenate(
        (
            np.log([v for c in base.components for v in (c.median_s, c.sigma)]),
            np.log(np.array(base.size_factors[1:]) / base.size_factors[0]),
            np.log(w0[:, 1:] / w0[:, :1]).ravel(),
        )
    )
    res = least_squares(residuals, theta0, diff_step=1e-3)
    return unpack(res.x)


def fit_outcomes(profile: SyntheticProfile) -> OutcomeModel:
    """Logit coefficients whose expected job and GPU-time shares over a 400,000-job draw are the published ones."""
    d = draw_profile(HARD, 400_000, 1.0, np.random.default_rng(SEED), profile)
    gpu_time = d.gpus * d.runtime_s
    pub = profile.published
    targets = [
        pub.failed_share.value,
        pub.cancelled_share.value,
        pub.failed_gpu_time_share.value,
        pub.cancelled_gpu_time_share.value,
    ]

    def residuals(th: np.ndarray) -> np.ndarray:
        p_f, p_c = outcome_probs(OutcomeModel(tuple(th[:2]), tuple(th[2:])), gpu_time / GPU_HOUR_S)
        got = [
            p_f.mean(),
            p_c.mean(),
            (p_f * gpu_time).sum() / gpu_time.sum(),
            (p_c * gpu_time).sum() / gpu_time.sum(),
        ]
        return np.log(np.array(got) / targets)

    m = profile.outcomes
    res = least_squares(residuals, np.array([*m.failed, *m.cancelled]), xtol=1e-12)
    return OutcomeModel(tuple(float(v) for v in res.x[:2]), tuple(float(v) for v in res.x[2:]))


def arrival_rows(arrival_s: np.ndarray) -> dict[str, float]:
    c = count_stats(day_counts(arrival_s))
    return dict(
        vars(c), interarrival_cv=interarrival_cv(arrival_s), same_instant_share=same_instant_share(arrival_s)
    )


def itp_bursts(traces: Path, base: ArrivalModel) -> ArrivalModel:
    """ITP's same-instant groups: the share of jobs in them (the median over the clusters, as the table's
    row), the largest group, and the exponent whose size law has the files' mean group size."""
    require_paths(traces / "microsoft-itp-elasticflow-2021")
    frames = itp_jobs(traces)
    groups = np.concatenate([np.unique(f["submission_time"], return_counts=True)[1] for f in frames])
    bursts = groups[groups > 1]
    sizes = np.arange(2, bursts.max() + 1)

    def mean_size(a: float) -> float:
        p = sizes.astype(float) ** -a
        return float(sizes @ p / p.sum())

    exponent = brentq(lambda a: mean_size(a) - bursts.mean(), 0.0, 20.0)
    share = float(np.median([same_instant_share(f["submission_time"].to_numpy(float)) for f in frames]))
    return replace(
        base, burst_job_fraction=share, burst_size_max=int(bursts.max()), burst_size_exponent=exponent
    )


def fit_arrivals(profile: SyntheticProfile, free: tuple[str, ...], num_jobs: int = 400_000) -> ArrivalModel:
    """The `free` fields of the ArrivalModel (log scale; shares on the logit scale), by Nelder-Mead on the
    arrival rows of instants drawn at the profile's jobs per day on the hard cluster at load 1."""
    d = draw_profile(HARD, 100_000, 1.0, np.random.default_rng(SEED), profile)
    jobs_per_day = 100_000 / (d.arrival_s[-1] / 86_400.0)
    window_s = num_jobs / jobs_per_day * 86_400.0
    base = profile.arrivals

    def unpack(th: np.ndarray) -> ArrivalModel:
        values = {}
        for name, v in zip(free, th, strict=True):
            values[name] = (
                float(1 / (1 + np.exp(-v))) if name.endswith(("share", "fraction")) else float(np.exp(v))
            )
            if name.endswith("_cv") and values[name] < 1e-3:
                values[name] = 0.0
        return replace(base, **values)

    def loss(th: np.ndarray) -> float:
        model = unpack(th)
        runs = []
        for seed in ARRIVAL_SEEDS:  # the mean over a few draws: one draw's rare bursts would steer the fit
            rng = np.random.default_rng(seed)
            sizes = burst_group_sizes(num_jobs, model, rng)
            runs.append(arrival_rows(np.repeat(group_arrivals_s(sizes.size, window_s, model, rng), sizes)))
        got = {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}
        return float(np.sum(np.square(_residuals(got, profile, ARRIVAL_ROWS))))

    def pack(model: ArrivalModel) -> np.ndarray:
        out = []
        for name in free:
            v = getattr(model, name)
            out.append(np.log(v / (1 - v)) if name.endswith(("share", "fraction")) else np.log(v))
        return np.array(out)

    res = minimize(
        loss, pack(base), method="Nelder-Mead", options={"xatol": 1e-3, "fatol": 1e-6, "maxiter": 2000}
    )
    print(f"  arrivals: loss {res.fun:.2e} at {jobs_per_day:.0f} jobs/day", file=sys.stderr)
    return unpack(res.x)


ARRIVAL_FREE = {
    # Venus publishes no same-instant share: bursts and hourly factors set the within-day and whole-trace
    # dispersion, the day factor the day-to-day variation
    "helios": ("burst_job_fraction", "burst_size_exponent", "day_cv", "hour_cv"),
    "itp": ("day_cv", "hour_cv", "bin_cv", "off_hour_share", "off_run_mean_h"),
}


def _print(name: str, obj: object) -> None:
    text = repr(obj).replace("np.float64(", "(")
    print(f"{name} = {text}")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profiles", default=",".join(PROFILES))
    p.add_argument("--parts", default="runtime,outcomes,arrivals")
    p.add_argument("--traces", type=Path, default=DEFAULT_TRACES)
    a = p.parse_args()
    require_paths(a.traces)
    parts = a.parts.split(",")
    for name in a.profiles.split(","):
        profile = PROFILES[name]
        print(f"# {name}")
        if "runtime" in parts:
            profile = replace(profile, runtime=fit_runtime(profile, a.traces))
            _print("runtime", profile.runtime)
        if "outcomes" in parts:
            profile = replace(profile, outcomes=fit_outcomes(profile))
            _print("outcomes", profile.outcomes)
        if "arrivals" in parts and name in ARRIVAL_FREE:
            if name == "itp":
                profile = replace(profile, arrivals=itp_bursts(a.traces, profile.arrivals))
            profile = replace(profile, arrivals=fit_arrivals(profile, ARRIVAL_FREE[name]))
            _print("arrivals", profile.arrivals)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
