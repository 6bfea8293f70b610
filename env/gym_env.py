"""Gymnasium facade over the same Simulator the heuristics use: observation, action mask, reward."""

from __future__ import annotations

from collections.abc import Callable
from itertools import islice

import gymnasium as gym
import numpy as np

from config import RunConfig
from env.slot_observation import CONTEXT_FEATURES, JOB_FEATURES, SlotObservation
from scenario.build import Scenario, build_scenario
from scenario.mixtures import mixture_scenario
from sim.cluster import FULL
from sim.placement import fastest_speed, fit_type, place
from sim.records import RunResult
from sim.simulator import Decision, Simulator

_tuple_new = tuple.__new__  # Decision(...) without the NamedTuple constructor's extra call (hot path)
_INF = float("inf")

REWARDS = ("jct", "jct_at_start", "delay", "slowdown", "utilization")


def reset_scenario(config: RunConfig, options: dict | None, np_random: np.random.Generator) -> Scenario:
    """The scenario of an env's `reset(options={"scenario_seed": s})` (drawn from the reset seed when absent);
    ValueError for any other key or a seed that is not an integer >= 0. Shared by every env over the simulator."""
    unknown = sorted(set(options or {}) - {"scenario_seed"})
    if unknown:
        raise ValueError(
            f"reset(options=...): unknown key(s) {', '.join(map(repr, unknown))}; the only option is "
            "'scenario_seed' (an integer >= 0; default: drawn from the reset seed)"
        )
    sc_seed = (options or {}).get("scenario_seed")
    if sc_seed is None:
        sc_seed = int(np_random.integers(0, 2**31 - 1))
    elif isinstance(sc_seed, (bool, np.bool_)) or not isinstance(sc_seed, (int, np.integer)) or sc_seed < 0:
        raise ValueError(f"reset(options=...): 'scenario_seed' must be an integer >= 0, got {sc_seed!r}")
    return build_scenario(config, int(sc_seed))


