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
"""

from __future__ import annotations

import contextlib
import json
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
    request per call) or "ws" (one WebSocket for the session: fewer round-trip costs per step)."""

    metadata = {"render_modes": []}

    def __init__(
        self,
        base_url: str = "http://127.0.0.1:8000",
        task: str = "scheduling",
        options: dict[str, Any] | None = None,
        transport: str = "http",
        timeout_s: float = 120.0,
    ):
        super().__init__()
        if transport not in ("http", "ws"):
            raise ValueError(f"transport must be http or ws, got {transport!r}")
        self.base_url = base_url.rstrip("/")
        self.task = task
        self.task_options = dict(options or {})
        self.transport = transport
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout_s)
        self._ws = None
        if transport == "ws":
            from websockets.sync.client import connect

            ws_url = (
                "ws" + self.base_url[len("http") :] if self.base_url.startswith("http") else self.base_url
            )
            self._ws_stack = contextlib.ExitStack()  # websockets wants its sync connection used as a context
            self._ws = self._ws_stack.enter_context(
                connect(ws_url + "/ws", open_timeout=timeout_s, max_size=None)
            )
        self.session_id: str | None = None
        self._mask = np.zeros(0, dtype=bool)
        first = self._reset_remote(None)  # the server draws a seed; reset() starts the real first episode
        self.observation_space = space_from_json(first["spaces"]["observation"])
        self.action_space = space_from_json(first["spaces"]["action"])

    # -- transport ----------------------------------------------------------------------------------------

    def _http_call(
        self, method: str, path: str, body: dict | None = None, params: dict | None = None
    ) -> dict:
        r = self._http.request(
            method, path, content=None if body is None else json.dumps(body), params=params
        )
        data = r.json()
        if r.status_code != 200:
            raise RemoteEnvError(r.status_code, data.get("error", "?"), data.get("detail", r.text))
        return data

    def _ws_call(self, message: dict) -> dict:
        self._ws.send(json.dumps(message))
        reply = json.loads(self._ws.recv())
        if reply.get("type") == "error":
            d = reply.get("data", {})
            raise RemoteEnvError(d.get("status", 400), d.get("code", "?"), d.get("message", ""))
        return reply["data"]

    def _reset_remote(self, seed: int | None) -> dict:
        body: dict[str, Any] = {"task": self.task, **self.task_options}
        if seed is not None:
            body["seed"] = seed
        if self._ws is not None:
            data = self._ws_call({"type": "reset", "data": body})
        else:
            if self.session_id is not None:
                body["session_id"] = self.session_id
            data = self._http_call("POST", "/reset", body)
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
        if self._ws is not None:
            data = self._ws_call({"type": "step", "data": body})
        else:
            data = self._http_call("POST", "/step", {"session_id": self.session_id, **body})
        return (
            self._obs(data["observation"]),
            data["reward"],
            data["done"],
            data["truncated"],
            self._info(data["info"]),
        )

    def action_masks(self) -> np.ndarray:
        return self._mask.copy()

    def state(self, jobs: bool = False) -> dict:
        """The server's GET /state of this session (with every job's record when `jobs`)."""
        if self._ws is not None:
            return self._ws_call({"type": "state", "data": {"jobs": jobs}})
        return self._http_call("GET", "/state", params={"session_id": self.session_id, "jobs": jobs})

    def grade(self) -> dict:
        """The server's POST /grader of this session's finished episode."""
        return self._http_call("POST", "/grader", {"session_id": self.session_id})

    def close(self) -> None:
        try:
            if self._ws is not None:
                self._ws.send(json.dumps({"type": "close"}))
                self._ws_stack.close()
            elif self.session_id is not None:
                try:
                    self._http_call("POST", "/close", {"session_id": self.session_id})
                except RemoteEnvError as err:
                    if err.status != 404:  # already expired or closed: nothing to close
                        raise
        finally:
            self._ws = None
            self.session_id = None
            self._http.close()
        super().close()

    def _obs(self, values: list) -> np.ndarray:
        return np.asarray(values, dtype=self.observation_space.dtype)

    def _info(self, info: dict) -> dict:
        info = dict(info)
        if "action_mask" in info:
            info["action_mask"] = np.asarray(info["action_mask"], dtype=bool)
            self._mask = info["action_mask"]
        return info
