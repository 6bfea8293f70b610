"""Imported only by a sweep's fork servers: each dies with the process that started it (Linux prctl), so a Ray
worker killed at `ray.shutdown` (or a driver killed outright) leaves no fork server behind; and each ignores the
stop signals that `timeout`, `kill` or a closed terminal send to the driver's whole process group, so that the
driver, not the signal, decides how its runs stop (a run's process restores the default handlers). It is the
first module a fork server imports: one BLAS/OpenMP thread is set before the code it preloads loads numpy."""

from __future__ import annotations

from interrupts import ignore_stop_signals
from sweep.worker import die_with_parent, limit_threads

die_with_parent()
limit_threads()
ignore_stop_signals()
