"""A Gymnasium env whose episodes run on a remote environment server (server/app.py), over HTTP or one WebSocket.

    env = RemoteEnv("http://127.0.0.1:8000", options={"difficulty": "easy"})
    obs, info = env.reset(seed=0)
    obs, reward, done, truncated, info = env.step(env.action_space.n - 1)   # WAIT
    env.close()                                                             # closes the server's session

It behaves as the in-process env of its task (`scheduling`: `GPUClusterEnv(config)`; `power` and `autoscaling`:
env/node_tasks.py's `make_node_env`, actions Discrete(2T + 1) sent as {"index": i}): same spaces, same
seeding (`reset(seed=s)` draws the scenario seed from the env's RNG exactly as GPUClusterEnv does; or pass
`options={"scenario_seed": n}`, the command line's `--seed n`), same observations, rewards and infos bit for bit
(JSON floats round-trip exactly), an illegal action is a no-op flagged in `info["illegal_action"]`, and
`action_masks()` serves sb3-contrib's MaskablePPO. Server errors raise RemoteEnvError with the server's message.
A session the server lost (expired, evicted, server restarted, socket dropped) is reopened at the next
`reset()` with a warning; `close()` never raises.
"""

from __future__ import annotations

import contextlib
import json
import warnings
from typing import Any

import gymnasium as gym
import httpx
import numpy as np

from env.gym_env import as_action

SEED_RANGE = 2**31 - 1
ACTION_KEY = {"scheduling": "slot"}
"""the JSON key of a task's integer action (server/tasks.py); "index" for the node tasks and any other"""


class RemoteEnvError(RuntimeError):
    """The server refused a request: HTTP status, its error code and its message."""

    def __init__(self, status: int, code: str, detail: str):
        super().__init__(f"{status} {code}: {detail}")
        self.status = status
        self.code = code
        self.detail = detail


class SessionLost(RemoteEnvError):
    """The server no longer holds this env's session (the next reset() opens a new one)."""


def space_from_json(d: dict) -> gym.Space:
    if d["type"] == "Discrete":
        return gym.spaces.Discrete(d["n"], start=d.get("start", 0))
    if d["type"] == "Box":
        dtype = np.dtype(d["dtype"])
        return gym.spaces.Box(np.array(d["low"], dtype), np.array(d["high"], dtype), tuple(d["shape"]), dtype)
    raise ValueError(f"unknown space {d!r}")


