"""Conservative backfilling (Mu'alem & Feitelson, IEEE TPDS 12(6), 2001): every queued job holds a reservation.

At each decision instant the schedule is rebuilt from scratch (the paper's "compression": a job that ends
before its estimate moves every later reservation as early as it can go). The profile is the number of free
whole GPUs per node over future time, from the capacity free now and the estimated end of every running job
(max(estimated end, now): a job that overran its estimate is assumed to end at the next instant, a zero-length
row after the actual capacity now, so a reservation there waits for that job's completion event). Queued jobs,
in arrival order, each take a reservation in the profile:
- whole-GPU job of k GPUs: for each of its placement options (env/placement.py: one node of a speed group, or
  a spread over one type) the earliest profile row from which its estimated duration on that option fits
  throughout (one node with >= k free GPUs all along; for a spread, k GPUs summed over the type's nodes, each
  counted at its minimum over the interval). The reservation is the option with the EARLIEST ESTIMATED
  COMPLETION (ties -> the placement rule's option order), so a job may wait for a faster type rather than start
  now on a slower one. Within a one-node option the node with the fewest free GPUs at the start (best fit, ties
  -> lower index); within a spread the nodes with the most GPUs free all along first (ties -> lower index).
- fractional job (gpu_milli < 1000), a documented limit: in the profile it reserves a whole GPU (one node of a
  speed group, as above). It may instead start now on a GPU already shared by running fractional jobs if it
  fits there now and is estimated to end by the time that GPU's last resident ends (so it delays no
  reservation), when that completes no later than its whole-GPU reservation. A now-start of a whole-GPU
  reservation takes the best-fit GPU (smallest sufficient free share, ties -> lower index) of the reserved
  node: node free-GPU counts stay exact, since the reserved GPU is then left whole instead.
A job starts now exactly when its reservation starts now; no reservation ever delays an earlier one (each is
made on the capacity left by all earlier ones). Per-GPU identities are not reserved: GPUs of one node are
interchangeable for whole-GPU jobs, so node counts decide feasibility exactly.

Fast path (same decisions; tests/cbf_reference.py has none): while every queued job so far starts now on its
fastest option (the reservations so far all start now, so the profile only grows with time), the next job that
can start now on its fastest option gets that reservation without the profile being built.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from env.cluster import FULL, ClusterLayout, FreeState, Placement
from env.placement import _options, effective_speed
from env.simulator import Decision, View
from schedulers.plan import Plan


class Reservation(NamedTuple):
    """Where and when one queued job is planned to run (estimated)."""

    job: int
    start_s: float
    end_s: float
    type_idx: int
    nodes: tuple[int, ...]
    starts_now: bool


def cbf(view: View) -> list[Decision]:
    return cbf_schedule(view)[0]


def cbf_schedule(view: View, want_reservations: bool = False) -> tuple[list[Decision], list[Reservation]]:
    """This instant's starts, and (if asked) every queued job's reservation in arrival order."""
    jt = view.jobs
    now = view.now_s
    plan = Plan(view.free)
    shape = jt.shape
    known = jt.known_runtime_s
    type_speed = view.layout.type_speed
    reservations: list[Reservation] = []
    started: list[tuple[float, Placement]] = []
    queue = iter(view.queue)
    rest = None
    for i in queue:
        elig, k, milli, _, pace = shape[i]
        if milli < FULL:
            rest = i
            break
        p = plan.place(shape[i])
        if p is None:
            rest = i
            break
        rate = effective_speed(type_speed[p.type_idx], len(p.nodes) > 1, pace)
        if rate != _options(elig, k, pace)[0].rate:
            rest = i
            break
        end = now + known[i] / rate
        plan.add(i, p)
        started.append((end, p))
        if want_reservations:
            reservations.append(Reservation(i, now, end, p.type_idx, p.nodes, True))
    if rest is None:
        return plan.decisions, reservations
    prof = _Profile(view, plan.snapshot(), started)
    for i in _chain(rest, queue):
        r, p = prof.reserve(i, plan)
        if p is not None:
            plan.add(i, p)
            prof.started_now(i, p)
        if want_reservations:
            reservations.append(r)
    return plan.decisions, reservations


def _chain(first: int, rest):
    yield first
    yield from rest


_POOL_NODES: dict[int, tuple[ClusterLayout, dict]] = {}


def _nodes_of(layout: ClusterLayout, pools: tuple[int, ...]) -> np.ndarray:
    """The nodes of `pools`, ascending (cached per layout)."""
    hit = _POOL_NODES.get(id(layout))
    if hit is None or hit[0] is not layout:
        hit = _POOL_NODES[id(layout)] = (layout, {})
    cache = hit[1]
    nodes = cache.get(pools)
    if nodes is None:
        want = set(pools)
        nodes = cache[pools] = np.array(
            [n for n in range(layout.num_nodes) if layout.node_pool[n] in want], dtype=np.int64
        )
    return nodes


class _Profile:
    """Free whole GPUs per node (columns) over time rows: row r holds during [times[r], times[r+1])."""

    def __init__(self, view: View, free: FreeState, started: list[tuple[float, Placement]]):
        self.view = view
        self.layout = layout = view.layout
        self.free = free  # capacity now after the fast-path starts (the plan copies before changing it)
        now = view.now_s
        placements = view.placements
        gpu_node = layout.gpu_node
        t_list: list[float] = []
        n_list: list[int] = []
        c_list: list[int] = []
        # when each shared GPU's last fractional resident ends (it then counts as a whole free GPU)
        self.shared_until: dict[int, float] = {}
        shared_until = self.shared_until
        for end, j in view.running:
            p = placements[j]
            if p.milli == FULL:
                if len(p.nodes) == 1:
                    t_list.append(end)
                    n_list.append(p.nodes[0])
                    c_list.append(len(p.gpus))
                else:
                    for n, c in zip(p.nodes, p.node_counts, strict=True):
                        t_list.append(end)
                        n_list.append(n)
                        c_list.append(c)
            else:
                g = p.gpus[0]
                if shared_until.get(g, -1.0) < end:
                    shared_until[g] = end
        for end, p in started:  # whole-GPU fast-path starts
            if len(p.nodes) == 1:
                t_list.append(end)
                n_list.append(p.nodes[0])
                c_list.append(len(p.gpus))
            else:
                for n, c in zip(p.nodes, p.node_counts, strict=True):
                    t_list.append(end)
                    n_list.append(n)
                    c_list.append(c)
        for g, end in shared_until.items():
            t_list.append(end)
            n_list.append(gpu_node[g])
            c_list.append(1)
        # row 0: the capacity now; a zero-length row at `now` for overrunning jobs' releases; then each end
        t_arr = np.maximum(np.asarray(t_list, dtype=float), now)
        ends = np.unique(t_arr)
        times = np.concatenate(([now], ends))
        rows = np.zeros((len(times), layout.num_nodes), dtype=np.int64)
        rows[0] = free.node_whole
        if t_list:
            r = np.searchsorted(ends, t_arr) + 1
            np.add.at(rows, (r, np.asarray(n_list)), np.asarray(c_list, dtype=np.int64))
        self.rows = np.cumsum(rows, axis=0)
        self.times = times

    # -- the profile -------------------------------------------------------------------------------------

    def _window_ends(self, dur_s: float) -> np.ndarray:
        """For each start row a, the first row not needed by a run of `dur_s` from times[a] (at least a + 1)."""
        times = self.times
        b = np.searchsorted(times, times + dur_s, side="left")
        return np.maximum(b, np.arange(1, len(times) + 1))

    def _split_at(self, t: float) -> int:
        """Index of the row starting at `t`, splitting the row that holds t if needed (t > now)."""
        times = self.times
        b = int(np.searchsorted(times, t, side="left"))
        if b < len(times) and times[b] == t:
            return b
        self.times = np.insert(times, b, t)
        self.rows = np.insert(self.rows, b, self.rows[b - 1], axis=0)
        return b

    def _one_node(self, nodes: np.ndarray, k: int, dur_s: float, before_s: float) -> tuple[int, int] | None:
        """(start row, node) of the earliest run on one of `nodes` with k GPUs free all along, starting before
        `before_s`; best fit at the start row (ties -> lower node index). None if none."""
        times = self.times
        last = int(np.searchsorted(times + dur_s, before_s, side="left"))  # starts with times[a] + d < before
        if last == 0:
            return None
        sub = self.rows[:, nodes]
        bad = np.zeros((len(times) + 1, len(nodes)), dtype=np.int64)
        np.cumsum(sub < k, axis=0, out=bad[1:])
        b = self._window_ends(dur_s)[:last]
        ok = bad[b] == bad[:last]
        hit = ok.any(axis=1)
        if not hit.any():
            return None
        a = int(hit.argmax())
        free_at = np.where(ok[a], sub[a], np.iinfo(np.int64).max)
        return a, int(nodes[int(free_at.argmin())])

    def _spread(
        self, nodes: np.ndarray, k: int, dur_s: float, before_s: float
    ) -> tuple[int, np.ndarray] | None:
        """(start row, GPUs free all along per node of `nodes`) of the earliest run with k GPUs summed over
        `nodes`, starting before `before_s`. None if none."""
        times = self.times
        b_all = self._window_ends(dur_s)
        for a in range(len(times)):
            if times[a] + dur_s >= before_s:
                return None
            avail = self.rows[a : b_all[a]][:, nodes].min(axis=0)
            if int(avail.sum()) >= k:
                return a, avail
        return None

    def _take(self, a: int, end_s: float, cols, counts) -> None:
        """Remove counts[i] GPUs of node cols[i] from rows [a, row of end_s)."""
        if end_s > self.times[a]:
            b = self._split_at(end_s)
        else:
            b = a + 1
        self.rows[a:b, cols] -= counts

    # -- reservations ------------------------------------------------------------------------------------

    def reserve(self, i: int, plan: Plan) -> tuple[Reservation, Placement | None]:
        """Job i's reservation (taken from the profile) and its placement if it starts now."""
        view = self.view
        jt = view.jobs
        elig, k, milli, mem_mb, pace = jt.shape[i]
        known = jt.known_runtime_s[i]
        now = view.now_s
        layout = self.layout
        best = None  # (completion, start row, option kind, data, type, rate)
        for o in _options(elig, 1 if milli < FULL else k, pace):
            d = known / o.rate
            bound = best[0] if best is not None else float("inf")
            if o.multi_type < 0:
                hit = self._one_node(_nodes_of(layout, o.pools), k, d, bound)
                if hit is not None:
                    a, n = hit
                    best = (self.times[a] + d, a, -1, n, layout.node_type[n], d)
            else:
                hit = self._spread(_nodes_of(layout, o.pools), k, d, bound)
                if hit is not None:
                    a, avail = hit
                    best = (self.times[a] + d, a, o.multi_type, (o.pools, avail), o.multi_type, d)
        if milli < FULL:
            shared = self._shared_now(i, plan.free, best[0] if best is not None else float("inf"))
            if shared is not None:
                p, end = shared
                return Reservation(i, now, end, p.type_idx, p.nodes, True), p
        end, a, kind, data, t, d = best
        start = float(self.times[a])
        if kind < 0:
            n = data
            self._take(a, end, [n], [1 if milli < FULL else k])
            nodes = (n,)
            p = None
            if a == 0:
                free = plan.free
                p = _on_node(free, n, k, milli, mem_mb)
        else:
            pools, avail = data
            cols = _nodes_of(layout, pools)
            order = sorted(range(len(cols)), key=lambda x: (-int(avail[x]), int(cols[x])))
            take_n, take_c = [], []
            left = k
            for x in order:
                if left == 0:
                    break
                c = min(int(avail[x]), left)
                if c > 0:
                    take_n.append(int(cols[x]))
                    take_c.append(c)
                    left -= c
            self._take(a, end, take_n, take_c)
            nodes = tuple(take_n)
            p = _spread_placement(plan.free, take_n, take_c, kind) if a == 0 else None
        return Reservation(i, start, float(end), t, nodes, p is not None), p

    def _shared_now(self, i: int, free: FreeState, before_s: float) -> tuple[Placement, float] | None:
        """A fractional job's start now on a shared GPU where it ends by the GPU's last resident's end and by
        `before_s` (its whole-GPU reservation's end: ties go to sharing); fastest speed first, then best fit
        (smallest sufficient free share), ties -> lower GPU index."""
        view = self.view
        jt = view.jobs
        elig, _, milli, mem_mb, pace = jt.shape[i]
        layout = self.layout
        now = view.now_s
        fm = free.free_milli
        fmem = free.free_mem_mb
        best = None  # (-speed, free share, gpu)
        for g, until in self.shared_until.items():
            if fm[g] < milli or fmem[g] < mem_mb or fm[g] == FULL:
                continue
            n = layout.gpu_node[g]
            if not elig.accepts((n,)):
                continue
            v = layout.type_speed[layout.node_type[n]]
            end = now + jt.known_runtime_s[i] / effective_speed(v, False, pace)
            if end > until or end > before_s:
                continue
            key = (-v, int(fm[g]), g)
            if best is None or key < best[0]:
                best = (key, end)
        if best is None:
            return None
        g = best[0][2]
        n = layout.gpu_node[g]
        return Placement((g,), (n,), milli, mem_mb, layout.node_type[n]), best[1]

    def started_now(self, i: int, p: Placement) -> None:
        """Record a fractional start now on a GPU (its GPU is shared until at least the job's end)."""
        if p.milli < FULL:
            view = self.view
            g = p.gpus[0]
            end = view.now_s + view.duration_on(i, p)
            if self.shared_until.get(g, -1.0) < end:
                self.shared_until[g] = end


