"""The server's open sessions: one env each, a lock per session, a limit on how many, and idle expiry."""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import gymnasium as gym


class ApiError(Exception):
    """A request the server refuses: HTTP `status`, a short machine-readable `code`, a message naming the problem."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


@dataclass
class Session:
    """One client's episode. Every field below `lock` is read and written only while holding `lock`."""

    session_id: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    task: object = None
    """server.tasks.Task"""
    env: gym.Env | None = None
    options: dict = field(default_factory=dict)
    seed: int = -1
    step_count: int = 0
    done: bool = False
    truncated: bool = False
    info: dict = field(default_factory=dict)
    last_used_s: float = 0.0
    """clock time of the last request (read by the store under its own lock: a float write is atomic)"""


class SessionStore:
    """Open sessions by id. At most `max_sessions` at once; one unused for `ttl_s` seconds of `clock` is closed
    (checked at every request, so no background task is needed). Thread-safe."""

    def __init__(self, max_sessions: int, ttl_s: float, clock: Callable[[], float] = time.monotonic):
        self.max_sessions = max_sessions
        self.ttl_s = ttl_s
        self.clock = clock
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}
        self._gone: OrderedDict[str, str] = OrderedDict()
        """recently closed or expired ids -> why (to name it in the error), the last 4096"""

    def __len__(self) -> int:
        with self._lock:
            self._expire()
            return len(self._sessions)

    def _expire(self) -> None:
        now = self.clock()
        # a session in the middle of a request (its lock held) is in use, however long that request takes
        idle = [
            s for s, x in self._sessions.items() if now - x.last_used_s > self.ttl_s and not x.lock.locked()
        ]
        for sid in idle:
            self._forget(sid, f"expired after {self.ttl_s:g} s unused (the server's --session_ttl_s)")

    def _forget(self, sid: str, why: str) -> Session | None:
        session = self._sessions.pop(sid, None)
        self._gone[sid] = why
        while len(self._gone) > 4096:
            self._gone.popitem(last=False)
        if session is not None and session.env is not None:
            session.env.close()
        return session

    def create(self) -> Session:
        """A new, empty session holding one of the `max_sessions` places; ApiError 429 when none is left."""
        with self._lock:
            self._expire()
            if len(self._sessions) >= self.max_sessions:
                raise ApiError(
                    429,
                    "too_many_sessions",
                    f"session limit reached: {len(self._sessions)} sessions are open (the server's "
                    f"--max_sessions {self.max_sessions}); close one (POST /close) or wait until one expires "
                    f"({self.ttl_s:g} s unused)",
                )
            session = Session(uuid.uuid4().hex, last_used_s=self.clock())
            self._sessions[session.session_id] = session
            return session

    def get(self, sid: object) -> Session:
        """The open session `sid` (its last use is now); ApiError 404 naming why when there is none."""
        if not isinstance(sid, str) or not sid:
            raise ApiError(
                422, "bad_request", f"session_id must be the non-empty string /reset returned, got {sid!r}"
            )
        with self._lock:
            self._expire()
            session = self._sessions.get(sid)
            if session is None:
                why = self._gone.get(sid, "no session has this id (POST /reset starts one)")
                raise ApiError(404, "unknown_session", f"unknown session_id {sid!r}: {why}")
            session.last_used_s = self.clock()
            return session

    def touch(self, session: Session) -> None:
        """Its last use is now (at the end of a request: its TTL counts from there)."""
        session.last_used_s = self.clock()

    def close(self, sid: str, why: str = "closed (POST /close)") -> bool:
        """Close `sid`; False when it was not open."""
        with self._lock:
            return self._forget(sid, why) is not None if sid in self._sessions else False

    def close_all(self) -> None:
        with self._lock:
            for sid in list(self._sessions):
                self._forget(sid, "the server shut down")
