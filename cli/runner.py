"""Runs one mode end to end: scenarios -> simulations (heuristic or agent) -> files in the log directory."""

from __future__ import annotations

import json
import re
import sys
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
from tqdm import tqdm

from cli.report_page import COMPARE_INTRO, write_run_page, write_top_page
from cli.run_folder import (
    OUTPUT_ERRNOS,
    RunFolder,
    check_inputs_outside,
    default_log_dir,
    run_identity,
    sha256_of,
    write_error,
)
from config import SCORER_ALGOS, RunConfig, UserError, a_or_an
from metrics.compare import aggregate, assert_same_jobs, compare_table, format_table, write_compare_csv
from metrics.energy import EnergyReport, energy_report, summary_fields
from metrics.fairness import FairnessRow, fairness, write_fairness_csv
from metrics.power_states import write_power_states_csv
from metrics.summary import EnergySummaryRow, SummaryRow, capacity_load_factor, energy_of, per_job, summarize
from metrics.writers import write_cluster_csv, write_jobs_csv, write_runs_csv, write_summary_csv
from scenario.build import Scenario, build_scenario
from schedulers import PREEMPTIVE, make_policy
from schedulers.power_managers import ManagerSpec, deferring, make_manager, parse_manager
from sim.limits import size_notice
from sim.power import ON, PowerModel
from sim.prices import PriceCurve, run_prices
from sim.records import REJECTED, RunResult

AGENTS = ("d3qn", "sac", "ppo", "cem", "es")


def open_run_folder(cfg: RunConfig, checkpoints: dict[str, str]) -> RunFolder:
    """The run's folder, checked before any work: it holds no input and no other run (run_folder.RunFolder)."""
    identity = run_identity(cfg, checkpoints)
    path = default_log_dir(cfg, checkpoints)
    check_inputs_outside(path, cfg, checkpoints)
    folder = RunFolder(path, cfg, identity)
    folder.check()
    for algo, checkpoint in checkpoints.items():
        _check_agent_fits(cfg, algo, checkpoint)  # a wrong or unreadable file is reported before any work
        _load_agent(algo, checkpoint)
    return folder


def _check_agent_fits(cfg: RunConfig, algo: str, checkpoint: str) -> None:
    """A checkpoint of another task, or whose network reads other features, is refused naming both sides; one
    trained with other runtime information (--runtime_info) than this run, or a scorer's `_best.pt` from another
    training run than the `_final.pt` beside it, is a warning (a slot agent's load_policy says the latter)."""
    from agents.checkpoint import load_checkpoint, warn_if_best_of_another_run
    from agents.fit import check_fits, runtime_info_warning

    window = cfg.env.window if cfg.task.name == "scheduling" else None  # a node task's follows the cluster
    saved = load_checkpoint(checkpoint)
    check_fits(checkpoint, saved, cfg.task.name, window)
    warning = runtime_info_warning(checkpoint, saved, cfg.sim.runtime_info, "this run")
    if warning:  # (a choice the run may mean, e.g. an ablation with exact runtimes: said, not refused)
        print(warning, file=sys.stderr)
    if algo in SCORER_ALGOS:
        warn_if_best_of_another_run(Path(checkpoint), saved)


def _progress(total: int, desc: str, enabled: bool):
    """A callback num_done -> None that drives a tqdm bar (None when disabled)."""
    if not enabled:
        return None, None
    bar = tqdm(total=total, desc=desc, unit="job", mininterval=0.5, leave=False)

    def update(done: int) -> None:
        bar.update(done - bar.n)

    return update, bar


@dataclass(frozen=True)
class PowerSetup:
    """One --power manager with the power model and price curve it runs under."""

    spec: ManagerSpec
    model: PowerModel
    prices: PriceCurve


def power_setups(cfg: RunConfig) -> list[PowerSetup | None]:
    """The run's power managers in --power order; [None] without --power (no power model at all)."""
    p = cfg.power
    if not p.managers:
        return [None]
    prices = run_prices(p.prices_path, p.price_offset_s)
    model = PowerModel(pue=p.pue)
    return [PowerSetup(parse_manager(m), model, prices) for m in p.managers]


