"""Plain second implementations for the node-management tasks' tests: energy, rental and SLA accounting swept
over a finished run's records, and the threshold node manager written over the raw simulator state."""

from __future__ import annotations

import math

import numpy as np

from sim.cluster import FULL
from sim.placement import place
from sim.power import BOOTING, OFF, ON
from sim.records import COMPLETED


def node_states_at(result, t: float) -> list[int]:
    """Each node's power state at time t (the log's changes at times <= t applied)."""
    state = list(result.power_initial)
    for when, n, s in zip(result.power_log_t_s, result.power_log_node, result.power_log_state, strict=True):
        if when <= t:
            state[int(n)] = int(s)
    return state


def _gpu_shares_at(result, t: float) -> dict[str, float]:
    """Busy share of every GPU label (node_id/gpu) at time t, from the jobs' intervals and placements."""
    share: dict[str, float] = {}
    for i, job in enumerate(result.jobs):
        start, end = result.start_s[i], result.end_s[i]
        if not start <= t or (end == end and not t < end):
            continue
        for label in result.placement[i].split(";"):
            share[label] = share.get(label, 0.0) + job.gpu_milli / FULL
    return share


def energy_cost_eur(result, model, prices, end_s: float) -> float:
    """Facility energy cost over [first arrival, end_s] (summary.csv's window when end_s is the last
    completion), integrated segment by segment between every state change, job start or end and price-slot
    boundary (power and price are constant inside each segment)."""
    start_s = min(j.arrival_s for j in result.jobs)
    points = {start_s, end_s}
    points |= {float(t) for t in result.power_log_t_s}
    points |= {float(t) for t in result.start_s if t == t}
    points |= {float(t) for t in result.end_s if t == t}
    points |= {k * prices.step_s for k in range(int(end_s // prices.step_s) + 1)}
    points = sorted(p for p in points if start_s <= p <= end_s)
    total = 0.0
    for a, b in zip(points, points[1:], strict=False):
        if b <= a:
            continue
        mid = (a + b) / 2
        states = node_states_at(result, mid)
        shares = _gpu_shares_at(result, mid)
        it_w = 0.0
        for n, node in enumerate(result.nodes):
            if states[n] == OFF:
                it_w += model.off_w
                continue
            watts = model.node_watts(node.gpu_type, node.kind)  # the node kind's figures where it has one
            it_w += watts.base_w
            for g in range(node.num_gpus):
                s = shares.get(f"{node.node_id}/{g}", 0.0) if states[n] == ON else 0.0
                it_w += watts.gpu_idle_w + (watts.gpu_max_w - watts.gpu_idle_w) * s
        total += model.pue * it_w * prices.price_at(mid) * (b - a) / 3.6e9
    return total


def sum_jct_s(result) -> float:
    arrival = np.array([j.arrival_s for j in result.jobs])
    done = np.asarray(result.status) == COMPLETED
    return float((result.end_s[done] - arrival[done]).sum())


def rental_usd(result, node_price_usd_per_h: list[float], end_s: float) -> float:
    """Price of every node for the time it was not OFF within [0, end_s]."""
    total = 0.0
    for n, price in enumerate(node_price_usd_per_h):
        state, since = result.power_initial[n], 0.0
        for when, m, s in zip(
            result.power_log_t_s, result.power_log_node, result.power_log_state, strict=True
        ):
            if int(m) != n or when > end_s:
                continue
            if state != OFF:
                total += price * (when - since) / 3600
            state, since = int(s), float(when)
        if state != OFF:
            total += price * (end_s - since) / 3600
    return total


def sla_penalty_usd(result, preset, end_s: float) -> float:
    total = 0.0
    for i, job in enumerate(result.jobs):
        if result.status[i] == "rejected" or job.arrival_s > end_s:
            continue
        started = result.start_s[i] if result.start_s[i] == result.start_s[i] else end_s
        late = min(started, end_s) - (job.arrival_s + preset.sla_wait_s)
        if late > 0:
            total += preset.sla_usd_per_gpu_h * job.num_gpus * job.gpu_milli / FULL * late / 3600
    return total


def completed_value_usd(result, preset) -> float:
    return sum(
        preset.value_usd_per_gpu_h * j.num_gpus * j.gpu_milli / FULL * j.runtime_s / 3600
        for j, s in zip(result.jobs, result.status, strict=True)
        if s == COMPLETED
    )


def plain_threshold_action(env, idle_off_s: float, reserve: int, fit: bool = False) -> int:
    """The threshold rule (env/node_heuristics.py) computed from the simulator itself, without FleetView; `fit`:
    the jobs that could not start with every node on are left out."""
    from sim.cluster import Placement

    sim = env.sim
    layout = sim.layout
    states = sim.node_power.state
    mask = env.action_masks()
    T = len(layout.type_names)

    def whole(n: int) -> Placement:
        a, k = layout.node_first_gpu[n], layout.node_num_gpus[n]
        return Placement(tuple(range(a, a + k)), (n,), FULL, 0, layout.node_type[n], a)

    free = sim.free.copy()
    every_node_on = sim.free.copy()
    for n in range(layout.num_nodes):
        if states[n] == BOOTING:
            free.give(whole(n))
        if states[n] != ON:  # booting, off or shutting down: no job on it
            every_node_on.give(whole(n))
    queue = list(sim.queue)[:256]
    if fit:
        queue = [i for i in queue if place(every_node_on, *sim.jobs.shape[i]) is not None]
    for i in queue:
        p = place(free, *sim.jobs.shape[i])
        if p is not None:
            free.take(p)
            continue
        best = None
        for t in sim.jobs.elig[i].types:
            if not mask[2 * t]:
                continue
            key = (env._unit_cost(t) / layout.type_speed[t], t)
            if best is None or key < best:
                best = key
        if best is not None:
            return 2 * best[1]
    wanted = {t for i in queue for t in sim.jobs.elig[i].types}
    for t in range(T):
        idle = [
            n
            for n in range(layout.num_nodes)
            if layout.node_type[n] == t
            and states[n] == ON
            and sim.free.node_whole[n] == layout.node_num_gpus[n]
        ]
        if t in wanted or len(idle) <= reserve:
            continue
        if sim.now_s - min(sim.node_power.idle_since_s[n] for n in idle) >= idle_off_s:
            return 2 * t + 1
    return 2 * T


def finite(x: float) -> bool:
    return math.isfinite(x)
