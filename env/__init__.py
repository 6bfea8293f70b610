"""Gymnasium facades over the one simulator: the slot scheduling env, the score env, the node power and autoscaling
envs and their tasks. Imports config, sim, workloads, schedulers, scenario and metrics; never agents, evaluation or
the CLI."""

import gymnasium

if "GPUClusterScheduling-v0" not in gymnasium.registry:
    gymnasium.register("GPUClusterScheduling-v0", entry_point="env.gym_env:GPUClusterEnv")
if "GPUClusterScore-v0" not in gymnasium.registry:
    gymnasium.register("GPUClusterScore-v0", entry_point="env.score_env:GPUClusterScoreEnv")
if "GPUClusterPower-v0" not in gymnasium.registry:
    gymnasium.register("GPUClusterPower-v0", entry_point="env.power_env:GPUClusterPowerEnv")
if "GPUClusterAutoscale-v0" not in gymnasium.registry:
    gymnasium.register("GPUClusterAutoscale-v0", entry_point="env.autoscale_env:GPUClusterAutoscaleEnv")
