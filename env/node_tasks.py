"""The power and autoscaling tasks as the command line and the HTTP server use them: env construction from a
RunConfig or JSON options, JSON actions, evaluation runs of an agent or a reference node manager, and graders.

The server's registry (server/tasks.py) lists these next to `scheduling`; every function here takes plain values
so that registry stays a table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import lru_cache

import gymnasium as gym
import numpy as np

from config import TASKS, RunConfig, TaskConfig, UserError
from env.autoscale_env import AUTOSCALE_PRESETS, GPUClusterAutoscaleEnv, autoscale_config
from env.grade import Grade, grade_higher_better
from env.node_env import NodeManagerEnv
from env.node_heuristics import node_manager, run_manager
from env.power_env import GPUClusterPowerEnv
from scenario.build import Scenario, build_scenario
from schedulers import POLICIES, REPLAYS
from sim.power import PowerModel
from sim.prices import run_prices

NODE_TASKS = ("power", "autoscaling")
NODE_TASK_OPTIONS = {
    "power": ("scheduler", "jct_weight", "recheck_s"),
    "autoscaling": ("preset", "scheduler", "recheck_s"),
}
"""the task options /reset accepts besides the workload/cluster options (power only: autoscaling's workload
and fleet are the preset's)"""
TASK_SCHEDULERS = tuple(p for p in POLICIES if p not in REPLAYS)
"""the heuristics that may start a node task's jobs: not the replays of the authors' simulators (every node is
on there; switched off, a node would leave them waiting for ever)"""
REFERENCE_MANAGER = {"power": "idle_off:600:1", "autoscaling": "provision_to_demand"}
"""the reference node manager of each task: the default demonstrator"""


def check_task_config(t: TaskConfig) -> None:
    """UserError for a task setting out of range."""
    if t.name not in TASKS:
        raise UserError(f"unknown --task {t.name!r}; choose one of {', '.join(TASKS)}")
    if t.scheduler in REPLAYS:
        raise UserError(
            f"--task_scheduler {t.scheduler} replays an authors' simulator, which has every node on and no power "
            f"states; choose one of {', '.join(TASK_SCHEDULERS)}"
        )
    if t.scheduler not in POLICIES:
        raise UserError(
            f"unknown --task_scheduler {t.scheduler!r}; choose one of {', '.join(TASK_SCHEDULERS)}"
        )
    if not (t.jct_weight_eur_per_job_h >= 0 and math.isfinite(t.jct_weight_eur_per_job_h)):
        raise UserError(
            f"--jct_weight must be a finite number >= 0 EUR per job-hour, got {t.jct_weight_eur_per_job_h}"
        )
    if not (t.recheck_s > 0 and math.isfinite(t.recheck_s)):
        raise UserError(f"--recheck_s must be a finite number of seconds > 0, got {t.recheck_s}")
    if t.autoscale_preset not in AUTOSCALE_PRESETS:
        raise UserError(
            f"unknown --autoscale_preset {t.autoscale_preset!r}; choose one of {', '.join(AUTOSCALE_PRESETS)}"
        )


def task_scenario_config(cfg: RunConfig) -> RunConfig:
    """The RunConfig whose build_scenario(..., seed) gives the task's scenario for `seed`."""
    if cfg.task.name == "autoscaling":
        return autoscale_config(AUTOSCALE_PRESETS[cfg.task.autoscale_preset], cfg)
    return cfg


def make_node_env(
    cfg: RunConfig, scenario: Scenario | None = None, max_steps: int | None = None
) -> NodeManagerEnv:
    """The env of task cfg.task.name (power or autoscaling) with cfg's settings."""
    t = cfg.task
    check_task_config(t)
    if t.name == "power":
        p = cfg.power
        prices = run_prices(p.prices_path, p.price_offset_s)
        env = GPUClusterPowerEnv(
            cfg,
            scenario=scenario,
            scheduler=t.scheduler,
            power_model=PowerModel(pue=p.pue),
            prices=prices,
            jct_weight_eur_per_job_h=t.jct_weight_eur_per_job_h,
            recheck_s=t.recheck_s,
            max_steps=max_steps,
        )
    elif t.name == "autoscaling":
        env = GPUClusterAutoscaleEnv(
            t.autoscale_preset, t.scheduler, t.recheck_s, max_steps=max_steps, scenario=scenario, config=cfg
        )
    else:
        raise ValueError(f"{t.name!r} is not a node-management task")
    env.run_config = cfg  # what the power grader rebuilds its references from
    return env


def node_config_from_options(
    task: str, options: Mapping[str, object], base: RunConfig | None = None
) -> RunConfig:
    """`base` (the workload/cluster options, already parsed) with the task options of `options` (JSON values,
    command-line names without dashes: NODE_TASK_OPTIONS[task]); UserError on a wrong key or value."""
    base = base or RunConfig()
    allowed = NODE_TASK_OPTIONS[task]
    t = replace(base.task, name=task)
    for key, value in options.items():
        if key not in allowed:
            continue  # the workload/cluster options are the caller's (they are in `base`)
        if key in ("scheduler", "preset"):
            if not isinstance(value, str):
                raise UserError(f"option {key!r} must be a string, got {value!r}")
            t = replace(t, scheduler=value) if key == "scheduler" else replace(t, autoscale_preset=value)
        else:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise UserError(f"option {key!r} must be a number, got {value!r}")
            field = "jct_weight_eur_per_job_h" if key == "jct_weight" else "recheck_s"
            t = replace(t, **{field: float(value)})
    check_task_config(t)
    return replace(base, task=t)


class NodeActionError(ValueError):
    """A JSON action of a node task that cannot be read."""


def _is_int(x: object, value: int) -> bool:
    """x is the JSON integer `value` (not a float such as 1.0, not a boolean such as false == 0)."""
    return isinstance(x, int) and not isinstance(x, bool) and x == value


def read_node_action(env: NodeManagerEnv, action: object) -> int:
    """The env action of a JSON action: {"index": i} (0 <= i <= 2T), or {"gpu_type": name, "change": +1 | -1},
    or {"change": 0} (KEEP)."""
    env = env.unwrapped
    if isinstance(action, Mapping) and set(action) == {"index"}:
        i = action["index"]
        if isinstance(i, bool) or not isinstance(i, int):
            raise NodeActionError(f'"index" must be an integer, got {i!r}')
        return i
    if isinstance(action, Mapping) and set(action) == {"change"} and _is_int(action["change"], 0):
        return env.keep_action
    if isinstance(action, Mapping) and set(action) == {"gpu_type", "change"}:
        name, change = action["gpu_type"], action["change"]
        if name not in env.type_names:
            raise NodeActionError(
                f'"gpu_type" {name!r} is not a type of this cluster ({", ".join(env.type_names)})'
            )
        if not (_is_int(change, 1) or _is_int(change, -1)):
            raise NodeActionError(f'"change" must be 1 (turn one on) or -1 (turn one off), got {change!r}')
        t = env.type_names.index(name)
        return 2 * t if change == 1 else 2 * t + 1
    raise NodeActionError(
        'an action is {"index": i} (2t: one more node of type t on, 2t+1: one off, 2T: KEEP), '
        f'{{"gpu_type": name, "change": 1 or -1}} or {{"change": 0}} (KEEP); got {action!r}'
    )


def node_action_schema(env: NodeManagerEnv | None) -> dict:
    types = list(env.unwrapped.type_names) if env is not None else []
    keep = 2 * len(types) if types else None
    return {
        "oneOf": [
            {
                "type": "object",
                "properties": {
                    "index": {"type": "integer", "minimum": 0, **({"maximum": keep} if keep else {})}
                },
                "required": ["index"],
                "additionalProperties": False,
                "description": "2t turns one OFF node of type t on, 2t+1 turns one idle node of type t off, 2T "
                "keeps (T = number of GPU types); legal actions: info.action_mask",
            },
            {
                "type": "object",
                "properties": {
                    "gpu_type": {"type": "string", **({"enum": types} if types else {})},
                    "change": {"enum": [1, -1]},
                },
                "required": ["gpu_type", "change"],
                "additionalProperties": False,
            },
            {
                "type": "object",
                "properties": {"change": {"const": 0}},
                "required": ["change"],
                "additionalProperties": False,
                "description": "KEEP (= index 2T): no power change now",
            },
        ]
    }


def _finished(env: NodeManagerEnv) -> NodeManagerEnv:
    env = env.unwrapped
    if env.sim is None or not env._done:
        raise UserError("the episode is not over: step until done is true, then ask for its grade")
    return env


NODE_SUITE = ("always_on", "provision_to_demand", "idle_off:600:1", "idle_off:1800")
"""the reference node managers of every node task (autoscaling's grader: its score-1 anchor is their best)"""
POWER_SUITE = NODE_SUITE + tuple(
    f"idle_off_fit:{t}{f':{r}' if r else ''}" for t in (0, 600, 1800, 7200) for r in (0, 1, 2)
)
"""the power grader's references: NODE_SUITE and idle_off_fit over a grid (idle 0 s to 2 h before a node is
turned off, 0-2 idle nodes kept per type). Heavy-tailed runtimes make a few long jobs decide the cost and which
setting is best differs from scenario to scenario; idle_off boots a whole GPU type for a job that must wait for
a running one anyway and keeps it idle until then, which random toggling does not (it beat the four of
NODE_SUITE on 2 easy scenarios in 6)"""
SUITES = {"power": POWER_SUITE, "autoscaling": NODE_SUITE}
RANDOM_ROLLOUTS = {"power": 10, "autoscaling": 10}
"""uniform-random legal episodes whose best return is a grader's score-0 anchor (the best, not the mean: another
random episode then scores 0 ten times in eleven, however noisy random play is; power's random returns have a
long upper tail: on six easy scenarios random play averaged 0.03-0.64 against the best of 2 and NODE_SUITE,
0.002-0.07 against the best of 10 and POWER_SUITE)"""


def _scenario(cfg: RunConfig, seed: int) -> Scenario:
    return build_scenario(task_scenario_config(cfg), seed)


@lru_cache(maxsize=1024)
def _manager_return(cfg: RunConfig, seed: int, manager: str) -> float:
    return run_node_policy(cfg, _scenario(cfg, seed), None, manager).episode_return


def random_legal(rng: np.random.Generator) -> Callable[[np.ndarray, np.ndarray], int]:
    """act(obs, mask): a uniformly random legal action (a graders' score-0 player, for every task)."""
    return lambda obs, mask: int(rng.choice(np.flatnonzero(mask)))


def random_play_return(cfg: RunConfig, sc: Scenario, rng: np.random.Generator) -> float:
    """The return of one episode of uniform-random legal actions drawn from `rng` (KEEP included) through the
    task's env on scenario sc: run_node_policy(cfg, sc, random_legal(rng), None).episode_return, without
    building the observations random play never looks at (half the time)."""
    env = make_node_env(cfg, sc, max_steps=2**62)
    env.reset(seed=sc.seed)
    act = random_legal(rng)
    done = truncated = False
    while not (done or truncated):
        _, done, truncated, _ = env.act(act(None, env.action_masks()))
    return env.episode_return


@lru_cache(maxsize=64)
def _random_return(cfg: RunConfig, seed: int) -> float:
    """The best return of uniform-random legal episodes (KEEP included); rollout k draws from
    default_rng([seed, k])."""
    sc = _scenario(cfg, seed)
    returns = [
        random_play_return(cfg, sc, np.random.default_rng([seed, k]))
        for k in range(RANDOM_ROLLOUTS[cfg.task.name])
    ]
    return float(max(returns))


def node_anchors(cfg: RunConfig, seed: int) -> tuple[float, str, float]:
    """(random play's best return, the best manager of the task's suite, its return) on the task's scenario."""
    best = max(SUITES[cfg.task.name], key=lambda m: (_manager_return(cfg, seed, m), m))
    return _random_return(cfg, seed), best, _manager_return(cfg, seed, best)


def grade_node_task(env: NodeManagerEnv) -> Grade:
    """score = (return - random play's) / (best reference manager's - random play's), clipped to [0, 1]; the
    anchors run through the same env on the episode's scenario (same seed and options)."""
    e = _finished(env)
    random_return, best, reference = node_anchors(e.run_config, e.scenario.seed)
    value = e.episode_return
    unit = "return_eur" if e.run_config.task.name == "power" else "return_usd"
    return Grade(
        grade_higher_better(value, random_return, reference),
        unit,
        value,
        random_return,
        reference,
        "random",
        best,
    )


_GRADER_DOC = (
    "score = (return - R) / (B - R), clipped to [0, 1], in {unit}: R = the best return of {n} episodes of "
    "uniform-random legal actions, B = the return of the best of the reference managers {refs}, all run "
    "through the same env on the episode's scenario. 0 = no better than random play, 1 = at least as good as "
    "the best reference. Non-decreasing in the return."
)
GRADER_DOCS = {
    "power": _GRADER_DOC.format(
        unit="euros",
        n=RANDOM_ROLLOUTS["power"],
        refs="always_on, provision_to_demand, idle_off:600:1, idle_off:1800 and idle_off_fit:T:R for T = 0, "
        "600, 1800, 7200 s and R = 0, 1, 2",
    ),
    "autoscaling": _GRADER_DOC.format(
        unit="US dollars",
        n=RANDOM_ROLLOUTS["autoscaling"],
        refs="always_on, provision_to_demand, idle_off:600:1 and idle_off:1800",
    ),
}
GRADERS: dict[str, Callable[[NodeManagerEnv], Grade]] = {
    "power": grade_node_task,
    "autoscaling": grade_node_task,
}


def run_node_policy(
    cfg: RunConfig, sc: Scenario, act: Callable[[np.ndarray, np.ndarray], int] | None, manager: str | None
) -> NodeManagerEnv:
    """Run an agent (`act(obs, mask)`) or a reference node manager through the task's env on a fixed scenario
    to the episode's end; returns the finished env (its sim holds the run, episode_return its return)."""
    env = make_node_env(cfg, sc, max_steps=2**62)
    obs, info = env.reset(seed=sc.seed)
    if manager is not None:
        run_manager(env, node_manager(manager) if manager != "keep" else (lambda v: env.keep_action))
        return env
    done = truncated = False
    while not (done or truncated):
        obs, _, done, truncated, info = env.step(act(obs, info["action_mask"]))
    return env


def demonstrator_for(spec: str) -> Callable[[gym.Env], int]:
    """demonstrator(env) -> the action reference node manager `spec` takes (agents' demonstrations)."""
    manager = node_manager(spec)
    return lambda env: manager(env.unwrapped.fleet_view())
