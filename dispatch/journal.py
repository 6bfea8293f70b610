"""The run folder's journal writer (the records and their reader are workloads/dispatch_log.py's) and the lock
that keeps a second dispatcher out of a run folder while one runs in it."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from config import UserError

LOCK = ".dispatch.lock"


class JournalWriter:
    """Appends one JSON record a line and syncs it to disk before returning: what the journal says happened
    has happened (a job is recorded as started only once its process exists, and the record is on disk
    before the dispatcher goes on)."""

    def __init__(self, path: Path):
        self.path = path
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (held open for the run)

    def write(self, event: str, t_s: float, **fields) -> None:
        self._file.write(json.dumps({"event": event, "t": t_s, **fields}, sort_keys=True) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


class FolderLock:
    """An exclusive lock on the run folder (released by the kernel if the dispatcher dies)."""

    def __init__(self, folder: Path):
        self.path = folder / LOCK
        self._file = open(self.path, "a+")  # noqa: SIM115 (held for the run)
        try:
            fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._file.seek(0)
            holder = self._file.read().strip() or "?"
            self._file.close()
            raise UserError(
                f"another dispatcher (pid {holder}) is running in {folder}; wait for it or use another --log_dir"
            ) from None
        self._file.seek(0)
        self._file.truncate()
        self._file.write(str(os.getpid()))
        self._file.flush()

    def release(self) -> None:
        self._file.close()
