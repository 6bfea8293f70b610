"""Workload sources: the synthetic generator, the plain jobs CSV and real-trace loaders, all -> Workload (sim/job.py).
Imports config and sim only."""
