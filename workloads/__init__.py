"""Workload sources: the synthetic generator, the plain jobs CSV and real-trace loaders, all -> Workload."""
