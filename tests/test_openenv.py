"""OpenEnv conformance on loopback: OpenEnv's own runtime validator (`openenv validate --url`) passes every check,
its stock GenericEnvClient plays one episode of each task with the return of the in-process env, and, without
openenv-core installed, the same routes and shapes are checked here (what the validator checks, criterion by
criterion)."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest

from server.tasks import make_task_env
from tests.test_server import post, served, url  # noqa: F401 - the uvicorn fixture, shared

EPISODES = {
    "scheduling": {"difficulty": "easy", "num_jobs": 20, "window": 4},
    "power": {"difficulty": "easy", "num_jobs": 5, "load_factor": 0.5, "synthetic_profile": "legacy"},
    "autoscaling": {"preset": "easy"},
}


def first_legal(task: str, mask: list[bool]) -> dict:
    i = mask.index(True)
    return {"slot": i} if task == "scheduling" else {"index": i}


def in_process_return(task: str, seed: int) -> tuple[float, int]:
    """(return, steps) of the first-legal-action policy on the in-process env."""
    env = make_task_env(task, EPISODES[task])
    _, info = env.reset(seed=seed, options={"scenario_seed": seed})
    total, steps, done, truncated = 0.0, 0, False, False
    while not (done or truncated):
        a = int(info["action_mask"].tolist().index(True))
        _, r, done, truncated, info = env.step(a)
        total, steps = total + r, steps + 1
    return total, steps


def test_the_routes_and_shapes_openenvs_validator_checks(url):  # noqa: F811
    """The validator's six criteria, checked here too (runs with or without openenv-core)."""
    spec = httpx.get(url + "/openapi.json").json()
    assert spec["info"]["version"].startswith("1.")  # profile openenv-http/1.x
    assert {"/reset", "/step", "/state"} <= set(spec["paths"])  # simulation mode: all three
    assert httpx.get(url + "/health").json()["status"] == "healthy"
    meta = httpx.get(url + "/metadata").json()
    assert isinstance(meta["name"], str) and isinstance(meta["description"], str)
    schema = httpx.get(url + "/schema").json()
    assert all(isinstance(schema[k], dict) for k in ("action", "observation", "state"))
    r = post(url, "/mcp", {})
    assert r.status_code == 200 and r.json()["jsonrpc"] == "2.0" and r.json()["error"]["code"] == -32600


def test_mcp_tools_play_an_http_session(url):  # noqa: F811
    def call(method: str, params: dict | None = None, request_id: int = 1) -> dict:
        r = post(url, "/mcp", {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}})
        assert r.status_code == 200 and r.json()["id"] == request_id
        return r.json()

    assert call("initialize")["result"]["serverInfo"]["name"]
    tools = {t["name"] for t in call("tools/list")["result"]["tools"]}
    assert tools == {"reset", "step", "state", "grade", "close"}
    opened = call(
        "tools/call",
        {"name": "reset", "arguments": {**EPISODES["scheduling"], "seed": 1, "open_session": True}},
    )
    body = opened["result"]["structuredContent"]
    assert not opened["result"]["isError"] and json.loads(opened["result"]["content"][0]["text"]) == body
    sid = body["session_id"]
    step = call(
        "tools/call",
        {
            "name": "step",
            "arguments": {
                "session_id": sid,
                "action": first_legal("scheduling", body["observation"]["action_mask"]),
            },
        },
    )
    assert not step["result"]["isError"] and step["result"]["structuredContent"]["reward"] is not None
    state = call("tools/call", {"name": "state", "arguments": {"session_id": sid}})["result"][
        "structuredContent"
    ]
    assert state["step_count"] == 1 and state["session_id"] == sid
    bad = call("tools/call", {"name": "step", "arguments": {"session_id": sid, "action": {"slot": 99}}})[
        "result"
    ]
    assert bad["isError"] and bad["structuredContent"]["error"] == "illegal_action"
    assert call("tools/call", {"name": "close", "arguments": {"session_id": sid}})["result"][
        "structuredContent"
    ]["closed"]
    assert call("tools/nope")["error"]["code"] == -32601
    assert post(url, "/mcp", "{oops").json()["error"]["code"] == -32700


def need_openenv():
    return pytest.importorskip(
        "openenv.core.generic_client", reason="openenv-core (requirements-dev.txt) absent"
    )


def test_openenvs_own_validator_passes_every_check(url):  # noqa: F811
    need_openenv()
    out = subprocess.run(
        [sys.executable, "-m", "openenv.cli", "validate", "--url", url, "--timeout", "30"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(out.stdout)
    failed = [c["id"] for c in report["criteria"] if not c["passed"]]
    assert report["passed"] and not failed and len(report["criteria"]) == 6, (failed, out.stderr[-500:])
    assert report["standard_profile"] == "openenv-http/1.x" and report["mode"] == "simulation"


@pytest.mark.parametrize("task", list(EPISODES))
def test_stock_generic_client_plays_an_episode_of_each_task(url, task):  # noqa: F811
    """OpenEnv's GenericEnvClient, unmodified: it picks a legal action from observation.action_mask, stops at
    done, and gets the in-process env's return step for step."""
    client = need_openenv().GenericEnvClient(base_url=url).sync()
    with client:
        result = client.reset(task=task, seed=5, **EPISODES[task])
        total, steps = 0.0, 0
        while not result.done:
            result = client.step(first_legal(task, result.observation["action_mask"]))
            total, steps = total + result.reward, steps + 1
        assert not result.observation["truncated"]
        state = client.state()
    expected_return, expected_steps = in_process_return(task, 5)
    assert (total, steps) == (expected_return, expected_steps) and state["step_count"] == steps
