"""Tiresias' 2D-LAS with the queues of the authors' own simulator (github.com/SymbioticLab/Tiresias at 959f9b0,
simulator/run_sim.py `dlas_sim_jobs` with `gputime=True`, i.e. `--schedule=dlas-gpu`, under `--scheme=count`),
replayed event by event so that its schedules are identical job for job.

It differs from `schedulers/tiresias.py` (queues in arrival order, running jobs first) only in the order inside a
queue, which the original keeps as a list changed at each of its events:
- an arriving job is appended to queue 0; a running job whose attained GPU-time reaches its queue's limit is
  moved to the BACK of the next queue, behind the jobs already waiting there, which may then preempt it;
- after each allocation every queue is split stably into its running jobs, then its waiting ones, so a job
  preempted while staying in its queue goes ahead of the jobs that waited there before it, and a job started
  goes behind the jobs that were already running;
- allocation: queues in order, each in list order; a job runs if the GPUs left (a count over the whole cluster)
  cover it, else a running job is preempted (no "fewest victims" rule: the walk decides).
Its clock: events are arrivals, completions and "jumps"; attained time grows by int(now - last check) per
event and a demotion is noticed only at an event (int(executed x GPUs) >= limit), the next jump being
now + ceil((limit - executed) / GPUs), which Python 2 evaluates as integer division for an integral limit: the
jump may fall before the crossing (then another jump follows from the new executed time) or, for a multi-GPU job
that has run, well after it (executed is in seconds, the limit in GPU-seconds), and the demotion waits for the
first event at or after the crossing.
The policy asks for a wake-up at each of those instants, including the next completion (estimated from the
known runtime, so it is exact with `--runtime_info oracle`), because a completion is an event of the original
even when nobody waits. Starvation promotion (`promote_knob` > 0, the original's `dlas-gpu-<knob>`): a waiting
job in a lower queue that has run is appended to queue 0 with its executed time zeroed once its waiting time
since it first ran (never reset on a restart, as in the original) reaches knob x its executed time.

State: unlike the other policies this one keeps the original's queue lists between calls of one run
(schedulers/run_state.py). It must therefore see every decision instant of a run, in
order, as `Simulator.run` gives them. Exact on clusters where counting GPUs is placing them (one node, or jobs
that never span nodes): a job the placement rule cannot place stays waiting, which the original never does.
"""

from __future__ import annotations

import math

from schedulers.plan import Plan
from schedulers.run_state import RunStates
from schedulers.tiresias import THRESHOLDS_GPU_S
from sim.simulator import View, WakeUp


class _Replay:
    """The original simulator's per-run state: queue lists and each job's clocks (seconds, whole numbers in the
    original)."""

    def __init__(self, num_queues: int):
        self.queues: list[list[int]] = [[] for _ in range(num_queues)]
        self.level: dict[int, int] = {}
        # job -> running, in order of arrival (the original's runnable_jobs)
        self.runnable: dict[int, bool] = {}
        self.executed: dict[int, int] = {}  # decides the queue; zeroed by a promotion
        self.total: dict[int, int] = {}
        self.last_check: dict[int, float] = {}
        self.last_pending: dict[int, int] = {}
        self.seen: set[int] = set()
        self.now = -math.inf
        self.next_jump = math.inf
        self.next_end = math.inf


