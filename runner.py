"""Runs one mode end to end: scenarios -> simulations (heuristic or agent) -> files in the log directory."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import numpy as np
from tqdm import tqdm

from config import RunConfig
from env.records import REJECTED, RunResult
from env.scenario import Scenario, UserError, build_scenario
from metrics.compare import aggregate, assert_same_jobs, format_table, write_compare_csv
from metrics.plots import plot_compare, plot_compare_cdf, plot_run
from metrics.summary import SummaryRow, summarize
from metrics.writers import write_cluster_csv, write_jobs_csv, write_summary_csv
from schedulers import POLICIES

AGENTS = ("d3qn", "sac")


def workload_tag(cfg: RunConfig) -> str:
    w = cfg.workload
    if w.workload_type == "synthetic":
        return f"synthetic-{w.difficulty}"
    return f"{w.workload_type}-{Path(w.workload_path).name.split('.')[0]}"


def default_log_dir(cfg: RunConfig) -> Path:
    if cfg.log_dir:
        return Path(cfg.log_dir)
    if cfg.mode == "compare":
        name = f"compare_{'-'.join(cfg.algos)}_{workload_tag(cfg)}_seeds{'-'.join(map(str, cfg.seeds))}"
    else:
        name = f"{cfg.mode}_{cfg.algo}_{workload_tag(cfg)}_seed{cfg.seed}"
    return Path("logs") / name


def _progress(total: int, desc: str, enabled: bool):
    """A callback num_done -> None that drives a tqdm bar (None when disabled)."""
    if not enabled:
        return None, None
    bar = tqdm(total=total, desc=desc, unit="job", mininterval=0.5, leave=False)

    def update(done: int) -> None:
        bar.update(done - bar.n)

    return update, bar


def run_heuristic(sc: Scenario, algo: str, progress: bool = False) -> RunResult:
    """Run heuristic `algo` on the scenario and return its result."""
    sim = sc.simulator()
    update, bar = _progress(len(sc.workload.jobs) - sim.num_rejected, algo, progress)
    sim.run(POLICIES[algo], update)
    if bar is not None:
        bar.close()
    return sim.result(algo, sc.seed)


def run_agent(cfg: RunConfig, sc: Scenario, algo: str, checkpoint: str, progress: bool = False) -> RunResult:
    """Run a trained agent greedily through the Gymnasium env on the scenario."""
    import torch

    from agents.policy import load_policy
    from env.gym_env import run_policy_in_env

    torch.set_num_threads(1)  # small nets: more threads are slower on a shared 2-core machine
    policy = load_policy(checkpoint, device="cpu")
    if policy.algo != algo:
        raise UserError(f"checkpoint {checkpoint} holds a {policy.algo} agent, not {algo}")
    return run_policy_in_env(cfg, sc, lambda obs, mask: policy.act(obs, mask), name=algo)


def find_checkpoint(cfg: RunConfig, algo: str) -> str:
    """--checkpoint, else models/<algo>_seed<seed>_<model>.pt, else the only such checkpoint of that algo
    (<model> = final or best, --model)."""
    if cfg.checkpoint and cfg.mode == "eval":
        if not Path(cfg.checkpoint).exists():
            raise UserError(f"--checkpoint {cfg.checkpoint}: no such file")
        return cfg.checkpoint
    models = Path(cfg.models_dir)
    own = models / f"{algo}_seed{cfg.seed}_{cfg.model}.pt"
    if own.exists():
        return str(own)
    finals = sorted(models.glob(f"{algo}_seed*_{cfg.model}.pt"))
    if len(finals) == 1:
        return str(finals[0])
    if not finals:
        raise UserError(
            f"no trained {algo} model in {models}/ (looked for {own.name}); "
            f"train one: python main.py --mode train --algo {algo} --seed {cfg.seed}"
        )
    raise UserError(
        f"several {algo} models in {models}/ ({', '.join(f.name for f in finals)}); pick one with --checkpoint"
    )


def run_one(cfg: RunConfig, sc: Scenario, algo: str, progress: bool) -> RunResult:
    if algo in AGENTS:
        return run_agent(cfg, sc, algo, find_checkpoint(cfg, algo), progress)
    return run_heuristic(sc, algo, progress)


def refuse_all_rejected(result: RunResult, sc: Scenario) -> None:
    """A run in which no job can ever fit the cluster has no metrics (all NaN): stop with the reasons instead."""
    if not result.status or any(s != REJECTED for s in result.status):
        return
    reasons = Counter(result.reject_reason).most_common(3)
    shown = "; ".join(f"{n} x {why}" for why, n in reasons)
    raise UserError(
        f"all {len(result.status)} jobs are rejected: none can ever fit the cluster {sc.cluster.name} "
        f"({sc.layout.num_gpus} GPUs) [{shown}]; give a larger --cluster or check the workload's GPU demands"
    )


def workload_report(sc: Scenario, result: RunResult) -> dict:
    """The loader's report plus what the run found: load factor, GPU-count histogram, rejections per reason."""
    jobs = sc.workload.jobs
    arrivals = [j.arrival_s for j in jobs]
    hist = Counter(j.gpu_demand for j in jobs)
    rejected = Counter(r for r, s in zip(result.reject_reason, result.status, strict=True) if s == REJECTED)
    report = dict(sc.workload.report)
    filtered = dict(report.get("filtered", {}))
    if rejected:
        filtered["cannot fit the cluster"] = sum(rejected.values())
    report.update(
        workload=sc.workload.name,
        jobs_loaded=len(jobs),
        jobs_rejected_by_cluster=dict(rejected),
        filtered=filtered,
        time_span_s=(max(arrivals) - min(arrivals)) if arrivals else 0.0,
        load_factor=result.load_factor,
        cluster=sc.cluster.name,
        cluster_note=sc.cluster_note,
        cluster_gpus=sc.layout.num_gpus,
        gpu_count_histogram={f"{k:g}": v for k, v in sorted(hist.items())},
    )
    return report


