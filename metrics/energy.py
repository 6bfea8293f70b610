"""Energy, cost and carbon of one run, integrated exactly from its job intervals and node power-state changes.

Definitions (docs/power.md; power model in sim/power.py):
- window: [first arrival, last completion] (the makespan window of metrics/summary.py; to the end of the run
  when nothing completed). Jobs still running at its end count up to it.
- IT power P(t) = sum over nodes: ON -> node_base_w + sum of its GPUs' idle_w + each running job's dynamic
  power (its GPUs x share x (max_w - idle_w)); BOOTING or SHUTTING_DOWN -> node_base_w + GPUs' idle_w; OFF ->
  off_w; a node of a node kind (sim/node_kinds.py) uses its kind's base and idle-GPU watts. P is piecewise
  constant between events (job starts and ends, power-state changes), so every integral is an exact sum over
  those pieces: no ticking.
- it_energy_kwh = integral of P over the window; facility_energy_kwh = it x PUE; cost_eur and carbon_kg
  integrate facility power against the price (EUR/MWh) and carbon (gCO2/kWh) curves, exactly per price slot
  (sim/prices.py's closed-form integrals).
- avg_power_kw = facility energy / window length; energy_per_gpu_hour_kwh = facility energy / GPU-hours of the
  completed jobs (a fractional share counts its fraction); node_hours_off = hours nodes spent OFF in the window.
- per job (jobs.csv): energy_kwh = facility energy attributed to the job while it runs: on each of its GPUs,
  share x (max_w + node_base_w / GPUs of that node), x PUE, over each of its execution intervals in the window
  (RunResult.runs: a preempted job has several, and a restore overhead counts as running); energy_cost_eur is
  the same power against the price curve. Idle GPUs, boots, shutdowns and OFF draw are not attributed to any job,
  so the jobs' sum is below the run's facility energy (the rest is the cluster's idle overhead).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.power import GPU_POWER, OFF, PowerModel
from sim.prices import J_PER_KWH, J_PER_MWH, PriceCurve
from sim.records import COMPLETED, RunResult

# the run-level figures written to summary.csv (and aggregated in compare.csv), in this order
ENERGY_FIELDS = (
    "it_energy_kwh",
    "facility_energy_kwh",
    "cost_eur",
    "carbon_kg",
    "avg_power_kw",
    "energy_per_gpu_hour_kwh",
    "node_hours_off",
)


@dataclass(frozen=True)
class EnergyReport:
    """One run's energy figures (module docstring) plus the power curve for plots."""

    window_start_s: float
    window_end_s: float
    it_energy_kwh: float
    facility_energy_kwh: float
    cost_eur: float
    carbon_kg: float
    avg_power_kw: float
    energy_per_gpu_hour_kwh: float
    node_hours_off: float
    job_energy_kwh: np.ndarray
    """per job (aligned with RunResult.jobs); NaN for jobs that never ran"""
    job_cost_eur: np.ndarray
    power_t_s: np.ndarray
    """IT power curve: it_power_w[k] holds on [power_t_s[k], power_t_s[k+1]) (the last until window_end_s)"""
    it_power_w: np.ndarray


def summary_fields(e: EnergyReport) -> tuple[tuple[str, float], ...]:
    """SummaryRow.energy of a report."""
    return tuple((name, float(getattr(e, name))) for name in ENERGY_FIELDS)


def _node_static_w(result: RunResult, model: PowerModel) -> tuple[np.ndarray, np.ndarray]:
    """Per node: draw when ON or in transition with idle GPUs (base + idle GPUs), and when OFF."""
    watts = [model.node_watts(n.gpu_type, n.kind) for n in result.nodes]
    idle = np.asarray(
        [w.base_w + n.num_gpus * w.gpu_idle_w for w, n in zip(watts, result.nodes, strict=True)]
    )
    return idle, np.full(len(result.nodes), model.off_w)


