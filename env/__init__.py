"""The simulated GPU cluster: catalog, cluster state, placement, the SimPy simulator and its Gymnasium facade."""

import gymnasium

if "GPUClusterScheduling-v0" not in gymnasium.registry:
    gymnasium.register("GPUClusterScheduling-v0", entry_point="env.gym_env:GPUClusterEnv")