def run_name(algo: str, power: PowerSetup | None) -> str:
    """The scheduler column of a run: the algorithm, + its power manager when there is a power model."""
    return algo if power is None else f"{algo}+{power.spec.label}"


def run_dir_name(algo: str, power: PowerSetup | None, seed: int) -> str:
    """A compare run's subfolder: <algo>[+<manager>]_seed<S> (':' in a manager spec becomes '-')."""
    return f"{run_name(algo, power).replace(':', '-')}_seed{seed}"


def run_heuristic(
    sc: Scenario,
    algo: str,
    progress: bool = False,
    power: PowerSetup | None = None,
    gate_s: float | None = None,
    round_s: float | None = None,
    score_preempt: bool = True,
    round_on_arrival: bool = False,
) -> RunResult:
    """Run heuristic `algo` on the scenario (under a power manager when `power` is given) and return its result
    (`gate_s`: sjf_gate's gate, `round_s`: las_speed's round, default their own; `score_preempt` and
    `round_on_arrival`: las_speed's; the Gavel replays take the scenario's seed and matrix)."""
    sim = sc.simulator(power.model if power is not None else None)
    update, bar = _progress(len(sc.workload.jobs) - sim.num_rejected, algo, progress)
    params = {k: v for k, v in (("gate_s", gate_s), ("round_s", round_s)) if v is not None}
    policy = make_policy(
        algo,
        seed=sc.seed,
        matrix=sc.throughput,
        score_preempt=score_preempt,
        round_on_arrival=round_on_arrival,
        **params,
    )
    manager = None
    if power is not None:
        manager = make_manager(power.spec, power.prices)
        if power.spec.name == "price_aware":
            policy = deferring(policy, power.prices, power.spec.defer_s)
    sim.run(policy, update, manager)
    if bar is not None:
        bar.close()
    return sim.result(run_name(algo, power), sc.seed, preemptive=algo in PREEMPTIVE)


def _always_on_record(result: RunResult, power: PowerSetup, name: str) -> RunResult:
    """An agent's run (the env keeps every node on) as a run under always_on: every node ON throughout."""
    finished = result.end_s[~np.isnan(result.end_s)]
    return replace(
        result,
        scheduler=name,
        power_model=power.model,
        power_initial=(ON,) * len(result.nodes),
        power_log_t_s=np.zeros(0),
        power_log_node=np.zeros(0, dtype=np.int64),
        power_log_state=np.zeros(0, dtype=np.int64),
        end_of_run_s=float(finished.max()) if len(finished) else 0.0,
    )


def run_agent(cfg: RunConfig, sc: Scenario, algo: str, checkpoint: str, progress: bool = False) -> RunResult:
    """Run a trained agent greedily through the Gymnasium env on the scenario (a scorer: its score rounds)."""
    if algo in SCORER_ALGOS:
        return _load_scorer(algo, checkpoint).run(sc, cfg)
    from env.gym_env import run_policy_in_env

    policy = _load_agent(algo, checkpoint)
    return run_policy_in_env(cfg, sc, lambda obs, mask: policy.act(obs, mask), name=algo)


def run_agents(cfg: RunConfig) -> tuple[str, ...]:
    """The RL agents this eval/compare run evaluates."""
    if cfg.mode == "eval":
        return (cfg.algo,) if cfg.algo in AGENTS else ()
    if cfg.mode == "compare":
        return tuple(a for a in cfg.algos if a in AGENTS)
    return ()


