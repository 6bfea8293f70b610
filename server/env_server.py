"""What each request does to the sessions, with no HTTP in it (the routes, the WebSocket and /mcp share it):
reset (stateless or in a session), step, state, grade, close, and the discovery answers."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable

import numpy as np

from config import ServeConfig, UserError
from server.guard import (
    DataFile,
    check_built_size,
    check_requested_size,
    file_error,
    resolve_data_files,
)
from server.protocol import (
    SEED_RANGE,
    ResetRequest,
    StepRequest,
    observation,
    space_json,
)
from server.sessions import HTTP, ApiError, Session, SessionStore
from server.tasks import TASKS, ActionError, Task, get_task

INLINE_STEP_S = 0.0005
"""a session whose last step took less CPU than this (seconds) steps on the event loop (EnvServer.step_now)"""
MAX_WINDOW = 256
"""the largest `window` a session may ask for (its observation grows with it)"""
STATELESS_BUILDS = 2
"""stateless resets (no session) building a scenario at once; more wait their turn (each may be as large as
--limit_session_mb, and none holds a session place)"""
NAME = "gpu-cluster-scheduling"
DESCRIPTION = (
    "Gymnasium environments of a simulated heterogeneous GPU cluster: schedule jobs (task scheduling), turn "
    "nodes on and off for energy cost (power), rent cloud nodes under a budget (autoscaling). GET /tasks lists "
    "each task's options and grader."
)
VERSION = "1.0.0"


class EnvServer:
    """The sessions of one server process and what each route does to them."""

    def __init__(
        self, cfg: ServeConfig, clock: Callable[[], float] | None = None, count=None, prefix: str = ""
    ):
        self.cfg = cfg
        kwargs = {} if clock is None else {"clock": clock}
        self.store = SessionStore(
            cfg.max_sessions,
            cfg.session_ttl_s,
            evict_idle_s=cfg.evict_idle_s,
            count=count,
            prefix=prefix,
            **kwargs,
        )
        self._rng = np.random.default_rng()  # seeds for resets that name none (reported back in `seed`)
        self._rng_lock = threading.Lock()
        self._stateless = threading.BoundedSemaphore(STATELESS_BUILDS)

    # -- episodes ---------------------------------------------------------------------------------------------

    def _build(self, task: Task, req: ResetRequest, options: dict):
        """(env, seed, obs, info) of the reset `req` asks for, within the server's limits and data folders."""
        if isinstance(options.get("window"), int) and options["window"] > MAX_WINDOW:
            raise ApiError(
                422,
                "limit_exceeded",
                f"window {options['window']} is over this server's largest, {MAX_WINDOW}",
            )
        files = resolve_data_files(options, self.cfg.data_dirs)
        check_requested_size(self.cfg, options)
        env_options = {**options, **{f.option: f.resolved for f in files}}
        env = None
        try:
            env = task.make(env_options)
            unwrapped = env.unwrapped
            unwrapped.max_steps = min(unwrapped.max_steps, self.cfg.limit_steps)
            seed = req.seed if req.seed is not None else self._draw_seed()
            obs, info = task.reset(env, seed)
            check_built_size(self.cfg, env)
        except UserError as err:
            if env is not None:
                env.close()
            raise ApiError(400, "bad_option", self._user_message(str(err), files, task, options)) from None
        except BaseException:
            if env is not None:
                env.close()
            raise
        return env, seed, obs, info

    @staticmethod
    def _user_message(message: str, files: list[DataFile], task: Task, options: dict) -> str:
        return file_error(message, files, task.name, options) if files else message

    def reset(self, req: ResetRequest, session: Session | None = None) -> dict:
        """A new episode: in `session` (the WebSocket's), in the open session req.session_id, in a new HTTP
        session (req.open_session), or stateless (OpenEnv's HTTP /reset: nothing is kept)."""
        task = self._task(req.task)
        options = dict(req.model_extra or {})
        if session is None and req.session_id is None and not req.open_session:
            with self._stateless:
                env, seed, obs, info = self._build(task, req, options)
                env.close()
            done = bool(getattr(env.unwrapped, "_done", False))
            return self._episode_answer(None, req, task, seed, obs, info, done, env, None)
        new = session is None and req.session_id is None
        if session is None:
            session = self.store.create(HTTP) if new else self.store.get(req.session_id)
        try:
            self._acquire(session, req.timeout_s)
            try:
                env, seed, obs, info = self._build(task, req, options)
                if session.env is not None:
                    session.env.close()
                session.task, session.env, session.options, session.seed = task, env, options, seed
                session.episode_id = req.episode_id or uuid.uuid4().hex
                session.step_count, session.truncated, session.info = 0, False, info
                # a scenario can end at reset (every job rejected): the scheduling env knows it, Gymnasium's API not
                session.done = bool(getattr(env.unwrapped, "_done", False))
                self.store.touch(session)
            finally:
                session.lock.release()
        except BaseException:
            if new:
                self.store.close(session.session_id, "its /reset failed")
            raise
        return self._episode_answer(
            session, req, task, seed, obs, info, session.done, env, session.episode_id
        )

    def _episode_answer(self, session, req, task, seed, obs, info, done, env, episode_id) -> dict:
        return {
            "observation": observation(obs, info, False),
            "reward": None,
            "done": done,
            "truncated": False,
            "info": info,
            "session_id": None if session is None else session.session_id,
            "episode_id": episode_id or req.episode_id,
            "task": task.name,
            "seed": seed,
            "spaces": {
                "observation": space_json(env.observation_space),
                "action": space_json(env.action_space),
            },
            **({"request_id": req.request_id} if req.request_id else {}),
        }

    def _draw_seed(self) -> int:
        with self._rng_lock:
            return int(self._rng.integers(0, SEED_RANGE))

    @staticmethod
    def _task(name: str) -> Task:
        try:
            return get_task(name)
        except UserError as err:
            raise ApiError(404, "unknown_task", str(err)) from None

    @staticmethod
    def _acquire(session: Session, timeout_s: float | None) -> None:
        if not session.lock.acquire(timeout=-1 if timeout_s is None else timeout_s):
            raise ApiError(
                504,
                "timeout",
                f"the session was busy with another request for the whole timeout_s ({timeout_s:g} s); nothing "
                "was done",
            )

    def _session_to_step(self, req: StepRequest, session: Session | None) -> Session:
        if session is None and req.session_id is None:
            raise ApiError(
                409,
                "no_session",
                "this step names no session: OpenEnv's HTTP /step keeps no episode between requests; step over "
                'the WebSocket /ws, or open an HTTP session (POST /reset with "open_session": true) and send its '
                "session_id",
            )
        return session or self.store.get(req.session_id)

    def step(self, req: StepRequest, session: Session | None = None) -> dict:
        """One step (in a worker thread: it waits up to req.timeout_s for the session)."""
        session = self._session_to_step(req, session)
        self._acquire(session, req.timeout_s)
        try:
            return self._step_locked(session, req)
        finally:
            session.lock.release()

    def step_now(self, req: StepRequest, session: Session | None = None) -> dict | None:
        """The step, done on the calling (event-loop) thread when that is sure to be quick: the session is idle
        and its last step took under INLINE_STEP_S of CPU. None otherwise: call step() in a worker thread. (A
        hop to a worker thread costs more CPU than such a step itself.)"""
        session = self._session_to_step(req, session)
        if session.step_cpu_s >= INLINE_STEP_S or not session.lock.acquire(blocking=False):
            return None
        try:
            return self._step_locked(session, req)
        finally:
            session.lock.release()

    def _step_locked(self, session: Session, req: StepRequest) -> dict:
        env = session.env
        if env is None:
            raise ApiError(409, "no_episode", "the session has no episode: POST /reset first")
        if session.done or session.truncated:
            end = "terminated (done)" if session.done else "truncated"
            raise ApiError(409, "episode_over", f"the episode is {end}: POST /reset starts a new one")
        try:
            action = session.task.action(env, req.action)
        except ActionError as err:
            raise ApiError(422, "bad_action", str(err)) from None
        mask = session.info.get("action_mask")
        if req.on_illegal == "error" and mask is not None and not (0 <= action < len(mask) and mask[action]):
            legal = [int(i) for i in np.flatnonzero(mask)]
            raise ApiError(
                409,
                "illegal_action",
                f"action {req.action!r:.200} is not legal now; legal "
                f"{'slots' if session.task.name == 'scheduling' else 'actions'} (info.action_mask): {legal}",
            )
        t0_s = time.thread_time()
        obs, reward, done, truncated, info = env.step(action)  # noop: the env's own illegal no-op
        session.step_cpu_s = time.thread_time() - t0_s
        session.step_count += 1
        session.done, session.truncated, session.info = bool(done), bool(truncated), info
        self.store.touch(session)
        return {
            "observation": observation(obs, info, bool(truncated)),
            "reward": float(reward),
            "done": bool(done or truncated),  # OpenEnv has no `truncated`: its clients stop at done
            "truncated": bool(truncated),
            "info": info,
            **({"request_id": req.request_id} if req.request_id else {}),
        }

    def state(self, sid: str | None, jobs: bool, session: Session | None = None) -> dict:
        if session is None and sid is None:  # OpenEnv's stateless /state: a fresh env's
            return {"episode_id": None, "step_count": 0, "session_id": None}
        session = session or self.store.get(sid)
        with session.lock:
            if session.env is None:
                raise ApiError(409, "no_episode", "the session has no episode: POST /reset first")
            return {
                "session_id": session.session_id,
                "episode_id": session.episode_id,
                "task": session.task.name,
                "seed": session.seed,
                "options": session.options,
                "step_count": session.step_count,
                "done": session.done,
                "truncated": session.truncated,
                **session.task.state(session.env, jobs),
            }

    def grade(self, sid: str) -> dict:
        session = self.store.get(sid)
        with session.lock:
            if session.env is None:
                raise ApiError(409, "no_episode", "the session has no episode: POST /reset first")
            try:
                g = session.task.grade(session.env)
            except UserError as err:
                raise ApiError(409, "episode_not_over", str(err)) from None
        return {"session_id": sid, "task": session.task.name, "seed": session.seed, **g.__dict__}

    def close(self, sid: str) -> dict:
        self.store.get(sid)  # 404 naming why when it is not open
        self.store.close(sid)
        return {"session_id": sid, "closed": True}

    # -- discovery --------------------------------------------------------------------------------------------

    def health(self) -> dict:
        return {"status": "healthy", "sessions": len(self.store), "max_sessions": self.cfg.max_sessions}

    @staticmethod
    def metadata() -> dict:
        return {
            "name": NAME,
            "description": DESCRIPTION,
            "version": VERSION,
            "readme_content": None,
            "author": None,
            "documentation_url": None,
        }

    def schema(self, task_name: str) -> dict:
        task = self._task(task_name)
        return {
            "task": task.name,
            "action": task.action_schema(None),
            "observation": task.observation_schema,
            "info": task.info_doc,
            "state": {
                "type": "object",
                "properties": {
                    k: {"type": t}
                    for k, t in (
                        ("session_id", "string"),
                        ("episode_id", "string"),
                        ("task", "string"),
                        ("seed", "integer"),
                        ("step_count", "integer"),
                        ("done", "boolean"),
                        ("truncated", "boolean"),
                        ("sim_time_s", "number"),
                        *task.state_types,
                    )
                },
            },
        }

    @staticmethod
    def tasks() -> dict:
        from cli.json_options import option_help

        return {
            "tasks": [
                {
                    "name": t.name,
                    "description": t.description,
                    "options": option_help(t.option_names),
                    "grader": t.grader_doc,
                }
                for t in TASKS.values()
            ]
        }
