"""Loaded at start-up by the `python main.py` processes of tests/test_reliability.py (this folder is first on their
PYTHONPATH; nothing else imports it): it pauses the program at a named point of its work, so the test can send a
real signal exactly there, while work is under way.

SIGNAL_HOOK=module:attribute[.attribute][@N]: the N-th call (default the first) of that function first creates the
file SIGNAL_HOOK_READY, then waits (at most 120 s) until the file SIGNAL_HOOK_SENT exists - the test creates it
after sending its signal - and then runs the function as usual. A handler that raises (the run modes' stop
signals) interrupts the wait; one that only records the signal (training's) lets the function run.
"""

import importlib
import os
import time
from pathlib import Path

_spec = os.environ.get("SIGNAL_HOOK")
if _spec:
    _target, _, _nth = _spec.partition("@")
    _module_name, _, _path = _target.partition(":")
    _owner = importlib.import_module(_module_name)
    *_parents, _name = _path.split(".")
    for _part in _parents:
        _owner = getattr(_owner, _part)
    _real = getattr(_owner, _name)
    _calls = [0]

    def _paused(*args, **kwargs):
        _calls[0] += 1
        if _calls[0] == int(_nth or 1):
            Path(os.environ["SIGNAL_HOOK_READY"]).touch()
            deadline = time.monotonic() + 120
            while not Path(os.environ["SIGNAL_HOOK_SENT"]).exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        return _real(*args, **kwargs)

    setattr(_owner, _name, _paused)
