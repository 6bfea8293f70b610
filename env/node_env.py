"""The Gymnasium base shared by the node-management tasks: an agent turns GPU nodes of each type on and off
while a heuristic scheduler places the jobs, on the same Simulator the scheduling task uses.

The tasks (env/power_env.py: energy cost under electricity prices; env/autoscale_env.py: cloud nodes under a
budget) differ only in how the reward accrues and in a few context features; everything else lives here:
the action encoding and its mask, decision points, the node bookkeeping, and the reference heuristics'
snapshot (`FleetView`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import islice

import gymnasium as gym
import numpy as np

from config import RunConfig
from env.gym_env import as_action, reset_scenario
from scenario.build import Scenario, build_scenario
from schedulers import POLICIES
from sim.cluster import FULL, FreeState, Placement
from sim.power import BOOTING, OFF, ON, SHUTTING_DOWN, PowerOff, PowerOn
from sim.simulator import Simulator

SLOT_FEATURES = (
    "power_on",  # 1 on a "turn one node of this type on" slot
    "power_off",  # 1 on a "turn one node of this type off" slot
    "speed",  # the type's training speed relative to an A100 / 2 (H100 = 1)
    "unit_cost",  # the task's cost of one node of the type per hour, scaled into [0, 1] (see the task)
    "on_frac",  # the type's nodes that are ON / its nodes
    "booting_frac",  # ... BOOTING / its nodes
    "off_frac",  # ... OFF / its nodes
    "shutting_frac",  # ... SHUTTING_DOWN / its nodes
    "idle_on_frac",  # ON nodes holding no job / the type's nodes
    "busy_share",  # busy GPU share of the type's GPUs (fractional jobs count their share)
    "queued_demand",  # GPUs asked by queued jobs that accept the type / the type's GPUs, clipped to 1
)
BASE_CONTEXT_FEATURES = (
    "queue_len",  # log1p(queued) / log1p(num jobs)
    "running",  # log1p(running) / log1p(num jobs)
    "queued_demand",  # queued GPU demand / cluster GPUs, clipped to 1
    "arrived_frac",  # fraction of the workload's accepted jobs that have arrived
    "day_sin",  # (1 + sin(2 pi t / day)) / 2
    "day_cos",  # (1 + cos(2 pi t / day)) / 2
)
_DAY_S = 86_400.0
RECHECK_S = 600.0
"""default longest stretch of simulated time without a decision point while a power action is possible: the
agent can turn an idle node off at most this late after it should (no per-hour ticking: only when a power
action is legal and no event happens sooner)"""


WAKE_SCAN_JOBS = 256
"""queued jobs a FleetView lists (arrival order): bounds the heuristics' cost under a long queue"""


@dataclass(frozen=True)
class FleetView:
    """What the node-management heuristics see at one decision point (read-only snapshot).

    Per node: `state` (sim.power states), `node_type`, `idle_since_s` (NaN unless the node is ON and holds no
    job). Per type t (layout order): `unit_cost[t]` (the task's cost of one node-hour of the type) and
    `speed[t]`. `free` is a scratch copy of the free capacity in which BOOTING nodes already count as free
    (copy it again before changing it); `all_on_free` the same were every node on (OFF and SHUTTING_DOWN nodes
    added: only ON nodes hold jobs), what a job could start on without any running job ending; `queue` lists the first WAKE_SCAN_JOBS waiting jobs in arrival order as
    (placement shape, accepted type indices), the shape being `place()`'s arguments; `mask` is the env's action
    mask (a manager must pick a legal action).
    """

    now_s: float
    state: tuple[int, ...]
    node_type: tuple[int, ...]
    idle_since_s: tuple[float, ...]
    unit_cost: tuple[float, ...]
    speed: tuple[float, ...]
    free: FreeState
    all_on_free: FreeState
    queue: tuple[tuple[tuple, tuple[int, ...]], ...]
    mask: tuple[bool, ...]


def power_on_action(t: int) -> int:
    """Action index that turns one OFF node of type `t` on."""
    return 2 * t


def power_off_action(t: int) -> int:
    """Action index that turns one idle ON node of type `t` off."""
    return 2 * t + 1


