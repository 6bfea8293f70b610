"""The HTTP and WebSocket routes of the environment server, in OpenEnv's shape (docs/server.md).

`uvicorn server.app:app` serves the defaults of config.ServeConfig; `python main.py --mode serve` builds the app
with `create_app(ServeConfig(...))`. OpenEnv's routes: POST /reset, POST /step, GET /state, GET /health,
GET /metadata, GET /schema, POST /mcp, WS /ws; this server's own: GET /tasks, POST /grader, POST /close, and
HTTP sessions (`open_session`, `session_id`).

Concurrency: env work runs in FastAPI's thread pool (40 threads), never on the event loop, so a slow step (a
large scenario to build, a long WAIT) holds one thread and never stalls another session's requests. Each session
has its own lock: two requests to one session run one after the other, requests to different sessions side by
side (the GIL interleaves them; `--processes N` runs N server processes, a session living in one of them).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request, WebSocket, WebSocketDisconnect
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from config import ServeConfig
from server import mcp
from server.env_server import DESCRIPTION, VERSION, EnvServer
from server.protocol import (
    DEFAULT_TASK,
    ResetRequest,
    SessionRequest,
    StepRequest,
    dumps,
    error_body,
    parse_json_object,
    validate,
    validation_message,
)
from server.sessions import WS, ApiError, Session

OPEN_ROUTES = ("/health",)
"""routes that need no token (a load balancer's health check)"""
REAP_EVERY_S = 1.0
"""how often idle sessions are expired (and, when every place is taken, an idle HTTP one closed)"""
ROUTES = "GET /health, /metadata, /schema, /state, /tasks; POST /reset, /step, /grader, /close, /mcp; WS /ws"


def _respond(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(dumps(body), status, headers=headers, media_type="application/json")


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response:
    return _respond(error_body(code, message), status, headers)


class Guard:
    """ASGI middleware in front of every route: the bearer token (when the server has one) and the request body
    size limit (a body over it is answered 413 before it is read whole)."""

    def __init__(self, app: FastAPI, cfg: ServeConfig):
        self.app = app
        self.state = app.state  # app.state.env_server: the sessions (tests read them)
        self.token = cfg.token.encode() if cfg.token else None
        self.limit_bytes = cfg.limit_body_kb * 1024
        self.limit_kb = cfg.limit_body_kb

    def _authorized(self, scope) -> bool:
        if self.token is None or scope["path"] in OPEN_ROUTES:
            return True
        given = dict(scope["headers"]).get(b"authorization", b"")
        return hmac.compare_digest(given, b"Bearer " + self.token)

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        if not self._authorized(scope):
            if scope["type"] == "websocket":  # closed before the handshake completes: the client sees a 403
                await send({"type": "websocket.close", "code": 1008, "reason": "unauthorized"})
                return None
            return await _send(
                send,
                _error(
                    401,
                    "unauthorized",
                    "this server needs its token: send the header Authorization: Bearer TOKEN",
                    {"www-authenticate": "Bearer"},
                ),
            )
        if scope["type"] == "websocket":  # message size: uvicorn's ws_max_size
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit_bytes:
            return await _send(send, self._too_large())
        chunks, size, more = [], 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return None  # the client went away
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            more = message.get("more_body", False)
            if size > self.limit_bytes:
                return await _send(send, self._too_large())
        body = b"".join(chunks)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)

    def _too_large(self) -> Response:
        return _error(
            413,
            "body_too_large",
            f"the request body is over this server's limit of {self.limit_kb:,} KiB (its --limit_body_kb)",
        )


async def _send(send, response: Response) -> None:
    await send(
        {"type": "http.response.start", "status": response.status_code, "headers": response.raw_headers}
    )
    await send({"type": "http.response.body", "body": response.body})


Forward = Callable[[str, Request, bytes], Awaitable[Response | None]]
"""(session_id, request, body) -> the answer of the process holding that session, or None when it is this one"""


async def _local(sid: str, request: Request, body: bytes) -> Response | None:
    return None


def create_app(
    cfg: ServeConfig | None = None, clock=None, count=None, prefix: str = "", forward: Forward = _local
):
    """The app serving `cfg`; `clock` (seconds, monotonic) replaces time.monotonic for session expiry; `count`,
    `prefix` and `forward`: the shared session count, this process's session-id prefix and the hop to the
    process that holds a session (server/processes.py)."""
    cfg = cfg or ServeConfig()
    server = EnvServer(cfg, clock, count, prefix)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        async def reap():
            while True:
                await asyncio.sleep(REAP_EVERY_S)
                await run_in_threadpool(server.store.reap)

        reaper = asyncio.create_task(reap())
        yield
        reaper.cancel()
        server.store.close_all()

    app = FastAPI(
        title="GPU-cluster scheduling environments",
        description=DESCRIPTION,
        version=VERSION,
        lifespan=lifespan,
    )
    app.state.env_server = server

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, err: ApiError) -> Response:
        return _error(err.status, err.code, err.message, err.headers)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, err: RequestValidationError) -> Response:
        return _error(*validation_message(err))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, err: StarletteHTTPException) -> Response:
        if err.status_code == 404:
            return _error(
                404, "no_such_route", f"no route {request.method} {request.url.path}; the routes: {ROUTES}"
            )
        if err.status_code == 405:
            return _error(
                405,
                "method_not_allowed",
                f"{request.url.path} does not take {request.method}; the routes: {ROUTES}",
            )
        return _error(err.status_code, "http_error", str(err.detail))

    @app.exception_handler(Exception)
    async def _internal(request: Request, err: Exception) -> Response:  # never crash: the request fails alone
        return _error(500, "internal_error", f"{type(err).__name__}: {err}")

    def body_of(model: type[BaseModel]) -> dict:
        """OpenAPI's description of a body the route parses itself (any content type: `curl -d` sends a form's)."""
        return {"requestBody": {"content": {"application/json": {"schema": model.model_json_schema()}}}}

    async def parsed(request: Request, model: type[BaseModel], empty_ok: bool = False):
        """(raw body, its model, the process answer when the session lives in another process, else None)."""
        raw = await request.body()
        data = {} if empty_ok and not raw.strip() else parse_json_object(raw)
        req = validate(model, data)
        sid = getattr(req, "session_id", None)
        elsewhere = await forward(sid, request, raw) if sid else None
        return raw, req, elsewhere

    @app.post("/reset", openapi_extra=body_of(ResetRequest))
    async def reset(request: Request) -> Response:
        _, req, elsewhere = await parsed(request, ResetRequest, empty_ok=True)
        return elsewhere or _respond(await run_in_threadpool(server.reset, req))

    @app.post("/step", openapi_extra=body_of(StepRequest))
    async def step(request: Request) -> Response:
        _, req, elsewhere = await parsed(request, StepRequest)
        if elsewhere:
            return elsewhere
        return _respond(server.step_now(req) or await run_in_threadpool(server.step, req))

    @app.get("/state")
    async def state(request: Request, session_id: str | None = None, jobs: bool = False) -> Response:
        elsewhere = await forward(session_id, request, b"") if session_id else None
        return elsewhere or _respond(await run_in_threadpool(server.state, session_id, jobs))

    @app.post("/grader", openapi_extra=body_of(SessionRequest))
    async def grader(request: Request) -> Response:
        _, req, elsewhere = await parsed(request, SessionRequest)
        return elsewhere or _respond(await run_in_threadpool(server.grade, req.session_id))

    @app.post("/close", openapi_extra=body_of(SessionRequest))
    async def close(request: Request) -> Response:
        _, req, elsewhere = await parsed(request, SessionRequest)
        return elsewhere or _respond(await run_in_threadpool(server.close, req.session_id))

    @app.post("/mcp")
    async def mcp_route(request: Request) -> Response:
        raw = await request.body()
        try:
            message = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            return _respond(mcp.rpc_error(None, mcp.PARSE_ERROR, f"not valid JSON ({err})"))
        args = (message.get("params") or {}).get("arguments") if isinstance(message, dict) else None
        sid = args.get("session_id") if isinstance(args, dict) else None
        elsewhere = await forward(sid, request, raw) if isinstance(sid, str) and sid else None
        return elsewhere or _respond(await run_in_threadpool(mcp.handle, server, message))

    @app.get("/health")
    def health() -> Response:
        return _respond(server.health())

    @app.get("/metadata")
    def metadata() -> Response:
        return _respond(server.metadata())

    @app.get("/schema")
    def schema(task: str = DEFAULT_TASK) -> Response:
        return _respond(server.schema(task))

    @app.get("/tasks")
    def tasks() -> Response:
        return _respond(server.tasks())

    @app.websocket("/ws")
    async def ws(socket: WebSocket) -> None:
        await socket.accept()
        await _ws_session(server, socket)

    return Guard(app, cfg)