def window(result: RunResult) -> tuple[float, float]:
    """[first arrival, last completion] (to the end of the run if nothing completed)."""
    if not result.jobs:
        return 0.0, 0.0
    start = min(j.arrival_s for j in result.jobs)
    done = [e for e, s in zip(result.end_s.tolist(), result.status, strict=True) if s == COMPLETED]
    end = max(done) if done else float(result.end_of_run_s if result.end_of_run_s is not None else start)
    return start, max(start, end)


def execution_intervals(
    result: RunResult,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[str, ...], tuple[str, ...]]:
    """Every execution interval (job, start, end or NaN, placement, GPU type): RunResult.runs when recorded (a
    preempted job has several), else one per started job."""
    runs = result.runs
    if runs is not None:
        return runs.job, runs.start_s, runs.end_s, runs.placement, runs.gpu_type
    started = np.flatnonzero(~np.isnan(np.asarray(result.start_s, dtype=float)))
    return (
        started,
        np.asarray(result.start_s, dtype=float)[started],
        np.asarray(result.end_s, dtype=float)[started],
        tuple(result.placement[i] for i in started),
        tuple(result.gpu_type[i] for i in started),
    )


def _interval_powers(
    result: RunResult,
    model: PowerModel,
    job: np.ndarray,
    placement: tuple[str, ...],
    gpu_type: tuple[str, ...],
) -> tuple[np.ndarray, np.ndarray]:
    """Per interval: dynamic IT watts (share x (max - idle) on each GPU) and attributed IT watts (share x
    (max + node base / node GPUs) on each GPU); base and idle are each node's (its kind's, if it has one)."""
    node_gpus = {n.node_id: n.num_gpus for n in result.nodes}
    node_w = {n.node_id: model.node_watts(n.gpu_type, n.kind) for n in result.nodes}
    dyn = np.zeros(len(job))
    attributed = np.zeros(len(job))
    jobs = result.jobs
    for k, (i, labels, t) in enumerate(zip(job.tolist(), placement, gpu_type, strict=True)):
        g = GPU_POWER[t]
        share = jobs[i].gpu_milli / 1000.0
        gpus = labels.split(";")
        on = [label.rsplit("/", 1)[0] for label in gpus]
        idle = {node_w[n].gpu_idle_w for n in on}
        if len(idle) == 1:  # every GPU of the interval idles at the same watts (always, without node kinds)
            dyn[k] = len(gpus) * share * (g.max_w - idle.pop())
        else:
            dyn[k] = share * sum(g.max_w - node_w[n].gpu_idle_w for n in on)
        base = sum(node_w[n].base_w / node_gpus[n] for n in on)
        attributed[k] = len(gpus) * share * g.max_w + share * base
    return dyn, attributed