class NodeManagerEnv(gym.Env):
    """Base of GPUClusterPower-v0 and GPUClusterAutoscale-v0 (see their docstrings for the rewards).

    ## Action Space
    `Discrete(2T + 1)` over the cluster's T GPU types (layout order): action 2t turns one OFF node of type t on
    (the lowest-index one; it boots first), 2t + 1 turns one idle ON node of type t off (the one idle longest,
    ties to the highest index), and 2T (KEEP) lets simulated time run to the next decision point. Several power
    actions may be taken at the same instant, one per step. Masks (`info["action_mask"]`, `action_masks()`):
    on needs an OFF node of the type (and, for autoscaling, room in the budget); off needs an ON node of the
    type with no job on it (a busy node cannot be turned off); KEEP is masked only when nothing could ever
    happen again otherwise (jobs wait, no event is pending) and some node can be turned on. An illegal action
    does nothing and sets `info["illegal_action"]`. The encoding is a Discrete over {type} x {+1, -1} plus a
    no-op, so the D3QN/SAC agents (which score K slots and a WAIT) use it unchanged: K = 2T slots, KEEP = WAIT.

    ## Decision points
    After the events of an instant are processed and the scheduler (`scheduler`: fcfs, sjf or easy) has
    started what it will, the agent is asked whenever some power action is legal: at arrivals, completions,
    boot and shutdown completions, and, when nothing else happens, every `recheck_s` seconds of simulated
    time. When no power action is legal the env keeps on its own (those instants are not steps). The first
    observation (reset) is always time 0, after the arrivals at time 0 and their starts.

    ## Episode End
    Terminates when every accepted job has finished, at the task's horizon if it has one, or when jobs wait
    with no event pending and no node can be turned on (they stay unfinished). Truncates after `max_steps`.
    """

    metadata = {"render_modes": []}
    task_context_features: tuple[str, ...] = ()

    def __init__(
        self,
        config: RunConfig | None = None,
        scenario: Scenario | None = None,
        scheduler: str = "easy",
        recheck_s: float = RECHECK_S,
        max_steps: int | None = None,
    ):
        super().__init__()
        self.config = config or RunConfig()
        if scheduler not in POLICIES:
            raise ValueError(f"unknown scheduler {scheduler!r}; choose one of {', '.join(POLICIES)}")
        if not (isinstance(recheck_s, (int, float)) and recheck_s > 0 and math.isfinite(recheck_s)):
            raise ValueError(f"recheck_s must be a finite number of seconds > 0, got {recheck_s!r}")
        self.scheduler = scheduler
        self._policy = POLICIES[scheduler]
        self.recheck_s = float(recheck_s)
        self.max_steps = self.config.env.max_steps if max_steps is None else max_steps
        self._fixed = scenario
        template = scenario if scenario is not None else build_scenario(self.config, 0)
        self.type_names = tuple(template.layout.type_names)
        self.num_types = len(self.type_names)
        # the agents' per-slot view of the action space: K slots + a WAIT, here 2T power slots + KEEP
        self.window = 2 * self.num_types
        self.job_feature_dim = len(SLOT_FEATURES)
        self.context_features = BASE_CONTEXT_FEATURES + self.task_context_features
        self.context_dim = len(self.context_features)
        self.keep_action = self.window
        n = self.window * self.job_feature_dim + self.context_dim
        self.observation_space = gym.spaces.Box(0.0, 1.0, (n,), np.float32)
        self.action_space = gym.spaces.Discrete(self.window + 1)
        self.sim: Simulator | None = None
        self.scenario: Scenario | None = None
        self._mask = np.zeros(self.window + 1, dtype=bool)
        self._steps = 0
        self._done = False
        self.episode_return = 0.0

    # -- hooks of the tasks ------------------------------------------------------------------------------

    initial_power_state: int
    """the power state every node starts the episode in (a task's choice: ON for power, OFF for autoscaling)"""

    def _make_simulator(self, sc: Scenario) -> Simulator:
        """The episode's simulator, tracking node power states from `initial_power_state`."""
        return Simulator(
            sc.workload,
            sc.layout,
            sc.known_runtime_s,
            sc.multi_node_runtime_factor,
            power=self.power_model,
            initial_power=(self.initial_power_state,) * sc.layout.num_nodes,
        )

    def _unit_cost(self, t: int) -> float:
        """The task's cost of one node of type t per hour (heuristics prefer the cheapest per unit of speed)."""
        raise NotImplementedError

    def _unit_cost_feature(self, t: int) -> float:
        raise NotImplementedError

    def _accrue(self, t0_s: float, t1_s: float) -> float:
        """Reward of the interval [t0, t1) in which the state does not change."""
        raise NotImplementedError

    def _credit(self, completed: list[int]) -> float:
        """Reward at the instant `completed` jobs finished."""
        return 0.0

    def _task_context(self) -> list[float]:
        return []

    def _can_power_on(self, t: int) -> bool:
        """Task limit on turning one more node of type t on (the autoscaling budget)."""
        return True

    def _horizon_s(self) -> float:
        return math.inf

    # -- Gymnasium API ------------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        sc = self._fixed if self._fixed is not None else reset_scenario(self.config, options, self.np_random)
        if tuple(sc.layout.type_names) != self.type_names:
            raise ValueError(
                f"scenario cluster types {sc.layout.type_names} differ from the env's {self.type_names}: the "
                "action space is fixed at construction"
            )
        self.scenario = sc
        self.sim = self._make_simulator(sc)
        self._step_t0_s = 0.0
        self._prepare(sc)
        self._steps = 0
        self.episode_return = 0.0
        # arrivals at time 0: the first decision point sees them
        if self.sim.next_event_s() == self.sim.now_s:
            self.sim.step_instant()
        self._schedule()
        # the first observation is time 0 even when only KEEP is legal: reset returns no reward, so no
        # simulated time may pass in it (the return identity counts from time 0)
        self._build_mask()
        self._done = self._all_done()
        return self._observe(), self._info(False)

    def step(self, action):
        reward, done, truncated, illegal = self.act(as_action(action))
        return self._observe(), reward, done, truncated, self._info(illegal)

    def act(self, a: int) -> tuple[float, bool, bool, bool]:
        """step() without its observation and info: (reward, done, truncated, illegal); the legal actions of
        the next step are then action_masks(). For players that look only at the mask (the graders' random
        play): building the observation is about half of a step's time."""
        if self.sim is None:
            raise RuntimeError("step() before reset(): call env.reset() to start an episode")
        self._steps += 1
        self._step_t0_s = self.sim.now_s
        if self._done:
            return 0.0, True, False, False
        illegal = not (0 <= a <= self.window) or not self._mask[a]
        reward, done = 0.0, False
        if illegal:
            pass
        elif a == self.keep_action:
            reward, done = self._keep()
        else:
            t, off = divmod(a, 2)
            if off:
                self.sim.apply(PowerOff(self._node_to_turn_off(t)))
            else:
                self.sim.apply(PowerOn(self._node_to_turn_on(t)))
            self._build_mask()
            if not self._mask[: self.window].any():
                # nothing else to decide at this instant: on to the next decision point
                reward, done = self._keep()
        self.episode_return += reward
        self._done = done
        truncated = not done and self._steps >= self.max_steps
        return reward, done, truncated, illegal

    def action_masks(self) -> np.ndarray:
        return self._mask.copy()

    # -- bookkeeping --------------------------------------------------------------------------------------

    def _prepare(self, sc: Scenario) -> None:
        layout = sc.layout
        sim = self.sim
        self._num_jobs = max(1, len(sc.workload.jobs) - sim.num_rejected)
        self._log_jobs = math.log1p(self._num_jobs)
        self._type_nodes = [
            [n for n in range(layout.num_nodes) if layout.node_type[n] == t] for t in range(self.num_types)
        ]
        self._running: set[int] = set()
        self._state = sim.node_power.state  # the simulator's live list (sim/power.py states)
        self._idle_since = sim.node_power.idle_since_s  # meaningful while a node is ON and empty
        self._node_gpus = layout.node_num_gpus
        self._speed = [float(s) for s in layout.type_speed]

    def _is_idle_on(self, n: int) -> bool:
        """Node n is ON and holds no job (a job that shares a GPU counts: the GPU is not wholly free)."""
        return self._state[n] == ON and self.sim.free.node_whole[n] == self._node_gpus[n]

    def _schedule(self) -> None:
        """Let the scheduler start what it will now; track which nodes hold jobs."""
        sim = self.sim
        if not sim.queue:
            return
        for d in self._policy(sim.view()):
            sim.apply(d)
            self._running.add(d.job)

    def _collect_completions(self) -> list[int]:
        sim = self.sim
        end = sim.end_s
        done = [i for i in self._running if end[i] == end[i]]
        done.sort()
        self._running.difference_update(done)
        return done

    def _node_to_turn_on(self, t: int) -> int:
        return next(n for n in self._type_nodes[t] if self._state[n] == OFF)

    def _node_to_turn_off(self, t: int) -> int:
        best, best_since = -1, math.inf
        for n in self._type_nodes[t]:
            if self._is_idle_on(n) and self._idle_since[n] <= best_since:
                best, best_since = n, self._idle_since[n]
        return best

    def _all_done(self) -> bool:
        return self.sim.num_completed == self._num_accepted()

    def _num_accepted(self) -> int:
        return len(self.sim.jobs) - self.sim.num_rejected

    def _build_mask(self) -> None:
        mask = self._mask
        mask[:] = False
        state = self._state
        for t, nodes in enumerate(self._type_nodes):
            if any(state[n] == OFF for n in nodes) and self._can_power_on(t):
                mask[2 * t] = True
            if any(self._is_idle_on(n) for n in nodes):
                mask[2 * t + 1] = True
        # KEEP: masked only when it would end the run with jobs waiting while a node could still be turned on
        stuck = bool(self.sim.queue) and not self.sim.has_future_events and self._horizon_s() == math.inf
        mask[self.window] = not (stuck and mask[0 : self.window : 2].any())

    # -- time ---------------------------------------------------------------------------------------------

    def _keep(self) -> tuple[float, bool]:
        reward, more = self._advance()
        if not more:
            self._build_mask()
            return reward, True
        r2, done = self._to_decision_point()
        return reward + r2, done

    def _advance(self) -> tuple[float, bool]:
        """Run to the next instant: the next event, or a re-check / the horizon when nothing happens sooner.
        Returns (reward accrued, whether the episode goes on)."""
        sim = self.sim
        t0 = sim.now_s
        horizon = self._horizon_s()
        if t0 >= horizon or self._all_done():
            return 0.0, False
        t_event = sim.next_event_s()
        self._build_mask()
        power_possible = self._mask[: self.window].any()
        limit = min(t0 + self.recheck_s if power_possible else math.inf, horizon)
        if t_event > limit:
            reward = self._accrue(t0, limit)
            sim.env.run(until=limit)  # nothing happens before `limit`: only the clock moves
            return reward, limit < horizon
        if t_event == math.inf:  # nothing pending and no power action possible: the run is stuck
            return 0.0, False
        reward = self._accrue(t0, t_event)
        sim.step_instant()
        reward += self._credit(self._collect_completions())
        self._schedule()
        return reward, True

    def _to_decision_point(self) -> tuple[float, bool]:
        """Keep on the agent's behalf until some power action is legal; (reward, done)."""
        reward = 0.0
        while True:
            if self._all_done() or self.sim.now_s >= self._horizon_s():
                self._build_mask()
                return reward, True
            self._build_mask()
            if self._mask[: self.window].any():
                return reward, False
            r, more = self._advance()
            reward += r
            if not more:
                self._build_mask()
                return reward, True

    # -- observation --------------------------------------------------------------------------------------

    def _queued_demand_by_type(self) -> list[float]:
        """GPUs asked by queued jobs that accept each type (a job counts for every type it accepts)."""
        demand = [0.0] * self.num_types
        for shape, members in self.sim.queue_by_shape.items():
            elig, k, milli = shape[0], shape[1], shape[2]
            asked = len(members) * k * milli / FULL
            for t in elig.types:
                demand[t] += asked
        return demand

    def _observe(self) -> np.ndarray:
        K, F = self.window, self.job_feature_dim
        sim = self.sim
        if sim is None:
            return np.zeros(K * F + self.context_dim, dtype=np.float32)
        layout = sim.layout
        demand = self._queued_demand_by_type()
        busy_milli = [0] * self.num_types
        for _, i in sim.running:
            p = sim.placements[i]
            busy_milli[p.type_idx] += p.milli * len(p.gpus)
        vals: list[float] = []
        for t, nodes in enumerate(self._type_nodes):
            count = [0, 0, 0, 0]  # ON, BOOTING, OFF, SHUTTING_DOWN
            idle = 0
            for n in nodes:
                s = self._state[n]
                count[(ON, BOOTING, OFF, SHUTTING_DOWN).index(s)] += 1
                idle += self._is_idle_on(n)
            m = len(nodes)
            gpus = layout.type_num_gpus[t]
            common = (
                min(1.0, self._speed[t] / 2),
                self._unit_cost_feature(t),
                count[0] / m,
                count[1] / m,
                count[2] / m,
                count[3] / m,
                idle / m,
                busy_milli[t] / (FULL * gpus),
                min(1.0, demand[t] / gpus),
            )
            vals += (1.0, 0.0, *common)
            vals += (0.0, 1.0, *common)
        now = sim.now_s
        queued = sum(k * milli / FULL * len(mem) for (_, k, milli, *_), mem in sim.queue_by_shape.items())
        vals += (
            min(1.0, math.log1p(len(sim.queue)) / self._log_jobs),
            min(1.0, math.log1p(len(sim.running)) / self._log_jobs),
            min(1.0, queued / layout.num_gpus),
            sim.num_arrived / self._num_jobs,
            (1.0 + math.sin(2 * math.pi * now / _DAY_S)) / 2,
            (1.0 + math.cos(2 * math.pi * now / _DAY_S)) / 2,
        )
        vals += self._task_context()
        return np.clip(np.array(vals, dtype=np.float32), 0.0, 1.0)

    def _info(self, illegal: bool) -> dict:
        sim = self.sim
        return {
            "action_mask": self._mask.copy(),
            "illegal_action": illegal,
            "sim_time_s": sim.now_s if sim else 0.0,
            "elapsed_s": sim.now_s - self._step_t0_s if sim else 0.0,
            "jobs_in_system": sim.jobs_in_system if sim else 0,
            "nodes_on": sum(s == ON for s in self._state) if sim else 0,
        }

    def _whole_node(self, n: int) -> Placement:
        """All of node n's GPUs as one placement (to give a node that is not ON to a scratch free state)."""
        layout = self.sim.layout
        a, k = layout.node_first_gpu[n], layout.node_num_gpus[n]
        return Placement(tuple(range(a, a + k)), (n,), FULL, 0, layout.node_type[n], a)

    def fleet_view(self) -> FleetView:
        """The snapshot the reference heuristics (env/node_heuristics.py) decide on."""
        sim = self.sim
        layout = sim.layout
        jt = sim.jobs
        queue = tuple((jt.shape[i], tuple(jt.elig[i].types)) for i in islice(sim.queue, WAKE_SCAN_JOBS))
        free = sim.free.copy()
        for n, s in enumerate(self._state):
            if s == BOOTING:
                free.give(self._whole_node(n))
        all_on = free.copy()
        for n, s in enumerate(self._state):
            if s in (OFF, SHUTTING_DOWN):
                all_on.give(self._whole_node(n))
        return FleetView(
            now_s=sim.now_s,
            state=tuple(self._state),
            node_type=tuple(layout.node_type),
            idle_since_s=tuple(
                self._idle_since[n] if self._is_idle_on(n) else math.nan for n in range(layout.num_nodes)
            ),
            unit_cost=tuple(self._unit_cost(t) for t in range(self.num_types)),
            speed=tuple(self._speed),
            free=free,
            all_on_free=all_on,
            queue=queue,
            mask=tuple(bool(x) for x in self._mask),
        )
