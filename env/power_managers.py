"""Power managers: pure functions of a View returning PowerOn/PowerOff/WakeUp decisions, by name (--power).

A manager runs after the job scheduler at every decision instant (`Simulator.run(policy, manager=...)`), so it
sees the capacity left after this instant's starts. Spec strings (README, *Energy and power states*):

- `always_on`: never changes a node's state (today's behaviour).
- `idle_off:T[:R]`: a node that has been ON and empty for T seconds is shut down, unless (a) a queued job could
  use it (its type and memory are acceptable to some waiting job) or (b) it is one of the R lowest-indexed idle
  ON nodes of its GPU type, kept as a warm reserve (default R = 1 per type). An OFF node is booted when a
  queued job needs it: walking the queue in arrival order (the first `WAKE_SCAN_JOBS`), each job is placed on
  the capacity that is free now plus that of booting nodes (jobs placed earlier in the walk take theirs); a job
  that fits nowhere boots OFF nodes it accepts, fastest type first, then fewest GPUs that still fit it, then
  lowest index, until it fits (none if it would not fit even then). A WakeUp is set at the next idle deadline.
- `price_aware:D[:T[:R]]`: `idle_off:T:R` (default T = 600 s) plus deferral of low-priority jobs to cheaper
  times: the scheduler does not see a queued job of priority 0 (the lowest class) at time t while t < its
  arrival + D and the price at t is above the lowest price of the curve over [t, arrival + D]. So such a job
  becomes startable at the first cheapest instant within D of its arrival, or at arrival + D at the latest.
  WakeUps are set at the next price change and the next deferral deadline.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from env.placement import place
from env.power import BOOTING, OFF, ON, PowerOff, PowerOn
from env.prices import PriceCurve
from env.simulator import View, WakeUp

WAKE_SCAN_JOBS = 256  # queued jobs the wake rule looks at per instant (bounds its cost under a long queue)
DEFAULT_IDLE_S = 600.0
DEFAULT_RESERVE = 1


@dataclass(frozen=True)
class ManagerSpec:
    """A parsed --power value."""

    name: str
    """always_on | idle_off | price_aware"""
    idle_s: float = DEFAULT_IDLE_S
    reserve: int = DEFAULT_RESERVE
    defer_s: float = 0.0

    @property
    def label(self) -> str:
        """The spec as typed in canonical form (run names, summary rows)."""
        if self.name == "always_on":
            return "always_on"
        if self.name == "idle_off":
            return f"idle_off:{self.idle_s:g}:{self.reserve}"
        return f"price_aware:{self.defer_s:g}:{self.idle_s:g}:{self.reserve}"


MANAGER_NAMES = ("always_on", "idle_off", "price_aware")


def parse_manager(text: str) -> ManagerSpec:
    """ManagerSpec from `always_on`, `idle_off:T[:R]` or `price_aware:D[:T[:R]]`; ValueError saying what is wrong."""
    name, *args = text.strip().lower().split(":")
    form = {"always_on": "always_on", "idle_off": "idle_off:T[:R]", "price_aware": "price_aware:D[:T[:R]]"}
    if name not in form:
        raise ValueError(
            f"unknown power manager {text!r}; choose always_on, idle_off:T[:R] or price_aware:D[:T[:R]]"
        )
    limits = {"always_on": (0, 0), "idle_off": (1, 2), "price_aware": (1, 3)}[name]
    if not limits[0] <= len(args) <= limits[1]:
        raise ValueError(f"power manager {text!r}: expected {form[name]}")
    try:
        nums = [float(a) for a in args]
    except ValueError:
        raise ValueError(f"power manager {text!r}: expected numbers in {form[name]}") from None
    if any(not (math.isfinite(x) and x >= 0) for x in nums):
        raise ValueError(f"power manager {text!r}: times and reserve must be finite and >= 0")
    if name == "always_on":
        return ManagerSpec(name)
    if name == "price_aware":
        defer, *rest = nums
    else:
        defer, rest = 0.0, nums
    idle = rest[0] if rest else DEFAULT_IDLE_S
    reserve = rest[1] if len(rest) > 1 else DEFAULT_RESERVE
    if reserve != int(reserve):
        raise ValueError(f"power manager {text!r}: the reserve R is a whole number of nodes")
    return ManagerSpec(name, idle, int(reserve), defer)


Manager = Callable[[View], list]


def make_manager(spec: ManagerSpec, prices: PriceCurve | None = None) -> Manager | None:
    """The manager function for `spec` (None for always_on: nothing to consult)."""
    if spec.name == "always_on":
        return None
    if spec.name == "idle_off":
        return lambda view: idle_off(view, spec.idle_s, spec.reserve)
    if prices is None:
        raise ValueError("price_aware needs a price curve")
    return lambda view: idle_off(view, spec.idle_s, spec.reserve) + price_wakeups(view, prices, spec.defer_s)


def idle_off(view: View, idle_s: float, reserve: int) -> list:
    """The idle_off rule (module docstring): boots for waiting jobs, shutdowns of long-idle nodes, a WakeUp."""
    power = view.node_power
    state = power.state
    decisions: list = _boots_for_queue(view) if OFF in state else []
    layout = view.layout
    whole, size = view.free.node_whole, layout.node_num_gpus
    # nodes some waiting job accepts (type and memory): never shut down while it waits
    wanted: set[int] = set()
    for shape in view.queue_by_shape:
        wanted.update(shape[0].nodes)
    kept = [0] * len(layout.type_names)
    now = view.now_s
    next_deadline = math.inf
    for n in range(layout.num_nodes):
        if state[n] != ON or whole[n] != size[n]:
            continue
        t = layout.node_type[n]
        if kept[t] < reserve:
            kept[t] += 1
            continue
        if n in wanted:
            continue
        deadline = power.idle_since_s[n] + idle_s
        if deadline <= now:
            decisions.append(PowerOff(n))
        else:
            next_deadline = min(next_deadline, deadline)
    if next_deadline < math.inf:
        decisions.append(WakeUp(next_deadline))
    return decisions


def _boots_for_queue(view: View) -> list:
    """PowerOn decisions for OFF nodes that waiting jobs need (the wake rule of the module docstring)."""
    power = view.node_power
    state = power.state
    layout = view.layout
    scratch = view.free.copy()
    for n in range(layout.num_nodes):
        if state[n] == BOOTING:
            scratch.give(layout.whole_node(n))
    off = [n for n in range(layout.num_nodes) if state[n] == OFF]
    boots: list = []
    shapes = view.jobs.shape
    for count, i in enumerate(view.queue):
        if count >= WAKE_SCAN_JOBS or not off:
            break
        elig, k, milli, mem, pace = shapes[i]
        p = place(scratch, elig, k, milli, mem, pace)
        if p is None:
            accepted = sorted(
                (n for n in off if n in elig._node_set),
                key=lambda n: (
                    -layout.node_speed[n],
                    layout.node_num_gpus[n] < k,
                    layout.node_num_gpus[n],
                    n,
                ),
            )
            trial = scratch.copy()
            chosen = []
            for n in accepted:
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
                boots.append(PowerOn(n))
        scratch.take(p)
    return boots


def held_jobs(view: View, prices: PriceCurve, defer_s: float) -> set[int]:
    """Queued jobs price_aware hides from the scheduler now (module docstring)."""
    now = view.now_s
    price_now = prices.price_at(now)
    held = set()
    arrival, priority = view.jobs.arrival_s, view.jobs.priority
    for i in view.queue:
        if priority[i] == 0:
            until = arrival[i] + defer_s
            if now < until and price_now > prices.min_price(now, until):
                held.add(i)
    return held


def price_wakeups(view: View, prices: PriceCurve, defer_s: float) -> list:
    """WakeUps at the next price change and the next deferral deadline of a held job."""
    held = held_jobs(view, prices, defer_s)
    if not held:
        return []
    now = view.now_s
    arrival = view.jobs.arrival_s
    wake = min(prices.next_change_s(now), min(arrival[i] + defer_s for i in held))
    return [WakeUp(wake)] if wake < math.inf else []


def without_held(view: View, held: set[int]) -> View:
    """`view` with the held jobs taken out of every queue structure (a copy; the live view is untouched)."""
    if not held:
        return view
    by_shape: dict = {}
    by_shape_runtime: dict = {}
    for s, members in view.queue_by_shape.items():
        kept = [i for i in members if i not in held]
        if kept:
            by_shape[s] = kept
            by_shape_runtime[s] = [e for e in view.queue_by_shape_runtime[s] if e[1] not in held]
    return view._replace(
        queue={i: None for i in view.queue if i not in held}.keys(),
        queue_by_runtime=[e for e in view.queue_by_runtime if e[1] not in held],
        queue_by_shape=by_shape,
        queue_by_shape_runtime=by_shape_runtime,
    )


def deferring(policy: Callable[[View], list], prices: PriceCurve, defer_s: float) -> Callable[[View], list]:
    """`policy` as price_aware runs it: it does not see the jobs held back for a cheaper time."""

    def run(view: View) -> list:
        return policy(without_held(view, held_jobs(view, prices, defer_s)))

    return run