def checkpoint_option(cfg: RunConfig) -> dict[str, str]:
    """--checkpoint as agent -> path: PATH (the one agent evaluated) or ALGO=PATH[,ALGO=PATH] (compare with
    several agents). Empty when not given or when no agent is evaluated."""
    agents = run_agents(cfg)
    text = cfg.checkpoint
    if not text or not agents:
        return {}
    if "=" not in text or Path(text).exists():
        if len(agents) > 1:
            raise UserError(
                f"--checkpoint {text}: --algos has several agents ({', '.join(agents)}); name each one's file: "
                f"--checkpoint {','.join(f'{a}=PATH' for a in agents)}"
            )
        return {agents[0]: text}
    chosen: dict[str, str] = {}
    for part in text.split(","):
        algo, _, path = (x.strip() for x in part.partition("="))
        algo = algo.lower()
        if not path or algo not in agents or algo in chosen:
            problem = (
                f"{algo!r} is given twice"
                if algo in chosen
                else f"{algo!r} is not an agent of this run ({', '.join(agents)})"
                if path
                else f"{part.strip()!r} names no file"
            )
            raise UserError(f"--checkpoint {text}: {problem}; expected PATH or ALGO=PATH[,ALGO=PATH]")
        chosen[algo] = path
    return chosen


def checkpoint_choice(cfg: RunConfig) -> dict[str, str]:
    """agent -> the checkpoint file this eval/compare run evaluates (find_checkpoint for each agent)."""
    return {algo: find_checkpoint(cfg, algo) for algo in run_agents(cfg)}


def _load_scorer(algo: str, checkpoint: str):
    """The trained scorer (agents.scorers.TrainedScorer) in `checkpoint`, which must hold an `algo` scorer."""
    from agents.scorers import load_scorer

    trained = load_scorer(checkpoint)
    if trained.algo != algo:
        raise UserError(f"checkpoint {checkpoint} holds {a_or_an(trained.algo)} agent, not {algo}")
    return trained


def _load_agent(algo: str, checkpoint: str):
    """The greedy policy (a scorer's: its scorer) stored in `checkpoint`, which must hold an `algo` agent."""
    import torch

    if algo in SCORER_ALGOS:
        return _load_scorer(algo, checkpoint).scorer

    from agents.policy import load_policy

    torch.set_num_threads(1)  # small nets: more threads are slower on a shared 2-core machine
    policy = load_policy(checkpoint, device="cpu")
    if policy.algo != algo:
        raise UserError(f"checkpoint {checkpoint} holds {a_or_an(policy.algo)} agent, not {algo}")
    return policy


def find_checkpoint(cfg: RunConfig, algo: str) -> str:
    """--checkpoint (PATH or ALGO=PATH), else models/<algo>_seed<seed>_<model>.pt (<model> = final or best,
    --model). Never another seed's model: that is an error listing the files there are."""
    explicit = checkpoint_option(cfg).get(algo)
    if explicit:
        if not Path(explicit).exists():  # a folder or a bad file: loading it says what is wrong
            raise UserError(f"--checkpoint {explicit}: no such file")
        return explicit
    models = Path(cfg.models_dir)
    own = models / f"{algo}_seed{cfg.seed}_{cfg.model}.pt"
    if own.is_file():
        return str(own)
    train = f"python main.py --mode train --algo {algo} --seed {cfg.seed}"
    found = sorted(p.name for p in models.glob(f"{algo}_seed*.pt")) if models.is_dir() else []
    if not found:
        raise UserError(f"no trained {algo} model in {models}/ (looked for {own.name}); train one: {train}")
    same_kind = [n for n in found if n.endswith(f"_{cfg.model}.pt")] or found
    others = len(found) - len(same_kind)
    listed = ", ".join(same_kind[:6]) + (f" and {len(same_kind) - 6} more" if len(same_kind) > 6 else "")
    listed += f" (and {others} other {algo} checkpoints)" if others else ""
    seed = re.fullmatch(rf"{algo}_seed(\d+)_{cfg.model}\.pt", same_kind[0])
    raise UserError(
        f"no {own.name} in {models}/ (the {cfg.model} model of training seed {cfg.seed}, chosen by --seed); "
        f"there is {listed}. Evaluate it with --checkpoint {models / same_kind[0]}"
        + (f" (or --seed {seed.group(1)})" if seed else "")
        + f", or train seed {cfg.seed}: {train}"
    )


