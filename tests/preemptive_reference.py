"""Plain, unoptimised SRTF and Tiresias (the rules are in schedulers/preemptive.py, srtf.py and tiresias.py), kept
as the references the fast policies must match decision for decision: every waiting and running job ranked in
one full sort at every instant, remaining work and attained service recomputed from the run records by hand,
full copies of the free state, no early exits, no memos; Tiresias wakes up at EVERY threshold crossing and
promotion instant while anything waits (the fast one only at those that can change a decision)."""

from __future__ import annotations

from sim.placement import place
from sim.simulator import Decision, Preempt, View, WakeUp


def _running(view: View) -> list[int]:
    return [j for _, j in view.running]


def _progress(view: View, j: int) -> float:
    """Reference work done by now, recomputed from the run start, the overhead and the speed."""
    done = view.progress_s[j]
    if j not in set(view.queue):
        work_from = view.run_start_s[j] + (view.restore_overhead_s if view.preemptions[j] else 0.0)
        done += max(0.0, view.now_s - work_from) * view.run_speed[j]
    return min(done, view.jobs.runtime_s[j])


def fewest_victims(view: View, free, victims: list[int], shape: tuple) -> list[int] | None:
    """The shortest prefix of `victims` (lowest priority first) whose release lets `shape` be placed, then each of
    its victims but the last spared, highest priority first, where the rest still suffice; None if all do not."""
    chosen: list[int] = []
    trial = free.copy()
    for v in victims:
        trial.give(view.placements[v])
        chosen.append(v)
        if place(trial, *shape) is not None:
            break
    else:
        return None
    for v in list(reversed(chosen[:-1])):
        rest = [u for u in chosen if u != v]
        trial = free.copy()
        for u in rest:
            trial.give(view.placements[u])
        if place(trial, *shape) is not None:
            chosen = rest
    return chosen


def _allocate(view: View, ranked: list[tuple[tuple, bool, int]], requeue_key) -> list:
    """The rule of schedulers/preemptive.py over one fully ranked list of (key, is running, job); a job preempted
    here is put back into the rest of the list as a waiting job with key `requeue_key(job)`."""
    shape = view.jobs.shape
    free = view.free.copy()
    out: list = []
    preempted: set[int] = set()
    ranked = list(ranked)
    pos = -1
    while pos + 1 < len(ranked):
        pos += 1
        _, running, j = ranked[pos]
        if running:
            continue
        p = place(free, *shape[j])
        if p is not None:
            free.take(p)
            out.append(Decision(j, p))
            continue
        lower = [v for _, r, v in ranked[pos + 1 :] if r and v not in preempted]
        lower.reverse()  # lowest priority first
        chosen = fewest_victims(view, free, lower, shape[j])
        if chosen is None:
            continue
        for v in chosen:
            free.give(view.placements[v])
            out.append(Preempt(v))
            preempted.add(v)
            ranked.append((requeue_key(v), False, v))
        ranked[pos + 1 :] = sorted(ranked[pos + 1 :])
        p = place(free, *shape[j])
        free.take(p)
        out.append(Decision(j, p))
    return out


def srtf_reference(view: View) -> list:
    known = view.jobs.known_runtime_s
    ranked = [((max(known[j] - _progress(view, j), 0.0), 1, j), False, j) for j in view.queue]
    ranked += [((max(known[v] - _progress(view, v), 0.0), 0, v), True, v) for v in _running(view)]
    ranked.sort()
    return _allocate(view, ranked, lambda v: (max(known[v] - _progress(view, v), 0.0), 1, v))


def tiresias_reference(thresholds=(3250.0, 7200.0), knob: float = 0.0):
    def policy(view: View) -> list:
        now = view.now_s
        demand = view.jobs.gpu_demand

        def promoted(j: int, since: float) -> bool:
            if not (knob and view.preemptions[j]):
                return False
            return since >= view.preempted_at_s[j] + knob * view.attained_gpu_s[j] / demand[j]

        def service(j: int, running: bool) -> float:
            if running:
                this_run = (now - view.run_start_s[j]) * demand[j]
                return this_run if promoted(j, view.run_start_s[j]) else view.attained_gpu_s[j] + this_run
            return 0.0 if promoted(j, now) else view.attained_gpu_s[j]

        def level(x: float) -> int:
            return sum(1 for t in thresholds if x + 1e-6 >= t)

        ranked = [((level(service(j, False)), 1, j), False, j) for j in view.queue]
        ranked += [((level(service(v, True)), 0, v), True, v) for v in _running(view)]
        ranked.sort()
        out = _allocate(view, ranked, lambda v: (level(view.attained_now(v)), 1, v))
        started = {d.job for d in out if isinstance(d, Decision)}
        preempted = {d.job for d in out if isinstance(d, Preempt)}
        waiting = [j for j in [*view.queue, *preempted] if j not in started]
        if not waiting:
            return out
        times = []
        for v in [*(_running(view)), *started]:
            if v in preempted and v not in started:
                continue
            if v in preempted:
                x = view.attained_now(v)
            else:
                x = service(v, v not in started)
            k = level(x)
            if k < len(thresholds):
                if v in started:
                    start, base = now, x
                else:
                    start = view.run_start_s[v]
                    base = 0.0 if promoted(v, start) else view.attained_gpu_s[v]
                times.append(max(start + (thresholds[k] - base) / demand[v], now + 1e-6 / demand[v]))
        if knob:
            for j in waiting:
                got = view.attained_now(j) if j in preempted else view.attained_gpu_s[j]
                if got > 0 and (j in preempted or view.preemptions[j]):
                    at = (now if j in preempted else view.preempted_at_s[j]) + knob * got / demand[j]
                    if at > now:
                        times.append(at)
        out += [WakeUp(t) for t in times]
        return out

    return policy