def write_run(result: RunResult, sc: Scenario, out_dir: Path, rows: list[SummaryRow]) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    write_jobs_csv(result, out_dir / "jobs.csv")
    write_cluster_csv(result, out_dir / "cluster.csv")
    write_summary_csv(rows, out_dir / "summary.csv")
    plot_run(result, out_dir)
    (out_dir / "workload_report.json").write_text(
        json.dumps(workload_report(sc, result), indent=2, sort_keys=True, default=_json_default) + "\n"
    )


def _json_default(x):
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"not JSON serialisable: {type(x)}")


def _print_summary(row: SummaryRow) -> None:
    print(
        f"{row.scheduler} on {row.workload} seed {row.seed}: {row.completed}/{row.num_jobs} completed, "
        f"{row.unfinished} unfinished, {row.rejected} rejected | load {row.load_factor:.3f} | "
        f"avg JCT {row.avg_jct_s:.1f} s, p95 {row.p95_jct_s:.1f} s, avg wait {row.avg_wait_s:.1f} s, "
        f"bounded slowdown {row.avg_bounded_slowdown:.2f} | makespan {row.makespan_s:.0f} s | "
        f"GPU util {row.gpu_utilization:.3f}, FLOPS util {row.flops_utilization:.3f}"
    )


def mode_eval(cfg: RunConfig) -> Path:
    out = default_log_dir(cfg)
    t0 = time.perf_counter()
    sc = build_scenario(cfg, cfg.seed)
    print(
        f"cluster: {sc.cluster.name} ({sc.layout.num_gpus} GPUs, {sc.layout.num_nodes} nodes) [{sc.cluster_note}]"
    )
    result = run_one(cfg, sc, cfg.algo, cfg.progress)
    refuse_all_rejected(result, sc)
    row = summarize(result)
    write_run(result, sc, out, [row])
    _print_summary(row)
    print(f"wrote {out}/ in {time.perf_counter() - t0:.1f} s")
    return out


def mode_compare(cfg: RunConfig) -> Path:
    out = default_log_dir(cfg)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[SummaryRow] = []
    for seed in cfg.seeds:
        sc = build_scenario(cfg, seed)
        results = []
        for algo in cfg.algos:
            result = run_one(cfg, sc, algo, cfg.progress)
            refuse_all_rejected(result, sc)
            results.append(result)
            row = summarize(result)
            rows.append(row)
            write_run(result, sc, out / f"{algo}_seed{seed}", [row])
            _print_summary(row)
        assert_same_jobs(results)
        plot_compare_cdf(results, out / f"jct_cdf_seed{seed}.png")
    write_summary_csv(rows, out / "summary.csv")
    agg = aggregate(rows)
    write_compare_csv(agg, out / "compare.csv")
    plot_compare(rows, out)
    print(format_table(agg))
    print(f"wrote {out}/")
    return out


def mode_train(cfg: RunConfig) -> Path:
    from agents.train_cli import train_from_config

    return train_from_config(cfg)


def run_mode(cfg: RunConfig) -> Path:
    if cfg.mode == "eval":
        return mode_eval(cfg)
    if cfg.mode == "compare":
        return mode_compare(cfg)
    if cfg.mode == "train":
        return mode_train(cfg)
    raise UserError(f"unknown mode {cfg.mode}")