class GPUClusterEnv(gym.Env):
    """Schedule the jobs of a GPU cluster, one start decision at a time.

    ## Description
    The environment wraps the event-driven `Simulator` that the FCFS/SJF/EASY baselines run on. The agent is
    asked to act only at decision points: instants at which at least one queued job can start. It may start
    several jobs at the same instant (one per step, simulated time does not move), or WAIT, which lets the
    simulator run to its next event (an arrival or a completion), and on to the next decision point.
    A chosen job is placed by the core placement rule (sim/placement.py); `step_decision` lets a heuristic that
    chooses placements itself (EASY) start a job on its own placement, outside the agents' action space.

    ## Action Space
    `Discrete(K + 1)`: action i < K starts the job in window slot i; action K is WAIT. The window shows queued
    jobs that fit now, then, in the remaining slots, ones that do not, so a long queue of blocked jobs never
    hides startable ones. Which jobs of each group are shown: the shortest known runtimes
    (`window_order="runtime"`, default: the K shortest startable jobs are always visible, so the agent can at
    least do what SJF does) or the oldest (`"arrival"`). Within each group the shown jobs sit in arrival order
    whatever the selection, so no heuristic's choice is always the same slot (SJF's pick is wherever the
    shortest job's arrival puts it; demonstrations and DQfD's margin do not teach "slot 0").
    The legal-action mask is `info["action_mask"]`
    and `action_masks()`: slots holding a job that fits now, and WAIT unless waiting would deadlock (nothing
    running and no arrival left). An illegal action does nothing; `info["illegal_action"]` is True. An action
    that is not an integer (0.7, "0", True) raises TypeError; numpy integers and 0-d integer arrays are accepted.

    ## Observation Space
    `Box(0, 1, (K * F_job + F_ctx,), float32)`: K rows of `JOB_FEATURES` (empty slots are zeros), then
    `CONTEXT_FEATURES`: per catalog GPU type its share of the cluster (0 = absent, so "absent" differs from
    "fully busy"), free fraction, largest free block and time to its next estimated release; totals; queue and
    running counts (on a fixed log scale); time to the next estimated completion; time of day. Every value is
    clipped into [0, 1]. Nothing tells the agent about jobs still to arrive (no workload size, no arrived
    fraction). Runtime information follows `runtime_info` (true or estimated runtimes only).

    ## Rewards
    `jct` (default): -dt x (jobs in system) / reward_scale_s per elapsed interval, so the undiscounted return
    is exactly -sum(JCT) / reward_scale_s. `jct_at_start`: the same return, assigned differently: waiting jobs
    cost -dt x (queued jobs) / scale as time passes, and a started job costs its whole run time on the GPUs it
    got (-duration / scale) at the step that starts it, so the price of a slow GPU or of a long job is seen at
    once instead of hundreds of steps later. `delay`: like `jct_at_start`, but a start is charged only the
    time it loses to the GPU it got: duration - its shortest possible duration in THIS cluster (runtime / the
    effective speed of its fastest option, sim.placement.fastest_speed; >= 0, and 0 where no faster GPU
    exists, so postponing an unavoidable charge never pays), so the return is
    -(sum(JCT) - sum(shortest durations)) / scale: the policy-independent total of run times is left out, a
    start is never dearer than a WAIT just because the job is long, and values stay small enough for a
    discount below 1.

    `info["elapsed_s"]` is the simulated time the step took (0 for starts at one instant; the time to the next
    decision point for WAIT): agents discount by gamma^(elapsed_s / tau_s), so 20 starts at one instant are
    not discounted like 20 hours. `slowdown`: -dt x sum over jobs in system of 1/max(known runtime,
    10 s), i.e. -sum(bounded slowdown-like ratio). `utilization`: +dt x busy GPU share / (GPUs x scale).

    ## Starting State
    A fresh scenario: `options["scenario_seed"]` (an integer >= 0; another key is a ValueError) if given, else a
    seed drawn from the env's RNG (synthetic workloads differ per episode; trace workloads are the same jobs with
    seed-dependent estimates). The simulator is advanced to the first decision point. `step()` before the first
    `reset()` raises RuntimeError.

    ## Episode End
    Terminates when no job is waiting and no event remains (all jobs done). Truncates after `max_steps` steps.

    ## Arguments
    `config` (RunConfig: workload, cluster, sim and env sections), `scenario` (a fixed Scenario to replay every
    episode, for evaluation on the same jobs as the heuristics), `max_steps` (overrides config.env.max_steps).
    """

    metadata = {"render_modes": []}

    def __init__(
        self, config: RunConfig | None = None, scenario: Scenario | None = None, max_steps: int | None = None
    ):
        super().__init__()
        self.config = config or RunConfig()
        e = self.config.env
        if e.reward not in REWARDS:
            raise ValueError(f"unknown reward {e.reward!r}; choose one of {', '.join(REWARDS)}")
        if isinstance(e.window, bool) or not isinstance(e.window, int) or e.window < 1:
            raise ValueError(f"window must be an integer >= 1 (visible queued jobs), got {e.window!r}")
        self.window = e.window
        self.job_feature_dim = len(JOB_FEATURES)
        self.context_dim = len(CONTEXT_FEATURES)
        self.reward_name = e.reward
        if e.window_order not in ("runtime", "arrival"):
            raise ValueError(f"unknown window_order {e.window_order!r}; choose runtime or arrival")
        self.window_order = e.window_order
        self.reward_scale_s = e.reward_scale_s
        self.max_steps = e.max_steps if max_steps is None else max_steps
        self._fixed = scenario
        n = self.window * self.job_feature_dim + self.context_dim
        self.observation_space = gym.spaces.Box(0.0, 1.0, (n,), np.float32)
        self.action_space = gym.spaces.Discrete(self.window + 1)
        # the masks there can be: slots 0..nfit-1 startable, WAIT legal or not (never changed once built)
        self._masks = [
            [np.array([s < nfit for s in range(self.window)] + [wait]) for wait in (False, True)]
            for nfit in range(self.window + 1)
        ]
        self.sim: Simulator | None = None
        self.scenario: Scenario | None = None
        self._slots: list[int] = []
        self._slot_type: list[int] = []
        self._nfit = 0
        self._wait_ok = False
        self._mask = self._masks[0][False]
        self._steps = 0
        self._step_t0_s = 0.0
        self._done = False
        self._fit_of: dict[tuple, int] = {}  # the window's fit_type memo and the free state it describes
        self._fit_free = None
        self._fit_version = self._fit_gives = -1

    # -- Gymnasium API ------------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        sc = self._fixed if self._fixed is not None else reset_scenario(self.config, options, self.np_random)
        self.scenario = sc
        self.sim = sc.simulator()
        self._prepare_scenario(sc)
        self._steps = 0
        self._step_t0_s = self.sim.now_s
        reward, done = self._to_decision_point()
        obs, _, _, _, info = self._finish_step(0.0, done, False)
        return obs, info

    def step(self, action):
        a = action if type(action) is int else as_action(action)
        sim = self.sim
        if sim is None:
            raise RuntimeError("step() before reset(): call env.reset() to start an episode")
        self._steps += 1
        self._step_t0_s = sim.env._now  # (sim.now_s without its two property calls: the hot path)
        if self._done:  # nothing left to schedule (also when every job was rejected at reset)
            return self._finish_step(0.0, True, False)
        if 0 <= a < self._nfit:
            i = self._slots[a]
            reward, done = self._start(_tuple_new(Decision, (i, place(sim.free, *sim.jobs.shape[i]))))
            illegal = False
        elif a == self.window and self._wait_ok:
            reward, done = self._wait()
            illegal = False
        else:  # an empty or blocked slot, WAIT where it would deadlock, or out of range: a no-op
            reward, done, illegal = 0.0, False, True
        return self._finish_step(reward, done, illegal)

    def step_decision(self, decision: Decision):
        """`step` for a heuristic that places jobs itself: start `decision.job` on `decision.placement` (EASY
        backfills a job on one of its alternative placements, which an action, naming a job only, cannot
        express). Same transition, reward and info as the action starting that job's slot would give, except the
        placement. The job must be startable (a legal slot), else it is an illegal no-op like an illegal action;
        a placement that is not free or does not match the job raises ValueError (Simulator.start). Agents never
        need this: their action space is `step`'s."""
        self._steps += 1
        self._step_t0_s = self.sim.now_s
        if self._done:
            return self._finish_step(0.0, True, False)
        if decision.job not in self._slots[: self._nfit]:
            return self._finish_step(0.0, False, True)
        reward, done = self._start(decision)
        return self._finish_step(reward, done, False)

    def _start(self, d: Decision) -> tuple[float, bool]:
        """Start `d`, advance to the next decision point; (reward, done)."""
        self.sim.start(d)
        i = d.job
        reward, done = self._to_decision_point()
        if self.reward_name == "jct_at_start":
            reward -= self.sim.duration_s[i] / self.reward_scale_s
        elif self.reward_name == "delay":  # only the time lost to a slower GPU or a multi-node split
            reward -= (self.sim.duration_s[i] - self._shortest_s(i)) / self.reward_scale_s
        return reward, done

    def _finish_step(self, reward: float, done: bool, illegal: bool):
        """step()'s return (reset's observation and info too)."""
        self._done = done
        sim = self.sim
        now = sim.env._now
        info = {
            "action_mask": self._mask.copy(),
            "illegal_action": illegal,
            "sim_time_s": now,
            "elapsed_s": now - self._step_t0_s,
            "jobs_in_system": len(sim.queue) + len(sim.running),
        }
        obs = self._observation.observe(self._slots, self._slot_type, now)
        return obs, reward, done, not done and self._steps >= self.max_steps, info

    def action_masks(self) -> np.ndarray:
        return self._mask.copy()

    # -- simulation ---------------------------------------------------------------------------------------

    def _prepare_scenario(self, sc: Scenario) -> None:
        """Per-scenario state of the observation and rewards (per-job values are computed when first read)."""
        self._observation = SlotObservation(self.window, self.sim)
        self._shortest: dict[int, float] = {}  # job -> its shortest duration in this cluster (delay reward)
        self._fastest: dict[tuple, float] = {}  # shape -> fastest_speed
        self._rate = getattr(self, f"_rate_{self.reward_name}")
        if self.reward_name == "slowdown":
            self._inv_slowdown = [1.0 / max(r, 10.0) for r in self.sim.jobs.known_runtime_s]

    def _shortest_s(self, i: int) -> float:
        """The shortest duration job i can have in this cluster (the delay reward's reference; the true runtime,
        as the charge uses the true duration): runtime / its fastest option's effective speed."""
        v = self._shortest.get(i)
        if v is None:
            jt = self.sim.jobs
            e, k, milli, _, pace = jt.shape[i]
            key = (e, k, milli, pace)
            speed = self._fastest.get(key)
            if speed is None:
                speed = self._fastest[key] = fastest_speed(e, k, milli, pace)
            r = jt.runtime_s[i]
            v = self._shortest[i] = r / speed if speed > 0 else float("nan")  # 0: rejected, never starts
        return v

    # reward per simulated second at the current state, one method per reward (bound at reset)
    def _rate_jct(self) -> float:
        sim = self.sim
        return -(len(sim.queue) + len(sim.running)) / self.reward_scale_s

    def _rate_jct_at_start(self) -> float:  # run time (or its excess) was charged at the start
        return -len(self.sim.queue) / self.reward_scale_s

    _rate_delay = _rate_jct_at_start

    def _rate_slowdown(self) -> float:
        sim, inv = self.sim, self._inv_slowdown
        return -(sum(inv[i] for i in sim.queue) + sum(inv[i] for _, i in sim.running))

    def _rate_utilization(self) -> float:
        sim = self.sim
        return sim._busy_milli / (FULL * sim.layout.num_gpus * self.reward_scale_s)

    def _wait(self) -> tuple[float, bool]:
        """Run one event instant, then on to the next decision point; (reward, done)."""
        sim = self.sim
        env = sim.env
        t0 = env._now
        rate = self._rate()
        reward = rate * (env._now - t0) if sim.step_instant() else 0.0
        r2, done = self._to_decision_point()
        return reward + r2, done

    def _to_decision_point(self) -> tuple[float, bool]:
        """Advance instant by instant (the reward accrued per instant) until some queued job fits (True done flag
        when the run is over); builds the window."""
        reward = 0.0
        sim = self.sim
        env = sim.env
        queue = sim.queue
        while True:
            if queue and self._build_window():
                return reward, False
            t0 = env._now
            rate = self._rate()
            if sim.step_instant():
                reward += rate * (env._now - t0)
            else:  # (reward + 0.0 is reward: the sum from 0.0 is never -0.0)
                self._slots, self._slot_type = [], []
                self._nfit, self._wait_ok = 0, False
                self._mask = self._masks[0][False]
                return reward, True

    def _build_window(self) -> bool:
        """Fill the K slots (startable jobs first, then blocked ones); True if some job can start.

        Which jobs: the first K startable ones in the window order (shortest known runtime, or arrival), then the
        first blocked ones in that order; found shape by shape (whether a shape fits now is one `fit_type` call,
        however many jobs of it wait, remembered while it cannot have changed: see `_fit_of`). Usually all of a
        group fits in the window, and its order does not matter."""
        sim = self.sim
        free = sim.free
        K = self.window
        by_shape = sim.queue_by_shape
        # shape -> fit_type(free, *shape) of the shapes known for the free state as it is now: what was found
        # since the last give() stays true while nothing changed (the same `version`), and a blocked shape stays
        # blocked while only take()s happened (capacity only shrank: a fitting shape is asked again, its type
        # may have filled up); a give() or a new simulator forgets everything
        fit_of = self._fit_of
        if free.version != self._fit_version:
            if free is not self._fit_free or free.gives != self._fit_gives:
                fit_of = self._fit_of = {}
                self._fit_free, self._fit_gives = free, free.gives
            else:
                fit_of = self._fit_of = {s: t for s, t in fit_of.items() if t < 0}
            self._fit_version = free.version
        elif free is not self._fit_free:
            fit_of = self._fit_of = {}
            self._fit_free, self._fit_gives = free, free.gives
        fit_shapes: list[tuple[tuple, int]] = []
        blocked_shapes: list[tuple] = []
        num_fit = 0
        for s, members in by_shape.items():
            t = fit_of.get(s)
            if t is None:
                t = fit_of[s] = fit_type(free, *s)
            if t >= 0:
                fit_shapes.append((s, t))
                num_fit += len(members)
            else:
                blocked_shapes.append(s)
        if not fit_shapes:
            return False
        if num_fit <= K:
            if len(fit_shapes) == 1:
                s, t = fit_shapes[0]
                slots = list(by_shape[s])  # one shape: its jobs ascending already
                slot_type = [t] * num_fit
            else:
                fits = [(i, t) for s, t in fit_shapes for i in by_shape[s]]
                fits.sort()  # shown in arrival order (job index) within each group
                slots = [i for i, _ in fits]
                slot_type = [t for _, t in fits]
        else:
            slots = self._first_jobs([s for s, _ in fit_shapes], K)
            type_of, shape = dict(fit_shapes), sim.jobs.shape
            slot_type = [type_of[shape[i]] for i in slots]
        nfit = len(slots)
        room = K - nfit
        if room and blocked_shapes:
            if len(blocked_shapes) == 1:
                # one shape: its jobs ascending already, the first ones the oldest
                members = by_shape[blocked_shapes[0]]
                if self.window_order == "arrival" or len(members) <= room:
                    blocked = list(islice(members, room))
                else:
                    blocked = self._first_jobs(blocked_shapes, room)
            elif sum(len(by_shape[s]) for s in blocked_shapes) <= room:
                blocked = [i for s in blocked_shapes for i in by_shape[s]]
                blocked.sort()
            else:
                blocked = self._first_jobs(blocked_shapes, room)
            slots += blocked
            slot_type += [-1] * len(blocked)
        self._slots = slots
        self._slot_type = slot_type
        # WAIT is legal unless nothing would ever happen again (deadlock): sim.has_future_events, inlined
        heap = sim.env._queue
        wait = (bool(heap) and heap[0][0] != _INF) or sim.next_arrival_s != _INF
        self._nfit, self._wait_ok = nfit, wait
        self._mask = self._masks[nfit][wait]
        return True

    def _first_jobs(self, shapes: list[tuple], n: int) -> list[int]:
        """The first n waiting jobs of these shapes in the window order, ascending (in arrival order): the first n
        of each shape's list in that order (job indices, or (known runtime, job)), merged by one sort."""
        sim = self.sim
        arrival = self.window_order == "arrival"
        index = sim.queue_by_shape if arrival else sim.queue_by_shape_runtime
        first: list = []
        for s in shapes:
            first += islice(index[s], n)
        first.sort()
        del first[n:]
        if arrival:
            return first
        jobs = [i for _, i in first]
        jobs.sort()
        return jobs