def _on_node(free: FreeState, n: int, k: int, milli: int, mem_mb: int) -> Placement:
    layout = free.layout
    a = layout.node_first_gpu[n]
    m = layout.node_num_gpus[n]
    if milli == FULL:
        gpus = [a + g for g, x in enumerate(free.free_milli[a : a + m].tolist()) if x == FULL][:k]
        first = gpus[0] if gpus[-1] - gpus[0] == k - 1 else -1
        return Placement(tuple(gpus), (n,), FULL, 0, layout.node_type[n], first)
    fm = free.free_milli[a : a + m].tolist()
    fmem = free.free_mem_mb[a : a + m].tolist()
    g = min((x for x in range(m) if fm[x] >= milli and fmem[x] >= mem_mb), key=lambda x: (fm[x], x))
    return Placement((a + g,), (n,), milli, mem_mb, layout.node_type[n])


def _spread_placement(free: FreeState, nodes: list[int], counts: list[int], t: int) -> Placement:
    layout = free.layout
    gpus: list[int] = []
    for n, c in zip(nodes, counts, strict=True):
        a = layout.node_first_gpu[n]
        m = layout.node_num_gpus[n]
        gpus.extend([a + g for g, x in enumerate(free.free_milli[a : a + m].tolist()) if x == FULL][:c])
    return Placement(tuple(gpus), tuple(nodes), FULL, 0, t, -1, tuple(counts))
