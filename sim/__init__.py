"""The simulated world: GPU catalog, cluster state, placement, jobs, the SimPy simulator, power physics, prices and
the records a run leaves. Imports only config; knows nothing of workloads' sources, policies, RL, the CLI or files."""
