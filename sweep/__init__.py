"""Experiment sweeps: a TOML study file expands into runs of the ordinary CLI, run in parallel (sweep.cli)."""
