"""The policy's view of the box: the same `View` the simulator gives policies (sim/simulator.py), built from the
dispatcher's queue, its running jobs and what the GPUs' memory is committed to, so that schedulers/ run
unchanged; and the policy's decisions mapped back to jobs and device indices.

Jobs are indexed running and queued together, the queue in its order (priority, then jobs-file order) and the
two merged by arrival order, so that while the queue is in arrival order the indices are those the replay's
simulator gives the same jobs. A running job holds its budget (dispatch/memory.py); a GPU with an external
process is not idle, and external memory is taken from its free memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.cluster import FULL, ClusterLayout, FreeState, Placement, gb_to_mb
from sim.job import Job
from sim.placement import effective_speed
from sim.simulator import Decision, JobTable, View
from sim.sorted_list import SortedList
from workloads.dispatch_log import Device, box_cluster, largest_usable_mb, mb_of_mib, share_milli, sim_job


@dataclass(frozen=True)
class ViewJob:
    """A queued or running job as the policy sees it. `vram_mib` is a running job's budget."""

    job: str
    seq: int
    queued_s: float
    num_gpus: int
    vram_mib: int | None
    est_s: float
    priority: int
    start_s: float | None = None
    """None while queued"""
    devices: tuple[int, ...] = ()
    """a running job's GPUs"""


@dataclass(frozen=True)
class Launch:
    """A policy decision to start `job` on these devices (device indices) with this layout placement."""

    job: str
    devices: tuple[int, ...]
    placement: Placement


class Box:
    """The box's GPUs as the simulator's cluster layout, and the map between layout GPUs and device indices."""

    def __init__(self, devices: tuple[Device, ...], margin_mib: int):
        self.devices = devices
        self.margin_mib = margin_mib
        self.spec, self.device_of_gpu = box_cluster(devices, margin_mib)
        self.layout = ClusterLayout(self.spec)
        self.gpu_of_device = {d: g for g, d in enumerate(self.device_of_gpu)}
        self.base_mb = largest_usable_mb(devices, margin_mib)

    def job(self, j: ViewJob) -> Job:
        return sim_job(j.job, j.queued_s, j.est_s, j.num_gpus, j.vram_mib, j.est_s, j.priority, self.base_mb)

    def never_fits(self, num_gpus: int, vram_mib: int | None) -> str | None:
        """Why a job of this shape cannot run even on the empty box, None if it can."""

        def why_not(vram: int | None) -> str | None:
            job = sim_job("", 0.0, 1.0, num_gpus, vram, 1.0, 0, self.base_mb)
            return self.layout.eligible((), gb_to_mb(job.gpu_mem_gb)).never_fits(job.num_gpus, job.gpu_milli)

        if why_not(vram_mib) is None:
            return None
        if num_gpus > self.layout.num_gpus:
            return f"needs {num_gpus} GPUs; the box has {self.layout.num_gpus}"
        if vram_mib is not None and why_not(None) is None:
            largest = max(d.total_mib for d in self.devices) - self.margin_mib
            return f"declares {vram_mib} MiB per GPU; the largest GPU has {largest} MiB usable (total less the margin)"
        return why_not(vram_mib)

    def placement(self, layout_gpus: tuple[int, ...], milli: int, mem_mb: int) -> Placement:
        layout = self.layout
        gpus = tuple(sorted(layout_gpus))
        nodes = tuple(dict.fromkeys(layout.gpu_node[g] for g in gpus))
        t = layout.node_type[nodes[0]]
        if milli < FULL:
            return Placement(gpus, nodes, milli, mem_mb, t)
        counts = (
            tuple(sum(1 for g in gpus if layout.gpu_node[g] == n) for n in nodes) if len(nodes) > 1 else ()
        )
        first = gpus[0] if gpus == tuple(range(gpus[0], gpus[0] + len(gpus))) else -1
        return Placement(gpus, nodes, FULL, 0, t, first, counts)


def _merge_by_seq(running: list[ViewJob], queue: list[ViewJob]) -> list[ViewJob]:
    """Running jobs (by arrival) and the queue (in its order) merged by arrival order, each keeping its order."""
    running = sorted(running, key=lambda j: j.seq)
    out: list[ViewJob] = []
    r = q = 0
    while r < len(running) or q < len(queue):
        if q == len(queue) or (r < len(running) and running[r].seq < queue[q].seq):
            out.append(running[r])
            r += 1
        else:
            out.append(queue[q])
            q += 1
    return out


