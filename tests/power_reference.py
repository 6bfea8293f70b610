"""A plain second implementation of the idle_off power manager (schedulers/power_managers.py), for cross-checks.

It reads per-GPU free shares instead of the free state's pool counts, scans every queued job instead of job
shapes, and takes no shortcut, so that the optimised manager can be checked decision for decision.
"""

from __future__ import annotations

from schedulers.power_managers import WAKE_SCAN_JOBS
from sim.cluster import FULL
from sim.placement import place
from sim.power import BOOTING, OFF, ON, PowerOff, PowerOn
from sim.simulator import View, WakeUp


def idle_off_reference(view: View, idle_s: float, reserve: int) -> list:
    layout = view.layout
    state = view.node_power.state
    out: list = []
    # boots: walk the queue in arrival order on the capacity free now plus the booting nodes'
    if OFF in state and len(view.queue):
        scratch = view.free.copy()
        for n in range(layout.num_nodes):
            if state[n] == BOOTING:
                scratch.give(layout.whole_node(n))
        off = [n for n in range(layout.num_nodes) if state[n] == OFF]
        for count, i in enumerate(view.queue):
            if count >= WAKE_SCAN_JOBS or not off:
                break
            elig, k, milli, mem, pace = view.jobs.shape[i]
            p = place(scratch, elig, k, milli, mem, pace)
            if p is None:
                candidates = [n for n in off if n in elig.nodes]
                candidates.sort(
                    key=lambda n: (
                        -layout.node_speed[n],
                        layout.node_num_gpus[n] < k,
                        layout.node_num_gpus[n],
                        n,
                    )
                )
                trial = scratch.copy()
                chosen = []
                for n in candidates:
                    trial.give(layout.whole_node(n))
                    chosen.append(n)
                    p = place(trial, elig, k, milli, mem, pace)
                    if p is not None:
                        break
                if p is None:
                    continue
                scratch = trial
                for n in chosen:
                    off.remove(n)
                    out.append(PowerOn(n))
            scratch.take(p)
    # reserve: per type, idle (on, every GPU free) + booting nodes, counting this instant's boots
    free_milli = view.free.free_milli.tolist()

    def empty(n: int) -> bool:
        a = layout.node_first_gpu[n]
        return all(m == FULL for m in free_milli[a : a + layout.node_num_gpus[n]])

    booted = {d.node for d in out}
    if reserve > 0:
        for t in range(len(layout.type_names)):
            nodes = [n for n in range(layout.num_nodes) if layout.node_type[n] == t]
            ready = sum(
                1 for n in nodes if (state[n] == ON and empty(n)) or state[n] == BOOTING or n in booted
            )
            for n in nodes:
                if ready >= reserve:
                    break
                if state[n] == OFF and n not in booted:
                    out.append(PowerOn(n))
                    ready += 1
    # shutdowns
    kept: dict[int, int] = {}
    deadlines = []
    for n in range(layout.num_nodes):
        if state[n] != ON or not empty(n):
            continue
        t = layout.node_type[n]
        if kept.get(t, 0) < reserve:
            kept[t] = kept.get(t, 0) + 1
            continue
        deadline = view.node_power.idle_since_s[n] + idle_s
        if deadline > view.now_s:
            deadlines.append(deadline)
            continue
        if not any(n in view.jobs.elig[i].nodes for i in view.queue):
            out.append(PowerOff(n))
    if deadlines:
        out.append(WakeUp(min(deadlines)))
    return out
