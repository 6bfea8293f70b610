"""Scenario assembly: config + seed -> workload, cluster layout and the runtimes a policy may know, and the training
mixtures of such scenarios. Imports config, sim and workloads only."""
