"""The score env (GPUClusterScore-v0): an agent scores every (job, GPU type) row and the score-round mechanism
(schedulers/score_rounds.py) applies the scores; plus `run_with_scorer`, the same mechanism without an env for
trainers that evaluate many episodes."""

from __future__ import annotations

import math
from collections.abc import Callable

import gymnasium as gym
import numpy as np

from config import RunConfig
from env.gym_env import reset_scenario
from env.slot_observation import CATALOG_TYPES
from scenario.build import Scenario, build_scenario
from scenario.mixtures import mixture_scenario
from schedulers.score_features import FEATURE_NAMES, NUM_FEATURES, Rows
from schedulers.score_rounds import ROUND_S, Consult, Scorer, consult, decide, make_score_policy
from sim.cluster import FULL
from sim.records import RunResult
from sim.simulator import Simulator

CONTEXT_FEATURES = (
    "at_round",  # 1 at a round (a boundary, or an arrival with rounds at arrivals: the walk may preempt), 0 at a fill
    "to_next_round",  # (next boundary - now) / round_s
    "waiting_jobs",  # log1p(waiting jobs) / log1p(100,000), clipped to 1
    "running_jobs",  # log1p(running jobs) / log1p(100,000), clipped to 1
    "free_frac_all",  # free GPU share / the cluster's GPUs
    "queued_demand",  # waiting jobs' GPU demand / the cluster's GPUs, clipped to 1
    *(f"total_{t}" for t in CATALOG_TYPES),  # the type's share of the cluster's GPUs (0: absent)
    *(f"free_frac_{t}" for t in CATALOG_TYPES),  # free whole GPUs of the type / its GPUs (0 if absent)
)
_LOG_COUNT = math.log1p(100_000)
ROW_BOUND = 1e3
"""|feature| of a row never reaches this (ln-minutes of times, ln of speeds, shares): the rows' Box bounds"""
DEFAULT_MAX_ROWS = 1024


def run_with_scorer(
    source: Scenario | RunConfig,
    scorer: Scorer,
    seed: int | None = None,
    round_s: float | None = None,
    name: str = "scorer",
    preempt: bool | None = None,
    on_arrival: bool | None = None,
) -> RunResult:
    """One run of the score-round mechanism with `scorer` (features -> scores) on a scenario, or on the scenario
    `build_scenario(config, seed)`; no env in between. `round_s` defaults to the config's (a RunConfig source)
    or ROUND_S (360 s); `preempt` (default: the config's policy.score_preempt, else True) False runs the
    non-preemptive ablation (schedulers.score_rounds.make_score_policy); `on_arrival` (default: the config's
    policy.round_on_arrival, else False) makes every arrival instant a round too. The result is the run's RunResult (job records, runs, timeline) named `name`."""
    if isinstance(source, RunConfig):
        if seed is None:
            raise ValueError("run_with_scorer(config, ...) needs the scenario seed")
        sc = build_scenario(source, seed)
        round_s = source.policy.round_s if round_s is None else round_s
        preempt = source.policy.score_preempt if preempt is None else preempt
        on_arrival = source.policy.round_on_arrival if on_arrival is None else on_arrival
    else:
        sc = source
    sim = sc.simulator()
    sim.run(
        make_score_policy(
            scorer, ROUND_S if round_s is None else round_s, preempt is not False, bool(on_arrival)
        )
    )
    return sim.result(name, sc.seed, preemptive=True)


