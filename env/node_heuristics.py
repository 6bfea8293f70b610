"""Reference node managers for the power and autoscaling tasks: pure functions of a FleetView -> one action.

Each is called once per env step and returns one action of NodeManagerEnv's encoding (2t: turn a node of type
t on, 2t + 1: turn one off, 2T: KEEP); called again at the same instant it gives its next action, until KEEP.

- `always_on`: every node on (turns any OFF node on; never turns one off). In the power task all nodes start
  on, so it keeps throughout: today's behaviour. In the autoscaling task it provisions the whole fleet.
- `threshold(idle_off_s, reserve)`, an idle_off-like rule: (1) wake: walk the queue (its first WAKE_SCAN_JOBS
  jobs) in arrival order, placing each job by the core placement rule on the capacity that is free now plus
  that of BOOTING nodes (jobs placed earlier in the walk take theirs); the first job that fits nowhere gets one
  OFF node turned on, of the accepted type with an OFF node that is cheapest per unit of speed (unit_cost /
  speed; ties: layout order); asked again, the rule boots more until the job fits. (2) sleep: otherwise turn off the
  type's longest-idle node if it has been idle for at least `idle_off_s`, no queued job accepts its type, and
  more than `reserve` idle ON nodes of that type remain. (3) else KEEP.
- `threshold(idle_off_s, reserve, fit=True)` (`idle_off_fit:T[:R]`): the same, except that a queued job which
  could not start even with every node on (`FleetView.all_on_free`: a 32-GPU job while a running job holds
  part of the only 32 GPUs that accept it) is left out of both walks: nothing is booted or kept idle for a job
  that must wait for running jobs to end anyway. Without it the rule boots the whole type for such a job and
  keeps it idle until the running job ends (days, with heavy-tailed runtimes).
- `provision_to_demand`: `threshold(0, 0)`: boot what the queue needs, release idle nodes at once.

The env asks again at every event and every `recheck_s` (NodeManagerEnv), so an idle deadline is acted on at
most recheck_s late.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from env.node_env import FleetView, power_off_action, power_on_action
from sim.placement import place
from sim.power import OFF, ON

NodeManager = Callable[[FleetView], int]


def _num_types(v: FleetView) -> int:
    return len(v.unit_cost)


def always_on(v: FleetView) -> int:
    for n, s in enumerate(v.state):
        if s == OFF and v.mask[power_on_action(v.node_type[n])]:
            return power_on_action(v.node_type[n])
    return 2 * _num_types(v)


def _could_start(v: FleetView, shape: tuple) -> bool:
    """The job of placement shape `shape` could start were every node on (no running job ending)."""
    return place(v.all_on_free, *shape) is not None


def _wake(v: FleetView, fit: bool) -> int | None:
    """The power-on action the queue needs, or None (fit: jobs that could not start with every node on left
    out)."""
    has_off = [False] * _num_types(v)
    for n, s in enumerate(v.state):
        if s == OFF and v.mask[power_on_action(v.node_type[n])]:  # the mask holds the budget too
            has_off[v.node_type[n]] = True
    free = v.free.copy()
    for shape, types in v.queue:
        p = place(free, *shape)
        if p is not None:
            free.take(p)
            continue
        if fit and not _could_start(v, shape):
            continue
        options = [t for t in types if has_off[t]]
        if options:
            return power_on_action(min(options, key=lambda t: (v.unit_cost[t] / v.speed[t], t)))
    return None


def _sleep(v: FleetView, idle_off_s: float, reserve: int, fit: bool) -> int | None:
    T = _num_types(v)
    wanted = [False] * T
    for shape, types in v.queue:
        if fit and not _could_start(v, shape):
            continue
        for t in types:
            wanted[t] = True
    idle_nodes: list[list[int]] = [[] for _ in range(T)]
    for n, s in enumerate(v.state):
        if s == ON and not math.isnan(v.idle_since_s[n]):
            idle_nodes[v.node_type[n]].append(n)
    for t in range(T):
        nodes = idle_nodes[t]
        if wanted[t] or len(nodes) <= reserve:
            continue
        # the env turns off the type's longest-idle node: the one with the earliest idle_since
        oldest = min(v.idle_since_s[n] for n in nodes)
        if v.now_s - oldest >= idle_off_s:
            return power_off_action(t)
    return None


def threshold(idle_off_s: float, reserve: int = 0, fit: bool = False) -> NodeManager:
    """The idle_off-like rule (module docstring); `idle_off_s` >= 0 seconds, `reserve` >= 0 idle nodes per type;
    `fit`: leave out of both walks the queued jobs that could not start with every node on."""
    if not (idle_off_s >= 0 and math.isfinite(idle_off_s)):
        raise ValueError(f"idle_off_s must be a finite number of seconds >= 0, got {idle_off_s!r}")
    if isinstance(reserve, bool) or not isinstance(reserve, int) or reserve < 0:
        raise ValueError(f"reserve must be an integer >= 0, got {reserve!r}")

    def manager(v: FleetView) -> int:
        a = _wake(v, fit)
        if a is None:
            a = _sleep(v, idle_off_s, reserve, fit)
        return 2 * _num_types(v) if a is None else a

    return manager


def provision_to_demand(v: FleetView) -> int:
    return threshold(0.0, 0)(v)


def node_manager(spec: str) -> NodeManager:
    """A reference manager by name: always_on | idle_off:T[:R] (threshold(T, R)) | idle_off_fit:T[:R]
    (threshold(T, R, fit=True)) | provision_to_demand."""
    if spec == "always_on":
        return always_on
    if spec == "provision_to_demand":
        return provision_to_demand
    parts = spec.split(":")
    if parts[0] in ("idle_off", "idle_off_fit") and len(parts) in (2, 3):
        try:
            idle_s = float(parts[1])
            reserve = int(parts[2]) if len(parts) == 3 else 0
            return threshold(idle_s, reserve, fit=parts[0] == "idle_off_fit")
        except ValueError as e:
            raise ValueError(f"bad node manager {spec!r}: {e}") from None
    raise ValueError(
        f"unknown node manager {spec!r}; choose always_on, provision_to_demand, idle_off:T[:R] or "
        "idle_off_fit:T[:R] (T seconds idle before a node is turned off, R idle nodes kept per type; _fit: "
        "nothing booted or kept for a job that could not start with every node on)"
    )


def run_manager(env, manager: NodeManager) -> float:
    """Run `manager` through `env` (already reset) to the episode's end; the undiscounted return."""
    total = 0.0
    done = truncated = False
    while not (done or truncated):
        view = env.fleet_view()
        a = manager(view)
        if not view.mask[a]:
            raise RuntimeError(f"node manager chose illegal action {a} (mask {view.mask})")
        _, r, done, truncated, _ = env.step(a)
        total += r
    return total
