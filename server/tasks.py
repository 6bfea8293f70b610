"""The registry of tasks a remote client may ask for by name: how each builds its Gymnasium env from JSON options,
reads an action from JSON, and grades a finished episode in [0, 1].

Add a task by adding a `Task` to `TASKS` (the `scheduling` entry is the pattern). Option dicts hold the command
line's option names (no dashes) and JSON values; each task checks them with the command line's own checks.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache

import gymnasium as gym
import numpy as np

from cli.json_options import ENV_OPTIONS, SCENARIO_OPTIONS, run_config_from_options
from config import RunConfig, UserError
from env.grade import Grade, grade_lower_better


class ActionError(ValueError):
    """An action whose JSON shape the task cannot read (missing key, wrong type)."""


@dataclass(frozen=True)
class Task:
    name: str
    description: str
    option_names: tuple[str, ...]
    """the option keys /reset accepts for this task (command-line names)"""
    make: Callable[[Mapping[str, object]], gym.Env]
    """options -> a fresh env; raises UserError on bad options (the command line's message)"""
    reset: Callable[[gym.Env, int], tuple[np.ndarray, dict]]
    """(env, seed) -> env.reset(...): the episode with this seed (the command line's --seed)"""
    action: Callable[[gym.Env, object], object]
    """(env, JSON action) -> the env's action; raises ActionError on a wrong shape"""
    action_schema: Callable[[gym.Env | None], dict]
    """JSON schema of an action (for the env's spaces when given, else the defaults)"""
    observation_schema: dict
    """JSON schema of an observation as the server sends it"""
    info_doc: dict
    """info key -> what it holds"""
    grade: Callable[[gym.Env], Grade]
    """a finished (terminated) episode -> its Grade"""
    grader_doc: str
    state: Callable[[gym.Env, bool], dict]
    """(env, with per-job records) -> the episode's state beyond the observation, as JSON values"""
    state_types: tuple[tuple[str, str], ...] = ()
    """(key, JSON type) of the task's own /state fields beyond the common ones (GET /schema lists them)"""


# -- scheduling: today's env ----------------------------------------------------------------------------------


def _scheduling_config(options: Mapping[str, object]) -> RunConfig:
    return run_config_from_options(options, SCENARIO_OPTIONS + ENV_OPTIONS, "scheduling")


def _make_scheduling(options: Mapping[str, object]) -> gym.Env:
    from env.gym_env import GPUClusterEnv

    return GPUClusterEnv(_scheduling_config(options))


def _reset_scheduling(env: gym.Env, seed: int) -> tuple[np.ndarray, dict]:
    """The scenario of `--seed seed` (build_scenario(config, seed)), as `python main.py --seed seed` runs it."""
    return env.reset(seed=seed, options={"scenario_seed": seed})


def _scheduling_action(env: gym.Env, action: object) -> int:
    env = env.unwrapped
    if not isinstance(action, Mapping) or set(action) != {"slot"}:
        raise ActionError(
            f'an action is {{"slot": i}} (0 <= i <= {env.window}, {env.window} = WAIT), got {action!r}'
        )
    slot = action["slot"]
    if isinstance(slot, bool) or not isinstance(slot, int):
        raise ActionError(f'"slot" must be an integer, got {slot!r}')
    return slot


def _scheduling_action_schema(env: gym.Env | None) -> dict:
    window = env.unwrapped.window if env is not None else RunConfig().env.window
    return {
        "type": "object",
        "properties": {
            "slot": {
                "type": "integer",
                "minimum": 0,
                "maximum": window,
                "description": f"start the job in window slot i (< {window}), or WAIT (= {window}, the window "
                "size: option 'window'); legal slots: info.action_mask",
            }
        },
        "required": ["slot"],
        "additionalProperties": False,
    }


def observation_schema(features: str) -> dict:
    """JSON schema of an observation as the server sends it: OpenEnv's observation object."""
    return {
        "type": "object",
        "properties": {
            "features": {
                "type": "array",
                "items": {"type": "number", "minimum": 0.0, "maximum": 1.0},
                "description": features,
            },
            "action_mask": {
                "type": "array",
                "items": {"type": "boolean"},
                "description": "one per action: true where the action is legal now (as info.action_mask)",
            },
            "truncated": {
                "type": "boolean",
                "description": "the episode was cut at the step limit (done is then true as well)",
            },
        },
        "required": ["features", "action_mask", "truncated"],
    }


def _scheduling_observation_schema() -> dict:
    from env.gym_env import CONTEXT_FEATURES, JOB_FEATURES

    return observation_schema(
        "the env's float32 features: K window slots x job features, then context features (job "
        f"features: {', '.join(JOB_FEATURES)}; context: {', '.join(CONTEXT_FEATURES)})"
    )


SCHEDULING_INFO = {
    "action_mask": "list of booleans, one per action: true where the action is legal now",
    "illegal_action": "true when the step's action was an illegal no-op (on_illegal=noop)",
    "sim_time_s": "simulated time, seconds",
    "jobs_in_system": "queued and running jobs",
}


def avg_jct_s(result) -> float:
    """Average JCT (end - arrival) over completed jobs, as summary.csv's avg_jct_s."""
    from sim.records import COMPLETED

    jct = [
        e - j.arrival_s
        for j, e, s in zip(result.jobs, result.end_s, result.status, strict=True)
        if s == COMPLETED
    ]
    return float(np.mean(jct)) if jct else float("nan")


RANDOM_ROLLOUTS = 5
"""uniform-random legal episodes whose best is the grader's score-0 anchor (the best, not the mean: another random
episode then scores 0 five times in six, however noisy random play is)"""


@lru_cache(maxsize=256)
def _heuristic_jct_s(cfg: RunConfig, seed: int, algo: str) -> float:
    """avg JCT of heuristic `algo` run natively on the scenario (cached: many episodes share scenarios)."""
    from scenario.build import build_scenario
    from schedulers import POLICIES

    sim = build_scenario(cfg, seed).simulator()
    sim.run(POLICIES[algo])
    return avg_jct_s(sim.result(algo, seed))


@lru_cache(maxsize=64)
def _random_jct_s(cfg: RunConfig, seed: int) -> float:
    """The best (lowest) avg JCT of RANDOM_ROLLOUTS episodes of uniform-random legal actions (WAIT included
    when legal) through the env on the scenario; rollout k draws from np.random.default_rng([seed, k])."""
    from env.gym_env import run_policy_in_env
    from env.node_tasks import random_legal
    from scenario.build import build_scenario

    sc = build_scenario(cfg, seed)
    values = []
    for k in range(RANDOM_ROLLOUTS):
        result = run_policy_in_env(cfg, sc, random_legal(np.random.default_rng([seed, k])), "random")
        values.append(avg_jct_s(result))
    return float(min(values))


def scheduling_suite() -> tuple[str, ...]:
    """The heuristics an agent of the scheduling task can match: every non-preemptive one (the task starts
    jobs; it cannot preempt them)."""
    from schedulers import POLICIES, PREEMPTIVE

    return tuple(a for a in POLICIES if a not in PREEMPTIVE)


def scheduling_anchors(cfg: RunConfig, seed: int) -> tuple[float, str, float]:
    """(random play's avg JCT, the best heuristic of scheduling_suite(), its avg JCT) on the scenario."""
    best = min(scheduling_suite(), key=lambda a: (_heuristic_jct_s(cfg, seed, a), a))
    return _random_jct_s(cfg, seed), best, _heuristic_jct_s(cfg, seed, best)


def _grade_scheduling(env: gym.Env) -> Grade:
    env = env.unwrapped
    if env.sim is None or not env._done:
        raise UserError("the episode is not over: step until done is true, then ask for its grade")
    sc = env.scenario
    value = avg_jct_s(env.sim.result("agent", sc.seed))
    random_jct, best_name, best = scheduling_anchors(env.config, sc.seed)
    return Grade(
        grade_lower_better(value, random_jct, best), "avg_jct_s", value, random_jct, best, "random", best_name
    )


def _json_time(x: float) -> float | None:
    return float(x) if x == x else None  # NaN (never started / not finished) -> null


def _scheduling_state(env: gym.Env, with_jobs: bool) -> dict:
    """Simulated time, job counts and, when asked, every job's record as in jobs.csv (times null when none)."""
    env = env.unwrapped
    sim = env.sim
    out: dict = {
        "sim_time_s": float(sim.now_s),
        "num_jobs": len(sim.jobs),
        "rejected": sim.num_rejected,
        "arrived": sim.num_arrived,
        "queued": len(sim.queue),
        "running": len(sim.running),
        "completed": sim.num_completed,
    }
    if with_jobs:
        r = sim.result("agent", env.scenario.seed)
        out["jobs"] = [
            {
                "job_id": j.job_id,
                "submit_s": float(j.arrival_s),
                "start_s": _json_time(r.start_s[i]),
                "end_s": _json_time(r.end_s[i]),
                "runtime_s": _json_time(r.runtime_actual_s[i]),
                "num_gpus": j.gpu_demand,
                "gpu_type": r.gpu_type[i],
                "placement": r.placement[i],
                "status": r.status[i],
                "reject_reason": r.reject_reason[i],
            }
            for i, j in enumerate(r.jobs)
        ]
    return out


SCHEDULING_GRADER = (
    "score = (R - avg JCT of the episode) / (R - B), clipped to [0, 1]: R = the best avg JCT of "
    f"{RANDOM_ROLLOUTS} episodes of uniform-random legal actions, B = the avg JCT of the best non-preemptive "
    "heuristic (fcfs, sjf, easy, cbf, sjf_gate, ect: what an agent that starts jobs can match), all on the episode's scenario (same seed and "
    "options, same jobs). 0 = no better than random play, 1 = at least as good as the best heuristic; it never "
    "rises when the episode's average JCT rises. Only a terminated episode (every accepted job completed) is "
    "graded."
)


TASKS: dict[str, Task] = {
    "scheduling": Task(
        name="scheduling",
        description="Start queued jobs on a heterogeneous GPU cluster (GPUClusterScheduling-v0): action "
        '{"slot": i} starts the job in window slot i, slot K (the window size) is WAIT; observation and reward '
        "as the Gymnasium env (docs/agents.md); any workload or cluster option of the command line.",
        option_names=SCENARIO_OPTIONS + ENV_OPTIONS,
        make=_make_scheduling,
        reset=_reset_scheduling,
        action=_scheduling_action,
        action_schema=_scheduling_action_schema,
        observation_schema=_scheduling_observation_schema(),
        info_doc=SCHEDULING_INFO,
        grade=_grade_scheduling,
        grader_doc=SCHEDULING_GRADER,
        state=_scheduling_state,
    ),
}


# -- power and autoscaling: the node-management envs (env/node_tasks.py) -----------------------------------------


def _make_node(task: str) -> Callable[[Mapping[str, object]], gym.Env]:
    from env.node_tasks import NODE_TASK_OPTIONS, make_node_env, node_config_from_options

    own = NODE_TASK_OPTIONS[task]

    def make(options: Mapping[str, object]) -> gym.Env:
        if task == "autoscaling":  # the workload and fleet are the preset's
            unknown = sorted(set(options) - set(own))
            if unknown:
                raise UserError(
                    f"unknown option(s) {', '.join(map(repr, unknown))} for task autoscaling: its workload and "
                    f"fleet are the preset's; options: {', '.join(own)}"
                )
            base = RunConfig()
        else:
            unknown = sorted(set(options) - set(SCENARIO_OPTIONS) - set(own))
            if unknown:  # named here: the scenario parser alone would list only the scenario options
                raise UserError(
                    f"{task}: unknown option(s) {', '.join(map(repr, unknown))}; the options are "
                    f"{', '.join(SCENARIO_OPTIONS + own)}"
                )
            scenario = {k: v for k, v in options.items() if k not in own}
            base = run_config_from_options(scenario, SCENARIO_OPTIONS, task)
        given = {k: v for k, v in options.items() if v is not None}  # JSON null: the option's default
        return make_node_env(node_config_from_options(task, given, base))

    return make


def _node_action(env: gym.Env, action: object) -> int:
    from env.node_tasks import NodeActionError, read_node_action

    try:
        return read_node_action(env, action)
    except NodeActionError as e:
        raise ActionError(str(e)) from None


def _node_action_schema(env: gym.Env | None) -> dict:
    from env.node_tasks import node_action_schema

    return node_action_schema(env)


def _node_grade(task: str) -> Callable[[gym.Env], Grade]:
    def grade(env: gym.Env) -> Grade:
        from env.node_tasks import GRADERS

        return GRADERS[task](env)

    return grade


NODE_INFO = {
    "action_mask": "list of booleans, one per action (2T + 1: on/off per GPU type, then KEEP): true where legal",
    "illegal_action": "true when the step's action was an illegal no-op (on_illegal=noop)",
    "sim_time_s": "simulated time, seconds",
    "elapsed_s": "simulated seconds the step took (agents discount by gamma^(elapsed_s / tau_s))",
    "jobs_in_system": "queued and running jobs",
    "nodes_on": "nodes that are ON",
}


def _node_state(env: gym.Env, with_jobs: bool) -> dict:
    """The scheduling state plus the episode's return so far (the task's reward unit) and, per GPU type, how
    many of its nodes are in each power state (sim/power.py's STATE_NAMES)."""
    from sim.power import STATE_NAMES

    env = env.unwrapped
    layout, states = env.scenario.layout, env.sim.node_power.state
    nodes = [
        {
            "gpu_type": name,
            **{
                s: sum(1 for n in range(layout.num_nodes) if layout.node_type[n] == t and states[n] == k)
                for k, s in enumerate(STATE_NAMES)
            },
        }
        for t, name in enumerate(env.type_names)
    ]
    return {**_scheduling_state(env, with_jobs), "episode_return": float(env.episode_return), "nodes": nodes}


def _node_task(task: str, description: str) -> Task:
    from env.node_tasks import GRADER_DOCS, NODE_TASK_OPTIONS

    own = NODE_TASK_OPTIONS[task]
    return Task(
        name=task,
        description=description,
        option_names=own if task == "autoscaling" else SCENARIO_OPTIONS + own,
        make=_make_node(task),
        reset=_reset_scheduling,
        action=_node_action,
        action_schema=_node_action_schema,
        observation_schema=observation_schema(
            "the env's float32 features (docs/power.md: per-type slots, then queue, running, demand, time of "
            "day and the task's context)"
        ),
        info_doc=NODE_INFO,
        grade=_node_grade(task),
        grader_doc=GRADER_DOCS[task],
        state=_node_state,
        state_types=(("episode_return", "number"), ("nodes", "array")),
    )


TASKS["power"] = _node_task(
    "power",
    "Turn nodes on and off for energy cost + JCT while a heuristic starts the jobs (GPUClusterPower-v0): action "
    '{"index": i} (2t: one more node of type t on, 2t+1: one off, 2T: KEEP) or {"gpu_type": name, "change": 1 | '
    '-1} or {"change": 0}; reward -(energy cost + lambda x JCT cost) in euros.',
)
TASKS["autoscaling"] = _node_task(
    "autoscaling",
    "Rent cloud GPU nodes under a budget while a heuristic starts the jobs (GPUClusterAutoscale-v0): actions as "
    "the power task; reward = value of completed work - rental cost - SLA penalty for waiting, in US dollars; "
    "presets easy, medium, hard.",
)


def get_task(task: str) -> Task:
    if task not in TASKS:
        raise UserError(f"unknown task {task!r}; the tasks are {', '.join(TASKS)}")
    return TASKS[task]


def make_task_env(task: str, options: Mapping[str, object] | None = None) -> gym.Env:
    """A fresh env of `task` built from JSON options (command-line names); UserError on a bad task or option."""
    return get_task(task).make(options or {})