def energy_report(result: RunResult, prices: PriceCurve) -> EnergyReport:
    """The run's energy, cost and carbon (module docstring). The run must have had a power model."""
    model = result.power_model
    if model is None:
        raise ValueError("the run had no power model (run it with --power)")
    t0, t1 = window(result)
    idle_w, off_w = _node_static_w(result, model)

    def static(state: int, node: int) -> float:
        return off_w[node] if state == OFF else idle_w[node]

    # events: (time, delta W); static power of every node's initial state at t0
    times = [np.array([t0])]
    deltas = [np.array([sum(static(s, k) for k, s in enumerate(result.power_initial))])]
    state = list(result.power_initial)
    off_s = 0.0
    off_since = {k: t0 for k, s in enumerate(state) if s == OFF}
    log_t, log_n, log_s = (
        result.power_log_t_s.tolist(),
        result.power_log_node.tolist(),
        result.power_log_state.tolist(),
    )
    ev_t, ev_d = [], []
    for t, k, s in zip(log_t, log_n, log_s, strict=True):
        ev_t.append(min(max(t, t0), t1))
        ev_d.append(static(s, k) - static(state[k], k))
        if state[k] == OFF and s != OFF:
            off_s += max(0.0, min(t, t1) - max(off_since.pop(k), t0))
        elif s == OFF and state[k] != OFF:
            off_since[k] = t
        state[k] = s
    for since in off_since.values():
        off_s += max(0.0, t1 - max(since, t0))
    times.append(np.asarray(ev_t, dtype=float))
    deltas.append(np.asarray(ev_d, dtype=float))

    job, start, end, placement, gpu_type = execution_intervals(result)
    dyn_w, attributed_w = _interval_powers(result, model, job, placement, gpu_type)
    s_clip = np.clip(start, t0, t1)
    e_clip = np.clip(np.where(np.isnan(end), t1, end), t0, t1)
    times += [s_clip, e_clip]
    deltas += [dyn_w, -dyn_w]

    t_all = np.concatenate(times)
    d_all = np.concatenate(deltas)
    order = np.argsort(t_all, kind="stable")
    t_sorted = t_all[order]
    level = np.cumsum(d_all[order])
    # one level per distinct time: the level after every event of that instant
    last = np.append(t_sorted[1:] != t_sorted[:-1], True)
    pt = t_sorted[last]
    pw = level[last]
    edges = np.append(pt, t1)
    seg_s = np.diff(edges)
    it_j = float(np.dot(pw, seg_s))
    pue = model.pue
    f_price = prices.price_integral(edges)
    f_carbon = prices.carbon_integral(edges)
    cost = float(np.dot(pw, np.diff(f_price))) * pue / J_PER_MWH
    carbon_g = float(np.dot(pw, np.diff(f_carbon))) * pue / J_PER_KWH

    n = len(result.jobs)
    ran = np.zeros(n, dtype=bool)
    ran[job] = True
    run_kwh = attributed_w * (e_clip - s_clip) * pue / J_PER_KWH
    run_cost = (
        attributed_w * (prices.price_integral(e_clip) - prices.price_integral(s_clip)) * pue / J_PER_MWH
    )
    job_kwh = np.where(ran, np.bincount(job, weights=run_kwh, minlength=n), np.nan)
    job_cost = np.where(ran, np.bincount(job, weights=run_cost, minlength=n), np.nan)
    completed = np.asarray(result.status, dtype=object) == COMPLETED
    gpu_hours = float(
        sum(
            j.num_gpus * j.gpu_milli / 1000.0 * rt
            for j, rt, c in zip(result.jobs, result.runtime_actual_s.tolist(), completed, strict=True)
            if c
        )
        / 3600.0
    )
    span_s = t1 - t0
    facility_kwh = it_j * pue / J_PER_KWH
    return EnergyReport(
        window_start_s=t0,
        window_end_s=t1,
        it_energy_kwh=it_j / J_PER_KWH,
        facility_energy_kwh=facility_kwh,
        cost_eur=cost,
        carbon_kg=carbon_g / 1000.0,
        avg_power_kw=facility_kwh / (span_s / 3600.0) if span_s > 0 else float("nan"),
        energy_per_gpu_hour_kwh=facility_kwh / gpu_hours if gpu_hours > 0 else float("nan"),
        node_hours_off=off_s / 3600.0,
        job_energy_kwh=job_kwh,
        job_cost_eur=job_cost,
        power_t_s=pt,
        it_power_w=pw,
    )


def node_states_over_time(result: RunResult) -> tuple[np.ndarray, np.ndarray]:
    """(times, counts[k, state]): how many nodes are in each state (columns in sim/power.py's order: ON, OFF,
    BOOTING, SHUTTING_DOWN) from each time on (for the power-state plot)."""
    counts = np.zeros(4, dtype=np.int64)
    for s in result.power_initial:
        counts[s] += 1
    ts = [0.0]
    rows = [counts.copy()]
    state = list(result.power_initial)
    for t, k, s in zip(
        result.power_log_t_s.tolist(),
        result.power_log_node.tolist(),
        result.power_log_state.tolist(),
        strict=True,
    ):
        counts[state[k]] -= 1
        counts[s] += 1
        state[k] = s
        if t == ts[-1]:
            rows[-1] = counts.copy()
        else:
            ts.append(t)
            rows.append(counts.copy())
    return np.asarray(ts), np.asarray(rows)
