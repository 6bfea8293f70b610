"""Files a training run writes safely: atomic replacement under unique temp names, and the per-seed lock."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from config import UserError

try:  # POSIX: a lock the kernel releases when its process dies, however it dies
    import fcntl
except ImportError:  # pragma: no cover - Windows: an exclusive-create lock file, removed on exit
    fcntl = None


def temp_path(target: str | os.PathLike) -> Path:
    """A temp file beside `target` whose name no other process or call uses: `.<name>.<pid>-<uuid>.tmp`
    (hidden, and never ending in `.npz`/`.pt`, so no loader mistakes it for a finished file)."""
    target = Path(target)
    return target.with_name(f".{target.name}.{os.getpid()}-{uuid.uuid4().hex[:12]}.tmp")


def atomic_write(target: str | os.PathLike, write: Callable[[BinaryIO], None]) -> None:
    """Call `write(file)` on a unique temp file beside `target`, flush it to disk, then rename it over
    `target` in one step. Whatever happens before the rename (an error, Ctrl-C, a kill), `target` is either
    its old complete self or the new complete file, never half-written; the temp file is removed on errors."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(target)
    try:
        with open(tmp, "wb") as file:
            write(file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(target: str | os.PathLike, text: str) -> None:
    atomic_write(target, lambda file: file.write(text.encode("utf-8")))


class TrainingLock:
    """Exclusive lock `<models_dir>/<algo>_seed<S>.lock` held while one training writes that seed's models.

    The file holds the owner's pid and start time. On POSIX the lock is an `flock` on the file, so a training
    that died (even by SIGKILL) holds nothing: the file it left (naming a dead pid) is taken over at once.
    Elsewhere the file is created exclusively, and a stale one must be deleted by hand (the error says so).
    """

    def __init__(self, path: str | os.PathLike, what: str):
        self.path, self.what = Path(path), what
        self._fd: int | None = None

    def __enter__(self) -> TrainingLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def _refuse(self, holder: str) -> UserError:
        return UserError(
            f"{self.path}: another training of {self.what} is writing these models ({holder}); wait for it to "
            "finish, or train into another --models_dir or --seed"
        )

    def acquire(self) -> None:
        try:
            self._acquire()
        except OSError as err:  # a read-only models folder, or a file where the folder should be
            folder = self.path.parent
            reason = "it is a file, not a folder" if folder.is_file() else err.strerror or str(err)
            raise UserError(
                f"models folder {folder}: cannot create the training lock there ({reason})"
            ) from None

    def _acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        record = f"pid {os.getpid()}, started {time.strftime('%Y-%m-%d %H:%M:%S')}\n".encode()
        if fcntl is None:  # pragma: no cover
            self._acquire_exclusive_create(record)
            return
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.read(fd, 200).decode("utf-8", "replace").strip() or "pid unknown"
                os.close(fd)
                raise self._refuse(holder) from None
            # the holder before us may have removed the file between our open and our lock: lock the live file
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.write(fd, record)
        self._fd = fd

    def _acquire_exclusive_create(self, record: bytes) -> None:  # pragma: no cover - non-POSIX
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            holder = self.path.read_text(errors="replace").strip()
            raise self._refuse(f"{holder}; if that process no longer runs, delete the lock file") from None
        os.write(fd, record)
        self._fd = fd

    def release(self) -> None:
        if self._fd is None:
            return
        self.path.unlink(missing_ok=True)  # while still locked, so no one locks the file we remove
        os.close(self._fd)
        self._fd = None
