"""The slot env's observation: the feature names, and for one scenario's simulator the float32 vector of the K
window slots' job features followed by the cluster context (env/gym_env.py's class docstring says what each
feature means to an agent).

Built in plain Python, which is cheaper than many tiny numpy operations, then packed as float32 in one call
(the same rounding as np.array(values, np.float32)). Per scenario it keeps what never changes: each job's static
features, the type columns, the cluster's type shares; a job's duration on a GPU type is computed the first
time it is shown there. `x if x < 1.0 else 1.0` stands for min(1.0, x) and `0.0 if d < 0.0 else d` for
max(d, 0.0) (equal for every float, NaN and signed zeros included) at a fraction of the builtins' cost.
"""

from __future__ import annotations

import math
import struct

import numpy as np

from sim.catalog import CATALOG
from sim.cluster import FULL
from sim.placement import duration_s, spans_nodes_on
from sim.simulator import Simulator

JOB_FEATURES = (
    "gpu_demand",  # log2(1 + GPUs) / log2(1 + cluster GPUs)
    "gpu_mem",  # per-GPU memory minimum / 80 GB, clipped to 1
    "runtime",  # known reference runtime: log1p(min) / log1p(max minutes), clipped
    "duration_here",  # known runtime on the type it would get now (same scale; 0 if it does not fit now)
    "waited",  # time waited so far: log1p(min) / log1p(max minutes), clipped
    "priority",  # min(priority, 10) / 10
    "fits_now",  # 1 if it can start now
    "is_head",  # 1 for the oldest queued job
)
CATALOG_TYPES = tuple(CATALOG)
CONTEXT_FEATURES = (
    # per catalog GPU type: its share of the cluster's GPUs (0 = the cluster has none: "absent" is not "busy")
    *(f"total_{t}" for t in CATALOG_TYPES),
    *(f"free_frac_{t}" for t in CATALOG_TYPES),  # free whole GPUs of the type / its GPUs (0 if absent)
    *(
        f"largest_block_{t}" for t in CATALOG_TYPES
    ),  # largest free block on one node / largest node of the type
    # time to the next estimated completion of a job holding GPUs of the type, same log scale as runtime;
    # 1 if none runs there (absent, or all free)
    *(f"next_release_{t}" for t in CATALOG_TYPES),
    "free_frac_all",  # free GPU share / all GPUs
    "queue_len",  # log1p(queued) / log1p(100,000), clipped
    "running",  # log1p(running) / log1p(100,000), clipped
    "queued_demand",  # queued GPU demand / cluster GPUs, clipped to 1
    "next_end",  # time to the next estimated completion, same log scale as runtime
    "day_sin",  # (1 + sin(2 pi t / day)) / 2
    "day_cos",  # (1 + cos(2 pi t / day)) / 2
)
# Nothing in the observation depends on jobs that have not arrived yet (no workload size, no arrived fraction):
# a real scheduler does not know how many jobs are still to come.
_MAX_MIN = math.log1p(7 * 24 * 60)  # a week, in minutes
_LOG_COUNT = math.log1p(100_000)  # queue and running counts are scaled by this, not by the workload's size
_DAY_S = 86_400.0
_TWO_PI = 2 * math.pi
_FEW_NODES = 16  # a type of at most this many nodes: its largest free block is a max over its nodes


