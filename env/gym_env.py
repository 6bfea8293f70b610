"""Gymnasium facade over the same Simulator the heuristics use: observation, action mask, reward."""

from __future__ import annotations

import math
from collections.abc import Callable

import gymnasium as gym
import numpy as np

from config import RunConfig
from scenario.build import Scenario, build_scenario
from scenario.mixtures import mixture_scenario
from sim.catalog import CATALOG
from sim.cluster import FULL
from sim.placement import duration_s, fastest_speed, fit_type, place, spans_nodes_on
from sim.records import RunResult
from sim.simulator import Decision, Simulator

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
        self.sim: Simulator | None = None
        self.scenario: Scenario | None = None
        self._slots: list[int] = []
        self._slot_type: list[int] = []
        self._mask = np.zeros(self.window + 1, dtype=bool)
        self._steps = 0
        self._step_t0_s = 0.0
        self._done = False

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
        self._done = done
        obs = self._observe()
        return obs, self._info(False, done)

    def step(self, action):
        a = as_action(action)
        if self.sim is None:
            raise RuntimeError("step() before reset(): call env.reset() to start an episode")
        self._steps += 1
        self._step_t0_s = self.sim.now_s
        if self._done:  # nothing left to schedule (also when every job was rejected at reset)
            return self._observe(), 0.0, True, False, self._info(False, True)
        illegal = not (0 <= a <= self.window) or not self._mask[a]
        reward = 0.0
        if illegal:
            done = False
        elif a == self.window:
            reward, done = self._wait()
        else:
            i = self._slots[a]
            reward, done = self._start(Decision(i, place(self.sim.free, *self.sim.jobs.shape[i])))
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
            return self._observe(), 0.0, True, False, self._info(False, True)
        nfit = int(self._mask[: self.window].sum())
        if decision.job not in self._slots[:nfit]:
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
            reward -= (self.sim.duration_s[i] - self._shortest_s[i]) / self.reward_scale_s
        return reward, done

    def _finish_step(self, reward: float, done: bool, illegal: bool):
        self._done = done
        obs = self._observe()
        truncated = not done and self._steps >= self.max_steps
        return obs, reward, done, truncated, self._info(illegal, done)

    def action_masks(self) -> np.ndarray:
        return self._mask.copy()

    # -- simulation ---------------------------------------------------------------------------------------

    def _prepare_scenario(self, sc: Scenario) -> None:
        layout = sc.layout
        self._log_gpus = math.log2(1 + layout.num_gpus)
        self._type_cols = [CATALOG_TYPES.index(t) for t in layout.type_names]
        self._type_max_node = [0] * len(layout.type_names)
        for i in range(layout.num_nodes):
            t = layout.node_type[i]
            self._type_max_node[t] = max(self._type_max_node[t], layout.node_num_gpus[i])
        self._inv_slowdown = [1.0 / max(r, 10.0) for r in self.sim.jobs.known_runtime_s]
        jt = self.sim.jobs
        # the shortest duration each job can have in this cluster (the delay reward's reference; the true
        # runtime, as the charge uses the true duration): runtime / its fastest option's effective speed
        speeds: dict[tuple, float] = {}
        self._shortest_s = []
        for r, (e, k, milli, _, pace) in zip(jt.runtime_s, jt.shape, strict=True):
            key = (e, k, milli, pace)
            v = speeds.get(key)
            if v is None:
                v = speeds[key] = fastest_speed(e, k, milli, pace)
            self._shortest_s.append(r / v if v > 0 else float("nan"))  # v == 0: rejected, never starts
        self._type_share = [n / layout.num_gpus for n in layout.type_num_gpus]
        self._static_rows = self._static_job_features()

    def _static_job_features(self) -> list[list[float]]:
        """Per job: [gpu_demand, gpu_mem, runtime, priority] features (the parts of a slot row that never change)."""
        jt = self.sim.jobs
        demand = np.array([k * m / FULL for k, m in zip(jt.num_gpus, jt.milli, strict=True)])
        mem = np.array([j.gpu_mem_gb for j in jt.jobs])
        known = np.array(jt.known_runtime_s)
        prio = np.array(jt.priority, dtype=float)
        self._demand = demand.tolist()
        self._zero_rows = [0.0] * (self.window * len(JOB_FEATURES))
        self._ctx_template = [0.0] * len(CATALOG_TYPES)
        out = np.stack(
            [
                np.log2(1 + demand) / self._log_gpus,
                mem / 80.0,
                np.log1p(known / 60.0) / _MAX_MIN,
                np.minimum(np.maximum(prio, 0), 10) / 10.0,
            ],
            axis=1,
        )
        return np.clip(out, 0.0, 1.0).astype(np.float32).tolist()

    def _rate(self) -> float:
        """Reward per simulated second at the current state."""
        sim = self.sim
        if self.reward_name == "jct":
            return -sim.jobs_in_system / self.reward_scale_s
        if self.reward_name in ("jct_at_start", "delay"):  # run time (or its excess) was charged at the start
            return -len(sim.queue) / self.reward_scale_s
        if self.reward_name == "slowdown":
            inv = self._inv_slowdown
            total = sum(inv[i] for i in sim.queue) + sum(inv[i] for _, i in sim.running)
            return -total
        return sim._busy_milli / (FULL * sim.layout.num_gpus * self.reward_scale_s)

    def _advance_instant(self) -> tuple[float, bool]:
        """Run one event instant; returns (reward accrued, whether events remained)."""
        sim = self.sim
        t0 = sim.now_s
        rate = self._rate()
        if not sim.step_instant():
            return 0.0, False
        return rate * (sim.now_s - t0), True

    def _wait(self) -> tuple[float, bool]:
        reward, _ = self._advance_instant()
        r2, done = self._to_decision_point()
        return reward + r2, done

    def _to_decision_point(self) -> tuple[float, bool]:
        """Advance until some queued job fits (True done flag when the run is over); builds the window."""
        reward = 0.0
        while True:
            if self.sim.queue and self._build_window():
                return reward, False
            r, more = self._advance_instant()
            reward += r
            if not more:
                self._slots, self._slot_type = [], []
                self._mask[:] = False
                return reward, True

    def _build_window(self) -> bool:
        """Fill the K slots (startable jobs first, then blocked ones); True if some job can start."""
        sim = self.sim
        shape = sim.jobs.shape
        free = sim.free
        K = self.window
        fit_slots: list[int] = []
        fit_type_idx: list[int] = []
        blocked: list[int] = []
        memo: dict = {}
        order = sim.queue if self.window_order == "arrival" else (i for _, i in sim.queue_by_runtime)
        for i in order:
            key = shape[i]
            t = memo.get(key)
            if t is None:
                t = memo[key] = fit_type(free, *key)
            if t >= 0:
                fit_slots.append(i)
                fit_type_idx.append(t)
                if len(fit_slots) == K:
                    break
            elif len(blocked) < K:
                blocked.append(i)
        if not fit_slots:
            return False
        nfit = len(fit_slots)
        # shown in arrival order (job index) within each group, whichever jobs the order selected
        fits = sorted(zip(fit_slots, fit_type_idx, strict=True))
        slots = [i for i, _ in fits] + sorted(blocked[: K - nfit])
        self._slots = slots
        self._slot_type = [t for _, t in fits] + [-1] * (len(slots) - nfit)
        mask = self._mask
        mask[:] = False
        mask[:nfit] = True
        # WAIT is legal unless nothing would ever happen again (deadlock)
        mask[K] = sim.has_future_events
        return True

    # -- observation --------------------------------------------------------------------------------------

    def _observe(self) -> np.ndarray:
        """Build the observation in plain Python (cheaper than many tiny numpy ops), then one array."""
        sim = self.sim
        K, F = self.window, self.job_feature_dim
        if sim is None:
            return np.zeros(K * F + self.context_dim, dtype=np.float32)
        now = sim.now_s
        jt = sim.jobs
        layout = sim.layout
        queue = sim.queue
        head = next(iter(queue), -1)
        static = self._static_rows
        arrival = jt.arrival_s
        known = jt.known_runtime_s
        speed = layout.type_speed
        shape = jt.shape
        log1p = math.log1p
        vals: list[float] = []
        for i, t in zip(self._slots, self._slot_type, strict=True):
            demand, mem, runtime, prio = static[i]
            waited = min(1.0, log1p((now - arrival[i]) / 60.0) / _MAX_MIN)
            if t >= 0:
                e, k, milli, _, pace = shape[i]
                d = duration_s(known[i], speed[t], spans_nodes_on(e, k, milli, t), pace)
                here = min(1.0, log1p(d / 60.0) / _MAX_MIN)
                vals += (demand, mem, runtime, here, waited, prio, 1.0, 1.0 if i == head else 0.0)
            else:
                vals += (demand, mem, runtime, 0.0, waited, prio, 0.0, 1.0 if i == head else 0.0)
        vals += self._zero_rows[: (K - len(self._slots)) * F]
        free = sim.free
        free_frac = self._ctx_template.copy()
        block = self._ctx_template.copy()
        type_block = [0] * len(layout.type_names)
        pool_type = layout.pool_type
        for q, by_c in enumerate(free.pool_free):
            for c in range(len(by_c) - 1, 0, -1):
                if by_c[c]:
                    if c > type_block[pool_type[q]]:
                        type_block[pool_type[q]] = c
                    break
        total = self._ctx_template.copy()
        release = [1.0] * len(CATALOG_TYPES)
        for t, col in enumerate(self._type_cols):
            total[col] = self._type_share[t]
            free_frac[col] = free.type_whole[t] / layout.type_num_gpus[t]
            block[col] = type_block[t] / self._type_max_node[t]
        running = sim.running
        placements = sim.placements
        left = len(self._type_cols)
        seen = [False] * left
        for end, j in running:  # by estimated end: the first job seen on a type is its next release
            t = placements[j].type_idx
            if not seen[t]:
                seen[t] = True
                release[self._type_cols[t]] = min(1.0, log1p(max(end - now, 0.0) / 60.0) / _MAX_MIN)
                left -= 1
                if not left:
                    break
        demand = self._demand
        vals += total
        vals += free_frac
        vals += block
        vals += release
        vals += (
            free.free_milli_total / (FULL * layout.num_gpus),
            min(1.0, log1p(len(queue)) / _LOG_COUNT),
            min(1.0, log1p(len(running)) / _LOG_COUNT),
            min(1.0, sum(map(demand.__getitem__, queue)) / layout.num_gpus),
            min(1.0, log1p(max(running[0][0] - now, 0.0) / 60.0) / _MAX_MIN) if running else 0.0,
            (1.0 + math.sin(2 * math.pi * now / _DAY_S)) / 2,
            (1.0 + math.cos(2 * math.pi * now / _DAY_S)) / 2,
        )
        return np.array(vals, dtype=np.float32)

    def _info(self, illegal: bool, done: bool) -> dict:
        now = self.sim.now_s if self.sim else 0.0
        return {
            "action_mask": self._mask.copy(),
            "illegal_action": illegal,
            "sim_time_s": now,
            "elapsed_s": now - self._step_t0_s,
            "jobs_in_system": self.sim.jobs_in_system if self.sim else 0,
        }


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