def run_one(
    cfg: RunConfig,
    sc: Scenario,
    algo: str,
    progress: bool,
    checkpoint: str | None = None,
    power: PowerSetup | None = None,
) -> RunResult:
    if algo in AGENTS:
        result = run_agent(cfg, sc, algo, checkpoint or find_checkpoint(cfg, algo), progress)
        return result if power is None else _always_on_record(result, power, run_name(algo, power))
    p = cfg.policy
    return run_heuristic(sc, algo, progress, power, p.gate_s, p.round_s, p.score_preempt, p.round_on_arrival)


def summarize_run(result: RunResult, power: PowerSetup | None) -> tuple[SummaryRow, EnergyReport | None]:
    """The run's summary row, with its energy figures when it had a power model."""
    row = summarize(result)
    if power is None:
        return row, None
    energy = energy_report(result, power.prices)
    return EnergySummaryRow.of(row, summary_fields(energy)), energy


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
    if result.jobs is jobs and jobs:  # (a simulator's run: per_job has the arrays, computed once per result)
        m = per_job(result)
        arrivals, demands = m.submit_s.tolist(), m.gpu_demand.tolist()
    else:
        arrivals, demands = [j.arrival_s for j in jobs], [j.gpu_demand for j in jobs]
    hist = Counter(demands)
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
        load_factor_capacity=capacity_load_factor(result),
        cluster=sc.cluster.name,
        cluster_note=sc.cluster_note,
        cluster_gpus=sc.layout.num_gpus,
        # numeric keys (int where whole) so json's sort_keys orders them 0.5, 1, 2, 16 rather than "16" < "2"
        gpu_count_histogram={
            (int(k) if float(k).is_integer() else float(k)): v for k, v in sorted(hist.items())
        },
    )
    return report


def write_run(
    result: RunResult,
    sc: Scenario,
    out_dir: Path,
    rows: list[SummaryRow],
    power: PowerSetup | None = None,
    energy: EnergyReport | None = None,
    plots: bool = True,
    plot_formats: tuple[str, ...] = ("png",),
    plot_span: str = "window",
    timeline_window_s: tuple[float, float] | None = None,
) -> list[Path]:
    """The run's files in `out_dir`: its CSVs, workload_report.json and (`plots`) its figures, drawn from the
    CSVs, in each of `plot_formats`; returns the figures' paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_jobs_csv(result, out_dir / "jobs.csv", energy)
    write_runs_csv(result, out_dir / "runs.csv")
    write_cluster_csv(result, out_dir / "cluster.csv")
    write_summary_csv(rows, out_dir / "summary.csv")
    write_fairness_csv([fairness(result)], out_dir / "fairness.csv")
    if result.power_model is not None:  # only runs with node power states: every other folder keeps its files
        write_power_states_csv(result, out_dir / "power_states.csv")
    figures: list[Path] = []
    if plots:
        # lazy: matplotlib takes 0.4 s to import, more than a small run's simulation and CSVs (--plots none)
        from metrics.power_plots import plot_power
        from metrics.run_figures import draw_run_figures

        title = f"{result.scheduler} on {result.workload} (seed {result.seed})"
        figures = [
            p
            for f in draw_run_figures(out_dir, title, plot_formats, plot_span, timeline_window_s)
            for p in f.paths
        ]
        if power is not None and energy is not None:
            figures += plot_power(result, energy, power.prices, out_dir, plot_formats)
    (out_dir / "workload_report.json").write_text(
        json.dumps(workload_report(sc, result), indent=2, sort_keys=True, default=_json_default) + "\n"
    )
    return figures


def _run_title(result: RunResult) -> str:
    return f"{result.scheduler} on {result.workload}, seed {result.seed}"


def _plot_options(cfg: RunConfig) -> tuple[bool, tuple[str, ...], str, tuple[float, float] | None]:
    """write_run's plots, plot_formats, plot_span and timeline_window_s from the options."""
    return cfg.plots == "png", cfg.plot_formats, cfg.plot_span, cfg.timeline_window_s


def _json_default(x):
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"not JSON serialisable: {type(x)}")