def make_tiresias_original(thresholds_gpu_s: tuple[float, ...] = THRESHOLDS_GPU_S, promote_knob: float = 0.0):
    """Tiresias as its authors' simulator runs it (module docstring); `promote_knob` 0 = `dlas-gpu`."""
    limits = tuple(float(t) for t in thresholds_gpu_s)
    if any(b <= a for a, b in zip(limits, limits[1:], strict=False)) or any(t <= 0 for t in limits):
        raise ValueError(f"thresholds must be positive and ascending, got {thresholds_gpu_s}")
    knob = float(promote_knob)
    if not knob >= 0:
        raise ValueError(f"promote_knob must be >= 0, got {promote_knob}")
    last = len(limits)
    runs: RunStates[_Replay] = RunStates()

    def tiresias_original(view: View) -> list:
        now = view.now_s
        st = runs.get(view, lambda _: _Replay(last + 1))
        if now == st.now:
            return []  # asked again at an instant already replayed
        waiting = view.queue
        running_now = {j for _, j in view.running}
        completed = [j for j in st.runnable if j not in running_now and j not in waiting]
        arrivals = sorted(j for j in waiting if j not in st.seen)
        if not completed and not arrivals and now != st.next_jump and now != st.next_end:
            return []  # not an event of the original (e.g. a preempted run's stale timeout)
        st.now = now
        gpus = view.jobs.num_gpus
        for j in completed:
            del st.runnable[j]
            st.queues[st.level.pop(j)].remove(j)
        for j in arrivals:
            st.seen.add(j)
            st.runnable[j] = False
            st.level[j] = 0
            st.queues[0].append(j)
            st.executed[j] = st.total[j] = st.last_pending[j] = 0
            st.last_check[j] = now
        for j, is_running in list(st.runnable.items()):
            tmp = int(now - st.last_check[j])
            st.last_check[j] = now
            q = st.level[j]
            if is_running:
                st.total[j] += tmp
                st.executed[j] += tmp
                if q < last and int(st.executed[j] * gpus[j]) >= limits[q]:
                    _move(st, j, q + 1)
                continue
            if st.executed[j] > 0:
                st.last_pending[j] += tmp
            if knob and q > 0 and st.total[j] > 0 and st.executed[j] > 0:
                if st.last_pending[j] >= int(st.executed[j] * knob):
                    st.executed[j] = 0
                    st.last_pending[j] = 0
                    _move(st, j, 0)
        return _allocate(view, st, limits, knob)

    return tiresias_original


def _steps(ratio: float, limit: float) -> int:
    """The original's ceil((limit - executed) / GPUs) under Python 2: an integral limit makes it integer division
    (rounding down), a fractional one float division."""
    return math.floor(ratio) if float(limit).is_integer() else math.ceil(ratio)


def _move(st: _Replay, j: int, q: int) -> None:
    """Move job j to the back of queue q."""
    st.queues[st.level[j]].remove(j)
    st.queues[q].append(j)
    st.level[j] = q


def _allocate(view: View, st: _Replay, limits: tuple[float, ...], knob: float) -> list:
    """The original's walk over the queues (a GPU count), then its stable split of each queue and its next
    completion and jump instants; returns the decisions and the wake-ups."""
    now = view.now_s
    gpus = view.jobs.num_gpus
    free = sum(view.layout.type_num_gpus)
    starts: list[int] = []
    preempts: list[int] = []
    for queue in st.queues:
        for j in queue:
            if free >= gpus[j]:
                if not st.runnable[j]:
                    starts.append(j)
                free -= gpus[j]
            elif st.runnable[j]:
                preempts.append(j)
    plan = Plan(view.free)
    placements = view.placements
    for j in preempts:
        plan.preempt(j, placements[j])
        st.runnable[j] = False
    shape = view.jobs.shape
    ends = [end for end, j in view.running if j not in preempts]
    for j in starts:
        p = plan.place(shape[j])
        if p is None:
            continue  # counting said it fits, the nodes do not: it waits (see the module docstring)
        plan.add(j, p)
        st.runnable[j] = True
        left = view.jobs.known_runtime_s[j] - view.progress_now(j)
        ends.append(now + view.restore_overhead_s * (view.preemptions[j] > 0) + view.duration_on(j, p, left))
    for q, queue in enumerate(st.queues):
        st.queues[q] = [j for j in queue if st.runnable[j]] + [j for j in queue if not st.runnable[j]]
    st.next_end = min((e for e in ends if e > now), default=math.inf)
    jump = math.inf
    for j, is_running in st.runnable.items():
        q = st.level[j]
        if is_running and q < len(limits):
            jump = min(jump, now + _steps((limits[q] - st.executed[j]) / gpus[j], limits[q]))
        elif not is_running and knob and q > 0 and st.total[j] and st.executed[j] > 0:
            diff = int(st.executed[j] * knob - st.last_pending[j])
            if diff > 0:
                jump = min(jump, int(diff + now))
    st.next_jump = jump
    wakes = sorted({t for t in (st.next_end, st.next_jump) if t < math.inf})
    return [*plan.decisions, *(WakeUp(t) for t in wakes)]
