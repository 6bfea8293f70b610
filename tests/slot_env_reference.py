"""Plain second implementation of the slot env's window, observation and rewards: the straightforward code the
env had before it was made fast (one scan of the queue in window order, every feature recomputed from the raw
simulator state, numpy's own float32 conversion). Subclasses GPUClusterEnv, so only those parts differ."""

from __future__ import annotations

import math

import numpy as np

from env.gym_env import GPUClusterEnv
from env.slot_observation import _DAY_S, _LOG_COUNT, _MAX_MIN, CATALOG_TYPES
from sim.cluster import FULL
from sim.placement import duration_s, fastest_speed, fit_type, spans_nodes_on


class ReferenceSlotEnv(GPUClusterEnv):
    def _prepare_scenario(self, sc) -> None:
        super()._prepare_scenario(sc)
        layout = sc.layout
        jt = self.sim.jobs
        self._ref_inv_slowdown = [1.0 / max(r, 10.0) for r in jt.known_runtime_s]
        self._ref_shortest = []
        for r, (e, k, milli, _, pace) in zip(jt.runtime_s, jt.shape, strict=True):
            v = fastest_speed(e, k, milli, pace)
            self._ref_shortest.append(r / v if v > 0 else float("nan"))
        self._ref_share = [n / layout.num_gpus for n in layout.type_num_gpus]
        demand = np.array([k * m / FULL for k, m in zip(jt.num_gpus, jt.milli, strict=True)])
        rows = np.stack(
            [
                np.log2(1 + demand) / math.log2(1 + layout.num_gpus),
                np.array([j.gpu_mem_gb for j in jt.jobs]) / 80.0,
                np.log1p(np.array(jt.known_runtime_s) / 60.0) / _MAX_MIN,
                np.minimum(np.maximum(np.array(jt.priority, dtype=float), 0), 10) / 10.0,
            ],
            axis=1,
        )
        self._ref_rows = np.clip(rows, 0.0, 1.0).astype(np.float32).tolist()
        self._ref_demand = demand.tolist()
        self._rate = self._ref_rate

    def _shortest_s(self, i: int) -> float:
        return self._ref_shortest[i]

    def _ref_rate(self) -> float:
        sim, scale = self.sim, self.reward_scale_s
        if self.reward_name == "jct":
            return -sim.jobs_in_system / scale
        if self.reward_name in ("jct_at_start", "delay"):
            return -len(sim.queue) / scale
        if self.reward_name == "slowdown":
            inv = self._ref_inv_slowdown
            return -(sum(inv[i] for i in sim.queue) + sum(inv[i] for _, i in sim.running))
        return sim._busy_milli / (FULL * sim.layout.num_gpus * scale)

    def _build_window(self) -> bool:
        sim, K = self.sim, self.window
        order = sim.queue if self.window_order == "arrival" else [i for _, i in sim.queue_by_runtime]
        fits, blocked = [], []
        for i in order:
            t = fit_type(sim.free, *sim.jobs.shape[i])
            if t >= 0:
                fits.append((i, t))
                if len(fits) == K:
                    break
            elif len(blocked) < K:
                blocked.append(i)
        if not fits:
            return False
        fits.sort()
        self._slots = [i for i, _ in fits] + sorted(blocked[: K - len(fits)])
        self._slot_type = [t for _, t in fits] + [-1] * (len(self._slots) - len(fits))
        self._nfit, self._wait_ok = len(fits), sim.has_future_events
        self._mask = np.array([s < len(fits) for s in range(K)] + [self._wait_ok])
        return True

    def _observe(self, now: float) -> np.ndarray:
        sim, layout, jt = self.sim, self.sim.layout, self.sim.jobs
        head = next(iter(sim.queue), -1)
        vals: list[float] = []
        for i, t in zip(self._slots, self._slot_type, strict=True):
            demand, mem, runtime, prio = self._ref_rows[i]
            waited = min(1.0, math.log1p((now - jt.arrival_s[i]) / 60.0) / _MAX_MIN)
            here = 0.0
            if t >= 0:
                e, k, milli, _, pace = jt.shape[i]
                d = duration_s(
                    jt.known_runtime_s[i], layout.type_speed[t], spans_nodes_on(e, k, milli, t), pace
                )
                here = min(1.0, math.log1p(d / 60.0) / _MAX_MIN)
            vals += [demand, mem, runtime, here, waited, prio, float(t >= 0), float(i == head)]
        vals += [0.0] * ((self.window - len(self._slots)) * self.job_feature_dim)
        n_cat = len(CATALOG_TYPES)
        total, free_frac, block, release = [0.0] * n_cat, [0.0] * n_cat, [0.0] * n_cat, [1.0] * n_cat
        for t, name in enumerate(layout.type_names):
            col = CATALOG_TYPES.index(name)
            total[col] = self._ref_share[t]
            free_frac[col] = sim.free.type_whole[t] / layout.type_num_gpus[t]
            largest = max(
                (
                    c
                    for q, by_c in enumerate(sim.free.pool_free)
                    if layout.pool_type[q] == t
                    for c in range(1, len(by_c))
                    if by_c[c]
                ),
                default=0,
            )
            biggest_node = max(
                layout.node_num_gpus[n] for n in range(layout.num_nodes) if layout.node_type[n] == t
            )
            block[col] = largest / biggest_node
            ends = [end for end, j in sim.running if sim.placements[j].type_idx == t]
            if ends:
                release[col] = min(1.0, math.log1p(max(ends[0] - now, 0.0) / 60.0) / _MAX_MIN)
        running = sim.running
        vals += total + free_frac + block + release
        vals += [
            sim.free.free_milli_total / (FULL * layout.num_gpus),
            min(1.0, math.log1p(len(sim.queue)) / _LOG_COUNT),
            min(1.0, math.log1p(len(running)) / _LOG_COUNT),
            min(1.0, sum(self._ref_demand[i] for i in sim.queue) / layout.num_gpus),
            min(1.0, math.log1p(max(running[0][0] - now, 0.0) / 60.0) / _MAX_MIN) if running else 0.0,
            (1.0 + math.sin(2 * math.pi * now / _DAY_S)) / 2,
            (1.0 + math.cos(2 * math.pi * now / _DAY_S)) / 2,
        ]
        return np.array(vals, dtype=np.float32)
