"""Power managers: pure functions of a View returning PowerOn/PowerOff/WakeUp decisions, by name (--power).

A manager runs after the job scheduler at every decision instant (`Simulator.run(policy, manager=...)`), so it
sees the capacity left after this instant's starts. Spec strings (docs/power.md):

- `always_on`: never changes a node's state (today's behaviour).
- `idle_off:T[:R]`: a node that has been ON and empty for T seconds is shut down, unless (a) a queued job could
  use it (its type and memory are acceptable to some waiting job) or (b) it is one of the R lowest-indexed idle
  ON nodes of its GPU type, kept as a warm reserve (default R = 2 per type). An OFF node is booted (1) when a
  queued job needs it: walking the queue in arrival order (the first `WAKE_SCAN_JOBS`), each job is placed on
  the capacity that is free now plus that of booting nodes (jobs placed earlier in the walk take theirs); a job
  that fits nowhere boots OFF nodes it accepts, fastest type first, then fewest GPUs that still fit it, then
  lowest index, until it fits (none if it would not fit even then); (2) to restore the reserve: while a GPU type
  has fewer than R nodes idle or booting, its lowest-indexed OFF node boots. A WakeUp is set at the next idle
  deadline.
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

from sim.placement import place
from sim.power import BOOTING, OFF, PowerOff, PowerOn
from sim.prices import PriceCurve
from sim.simulator import View, WakeUp
from sim.sorted_list import SortedList

WAKE_SCAN_JOBS = 256  # queued jobs the wake rule looks at per instant (bounds its cost under a long queue)
DEFAULT_IDLE_S = 600.0
# warm idle nodes kept per GPU type: 2 held EASY's avg JCT within 5 % of always_on on hard synthetic at load 0.5
# (+3.4 % over seeds 0-1, 1000 jobs) where 1 cost +10.2 % (a job that finds no fast node idle takes a slow type
# rather than waiting 260 s for a boot); BENCHMARKS.md, Energy
DEFAULT_RESERVE = 2


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
    idle = idle_nodes(view)
    layout = view.layout
    node_type = layout.node_type
    if reserve > 0 and OFF in state:
        decisions += _boots_for_reserve(view, idle, reserve, {d.node for d in decisions})
    if not idle:
        return decisions
    # the eligible-node sets of the waiting jobs: a node one of them accepts is never shut down while it waits
    wanted = list({id(shape[0]): shape[0]._node_set for shape in view.queue_by_shape}.values())
    kept = [0] * len(layout.type_names)
    now = view.now_s
    next_deadline = math.inf
    for n in idle:
        t = node_type[n]
        if kept[t] < reserve:
            kept[t] += 1
            continue
        deadline = power.idle_since_s[n] + idle_s
        if deadline > now:
            next_deadline = min(next_deadline, deadline)
        elif not any(n in nodes for nodes in wanted):
            decisions.append(PowerOff(n))
    if next_deadline < math.inf:
        decisions.append(WakeUp(next_deadline))
    return decisions


def _boots_for_reserve(view: View, idle: list[int], reserve: int, booting_now: set[int]) -> list:
    """PowerOn for the lowest-indexed OFF nodes of each GPU type that has fewer than `reserve` nodes idle or
    booting (the warm reserve is restored as soon as jobs take it)."""
    layout = view.layout
    state = view.node_power.state
    ready = [0] * len(layout.type_names)
    for n in idle:
        ready[layout.node_type[n]] += 1
    for n in range(layout.num_nodes):
        if state[n] == BOOTING or n in booting_now:
            ready[layout.node_type[n]] += 1
    boots = []
    for n in range(layout.num_nodes):
        t = layout.node_type[n]
        if state[n] == OFF and n not in booting_now and ready[t] < reserve:
            ready[t] += 1
            boots.append(PowerOn(n))
    return boots


def idle_nodes(view: View) -> list[int]:
    """ON nodes with no job, ascending. From the free state's per-pool counts of free GPUs: a node that is not ON
    has all its GPUs taken, so a node with every GPU free is ON and empty."""
    layout = view.layout
    size = layout.node_num_gpus
    out = []
    for by_c, sizes in zip(view.free.pool_free, layout.pool_node_sizes, strict=True):
        for c in sizes:
            if by_c[c]:
                out.extend(n for n in by_c[c] if size[n] == c)
    out.sort()
    return out


def _boots_for_queue(view: View) -> list:
    """PowerOn decisions for OFF nodes that waiting jobs need (the wake rule of the module docstring)."""
    if not view.queue:
        return []
    power = view.node_power
    state = power.state
    layout = view.layout
    off = [n for n in range(layout.num_nodes) if state[n] == OFF]
    eligible = {id(shape[0]): shape[0]._node_set for shape in view.queue_by_shape}.values()
    if not any(n in nodes for nodes in eligible for n in off):
        return []  # no waiting job accepts any OFF node
    scratch = view.free.copy()
    for n in range(layout.num_nodes):
        if state[n] == BOOTING:
            scratch.give(layout.whole_node(n))
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
            by_shape[s] = SortedList(kept)
            by_shape_runtime[s] = SortedList(e for e in view.queue_by_shape_runtime[s] if e[1] not in held)
    return view._replace(
        queue={i: None for i in view.queue if i not in held}.keys(),
        queue_by_runtime=SortedList(e for e in view.queue_by_runtime if e[1] not in held),
        queue_by_shape=by_shape,
        queue_by_shape_runtime=by_shape_runtime,
    )


def deferring(policy: Callable[[View], list], prices: PriceCurve, defer_s: float) -> Callable[[View], list]:
    """`policy` as price_aware runs it: it does not see the jobs held back for a cheaper time."""

    def run(view: View) -> list:
        return policy(without_held(view, held_jobs(view, prices, defer_s)))

    return run
