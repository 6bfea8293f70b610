"""The registry of tasks by name: `make_task_env(task, options)` builds the Gymnasium env a client asked for.

`scheduling` is today's env (GPUClusterScheduling-v0), `power` and `autoscaling` the node-management envs
(env/node_tasks.py). Options are command-line names without dashes with JSON values; the scenario options
(workload, cluster) go into the RunConfig, the task's own options are env/node_tasks.NODE_TASK_OPTIONS.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import gymnasium as gym

from config import RunConfig
from env.node_tasks import NODE_TASK_OPTIONS, NODE_TASKS, make_node_env, node_config_from_options
from env.scenario import UserError

TASK_NAMES = ("scheduling", *NODE_TASKS)
_SCENARIO_SECTIONS = ("workload", "cluster")


def _scenario_config(options: Mapping[str, object], ignore: tuple[str, ...]) -> RunConfig:
    """RunConfig with the workload/cluster fields named in `options` (field names of WorkloadConfig and
    ClusterConfig); an unknown key is a UserError."""
    cfg = RunConfig()
    for key, value in options.items():
        if key in ignore:
            continue
        for section in _SCENARIO_SECTIONS:
            part = getattr(cfg, section)
            if key in {f.name for f in dataclasses.fields(part)}:
                cfg = dataclasses.replace(cfg, **{section: dataclasses.replace(part, **{key: value})})
                break
        else:
            raise UserError(f"unknown option {key!r}")
    return cfg


def make_task_env(task: str, options: Mapping[str, object] | None = None) -> gym.Env:
    """A fresh env of `task` built from JSON options; UserError on an unknown task or option."""
    options = dict(options or {})
    if task == "scheduling":
        from env.gym_env import GPUClusterEnv

        return GPUClusterEnv(_scenario_config(options, ()))
    if task in NODE_TASKS:
        own = NODE_TASK_OPTIONS[task]
        if task == "autoscaling":
            unknown = sorted(set(options) - set(own))
            if unknown:
                raise UserError(
                    f"unknown option(s) {', '.join(map(repr, unknown))} for task autoscaling: its workload and "
                    f"fleet are the preset's; options: {', '.join(own)}"
                )
        base = _scenario_config(options, own)
        return make_node_env(node_config_from_options(task, options, base))
    raise UserError(f"unknown task {task!r}; the tasks are {', '.join(TASK_NAMES)}")