class GPUClusterScoreEnv(gym.Env):
    """Score every active (job, GPU type) pair; a preemptive round mechanism applies the scores.

    ## Description
    The environment wraps the same event-driven `Simulator` as every heuristic and runs the score-round mechanism
    of schedulers/score_rounds.py (docs/schedulers.md, Score rounds), which `las_speed` runs with fixed weights.
    The agent acts where that mechanism consults its scorer: at every round boundary (multiples of `round_s`
    from t = 0) while some job is active (with `policy.round_on_arrival`, also at every instant at which a job
    arrives and waits: a round like a boundary's), and between boundaries at an arrival or completion after which at least
    two waiting jobs fit (with one, its start needs no score: it is applied without asking). At a boundary the
    rows are every active job (waiting or running) on every GPU type it can use; rows are taken in descending
    score while the type has room, running jobs not taken (or taken for another type) are preempted and pay the
    restore overhead when restarted, and what is left is filled in score order (a running job still restoring
    keeps its GPUs whatever its scores). Between boundaries only the
    fitting waiting jobs' rows are shown and nothing is preempted. Between two steps the simulator runs on
    (arrivals, completions, starts that need no score).

    ## Action Space
    `Box(-inf, inf, (max_rows,), float64)`: one score per row of the observation, higher = taken first. The
    scores of padded rows (mask 0) are ignored; a score that is NaN or infinite on a real row is a ValueError.
    Ties: a running job's row for its current type first, then the lower job index, then the faster type.

    ## Observation Space
    `Dict(rows=Box(-1e3, 1e3, (max_rows, F), float64), mask=MultiBinary(max_rows), context=Box(0, 1, (C,),
    float64))`. `rows[r]` holds row r's `FEATURE_NAMES` (schedulers/score_features.py; the table in
    docs/schedulers.md): the exact float64 values the native policy's scorer sees, so a linear scorer applied to
    them reproduces the native run. Real rows come first (the waiting jobs', by job index, then the running
    jobs', by estimated end; a job's rows by type, fastest first); `mask` is 1 on real rows, the rest are zeros.
    `context` is `CONTEXT_FEATURES`: whether this is a boundary, the time to the next, waiting and running
    counts, free share, queued demand, and per catalog GPU type its share of the cluster and its free fraction.
    `info["action_mask"]` is the mask as booleans; `info["num_rows"]`, `info["at_round"]`; the env's `rows`
    attribute gives each row's job and type index. Nothing tells the agent about jobs still to arrive; runtimes
    follow `runtime_info` (true or estimated).

    ## Rewards
    -(integral of the number of jobs in the system over the step's simulated time) / `reward_scale_s`: each
    step is charged the time every arrived, unfinished job spent in the system since the previous step, so the
    undiscounted return is exactly -sum(JCT) / reward_scale_s (3,600: hours). `info["elapsed_s"]` is the
    simulated time the step covered.

    ## Starting State
    A fresh scenario: `options["scenario_seed"]` (an integer >= 0) if given, else one drawn from the env's RNG
    (`reset(seed=...)`); a fixed `scenario` replays the same jobs every episode. Every random draw is the
    scenario's. The simulator runs to the first instant that needs scores.

    ## Episode End
    Terminates when no event remains (every accepted job done). No truncation: an episode lasts as many rounds as
    the workload needs (medium: about 1,500-2,300 steps). `step()` before `reset()` raises RuntimeError; more rows
    than `max_rows` at some instant raise RuntimeError (make the env with a larger `max_rows`).

    ## Arguments
    `config` (RunConfig: workload, cluster, sim; `policy.round_s` the round length, `policy.round_on_arrival`
    rounds at arrivals too), `scenario` (a fixed Scenario),
    `max_rows` (observation rows, 1,024), `reward_scale_s` (3,600).
    """

    metadata = {"render_modes": []}

    def __init__(
        self,
        config: RunConfig | None = None,
        scenario: Scenario | None = None,
        max_rows: int = DEFAULT_MAX_ROWS,
        reward_scale_s: float = 3600.0,
    ):
        super().__init__()
        self.config = config or RunConfig()
        if isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1:
            raise ValueError(f"max_rows must be an integer >= 1, got {max_rows!r}")
        if not (math.isfinite(reward_scale_s) and reward_scale_s > 0):
            raise ValueError(f"reward_scale_s must be a finite number > 0, got {reward_scale_s}")
        self.round_s = float(self.config.policy.round_s)
        self.on_arrival = bool(self.config.policy.round_on_arrival)
        self.max_rows = max_rows
        self.reward_scale_s = float(reward_scale_s)
        self._fixed = scenario
        self.observation_space = gym.spaces.Dict(
            {
                "rows": gym.spaces.Box(-ROW_BOUND, ROW_BOUND, (max_rows, NUM_FEATURES), np.float64),
                "mask": gym.spaces.MultiBinary(max_rows),
                "context": gym.spaces.Box(0.0, 1.0, (len(CONTEXT_FEATURES),), np.float64),
            }
        )
        self.action_space = gym.spaces.Box(-np.inf, np.inf, (max_rows,), np.float64)
        self.sim: Simulator | None = None
        self.scenario: Scenario | None = None
        self.rows: Rows | None = None
        self._consult: Consult | None = None
        self._done = False
        self._area_s = 0.0  # job-seconds in the system not yet charged to a step
        self._t_s = 0.0  # when the area was last brought up to date
        self._in_system = 0  # jobs in the system since then
        self._running: list[int] = []  # the jobs that may complete before the next instant the sim stops
        self._step_t0_s = 0.0

    # -- Gymnasium API ------------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        sc = self._fixed if self._fixed is not None else reset_scenario(self.config, options, self.np_random)
        self.scenario = sc
        self.sim = sc.simulator()
        self._prepare(sc)
        self._area_s = 0.0
        self._t_s = self.sim.now_s
        self._in_system = 0
        self._running = []
        self._step_t0_s = self.sim.now_s
        self._done = not self._to_next_consult()
        return self._observe(), self._info()

    def step(self, action):
        if self.sim is None:
            raise RuntimeError("step() before reset(): call env.reset() to start an episode")
        self._step_t0_s = self.sim.now_s
        if self._done:
            return self._observe(), 0.0, True, False, self._info()
        n = len(self.rows)
        scores = np.asarray(action, dtype=np.float64).reshape(-1)
        if scores.shape != (self.max_rows,):
            raise ValueError(
                f"action must hold {self.max_rows} scores (one per row), got shape {scores.shape}"
            )
        self._apply(decide(self.sim.view(), self._consult, scores[:n]))
        self._done = not self._to_next_consult()
        reward = -self._area_s / self.reward_scale_s
        self._area_s = 0.0
        return self._observe(), reward, self._done, False, self._info()

    def action_masks(self) -> np.ndarray:
        """The rows that are real (a score matters) as booleans."""
        return self._mask.astype(bool)

    # -- simulation ---------------------------------------------------------------------------------------

    def _prepare(self, sc: Scenario) -> None:
        layout = sc.layout
        total = np.zeros(len(CATALOG_TYPES))
        self._type_cols = [CATALOG_TYPES.index(t) for t in layout.type_names]
        for t, col in enumerate(self._type_cols):
            total[col] = layout.type_num_gpus[t] / layout.num_gpus
        self._total = total
        self._demand = self.sim.jobs.gpu_demand
        self._mask = np.zeros(self.max_rows, dtype=np.int8)

    def _apply(self, decisions) -> None:
        sim = self.sim
        for d in decisions:
            sim.apply(d)
        self._in_system = sim.jobs_in_system
        self._running = [j for _, j in sim.running]

    def _to_next_consult(self) -> bool:
        """Run the simulator (applying the mechanism's decisions that need no scores) to the next instant whose
        decisions need scores; False when the run is over. Charges the time jobs spend in the system."""
        sim = self.sim
        while True:
            if not sim.advance():
                self._charge(sim.now_s)
                self.rows = self._consult = None
                return False
            self._charge(sim.now_s)
            view = sim.view()
            c = consult(view, self.round_s, self.on_arrival)
            if c.rows is not None:
                if len(c.rows) > self.max_rows:
                    raise RuntimeError(
                        f"{len(c.rows)} (job, GPU type) rows at {sim.now_s:g} s exceed max_rows={self.max_rows}; "
                        "make the env with a larger max_rows"
                    )
                self._consult = c
                self.rows = c.rows
                self._in_system = sim.jobs_in_system
                self._running = [j for _, j in sim.running]
                return True
            self._apply(decide(view, c, None))

    def _charge(self, now_s: float) -> None:
        """Add the job-seconds spent in the system since the last charge: jobs in the system then, less the time
        after their end of those that completed since (arrivals only happen at instants the simulator stops)."""
        dt = now_s - self._t_s
        if dt > 0:
            area = self._in_system * dt
            end = self.sim.end_s
            for j in self._running:
                e = end[j]
                if e == e:  # completed since the last stop (NaN while running)
                    area -= now_s - e
            self._area_s += area
        self._t_s = now_s
        self._running = []

    # -- observation --------------------------------------------------------------------------------------

    def _observe(self) -> dict:
        rows = np.zeros((self.max_rows, NUM_FEATURES))
        mask = self._mask
        mask[:] = 0
        context = np.zeros(len(CONTEXT_FEATURES))
        sim = self.sim
        if sim is not None and self.rows is not None:
            n = len(self.rows)
            rows[:n] = self.rows.features
            mask[:n] = 1
            now = sim.now_s
            c = self._consult
            layout = sim.layout
            free = sim.free
            queue = sim.queue
            context[0] = 1.0 if c.at_round else 0.0
            context[1] = (c.next_round_s - now) / self.round_s
            context[2] = min(1.0, math.log1p(len(queue)) / _LOG_COUNT)
            context[3] = min(1.0, math.log1p(len(sim.running)) / _LOG_COUNT)
            context[4] = free.free_milli_total / (FULL * layout.num_gpus)
            context[5] = min(1.0, sum(map(self._demand.__getitem__, queue)) / layout.num_gpus)
            k = len(CATALOG_TYPES)
            context[6 : 6 + k] = self._total
            for t, col in enumerate(self._type_cols):
                context[6 + k + col] = free.type_whole[t] / layout.type_num_gpus[t]
        return {"rows": rows, "mask": mask.copy(), "context": context}

    def _info(self) -> dict:
        sim = self.sim
        now = sim.now_s if sim else 0.0
        return {
            "action_mask": self._mask.astype(bool),
            "num_rows": len(self.rows) if self.rows is not None else 0,
            "at_round": bool(self._consult.at_round) if self._consult is not None else False,
            "sim_time_s": now,
            "elapsed_s": now - self._step_t0_s,
            "jobs_in_system": sim.jobs_in_system if sim else 0,
        }