def _ws_error(err: ApiError) -> dict:
    return {"type": "error", "data": {"code": err.code, "message": err.message, "status": err.status}}


async def _ws_reply(
    server: EnvServer, session: Session | None, kind: Any, data: Any
) -> tuple[dict, Session | None]:
    """The answer to one message, and the socket's session after it."""
    if kind == "reset":
        if not isinstance(data, dict):
            raise ApiError(422, "bad_request", "a reset message's data must be a JSON object")
        req = validate(
            ResetRequest, {k: v for k, v in data.items() if k not in ("session_id", "open_session")}
        )
        new = session is None
        if new:
            session = await run_in_threadpool(server.store.create, WS)
        try:
            body = await run_in_threadpool(server.reset, req, session)
        except BaseException:
            if new:  # a socket whose first reset failed holds no place
                server.store.close(session.session_id, "its first reset failed")
                session = None
            raise
        return {"type": "observation", "data": body}, session
    if kind == "mcp":
        return {"type": "mcp", "data": await run_in_threadpool(mcp.handle, server, data, session)}, session
    if kind not in ("step", "state"):
        raise ApiError(
            422, "unknown_type", f"unknown message type {kind!r:.80}; use reset, step, state, mcp or close"
        )
    if session is None:
        raise ApiError(409, "no_episode", "the socket has no episode: send a reset message first")
    if kind == "step":
        body = dict(data) if isinstance(data, dict) and "action" in data else {"action": data}
        req = validate(StepRequest, {**body, "session_id": session.session_id})
        answer = server.step_now(req, session) or await run_in_threadpool(server.step, req, session)
        return {"type": "observation", "data": answer}, session
    jobs = bool(data.get("jobs")) if isinstance(data, dict) else False
    return {
        "type": "state",
        "data": await run_in_threadpool(server.state, session.session_id, jobs, session),
    }, session


