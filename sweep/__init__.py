"""Experiment sweeps: a TOML study file expands into runs of the ordinary CLI, run in parallel (sweep.cli). Imports
the CLI (a sweep's runs are command lines) and every layer below it."""