def build_view(
    box: Box,
    now_s: float,
    running: list[ViewJob],
    queue: list[ViewJob],
    external_mib: dict[int, int],
    external_busy: dict[int, bool],
) -> tuple[View, list[ViewJob]]:
    """(the View, the job at each index). `queue` is in queue order; `external_mib`/`external_busy` per device:
    memory held by processes that are not the dispatcher's, and whether such a process is there."""
    layout = box.layout
    order = _merge_by_seq(running, queue)
    jobs = [box.job(j) for j in order]
    known = np.array([j.est_s for j in order], dtype=float)
    jt = JobTable(jobs, layout, known, 1.0)
    n = len(order)
    free = FreeState(layout)
    placements: list[Placement | None] = [None] * n
    run_start = [0.0] * n
    run_speed = [0.0] * n
    entries = []
    for i, j in enumerate(order):
        if j.start_s is None:
            continue
        p = box.placement(tuple(box.gpu_of_device[d] for d in j.devices), jt.milli[i], jt.mem_mb[i])
        free.take(p)
        placements[i] = p
        speed = effective_speed(layout.type_speed[p.type_idx], len(p.nodes) > 1, jt.pace[i])
        run_start[i] = j.start_s
        run_speed[i] = speed
        entries.append((j.start_s + known[i] / speed, i, len(p.gpus) if p.milli == FULL else 0))
    for d, mib in external_mib.items():
        g = box.gpu_of_device.get(d)
        if g is None or (free.free_milli[g] == 0 and free.free_mem_mb[g] == 0):
            continue  # not used by the dispatcher, or a job of ours holds it whole
        mem = mb_of_mib(mib)
        if external_busy.get(d):
            node = layout.gpu_node[g]
            free.take(Placement((g,), (node,), share_milli(mem, box.base_mb), mem, layout.node_type[node]))
        elif mem:
            free.free_mem_mb[g] -= mem  # below the noise level: less memory, the GPU stays idle
    entries.sort()
    queued = [i for i, j in enumerate(order) if j.start_s is None]
    by_shape: dict[tuple, list[int]] = {}
    for i in queued:
        by_shape.setdefault(jt.shape[i], []).append(i)
    # the sorted indexes as the simulator keeps them (SortedList: the policies use its lookups)
    view = View(
        now_s,
        dict.fromkeys(queued).keys(),
        SortedList((known[i], i) for i in queued),
        {s: SortedList(members) for s, members in by_shape.items()},
        {s: SortedList((known[i], i) for i in members) for s, members in by_shape.items()},
        [(end, i) for end, i, _ in entries],
        [k for _, _, k in entries],
        free,
        jt,
        layout,
        placements,
        [0.0] * n,
        [0.0] * n,
        [0] * n,
        run_start,
        list(run_start),
        run_speed,
        [float("nan")] * n,
        0.0,
        known,
        None,
    )
    return view, order


def launches(box: Box, view: View, order: list[ViewJob], decisions: list) -> tuple[list[Launch], list[str]]:
    """The starts among a policy's decisions, checked against the view's free capacity (taken as they apply);
    and a note for each decision that is refused (a policy bug, or one that preempts or asks to be woken)."""
    free = view.free.copy()
    out: list[Launch] = []
    refused: list[str] = []
    for d in decisions:
        if type(d) is not Decision:
            refused.append(f"{type(d).__name__} decisions are not supported by the dispatcher: {d!r}")
            continue
        i, p = d
        jt = view.jobs
        if not 0 <= i < len(order) or order[i].start_s is not None or i not in view.queue:
            refused.append(f"job index {i} is not waiting")
            continue
        if (
            p.milli != jt.milli[i]
            or len(p.gpus) != jt.num_gpus[i]
            or p.mem_mb != jt.mem_mb[i]
            or not free.fits(p)
        ):
            refused.append(f"placement {p} does not fit job {order[i].job}")
            continue
        free.take(p)
        out.append(Launch(order[i].job, tuple(box.device_of_gpu[g] for g in p.gpus), p))
    return out, refused