def as_action(action) -> int:
    """The action as a Python int: an int, a numpy integer or a 0-d integer array (what SB3 passes). Anything
    else (a float such as 0.7, a string, a bool) raises TypeError rather than being truncated to some slot."""
    if isinstance(action, np.ndarray) and action.shape == () and np.issubdtype(action.dtype, np.integer):
        return int(action)
    if isinstance(action, (int, np.integer)) and not isinstance(action, (bool, np.bool_)):
        return int(action)
    raise TypeError(
        f"action must be an integer (int, numpy integer or 0-d integer array), got {type(action).__name__} "
        f"{action!r}"
    )


def heuristic_action(env: GPUClusterEnv, policy) -> int:
    """The action a heuristic takes through the env: its first decision's slot, or WAIT if it starts nothing.

    Policies are pure functions of the snapshot, so calling one again after each start reproduces the rest of
    its decisions for that instant (tests/test_schedulers.py and tests/test_invariants.py check it for EASY;
    docs/schedulers.md gives its one known limit: spread backfills). The action names the job only: the
    env places it by the core placement rule, which is the policy's placement except when EASY backfills on an
    alternative placement; `heuristic_step` keeps the policy's placement.
    """
    decisions = policy(env.sim.view())
    if not decisions:
        return env.window
    return _slot_of(env, decisions[0].job)