def _fraction(x: float) -> str:
    """3 decimals, or 3 significant digits below 0.1 so a tiny load or utilization does not print as 0.000."""
    return f"{x:.3f}" if not abs(x) < 0.1 else f"{x:.3g}"


def _print_summary(row: SummaryRow) -> None:
    energy = dict(energy_of(row))
    tail = (
        f" | energy {energy['facility_energy_kwh']:.1f} kWh facility ({energy['it_energy_kwh']:.1f} IT), "
        f"cost {energy['cost_eur']:.2f} EUR, {energy['carbon_kg']:.1f} kg CO2, {energy['node_hours_off']:.1f} "
        "node-hours off"
        if energy
        else ""
    )
    print(
        f"{row.scheduler} on {row.workload} seed {row.seed}: "
        f"GPU util {_fraction(row.gpu_utilization_arrival_window)} within the arrival window "
        f"({_fraction(row.gpu_utilization)} over the makespan), FLOPS util {_fraction(row.flops_utilization)} | "
        f"{row.completed}/{row.num_jobs} completed, {row.unfinished} unfinished, {row.rejected} rejected | "
        f"load by GPU count at A100 speed {_fraction(row.load_factor)}, by capacity (A100-equivalent GPUs) "
        f"{_fraction(row.load_factor_capacity)} | "
        f"avg JCT {row.avg_jct_s:.1f} s, p95 {row.p95_jct_s:.1f} s, avg wait {row.avg_wait_s:.1f} s, "
        f"bounded slowdown {row.avg_bounded_slowdown:.2f}, reference slowdown {row.avg_reference_slowdown:.2f} | "
        f"makespan {row.makespan_s:.0f} s" + tail
    )


def _checkpoints_used(cfg: RunConfig) -> dict[str, str]:
    """Resolve and print which checkpoint each agent of the run evaluates (before any work)."""
    checkpoints = checkpoint_choice(cfg)
    for algo, path in checkpoints.items():
        if not Path(path).is_file():
            continue  # a folder: loading it reports that, before any work
        size = Path(path).stat().st_size
        print(f"{algo}: evaluating checkpoint {path} ({size:,} bytes, sha256 {sha256_of(Path(path))[:12]})")
    return checkpoints


def note_size(cfg: RunConfig, sc: Scenario) -> None:
    """A workload file's size is known once it is loaded: above sim/limits.py's notice size, say the memory each
    run needs (a synthetic workload's is noted before any work, cli/checks.py)."""
    notice = size_notice(len(sc.workload.jobs), sc.layout.num_gpus)
    if notice and cfg.workload.workload_type != "synthetic":
        print(notice, file=sys.stderr)


def _resolved(sc: Scenario) -> dict:
    """What the options resolved to for one scenario, recorded in run_config.json."""
    return {
        "seed": sc.seed,
        "workload": sc.workload.name,
        "num_jobs": len(sc.workload.jobs),
        "cluster": sc.cluster.name,
        "cluster_gpus": sc.layout.num_gpus,
        "cluster_nodes": sc.layout.num_nodes,
        "cluster_note": sc.cluster_note,
    }


def mode_eval(cfg: RunConfig) -> Path:
    if cfg.task.name != "scheduling":
        return mode_eval_node_task(cfg)
    checkpoints = _checkpoints_used(cfg)
    folder = open_run_folder(cfg, checkpoints)
    out = folder.path
    t0 = time.perf_counter()
    sc = build_scenario(cfg, cfg.seed)
    note_size(cfg, sc)
    print(
        f"cluster: {sc.cluster.name} ({sc.layout.num_gpus} GPUs, {sc.layout.num_nodes} nodes) [{sc.cluster_note}]"
    )
    folder.resolved.append(_resolved(sc))
    (power,) = power_setups(cfg)
    folder.claim()
    try:  # whatever stops the run (a user error, Ctrl-C, a crash), the folder goes back to how it was
        result = run_one(cfg, sc, cfg.algo, cfg.progress, checkpoints.get(cfg.algo), power)
        refuse_all_rejected(result, sc)
        row, energy = summarize_run(result, power)
        figures = write_run(result, sc, out, [row], power, energy, *_plot_options(cfg))
        write_run_page(out, cfg, folder.identity, [row], figures, _run_title(result))
    except BaseException as err:
        folder.failed(err)  # the folder goes back to how it was; a full disk becomes one error line
        raise
    folder.finish()
    _print_summary(row)
    print(f"wrote {out}/ in {time.perf_counter() - t0:.1f} s")
    return out