def run_scores_in_env(env: GPUClusterScoreEnv, act: Callable[[dict], np.ndarray], seed: int = 0) -> tuple:
    """Drive the env to the end with `act(observation) -> scores`; (RunResult, undiscounted return)."""
    obs, _ = env.reset(seed=seed)
    total = 0.0
    done = False
    while not done:
        obs, reward, done, _, _ = env.step(act(obs))
        total += reward
    return env.sim.result("scores", env.scenario.seed, preemptive=True), total


def episode_score_env_factory(
    cfg: RunConfig, max_rows: int = DEFAULT_MAX_ROWS
) -> Callable[[int], GPUClusterScoreEnv]:
    """make_env(scenario_seed) for trainers: the plain env (it builds the scenario at reset) or one replaying the
    training mixture's scenario of that seed (`--train_mix`)."""
    if cfg.mix.train_mix == "none":
        return lambda scenario_seed: GPUClusterScoreEnv(cfg, max_rows=max_rows)
    return lambda scenario_seed: GPUClusterScoreEnv(
        cfg, scenario=mixture_scenario(cfg, scenario_seed), max_rows=max_rows
    )


__all__ = [
    "CONTEXT_FEATURES",
    "FEATURE_NAMES",
    "GPUClusterScoreEnv",
    "episode_score_env_factory",
    "run_scores_in_env",
    "run_with_scorer",
]
