"""A minimal MCP endpoint (JSON-RPC 2.0, as OpenEnv's POST /mcp): `initialize`, `tools/list` and `tools/call` of
the tools reset, step, state, grade and close, whose arguments and results are the HTTP routes' bodies."""

from __future__ import annotations

import json
from typing import Any

from server.env_server import NAME, VERSION, EnvServer
from server.protocol import ResetRequest, SessionRequest, StepRequest, error_body, to_json, validate
from server.sessions import ApiError, Session

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
PROTOCOL_VERSION = "2025-06-18"


def _schema(properties: dict, required: tuple[str, ...] = ()) -> dict:
    return {"type": "object", "properties": properties, "required": list(required)}


_SID = {"type": "string", "description": "the session (reset with open_session true returns one)"}
TOOLS = [
    {
        "name": "reset",
        "description": "Start an episode (the POST /reset body: task, seed, episode_id, the task's options; "
        "open_session true keeps it in a session for step).",
        "inputSchema": {**ResetRequest.model_json_schema(), "additionalProperties": True},
    },
    {
        "name": "step",
        "description": "Take one action in a session's episode (the POST /step body).",
        "inputSchema": StepRequest.model_json_schema(),
    },
    {
        "name": "state",
        "description": "The session's state (GET /state); jobs true adds every job's record.",
        "inputSchema": _schema({"session_id": _SID, "jobs": {"type": "boolean"}}),
    },
    {
        "name": "grade",
        "description": "The finished episode's score in [0, 1] (POST /grader).",
        "inputSchema": _schema({"session_id": _SID}, ("session_id",)),
    },
    {
        "name": "close",
        "description": "Close the session (POST /close).",
        "inputSchema": _schema({"session_id": _SID}, ("session_id",)),
    },
]


def rpc_error(request_id: Any, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _call(server: EnvServer, name: str, args: dict, session: Session | None) -> dict:
    """A tool's result body; ApiError as the HTTP route would raise it."""
    if name == "reset":
        return server.reset(validate(ResetRequest, args), session)
    if name == "step":
        if session is not None:
            args = {**args, "session_id": session.session_id}
        return server.step(validate(StepRequest, args), session)
    if name == "state":
        sid = session.session_id if session is not None else args.get("session_id")
        return server.state(sid, bool(args.get("jobs", False)), session)
    if name in ("grade", "close"):
        req = validate(SessionRequest, args)
        return server.grade(req.session_id) if name == "grade" else server.close(req.session_id)
    raise ApiError(
        404, "unknown_tool", f"unknown tool {name!r}; the tools are {', '.join(t['name'] for t in TOOLS)}"
    )


def handle(server: EnvServer, message: Any, session: Session | None = None) -> dict:
    """One JSON-RPC request -> its response. Tool errors are results with isError true and the HTTP error body
    (MCP's convention); malformed requests are JSON-RPC errors. `session`: the WebSocket's, for its messages."""
    if (
        not isinstance(message, dict)
        or message.get("jsonrpc") != "2.0"
        or not isinstance(message.get("method"), str)
    ):
        return rpc_error(
            message.get("id") if isinstance(message, dict) else None,
            INVALID_REQUEST,
            'a JSON-RPC 2.0 request is {"jsonrpc": "2.0", "id": ..., "method": ..., "params": {...}}',
        )
    request_id, method, params = message.get("id"), message["method"], message.get("params", {})
    if not isinstance(params, dict):
        return rpc_error(request_id, INVALID_PARAMS, "params must be an object")
    if method == "initialize":
        result: dict = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {"tools": {}},
            "serverInfo": {"name": NAME, "version": VERSION},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call":
        name, args = params.get("name"), params.get("arguments", {})
        if not isinstance(name, str) or not isinstance(args, dict):
            return rpc_error(
                request_id, INVALID_PARAMS, "tools/call takes params {name: str, arguments: {...}}"
            )
        try:
            body, is_error = _call(server, name, args, session), False
        except ApiError as err:
            body, is_error = {**error_body(err.code, err.message), "status": err.status}, True
        body = to_json(body)
        text = json.dumps(body, allow_nan=False)
        result = {"content": [{"type": "text", "text": text}], "structuredContent": body, "isError": is_error}
    else:
        return rpc_error(
            request_id,
            METHOD_NOT_FOUND,
            f"unknown method {method!r:.80}; use initialize, tools/list or tools/call",
        )
    return {"jsonrpc": "2.0", "id": request_id, "result": result}