def heuristic_step(env: GPUClusterEnv, policy):
    """One env step taken by a heuristic with its own placement: its first decision through `step_decision`, or
    WAIT if it starts nothing. Stepping this to the end gives the native run's job records whenever the policy,
    asked again after each start, gives the rest of its decisions."""
    decisions = policy(env.sim.view())
    if not decisions:
        return env.step(env.window)
    _slot_of(env, decisions[0].job)
    return env.step_decision(decisions[0])


def _slot_of(env: GPUClusterEnv, job: int) -> int:
    try:
        return env._slots.index(job)
    except ValueError:
        raise RuntimeError(
            f"job {job} chosen by the policy is not in the window; use a larger --window"
        ) from None


def run_policy_in_env(
    cfg: RunConfig, sc: Scenario, act: Callable[[np.ndarray, np.ndarray], int], name: str
) -> RunResult:
    """Run `act(obs, mask) -> action` greedily through the env on a fixed scenario; the run's RunResult."""
    env = GPUClusterEnv(cfg, scenario=sc, max_steps=2**62)  # episodes are finite: no truncation in evaluation
    obs, info = env.reset(seed=sc.seed)
    done = truncated = False
    while not (done or truncated):
        obs, _, done, truncated, info = env.step(act(obs, info["action_mask"]))
    return env.sim.result(name, sc.seed)


def episode_env_factory(cfg: RunConfig) -> Callable[[int], object]:
    """make_env(scenario_seed) for the trainers: the plain env (it builds the scenario at reset) or one replaying
    the mixture's scenario of that seed."""
    if cfg.mix.train_mix == "none":
        return lambda scenario_seed: GPUClusterEnv(cfg)
    return lambda scenario_seed: GPUClusterEnv(cfg, scenario=mixture_scenario(cfg, scenario_seed))
