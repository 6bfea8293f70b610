"""The server's open sessions: one env each, a lock per session, a limit on how many (shared by every server
process), idle expiry, and making room by closing the longest-idle HTTP session when every place is taken."""

from __future__ import annotations

import math
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import gymnasium as gym

HTTP, WS = "http", "ws"
"""a session's kind: an HTTP session lives until closed, expired or evicted; a WebSocket one as long as its
socket (the socket handler alone closes it, so no socket can hold a session the store has forgotten)"""


class ApiError(Exception):
    """A request the server refuses: HTTP `status`, a short machine-readable `code`, a message naming the problem."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


@dataclass
class Session:
    """One client's episode. Every field below `lock` is read and written only while holding `lock`."""

    session_id: str
    kind: str = HTTP
    lock: threading.Lock = field(default_factory=threading.Lock)
    task: object = None
    """server.tasks.Task"""
    env: gym.Env | None = None
    options: dict = field(default_factory=dict)
    seed: int = -1
    episode_id: str | None = None
    step_count: int = 0
    done: bool = False
    truncated: bool = False
    info: dict = field(default_factory=dict)
    step_cpu_s: float = float("inf")
    """CPU seconds the last step took (inf: none yet), to decide where the next one runs"""
    last_used_s: float = 0.0
    """clock time of the last request (read by the store under its own lock: a float write is atomic)"""


class LocalCount:
    """The count of open sessions when one process serves them: `value` (open) and `wanted` (creations refused
    for want of a place since a reaper last made room), read and written under get_lock()."""

    def __init__(self):
        self.value = 0
        self.wanted = 0
        self._lock = threading.Lock()

    def get_lock(self) -> threading.Lock:
        return self._lock


class SharedCount:
    """LocalCount's interface over shared memory, for the processes of one server (created before they fork)."""

    def __init__(self, ctx):
        self._array = ctx.Array("i", 2)

    def get_lock(self):
        return self._array.get_lock()

    @property
    def value(self) -> int:
        return self._array[0]

    @value.setter
    def value(self, v: int) -> None:
        self._array[0] = v

    @property
    def wanted(self) -> int:
        return self._array[1]

    @wanted.setter
    def wanted(self, v: int) -> None:
        self._array[1] = v


class SessionStore:
    """Open sessions by id. At most `max_sessions` at once across every process sharing `count` (a
    multiprocessing.Value("i") or LocalCount); an HTTP session unused for `ttl_s` seconds of `clock` is closed
    (checked at every request and by `reap()`); when every place is taken, the HTTP session idle longest, if idle
    for at least `evict_idle_s`, is closed to make room. Ids start with `prefix` (the process that holds them).
    Thread-safe."""

    def __init__(
        self,
        max_sessions: int,
        ttl_s: float,
        clock: Callable[[], float] = time.monotonic,
        evict_idle_s: float = math.inf,
        count=None,
        prefix: str = "",
    ):
        self.max_sessions = max_sessions
        self.ttl_s = ttl_s
        self.clock = clock
        self.evict_idle_s = evict_idle_s
        self.count = count if count is not None else LocalCount()
        self.prefix = prefix
        self._lock = threading.Lock()
        self._sessions: dict[str, Session] = {}
        self._gone: OrderedDict[str, str] = OrderedDict()
        """recently closed or expired ids -> why (to name it in the error), the last 4096"""

    def __len__(self) -> int:
        """Sessions open in every process."""
        with self._lock:
            self._expire()
        return self.count.value

    def local(self) -> int:
        """Sessions open in this process."""
        with self._lock:
            return len(self._sessions)

    def _idle_http(self, min_idle_s: float) -> list[tuple[float, str]]:
        """(idle seconds, id) of HTTP sessions idle more than min_idle_s and not in the middle of a request."""
        now = self.clock()
        # a session in the middle of a request (its lock held) is in use, however long that request takes
        return [
            (now - x.last_used_s, s)
            for s, x in self._sessions.items()
            if x.kind == HTTP and now - x.last_used_s > min_idle_s and not x.lock.locked()
        ]

    def _expire(self) -> None:
        for _, sid in self._idle_http(self.ttl_s):
            self._forget(sid, f"expired after {self.ttl_s:g} s unused (the server's --session_ttl_s)")

    def _evict_one(self) -> bool:
        """Close the longest-idle HTTP session idle at least evict_idle_s; False when there is none."""
        idle = self._idle_http(self.evict_idle_s - 1e-9) if math.isfinite(self.evict_idle_s) else []
        if not idle:
            return False
        idle_s, sid = max(idle)
        self._forget(
            sid,
            f"closed after {idle_s:.0f} s unused to make room for a new session (every one of the server's "
            f"--max_sessions {self.max_sessions} places was taken; --evict_idle_s {self.evict_idle_s:g})",
        )
        return True

    def _take_place(self) -> bool:
        with self.count.get_lock():
            if self.count.value >= self.max_sessions:
                return False
            self.count.value += 1
            return True

    def _forget(self, sid: str, why: str) -> Session | None:
        session = self._sessions.pop(sid, None)
        self._gone[sid] = why
        while len(self._gone) > 4096:
            self._gone.popitem(last=False)
        if session is not None:
            with self.count.get_lock():
                self.count.value -= 1
            if session.env is not None:
                session.env.close()
        return session

    def create(self, kind: str = HTTP) -> Session:
        """A new, empty session holding one of the `max_sessions` places; ApiError 429 when none is left."""
        with self._lock:
            self._expire()
            if not self._take_place() and not (self._evict_one() and self._take_place()):
                if not isinstance(self.count, LocalCount):  # another process may hold an evictable session
                    with self.count.get_lock():
                        self.count.wanted += 1  # its reaper makes room within a second
                raise ApiError(
                    429,
                    "too_many_sessions",
                    f"session limit reached: {self.count.value} sessions are open (the server's --max_sessions "
                    f"{self.max_sessions}); close one (POST /close, or close its WebSocket), or retry: an HTTP "
                    f"session unused for {self.evict_idle_s:g} s is closed to make room, one unused for "
                    f"{self.ttl_s:g} s expires",
                    {"retry-after": "1"},
                )
            session = Session(self.prefix + uuid.uuid4().hex, kind, last_used_s=self.clock())
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
                raise ApiError(404, "unknown_session", f"unknown session_id {sid[:80]!r}: {why}")
            session.last_used_s = self.clock()
            return session

    def touch(self, session: Session) -> None:
        """Its last use is now (at the end of a request: its TTL counts from there)."""
        session.last_used_s = self.clock()

    def is_open(self, sid: str) -> bool:
        with self._lock:
            return sid in self._sessions

    def gone_reason(self, sid: str) -> str:
        """Why `sid` is not open (closed, expired, evicted)."""
        with self._lock:
            return self._gone.get(sid, "never opened")

    def close(self, sid: str, why: str = "closed (POST /close)") -> bool:
        """Close `sid`; False when it was not open."""
        with self._lock:
            return self._forget(sid, why) is not None if sid in self._sessions else False

    def reap(self) -> None:
        """Expire idle HTTP sessions now, and when a creation was refused for want of a place (in any process),
        close the longest-idle evictable session of this one (the server calls this every second)."""
        with self._lock:
            self._expire()
            if self.count.wanted and self.count.value >= self.max_sessions and self._evict_one():
                with self.count.get_lock():
                    self.count.wanted = max(0, self.count.wanted - 1)

    def close_all(self, why: str = "the server shut down") -> int:
        """Close every session of this process; how many were open."""
        with self._lock:
            ids = list(self._sessions)
            for sid in ids:
                self._forget(sid, why)
            return len(ids)