class RemoteEnv(gym.Env):
    """One session of `task` on the server at `base_url`, opened at construction (to learn the spaces and check
    the options: a bad option raises RemoteEnvError here) and closed by `close()`. `transport`: "http" (a
    request per call, in an HTTP session) or "ws" (one WebSocket for the session: fewer round-trip costs per
    step). `token`: the server's bearer token, if it asks for one."""

    metadata = {"render_modes": []}

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        task: str = "scheduling",
        options: dict[str, Any] | None = None,
        transport: str = "http",
        timeout_s: float = 120.0,
        token: str | None = None,
    ):
        super().__init__()
        if transport not in ("http", "ws"):
            raise ValueError(f"transport must be http or ws, got {transport!r}")
        self.base_url = base_url.rstrip("/")
        self.task = task
        self.task_options = dict(options or {})
        self.transport = transport
        self.timeout_s = timeout_s
        self._headers = {"authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout_s, headers=self._headers)
        self._ws = None
        self._ws_stack = contextlib.ExitStack()
        self.session_id: str | None = None
        self._lost: str | None = None
        """why the server no longer holds the session, once a request found out"""
        self._mask = np.zeros(0, dtype=bool)
        first = self._reset_remote(None)  # the server draws a seed; reset() starts the real first episode
        self.observation_space = space_from_json(first["spaces"]["observation"])
        self.action_space = space_from_json(first["spaces"]["action"])

    # -- transport ----------------------------------------------------------------------------------------

    def _connect_ws(self) -> None:
        from websockets.sync.client import connect

        url = "ws" + self.base_url[len("http") :] if self.base_url.startswith("http") else self.base_url
        self._ws_stack = contextlib.ExitStack()  # websockets wants its sync connection used as a context
        self._ws = self._ws_stack.enter_context(
            connect(url + "/ws", open_timeout=self.timeout_s, max_size=None, additional_headers=self._headers)
        )

    def _http_call(
        self, method: str, path: str, body: dict | None = None, params: dict | None = None
    ) -> dict:
        r = self._http.request(
            method, path, content=None if body is None else json.dumps(body), params=params
        )
        try:
            data = r.json()
        except ValueError:
            raise RemoteEnvError(r.status_code, "not_json", r.text[:200]) from None
        if r.status_code != 200:
            cls = SessionLost if data.get("error") == "unknown_session" else RemoteEnvError
            raise cls(r.status_code, data.get("error", "?"), data.get("detail", r.text))
        return data

    def _ws_call(self, message: dict) -> dict:
        from websockets.exceptions import ConnectionClosed

        try:
            if self._ws is None:
                raise ConnectionClosed(None, None)
            self._ws.send(json.dumps(message))
            reply = json.loads(self._ws.recv())
        except ConnectionClosed:
            self._ws = None
            raise SessionLost(
                0, "connection_closed", "the server closed this env's WebSocket (its session is gone)"
            ) from None
        if reply.get("type") == "error":
            d = reply.get("data", {})
            cls = SessionLost if d.get("code") in ("unknown_session", "session_expired") else RemoteEnvError
            raise cls(d.get("status", 400), d.get("code", "?"), d.get("message", ""))
        return reply["data"]

    def _call(self, ws_message: dict, method: str, path: str, body: dict | None = None, params=None) -> dict:
        """One request; a SessionLost answer is remembered, so that the next reset() reopens the session."""
        try:
            if self.transport == "ws":
                return self._ws_call(ws_message)
            return self._http_call(method, path, body, params)
        except SessionLost as err:
            self._lost = err.detail
            raise

    def _reset_remote(self, seed: int | None) -> dict:
        body: dict[str, Any] = {"task": self.task, **self.task_options}
        if seed is not None:
            body["seed"] = seed
        if self._lost is not None:
            warnings.warn(
                f"RemoteEnv: the server lost this env's session ({self._lost}); reset() opens a new one",
                stacklevel=3,
            )
            self._lost, self.session_id = None, None
            if self.transport == "ws":
                self.close_transport()
        if self.transport == "ws":
            if self._ws is None:
                self._connect_ws()
            data = self._call({"type": "reset", "data": body}, "", "")
        else:
            body.update({"session_id": self.session_id} if self.session_id else {"open_session": True})
            try:
                data = self._call({}, "POST", "/reset", body)
            except SessionLost:  # found out at this very reset: open a new one now
                return self._reset_remote(seed)
        self.session_id = data["session_id"]
        return data

    # -- Gymnasium API ------------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        unknown = sorted(set(options or {}) - {"scenario_seed"})
        if unknown:
            raise ValueError(
                f"reset(options=...): unknown key(s) {', '.join(map(repr, unknown))}; the only option "
                "is 'scenario_seed' (an integer >= 0; default: drawn from the reset seed)"
            )
        scenario_seed = (options or {}).get("scenario_seed")
        if scenario_seed is None:  # as GPUClusterEnv.reset draws it
            scenario_seed = int(self.np_random.integers(0, SEED_RANGE))
        data = self._reset_remote(int(scenario_seed))
        return self._obs(data["observation"]), self._info(data["info"])

    def step(self, action):
        a = as_action(action)
        body = {"action": {ACTION_KEY.get(self.task, "index"): a}, "on_illegal": "noop"}
        data = self._call(
            {"type": "step", "data": body}, "POST", "/step", {"session_id": self.session_id, **body}
        )
        truncated = bool(data["truncated"])
        return (
            self._obs(data["observation"]),
            data["reward"],
            bool(data["done"]) and not truncated,  # the server's done includes truncation (OpenEnv's done)
            truncated,
            self._info(data["info"]),
        )

    def action_masks(self) -> np.ndarray:
        return self._mask.copy()

    def state(self, jobs: bool = False) -> dict:
        """The server's GET /state of this session (with every job's record when `jobs`)."""
        return self._call(
            {"type": "state", "data": {"jobs": jobs}},
            "GET",
            "/state",
            params={"session_id": self.session_id, "jobs": jobs},
        )

    def grade(self) -> dict:
        """The server's POST /grader of this session's finished episode."""
        try:
            return self._http_call("POST", "/grader", {"session_id": self.session_id})
        except SessionLost as err:
            self._lost = err.detail
            raise

    def close_transport(self) -> None:
        with contextlib.suppress(Exception):
            self._ws_stack.close()
        self._ws = None

    def close(self) -> None:
        """Close the server's session (if it still holds it) and the connections; never raises."""
        with contextlib.suppress(Exception):
            if self._ws is not None:
                self._ws.send(json.dumps({"type": "close"}))
            elif self.transport == "http" and self.session_id is not None and self._lost is None:
                self._http_call("POST", "/close", {"session_id": self.session_id})
        self.close_transport()
        self.session_id = None
        with contextlib.suppress(Exception):
            self._http.close()
        super().close()

    def _obs(self, observation: dict) -> np.ndarray:
        return np.asarray(observation["features"], dtype=self.observation_space.dtype)

    def _info(self, info: dict) -> dict:
        info = dict(info)
        if "action_mask" in info:
            info["action_mask"] = np.asarray(info["action_mask"], dtype=bool)
            self._mask = info["action_mask"]
        return info
