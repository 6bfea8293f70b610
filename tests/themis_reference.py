"""A plain, unoptimised Themis (the rule is in schedulers/themis.py), kept as the reference the policy must match
decision for decision: rho recomputed for every job from the run records by hand, one full sort of waiting and
running jobs, the filter taken by counting, victims searched over full copies of the free state with no memo, and
a wake-up at the next lease end of EVERY running job while anything waits (the policy asks only for the first)."""

from __future__ import annotations

import math

from sim.placement import place
from sim.simulator import Decision, Preempt, View, WakeUp
from tests.preemptive_reference import fewest_victims


def _progress(view: View, j: int, running: bool) -> float:
    done = view.progress_s[j]
    if running:
        work_from = view.run_start_s[j] + (view.restore_overhead_s if view.preemptions[j] else 0.0)
        done += max(0.0, view.now_s - work_from) * view.run_speed[j]
    return min(done, view.jobs.runtime_s[j])


def themis_reference(lease_s: float = 300.0, f: float = 0.2):
    def lease_end_now(view: View, v: int) -> bool:
        elapsed = view.now_s - view.run_start_s[v]
        k = 1
        while view.run_start_s[v] + k * lease_s < view.now_s - 1e-6:
            k += 1
        return elapsed > 0 and abs(view.now_s - (view.run_start_s[v] + k * lease_s)) <= 1e-6

    def policy(view: View) -> list:
        now = view.now_s
        jt = view.jobs
        queue = list(view.queue)
        running = [j for _, j in view.running]
        n = len(queue) + len(running)
        if n == 0:
            return []
        gpus = sum(view.layout.node_num_gpus)

        def rho(j: int, is_running: bool) -> float:
            alone = jt.known_runtime_s[j] * max(1.0, n * jt.gpu_demand[j] / gpus)
            if alone <= 0:
                return math.inf
            left = max(jt.known_runtime_s[j] - _progress(view, j, is_running), 0.0)
            return (now - jt.arrival_s[j] + left) / alone

        r = {j: rho(j, False) for j in queue} | {v: rho(v, True) for v in running}
        worst = sorted(r.values(), reverse=True)
        count = 1
        while count < (1 - f) * n - 1e-9:
            count += 1
        bar = worst[count - 1]
        ranked = sorted([(-r[j], 1, j) for j in queue] + [(-r[v], 0, v) for v in running])
        free = view.free.copy()
        out: list = []
        preempted: set[int] = set()
        pos = -1
        while pos + 1 < len(ranked):
            pos += 1
            _, flag, j = ranked[pos]
            if flag == 0:
                continue
            shape = jt.shape[j]
            p = place(free, *shape)
            if p is not None:
                free.take(p)
                out.append(Decision(j, p))
                continue
            if r[j] < bar:
                continue
            victims = [
                v
                for _, fl, v in ranked[pos + 1 :]
                if fl == 0 and v not in preempted and r[v] < r[j] and lease_end_now(view, v)
            ]
            victims.reverse()  # lowest priority first
            chosen = fewest_victims(view, free, victims, shape)
            if chosen is None:
                continue
            for v in chosen:
                free.give(view.placements[v])
                out.append(Preempt(v))
                preempted.add(v)
                ranked.append((-r[v], 1, v))
            ranked[pos + 1 :] = sorted(ranked[pos + 1 :])
            p = place(free, *shape)
            free.take(p)
            out.append(Decision(j, p))
        started = {d.job for d in out if isinstance(d, Decision)}
        if all(j in started for j in [*queue, *preempted]):
            return out
        for v in running:
            if v in preempted:
                continue
            k = 1
            while view.run_start_s[v] + k * lease_s <= now + 1e-6:
                k += 1
            out.append(WakeUp(view.run_start_s[v] + k * lease_s))
        out += [WakeUp(now + lease_s) for v in started]
        return out

    return policy
