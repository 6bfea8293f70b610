"""The server's wire format: request models, JSON encoding of numpy values, the error shape, and validation
messages (shared by the HTTP routes, the WebSocket and /mcp)."""

from __future__ import annotations

import json
import math
from typing import Any, Literal

import gymnasium as gym
import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from server.sessions import ApiError

DEFAULT_TASK = "scheduling"
SEED_RANGE = 2**31 - 1
ID_MAX_CHARS = 255
"""the longest episode_id or request_id (OpenEnv's limit)"""


class ResetRequest(BaseModel):
    """POST /reset: OpenEnv's seed and episode_id, the task and its options at the top level; `open_session` (or
    `session_id`) keeps the episode on the server for later /step calls (this server's HTTP sessions)."""

    model_config = ConfigDict(extra="allow", strict=True)
    task: str = Field(DEFAULT_TASK, description="a task of GET /tasks")
    seed: int | None = Field(
        None, ge=0, lt=SEED_RANGE, description="the command line's --seed (default: drawn)"
    )
    episode_id: str | None = Field(
        None, max_length=ID_MAX_CHARS, description="a name for the episode (default: a new id), in /state"
    )
    open_session: bool = Field(
        False,
        description="keep the episode in a new HTTP session and return its session_id (an extension of "
        "OpenEnv's stateless HTTP routes; sessions also live on WS /ws)",
    )
    session_id: str | None = Field(None, description="start a new episode in this open session")
    request_id: str | None = Field(None, max_length=ID_MAX_CHARS, description="echoed in the answer")
    timeout_s: float | None = Field(
        None,
        gt=0,
        description="the longest wait, seconds, for the session (another request of it in progress)",
    )


class StepRequest(BaseModel):
    """POST /step: OpenEnv's action, timeout_s and request_id; `session_id` names the HTTP session."""

    model_config = ConfigDict(extra="forbid", strict=True)
    session_id: str | None = Field(None, description="the session to step (POST /reset with open_session)")
    action: Any = Field(description='the task\'s action, e.g. {"slot": 0} (GET /schema)')
    on_illegal: Literal["error", "noop"] = Field(
        "error",
        description="an action the mask forbids: error (409, nothing happens) or noop (the Gymnasium env's "
        "behaviour: a step that changes nothing, info.illegal_action true)",
    )
    timeout_s: float | None = Field(
        None,
        gt=0,
        description="the longest wait, seconds, for the session (another request of it in progress)",
    )
    request_id: str | None = Field(None, max_length=ID_MAX_CHARS, description="echoed in the answer")


class SessionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    session_id: str
    request_id: str | None = Field(None, max_length=ID_MAX_CHARS)


def to_json(x: Any) -> Any:
    """numpy values as JSON values; floats keep every bit (Python's json writes repr, the shortest exact form)."""
    if isinstance(x, np.ndarray):
        return x.tolist()
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, dict):
        return {str(k): to_json(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [to_json(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def dumps(body: Any) -> bytes:
    return json.dumps(to_json(body), allow_nan=False).encode()


def error_body(code: str, message: str, request_id: str | None = None) -> dict:
    """The one shape of every refused request: {"error": CODE, "detail": MESSAGE} (+ the request's request_id)."""
    return {"error": code, "detail": message, **({"request_id": request_id} if request_id else {})}


def observation(obs: np.ndarray, info: dict, truncated: bool) -> dict:
    """OpenEnv's observation object: the env's features, the legal-action mask, whether the episode was cut."""
    mask = info.get("action_mask")
    return {"features": obs, "action_mask": [] if mask is None else mask, "truncated": truncated}


def validation_message(err: ValidationError) -> tuple[int, str, str]:
    """(status, code, message) of a pydantic error: 400 malformed_json, else 422 bad_request naming each field."""
    errors = err.errors()
    if any(e.get("type") == "json_invalid" for e in errors):
        detail = "; ".join(str(e.get("ctx", {}).get("error", e.get("msg"))) for e in errors)
        return 400, "malformed_json", f"the request body is not valid JSON ({detail})"
    parts = []
    for e in errors:
        loc = ".".join(str(x) for x in e.get("loc", ()) if x not in ("body", "query")) or "body"
        got = e.get("input")
        shown = f" (got {got!r:.80})" if e.get("type") != "missing" and loc != "body" else ""
        parts.append(f"{loc}: {e.get('msg')}{shown}")
    return 422, "bad_request", "; ".join(parts)


def parse_json_object(raw: bytes | str, what: str = "the request body") -> dict:
    """A JSON object from raw text; ApiError 400 malformed_json / 422 bad_request otherwise."""
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ApiError(400, "malformed_json", f"{what} is not valid JSON ({err})") from None
    if not isinstance(data, dict):
        raise ApiError(422, "bad_request", f"{what} must be a JSON object, got {type(data).__name__}")
    return data


def validate(model: type[BaseModel], data: dict) -> BaseModel:
    try:
        return model.model_validate(data)
    except ValidationError as err:
        raise ApiError(*validation_message(err)) from None


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
