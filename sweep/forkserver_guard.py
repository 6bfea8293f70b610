"""Imported only by a sweep's fork servers: each dies with the process that started it (Linux prctl), so a Ray
worker killed at `ray.shutdown` (or a driver killed outright) leaves no fork server behind."""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1

if sys.platform.startswith("linux"):
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL))
    except (OSError, AttributeError):
        pass  # no prctl: the fork server still exits when its parent closes its end of the pipe
    if os.getppid() == 1:  # the parent died before the guard was set
        os._exit(0)
