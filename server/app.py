"""The HTTP and WebSocket routes of the environment server (OpenEnv's route and payload shape, with sessions).

`uvicorn server.app:app` serves the defaults of config.ServeConfig; `python main.py --mode serve` builds the app
with `create_app(ServeConfig(...))`. Routes: POST /reset, POST /step, GET /state, GET /health, GET /schema,
GET /tasks, POST /grader, POST /close, WS /ws (docs/server.md).

Concurrency: the routes are plain functions, which FastAPI runs in its thread pool (40 threads), never on the
event loop, so a slow step (a large scenario to build, a long WAIT) holds one thread and never stalls another
session's requests. Each session has its own lock: two requests to one session run one after the other, requests
to different sessions run side by side (the GIL interleaves them; one process serves all sessions).
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from fastapi import FastAPI, Query, Request, WebSocket, WebSocketDisconnect
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from config import ServeConfig, UserError
from server.sessions import ApiError, Session, SessionStore
from server.tasks import TASKS, ActionError, Task, get_task

DEFAULT_TASK = "scheduling"
SEED_RANGE = 2**31 - 1


class ResetRequest(BaseModel):
    """POST /reset: a new session (or a new episode of `session_id`), task options at the top level."""

    model_config = ConfigDict(extra="allow", strict=True)
    task: str = Field(DEFAULT_TASK, description="a task of GET /tasks")
    seed: int | None = Field(
        None, ge=0, lt=SEED_RANGE, description="the command line's --seed (default: drawn)"
    )
    session_id: str | None = Field(None, description="reset this open session instead of starting a new one")
    episode_id: str | None = Field(None, description="OpenEnv's episode tag; ignored")


class StepRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    session_id: str
    action: Any = Field(description='the task\'s action, e.g. {"slot": 0} (GET /schema)')
    on_illegal: Literal["error", "noop"] = Field(
        "error",
        description="an action the mask forbids: error (409, nothing happens) or noop (the Gymnasium env's "
        "behaviour: a step that changes nothing, info.illegal_action true)",
    )


class SessionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    session_id: str


def _json(x: Any) -> Any:
    """numpy values as JSON values; floats keep every bit (Python's json writes repr, the shortest exact form)."""
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, dict):
        return {str(k): _json(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_json(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _respond(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(_json(body), allow_nan=False), status, media_type="application/json")


def _error(status: int, code: str, message: str) -> Response:
    return _respond({"error": code, "detail": message}, status)


def _validation_message(err: RequestValidationError | ValidationError) -> tuple[int, str, str]:
    errors = err.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        detail = "; ".join(str(e.get("ctx", {}).get("error", e.get("msg"))) for e in errors)
        return 400, "malformed_json", f"the request body is not valid JSON ({detail})"
    parts = []
    for e in errors:
        loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body") or "body"
        parts.append(
            f"{loc}: {e.get('msg')}"
            + (f" (got {e['input']!r})" if e.get("type") != "missing" and loc != "body" else "")
        )
    return 422, "bad_request", "; ".join(parts)


def space_json(space: gym.Space) -> dict:
    """A Box or Discrete space as JSON (what server/client.py rebuilds the env's spaces from)."""
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.Box):
        return {
            "type": "Box",
            "shape": list(space.shape),
            "dtype": str(space.dtype),
            "low": space.low.tolist(),
            "high": space.high.tolist(),
        }
    raise TypeError(f"no JSON form for {space}")


async def _parse(request: Request, model: type[BaseModel], empty_ok: bool = False) -> BaseModel:
    """The request's body as `model`, whatever its content type; ApiError naming what is wrong."""
    raw = await request.body()
    if not raw.strip() and empty_ok:
        return model()
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ApiError(400, "malformed_json", f"the request body is not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise ApiError(
            422, "bad_request", f"the request body must be a JSON object, got {type(data).__name__}"
        )
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ApiError(*_validation_message(err)) from None


class EnvServer:
    """The sessions and what each route does to them (no HTTP here: the routes and /ws share these methods)."""

    def __init__(self, cfg: ServeConfig, clock=None):
        self.cfg = cfg
        self.store = SessionStore(cfg.max_sessions, cfg.session_ttl_s, *(() if clock is None else (clock,)))
        self._rng = np.random.default_rng()  # seeds for resets that name none (reported back in `seed`)
        self._rng_lock = threading.Lock()

    def reset(self, req: ResetRequest, session: Session | None = None) -> dict:
        task = self._task(req.task)
        options = dict(req.model_extra or {})
        new = session is None and req.session_id is None
        if session is None:
            session = self.store.create() if new else self.store.get(req.session_id)
        try:
            with session.lock:
                try:
                    env = task.make(options)
                    seed = req.seed if req.seed is not None else self._draw_seed()
                    obs, info = task.reset(env, seed)
                except UserError as err:
                    raise ApiError(400, "bad_option", str(err)) from None
                if session.env is not None:
                    session.env.close()
                session.task, session.env, session.options, session.seed = task, env, options, seed
                session.step_count, session.done, session.truncated, session.info = 0, False, False, info
                # a scenario can end at reset (every job rejected): the scheduling env knows it, Gymnasium's API not
                session.done = bool(getattr(env.unwrapped, "_done", False))
                self.store.touch(session)
        except Exception:
            if new:
                self.store.close(session.session_id, "its /reset failed")
            raise
        return {
            "session_id": session.session_id,
            "task": task.name,
            "seed": seed,
            "observation": obs,
            "reward": None,
            "done": session.done,
            "truncated": False,
            "info": info,
            "spaces": {
                "observation": space_json(env.observation_space),
                "action": space_json(env.action_space),
            },
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

    def step(self, req: StepRequest, session: Session | None = None) -> dict:
        session = session or self.store.get(req.session_id)
        with session.lock:
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
            if (
                req.on_illegal == "error"
                and mask is not None
                and not (0 <= action < len(mask) and mask[action])
            ):
                legal = [int(i) for i in np.flatnonzero(mask)]
                raise ApiError(
                    409,
                    "illegal_action",
                    f"action {req.action!r} is not legal now; legal "
                    f"{'slots' if session.task.name == 'scheduling' else 'actions'} (info.action_mask): {legal}",
                )
            obs, reward, done, truncated, info = env.step(action)  # noop: the env's own illegal no-op
            session.step_count += 1
            session.done, session.truncated, session.info = bool(done), bool(truncated), info
            self.store.touch(session)
        return {
            "observation": obs,
            "reward": float(reward),
            "done": bool(done),
            "truncated": bool(truncated),
            "info": info,
        }

    def state(self, sid: str, jobs: bool, session: Session | None = None) -> dict:
        session = session or self.store.get(sid)
        with session.lock:
            if session.env is None:
                raise ApiError(409, "no_episode", "the session has no episode: POST /reset first")
            return {
                "session_id": session.session_id,
                "episode_id": session.session_id,
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

    def health(self) -> dict:
        return {"status": "healthy", "sessions": len(self.store), "max_sessions": self.cfg.max_sessions}

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

    def tasks(self) -> dict:
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


def create_app(cfg: ServeConfig | None = None, clock=None) -> FastAPI:
    """The app serving `cfg`'s limits; `clock` (seconds, monotonic) replaces time.monotonic for session expiry."""
    server = EnvServer(cfg or ServeConfig(), clock)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        server.store.close_all()

    app = FastAPI(title="GPU-cluster scheduling environments", version="1", lifespan=lifespan)
    app.state.env_server = server

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, err: ApiError) -> Response:
        return _error(err.status, err.code, err.message)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, err: RequestValidationError) -> Response:
        return _error(*_validation_message(err))

    @app.exception_handler(Exception)
    async def _internal(request: Request, err: Exception) -> Response:  # never crash: the request fails alone
        return _error(500, "internal_error", f"{type(err).__name__}: {err}")

    def body_of(model: type[BaseModel]) -> dict:
        """OpenAPI's description of a body the route parses itself (any content type: `curl -d` sends a form's)."""
        return {"requestBody": {"content": {"application/json": {"schema": model.model_json_schema()}}}}

    @app.post("/reset", openapi_extra=body_of(ResetRequest))
    async def reset(request: Request) -> Response:
        req = await _parse(request, ResetRequest, empty_ok=True)
        return _respond(await run_in_threadpool(server.reset, req))

    @app.post("/step", openapi_extra=body_of(StepRequest))
    async def step(request: Request) -> Response:
        req = await _parse(request, StepRequest)
        return _respond(await run_in_threadpool(server.step, req))

    @app.get("/state")
    def state(session_id: str = Query(...), jobs: bool = Query(False)) -> Response:
        return _respond(server.state(session_id, jobs))

    @app.post("/grader", openapi_extra=body_of(SessionRequest))
    async def grader(request: Request) -> Response:
        req = await _parse(request, SessionRequest)
        return _respond(await run_in_threadpool(server.grade, req.session_id))

    @app.post("/close", openapi_extra=body_of(SessionRequest))
    async def close(request: Request) -> Response:
        req = await _parse(request, SessionRequest)
        return _respond(await run_in_threadpool(server.close, req.session_id))

    @app.get("/health")
    def health() -> Response:
        return _respond(server.health())

    @app.get("/schema")
    def schema(task: str = Query(DEFAULT_TASK)) -> Response:
        return _respond(server.schema(task))

    @app.get("/tasks")
    def tasks() -> Response:
        return _respond(server.tasks())

    @app.websocket("/ws")
    async def ws(socket: WebSocket) -> None:
        await socket.accept()
        await _ws_session(server, socket)

    return app


async def _ws_session(server: EnvServer, socket: WebSocket) -> None:
    """One session over one socket, OpenEnv's protocol: {"type": "reset", "data": {...}} (the /reset body),
    {"type": "step", "data": ACTION}, {"type": "state"}, {"type": "close"}; answers {"type": "observation" |
    "state" | "error", "data": ...}. The session closes with the socket."""
    session: Session | None = None
    try:
        while True:
            raw = await socket.receive_text()
            try:
                try:
                    msg = json.loads(raw)
                except json.JSONDecodeError as err:
                    raise ApiError(400, "malformed_json", f"the message is not valid JSON ({err})") from None
                kind = msg.get("type") if isinstance(msg, dict) else None
                data = msg.get("data", {}) if isinstance(msg, dict) else None
                if kind == "close":
                    break
                if kind == "reset":
                    if not isinstance(data, dict):
                        raise ApiError(422, "bad_request", "a reset message's data must be a JSON object")
                    req = ResetRequest.model_validate({k: v for k, v in data.items() if k != "session_id"})
                    if session is None:
                        session = await run_in_threadpool(server.store.create)
                    body = await run_in_threadpool(server.reset, req, session)
                    reply = {"type": "observation", "data": body}
                elif kind == "step":
                    if session is None:
                        raise ApiError(
                            409, "no_episode", "the socket has no episode: send a reset message first"
                        )
                    action = (
                        data.get("action", data) if isinstance(data, dict) and "on_illegal" in data else data
                    )
                    on_illegal = data.get("on_illegal", "error") if isinstance(data, dict) else "error"
                    req = StepRequest.model_validate(
                        {"session_id": session.session_id, "action": action, "on_illegal": on_illegal}
                    )
                    body = await run_in_threadpool(server.step, req, server.store.get(session.session_id))
                    reply = {"type": "observation", "data": body}
                elif kind == "state":
                    if session is None:
                        raise ApiError(
                            409, "no_episode", "the socket has no episode: send a reset message first"
                        )
                    sid = session.session_id
                    body = await run_in_threadpool(
                        server.state, sid, bool(data.get("jobs")) if isinstance(data, dict) else False
                    )
                    reply = {"type": "state", "data": body}
                else:
                    raise ApiError(
                        422, "unknown_type", f"unknown message type {kind!r}; use reset, step, state or close"
                    )
            except ApiError as err:
                reply = {
                    "type": "error",
                    "data": {"code": err.code, "message": err.message, "status": err.status},
                }
            except ValidationError as err:
                status, code, message = _validation_message(err)
                reply = {"type": "error", "data": {"code": code, "message": message, "status": status}}
            except Exception as err:  # noqa: BLE001 - one bad message fails alone
                reply = {
                    "type": "error",
                    "data": {
                        "code": "internal_error",
                        "message": f"{type(err).__name__}: {err}",
                        "status": 500,
                    },
                }
            await socket.send_text(json.dumps(_json(reply), allow_nan=False))
    except WebSocketDisconnect:
        pass
    finally:
        if session is not None:
            server.store.close(session.session_id, "its WebSocket closed")
    if socket.client_state.name == "CONNECTED":
        await socket.close()


app = create_app()