async def _ws_session(server: EnvServer, socket: WebSocket) -> None:
    """One session over one socket, OpenEnv's protocol: {"type": "reset", "data": {...}} (the /reset body),
    {"type": "step", "data": ACTION}, {"type": "state"}, {"type": "mcp", "data": JSON-RPC}, {"type": "close"};
    answers {"type": "observation" | "state" | "mcp" | "error", "data": ...}. The session lives exactly as long as
    the socket: a socket silent for --session_ttl_s is closed with it, and a session closed by anything else
    (POST /close, shutdown) closes its socket."""
    session: Session | None = None
    ttl_s = server.cfg.session_ttl_s
    try:
        while True:
            try:
                message = await asyncio.wait_for(socket.receive(), timeout=ttl_s)
            except TimeoutError:
                err = ApiError(
                    408,
                    "session_expired",
                    f"no message for {ttl_s:g} s (the server's --session_ttl_s): closed",
                )
                await socket.send_text(json.dumps(_ws_error(err)))
                break
            if message["type"] == "websocket.disconnect":
                break
            raw = message.get("text") if message.get("text") is not None else message.get("bytes", b"")
            if session is not None and not server.store.is_open(session.session_id):
                why = server.store.gone_reason(session.session_id)
                gone = ApiError(404, "unknown_session", f"this socket's session was {why}; the socket closes")
                session = None
                await socket.send_text(json.dumps(_ws_error(gone)))
                break
            try:
                msg = parse_json_object(raw, "the message")
                kind = msg.get("type")
                if kind == "close":
                    break
                reply, session = await _ws_reply(server, session, kind, msg.get("data", {}))
            except ApiError as err:
                reply = _ws_error(err)
            except ValidationError as err:
                reply = _ws_error(ApiError(*validation_message(err)))
            except Exception as err:  # noqa: BLE001 - one bad message fails alone
                reply = _ws_error(ApiError(500, "internal_error", f"{type(err).__name__}: {err}"))
            await socket.send_text(dumps(reply).decode())
    except WebSocketDisconnect:
        pass
    finally:
        if session is not None:
            server.store.close(session.session_id, "its WebSocket closed")
    if socket.client_state.name == "CONNECTED":
        with contextlib.suppress(Exception):
            await socket.close()


app = create_app()