def mode_eval_node_task(cfg: RunConfig) -> Path:
    """--task power|autoscaling: an agent or a reference node manager through the task's env on --seed's
    scenario; the run's files as for a scheduling eval plus task.json (return, its parts, grade)."""
    from env.node_tasks import GRADERS, run_node_policy, task_scenario_config

    checkpoints = _checkpoints_used(cfg)
    folder = open_run_folder(cfg, checkpoints)
    out = folder.path
    t0 = time.perf_counter()
    sc = build_scenario(task_scenario_config(cfg), cfg.seed)
    print(
        f"task {cfg.task.name}, jobs started by {cfg.task.scheduler}; cluster: {sc.cluster.name} "
        f"({sc.layout.num_gpus} GPUs, {sc.layout.num_nodes} nodes) [{sc.cluster_note}]"
    )
    folder.resolved.append(_resolved(sc))
    folder.claim()
    try:
        if cfg.algo in AGENTS:
            policy = _load_agent(cfg.algo, checkpoints.get(cfg.algo) or find_checkpoint(cfg, cfg.algo))
            env = run_node_policy(cfg, sc, policy.act, None)
        else:
            env = run_node_policy(cfg, sc, None, cfg.algo)
        result = env.sim.result(cfg.algo, sc.seed)
        refuse_all_rejected(result, sc)
        row, energy = summarize(result), None
        if cfg.task.name == "power":  # energy columns and plots as a --power run writes them
            energy = energy_report(result, env.prices)
            row = EnergySummaryRow.of(row, summary_fields(energy))
        figures = write_run(result, sc, out, [row], None, energy, *_plot_options(cfg))
        if energy is not None and cfg.plots == "png":
            from metrics.power_plots import plot_power  # lazy: matplotlib (see write_run)

            figures += plot_power(result, energy, env.prices, out, cfg.plot_formats)
        g = GRADERS[cfg.task.name](env)
        record = {"task": cfg.task.name, "episode_return": env.episode_return, "grade": g.__dict__}
        if cfg.task.name == "power":
            record |= {"energy_cost_eur": env.energy_cost_eur, "jct_cost_eur": env.jct_cost_eur}
        (out / "task.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        write_run_page(out, cfg, folder.identity, [row], figures, _run_title(result))
    except BaseException as err:
        folder.failed(err)  # the folder goes back to how it was; a full disk becomes one error line
        raise
    folder.finish()
    _print_summary(row)
    print(
        f"task {cfg.task.name}: return {env.episode_return:,.2f} ({g.objective}), grade {g.score:.3f} "
        f"(0 = {g.trivial_policy} {g.trivial_value:,.2f}, 1 = {g.reference_policy} {g.reference_value:,.2f})"
    )
    print(f"wrote {out}/ in {time.perf_counter() - t0:.1f} s")
    return out


def mode_compare(cfg: RunConfig) -> Path:
    checkpoints = _checkpoints_used(cfg)
    folder = open_run_folder(cfg, checkpoints)
    out = folder.path
    rows: list[SummaryRow] = []
    fair: list[FairnessRow] = []
    sc = build_scenario(cfg, cfg.seeds[0])  # a bad input is reported before the folder is touched
    note_size(cfg, sc)
    folder.resolved.append(_resolved(sc))
    powers = power_setups(cfg)
    plots = cfg.plots == "png"
    top_figures: list[Path] = []
    folder.claim()
    try:  # whatever stops the run (a user error on a later seed, Ctrl-C, a crash), the folder goes back
        for i, seed in enumerate(cfg.seeds):
            if i > 0:
                sc = build_scenario(cfg, seed)
                folder.resolved.append(_resolved(sc))
            results = []
            for algo in cfg.algos:
                for power in powers:
                    result = run_one(cfg, sc, algo, cfg.progress, checkpoints.get(algo), power)
                    refuse_all_rejected(result, sc)
                    results.append(result)
                    row, energy = summarize_run(result, power)
                    rows.append(row)
                    fair.append(fairness(result))
                    run_dir = out / run_dir_name(algo, power, seed)
                    figures = write_run(result, sc, run_dir, [row], power, energy, *_plot_options(cfg))
                    write_run_page(
                        run_dir, cfg, folder.identity, [row], figures, _run_title(result), top_level=False
                    )
                    _print_summary(row)
            assert_same_jobs(results)
            if plots:
                from metrics.plots import plot_compare_cdf  # lazy: matplotlib (see write_run)

                top_figures += plot_compare_cdf(results, out / f"jct_cdf_seed{seed}", cfg.plot_formats)
        write_summary_csv(rows, out / "summary.csv")
        write_fairness_csv(fair, out / "fairness.csv")
        agg = aggregate(rows)
        write_compare_csv(agg, out / "compare.csv")
        if plots:
            from metrics.plots import plot_compare, plot_compare_paired
            from metrics.power_plots import plot_jct_vs_cost

            top_figures = (
                plot_compare(rows, out, cfg.plot_formats)
                + plot_compare_paired(rows, out, cfg.plot_formats)
                + top_figures
            )
            if powers != [None]:
                top_figures += plot_jct_vs_cost(rows, out / "jct_vs_cost", cfg.plot_formats)
        title = f"{', '.join(cfg.algos)} on {agg[0].workload}, seeds {', '.join(map(str, cfg.seeds))}"
        write_top_page(
            out,
            cfg,
            folder.identity,
            ("Mean and std over seeds (compare.csv)", compare_table(agg)),
            top_figures,
            title,
            COMPARE_INTRO,
        )
    except BaseException as err:
        folder.failed(err)  # the folder goes back to how it was; a full disk becomes one error line
        raise
    folder.finish()
    print(format_table(agg))
    print(f"wrote {out}/")
    return out


def mode_train(cfg: RunConfig) -> Path:
    from agents.trainer import TrainingInterrupted
    from cli.train import check_training, train_from_config

    folder = open_run_folder(cfg, {})
    check_training(cfg)  # a refused training never touches its folder
    folder.claim()
    try:
        run_dir = train_from_config(replace(cfg, log_dir=str(folder.path)))
    except TrainingInterrupted:
        folder.leave_unfinished()  # resumable: its checkpoint continues in this folder
        raise
    except (UserError, KeyboardInterrupt):  # refused, or stopped before the first step: nothing to keep
        folder.abandon()
        raise
    except BaseException as err:
        folder.leave_unfinished()  # its periodic checkpoints may be resumed into this folder
        if isinstance(err, OSError) and err.errno in OUTPUT_ERRNOS:  # a full disk: one error line
            raise write_error(err, folder.path, _training_left(cfg)) from None
        raise
    folder.finish()
    return run_dir


def _training_left(cfg: RunConfig) -> str:
    """What a training stopped by a write error leaves: the checkpoint to resume from, if any."""
    from cli.train import earlier_checkpoints

    found = earlier_checkpoints(cfg)
    if not found:
        return "the training stopped before its first checkpoint (earlier models are untouched)"
    return f"the training stopped; resume it later with --resume {found[-1]}"


def run_mode(cfg: RunConfig) -> Path:
    if cfg.mode == "eval":
        return mode_eval(cfg)
    if cfg.mode == "compare":
        return mode_compare(cfg)
    if cfg.mode == "train":
        return mode_train(cfg)
    if cfg.mode == "report":
        from cli.report import mode_report

        return mode_report(cfg)
    raise UserError(f"unknown mode {cfg.mode}")