class SlotObservation:
    """The observation of one simulator's state for a window of `window` slots (see the module docstring)."""

    def __init__(self, window: int, sim: Simulator):
        self.sim = sim
        layout = sim.layout
        F = len(JOB_FEATURES)
        # the packed parts: the filled slots' rows, the empty slots' zeros (packed once), the context
        self._pack_slots = [struct.Struct(f"{k * F}f").pack for k in range(window + 1)]
        self._empty_slots = [bytes(4 * F * (window - k)) for k in range(window + 1)]
        self._pack_ctx = struct.Struct(f"{len(CONTEXT_FEATURES)}f").pack
        self._type_cols = [CATALOG_TYPES.index(t) for t in layout.type_names]
        max_node = [0] * len(layout.type_names)
        for n in range(layout.num_nodes):
            t = layout.node_type[n]
            max_node[t] = max(max_node[t], layout.node_num_gpus[n])
        n_cat = len(CATALOG_TYPES)
        # per layout type: (type, its free-fraction column, its largest-block column, GPUs, largest node, pools,
        # nodes); the context's per-type part is total, free fraction, largest block, next release (n_cat columns
        # each). The largest free block is the most whole free GPUs of a node of the type: the largest count
        # with a node in the type's pools (`FreeState.pool_free`), or for a type of few nodes, the same number
        # read as the max of their `FreeState.node_whole` (None: many nodes, the pools are scanned)
        self._type_info = []
        for t, col in enumerate(self._type_cols):
            pools = [q for q in range(len(layout.pool_type)) if layout.pool_type[q] == t]
            nodes = [n for n in range(layout.num_nodes) if layout.node_type[n] == t]
            info = (t, n_cat + col, 2 * n_cat + col, layout.type_num_gpus[t], max_node[t], pools, nodes)
            self._type_info.append(info if len(nodes) <= _FEW_NODES else (*info[:-1], None))
        self._release_col = [3 * n_cat + col for col in self._type_cols]
        base = [0.0] * (3 * n_cat) + [1.0] * n_cat  # a type without a running job: next release 1
        for t, col in enumerate(self._type_cols):
            base[col] = layout.type_num_gpus[t] / layout.num_gpus  # the cluster's shares never change
        self._ctx_base = base
        self._num_gpus = layout.num_gpus
        self._static_head, self._static_prio = self._static_job_features()
        # job * types + type -> its duration_here feature there (None: not computed yet)
        self._here: list[float | None] = [None] * (len(sim.jobs) * len(self._type_cols))
        self._day_t: float | None = None  # the time of day features of the last instant observed
        self._day = (0.0, 0.0)

    def _static_job_features(self) -> tuple[list[tuple[float, float, float]], list[float]]:
        """Per job: the (gpu_demand, gpu_mem, runtime) features that open its slot row, and its priority feature
        (the parts of a row that never change); sets the per-job GPU demand summed by queued_demand."""
        jt = self.sim.jobs
        demand = np.array(jt.num_gpus) * np.array(jt.milli) / FULL  # exact products: as k * m / FULL
        mem = np.array([j.gpu_mem_gb for j in jt.jobs])
        known = np.array(jt.known_runtime_s)
        prio = np.array(jt.priority, dtype=float)
        self._demand = demand.tolist()
        out = np.stack(
            [
                np.log2(1 + demand) / math.log2(1 + self._num_gpus),
                mem / 80.0,
                np.log1p(known / 60.0) / _MAX_MIN,
                np.minimum(np.maximum(prio, 0), 10) / 10.0,
            ],
            axis=1,
        )
        rows = np.clip(out, 0.0, 1.0).astype(np.float32)
        columns = rows.T.tolist()  # (column by column: a (jobs, 4) array's tolist costs about 3x more)
        return list(zip(*columns[:3], strict=True)), columns[3]

    def _duration_here(self, i: int, t: int) -> float:
        """Job i's duration_here feature on type t (its known runtime there, log-scaled), remembered."""
        sim = self.sim
        e, k, milli, _, pace = sim.jobs.shape[i]
        d = duration_s(
            sim.jobs.known_runtime_s[i], sim.layout.type_speed[t], spans_nodes_on(e, k, milli, t), pace
        )
        here = self._here[i * len(self._type_cols) + t] = min(1.0, math.log1p(d / 60.0) / _MAX_MIN)
        return here

    def observe(self, slots: list[int], slot_type: list[int], now: float) -> np.ndarray:
        """The observation at time `now` of the window showing jobs `slots`; `slot_type[k]` is the GPU type the
        k-th would start on now (-1: it does not fit now)."""
        sim = self.sim
        queue = sim.queue
        head = next(iter(queue), -1)
        static_head, static_prio = self._static_head, self._static_prio
        arrival = sim.jobs.arrival_s
        log1p = math.log1p
        here_of = self._here
        num_types = len(self._type_cols)
        vals: list[float] = []
        for i, t in zip(slots, slot_type, strict=True):
            waited = log1p((now - arrival[i]) / 60.0) / _MAX_MIN
            vals += static_head[i]  # gpu_demand, gpu_mem, runtime
            fits = 0.0
            here = 0.0
            if t >= 0:
                fits = 1.0
                here = here_of[i * num_types + t]
                if here is None:
                    here = self._duration_here(i, t)
            vals += (here, waited if waited < 1.0 else 1.0, static_prio[i], fits, 1.0 if i == head else 0.0)
        ctx = self._ctx_base.copy()
        free = sim.free
        type_whole = free.type_whole
        node_whole = free.node_whole
        busy_types = []  # types with a GPU not wholly free: only they can hold a running job
        for t, free_col, block_col, gpus, max_node, pools, nodes in self._type_info:
            whole = type_whole[t]
            ctx[free_col] = whole / gpus
            if nodes is not None:
                largest = max(map(node_whole.__getitem__, nodes))
            else:
                largest = 0
                pool_free = free.pool_free
                for q in pools:
                    by_c = pool_free[q]
                    for c in range(len(by_c) - 1, largest, -1):
                        if by_c[c]:
                            largest = c
                            break
            ctx[block_col] = largest / max_node
            if whole < gpus:
                busy_types.append(t)
        running = sim.running
        if busy_types:
            # next release per busy type: its first job in `running` (by estimated end), found in C
            running_type = sim.running_type
            release_col = self._release_col
            for t in busy_types:
                try:
                    d = running[running_type.index(t)][0] - now
                except ValueError:  # no job runs there (its busy GPUs are powered off, say): stays 1
                    continue
                r = log1p((0.0 if d < 0.0 else d) / 60.0) / _MAX_MIN
                ctx[release_col[t]] = r if r < 1.0 else 1.0
        if now != self._day_t:
            self._day_t = now
            self._day = (
                (1.0 + math.sin(_TWO_PI * now / _DAY_S)) / 2,
                (1.0 + math.cos(_TWO_PI * now / _DAY_S)) / 2,
            )
        num_gpus = self._num_gpus
        queued = log1p(len(queue)) / _LOG_COUNT
        busy = log1p(len(running)) / _LOG_COUNT
        demand = sum(map(self._demand.__getitem__, queue)) / num_gpus
        if running:
            d = running[0][0] - now
            next_end = log1p((0.0 if d < 0.0 else d) / 60.0) / _MAX_MIN
            next_end = next_end if next_end < 1.0 else 1.0
        else:
            next_end = 0.0
        ctx += (
            free.free_milli_total / (FULL * num_gpus),
            queued if queued < 1.0 else 1.0,
            busy if busy < 1.0 else 1.0,
            demand if demand < 1.0 else 1.0,
            next_end,
            *self._day,
        )
        packed = self._pack_slots[len(slots)](*vals) + self._empty_slots[len(slots)] + self._pack_ctx(*ctx)
        return np.frombuffer(bytearray(packed), dtype=np.float32)
