"""The environment server over real HTTP on loopback: episodes identical to in-process ones, every bad request kind
refused with a 4xx naming it (other sessions unaffected), session limit, idle expiry (injected clock), close, /ws."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import gymnasium as gym
import httpx
import numpy as np
import pytest
import uvicorn
from gymnasium.utils.env_checker import check_env
from hypothesis import given
from hypothesis import strategies as st
from websockets.sync.client import connect

from cli.json_options import ENV_OPTIONS, SCENARIO_OPTIONS, run_config_from_options
from config import ServeConfig
from env.grade import grade_lower_better
from env.gym_env import GPUClusterEnv, heuristic_action
from main import main
from metrics.summary import summarize
from scenario.build import build_scenario
from schedulers import POLICIES
from server import tasks
from server.app import create_app
from server.client import RemoteEnv, RemoteEnvError
from server.processes import uvicorn_config
from server.tasks import scheduling_suite

OPTIONS = {"difficulty": "easy", "num_jobs": 30, "window": 4}
MAX_SESSIONS = 3
TTL_S = 100.0


class FakeClock:
    """Seconds that move only when a test says so (session expiry without sleeping)."""

    def __init__(self):
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s


@pytest.fixture(scope="module")
def served():
    """uvicorn serving the app in a thread on a free loopback port: (base URL, app, clock)."""
    clock = FakeClock()
    cfg = ServeConfig(max_sessions=MAX_SESSIONS, session_ttl_s=TTL_S)
    app = create_app(cfg, clock=clock)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn_config(app, cfg))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}", app, clock
    server.should_exit = True
    thread.join(10)
    sock.close()


@pytest.fixture
def url(served):
    base, app, clock = served
    app.state.env_server.store.close_all()  # every test starts with no session open
    clock.now_s = 0.0
    return base


def post(url: str, path: str, body) -> httpx.Response:
    content = body if isinstance(body, str | bytes) else json.dumps(body)
    return httpx.post(url + path, content=content, timeout=30)


def reset(url: str, **body) -> dict:
    """POST /reset of a new HTTP session (or of body's session_id)."""
    r = post(url, "/reset", {**OPTIONS, "open_session": "session_id" not in body, **body})
    assert r.status_code == 200, r.text
    return r.json()


def in_process_env(options: dict = OPTIONS) -> GPUClusterEnv:
    return GPUClusterEnv(run_config_from_options(options, SCENARIO_OPTIONS + ENV_OPTIONS, "test"))


# -- same episode over HTTP as in process ------------------------------------------------------------------------


def lockstep(remote: RemoteEnv, local: GPUClusterEnv, seed: int) -> int:
    """Step both envs with the same actions (SJF's, every 4th step WAIT or an illegal slot) until done; every
    observation, reward, flag and info must be equal, floats bit for bit. Returns the steps taken."""
    o1, i1 = remote.reset(seed=seed)
    o2, i2 = local.reset(seed=seed)
    assert o1.dtype == o2.dtype == np.float32 and np.array_equal(o1, o2)
    assert np.array_equal(i1["action_mask"], i2["action_mask"])
    done = truncated = False
    n = 0
    while not (done or truncated):
        n += 1
        masked = np.flatnonzero(~local.action_masks())
        if n % 8 == 0:  # an illegal action: a masked slot, else one outside the action space
            a = int(masked[0]) if masked.size else local.window + 1
        elif n % 4 == 0:
            a = local.window  # WAIT
        else:
            a = heuristic_action(local, POLICIES["sjf"])
        o1, r1, d1, t1, i1 = remote.step(a)
        o2, r2, d2, t2, i2 = local.step(np.int64(a))
        assert np.array_equal(o1, o2) and type(r1) is float and r1 == r2 and (d1, t1) == (d2, t2), n
        assert np.array_equal(i1["action_mask"], i2["action_mask"])
        assert {k: v for k, v in i1.items() if k != "action_mask"} == {
            k: v for k, v in i2.items() if k != "action_mask"
        }
        done, truncated = d1, t1
    assert done
    return n


@pytest.mark.parametrize("transport", ["http", "ws"])
def test_episode_over_the_server_equals_in_process(url, transport):
    remote = RemoteEnv(url, options=OPTIONS, transport=transport)
    local = in_process_env()
    assert remote.observation_space == local.observation_space
    assert remote.action_space == local.action_space
    steps = lockstep(remote, local, seed=11)
    assert steps > 30  # every job started, some WAITs and illegal no-ops
    state = remote.state(jobs=True)
    result = local.sim.result("agent", local.scenario.seed)
    assert state["step_count"] == steps and state["done"] and state["seed"] == local.scenario.seed
    records = [
        (
            j["job_id"],
            j["submit_s"],
            j["start_s"],
            j["end_s"],
            j["runtime_s"],
            j["gpu_type"],
            j["placement"],
            j["status"],
        )
        for j in state["jobs"]
    ]
    expected = [
        (job.job_id, job.arrival_s, float(s), float(e), float(d), t, p, st_)
        for job, s, e, d, t, p, st_ in zip(
            result.jobs,
            result.start_s,
            result.end_s,
            result.runtime_actual_s,
            result.gpu_type,
            result.placement,
            result.status,
            strict=True,
        )
    ]
    assert records == expected  # exact float equality: JSON carries repr()
    lockstep(remote, local, seed=12)  # a second episode in the same session
    remote.close()
    assert httpx.get(url + "/health").json()["sessions"] == 0


def test_reset_seed_is_the_command_lines_seed(url):
    """/reset with seed s is the scenario `python main.py --seed s` runs (build_scenario(config, s))."""
    body = reset(url, seed=7)
    cfg = run_config_from_options(OPTIONS, SCENARIO_OPTIONS + ENV_OPTIONS, "test")
    local = GPUClusterEnv(cfg, scenario=build_scenario(cfg, 7))
    obs, info = local.reset(seed=7)
    assert body["seed"] == 7 and np.array_equal(np.array(body["observation"]["features"], np.float32), obs)
    assert body["info"]["action_mask"] == info["action_mask"].tolist()


def test_curl_body_without_json_content_type_is_read(url):
    """`curl -d '{...}'` sends application/x-www-form-urlencoded; the body is JSON all the same."""
    r = httpx.post(
        url + "/reset",
        content=json.dumps({"seed": 3, **OPTIONS}),
        headers={"content-type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 200 and r.json()["seed"] == 3


def test_reset_without_seed_draws_one_and_reports_it(url):
    body = reset(url)
    assert isinstance(body["seed"], int) and 0 <= body["seed"] < 2**31 - 1
    state = httpx.get(url + "/state", params={"session_id": body["session_id"]}).json()
    assert state["seed"] == body["seed"] and state["options"] == OPTIONS


def test_client_passes_gymnasiums_env_checker(url):
    env = RemoteEnv(url, options=OPTIONS)
    check_env(env, skip_render_check=True)  # random unmasked actions: illegal ones are no-ops
    assert env.action_masks().dtype == np.bool_
    env.close()


def test_client_raises_the_servers_message(url):
    with pytest.raises(RemoteEnvError, match="--num_jobs must be > 0, got -2") as err:
        RemoteEnv(url, options={"num_jobs": -2})
    assert err.value.status == 400 and err.value.code == "bad_option"
    assert httpx.get(url + "/health").json()["sessions"] == 0  # the failed reset left no session behind


# -- bad requests ------------------------------------------------------------------------------------------------


def cli_error(argv: list[str], capsys) -> str:
    assert main(argv) == 2
    [line] = capsys.readouterr().err.splitlines()
    return line.removeprefix("error: ")


@pytest.mark.parametrize(
    ("options", "argv"),
    [
        ({"num_jobs": -1}, ["--num_jobs", "-1"]),
        ({"load_factor": 1000.0}, ["--load_factor", "1000.0"]),
        ({"cluster": "2xB300:8"}, ["--cluster", "2xB300:8"]),
        ({"difficulty": "extreme"}, ["--difficulty", "extreme"]),
        ({"trace_start": 5.0}, ["--trace_start", "5.0"]),
        ({"workload_type": "csv"}, ["--workload_type", "csv"]),
        ({"multi_node_factor": 0.5}, ["--multi_node_factor", "0.5"]),
        ({"num_jobs": "ten"}, ["--num_jobs", "ten"]),
    ],
)
def test_bad_option_gets_the_command_lines_message(url, options, argv, capsys, tmp_path):
    r = post(url, "/reset", {"seed": 0, **options})
    assert r.status_code == 400 and r.json()["error"] == "bad_option"
    try:
        expected = cli_error(
            ["--mode", "eval", "--algo", "easy", *argv, "--log_dir", str(tmp_path / "x")], capsys
        )
    except SystemExit:  # argparse's own mistakes exit from the parser, with the --help hint appended
        expected = capsys.readouterr().err.splitlines()[0].removeprefix("error: ")
        expected = expected.removesuffix(" (python main.py --help lists the options)")
    assert r.json()["detail"] == expected


BAD_REQUESTS = [
    # (route, body (None: a valid step of the session), status, error code, fragment of the message)
    ("/step", "{not json", 400, "malformed_json", "not valid JSON"),
    ("/reset", "[1, 2]", 422, "bad_request", "must be a JSON object, got list"),
    (
        "/step",
        {"session_id": "nope", "action": {"slot": 0}},
        404,
        "unknown_session",
        "unknown session_id 'nope'",
    ),
    ("/step", {"action": {"slot": 0}}, 409, "no_session", "this step names no session"),
    ("/step", {"session_id": "SID"}, 422, "bad_request", "action: Field required"),
    ("/step", {"session_id": "SID", "action": 0}, 422, "bad_action", 'an action is {"slot": i}'),
    ("/step", {"session_id": "SID", "action": {"slot": "0"}}, 422, "bad_action", '"slot" must be an integer'),
    ("/step", {"session_id": "SID", "action": {"slot": 1.0}}, 422, "bad_action", '"slot" must be an integer'),
    (
        "/step",
        {"session_id": "SID", "action": {"slot": 0, "x": 1}},
        422,
        "bad_action",
        'an action is {"slot": i}',
    ),
    (
        "/step",
        {"session_id": "SID", "action": {"slot": 0}, "extra": 1},
        422,
        "bad_request",
        "extra: Extra inputs",
    ),
    ("/step", {"session_id": "SID", "action": {"slot": 99}}, 409, "illegal_action", "legal slots"),
    ("/step", {"session_id": "SID", "action": {"slot": -1}}, 409, "illegal_action", "legal slots"),
    ("/reset", {"task": "chess"}, 404, "unknown_task", "unknown task 'chess'; the tasks are scheduling"),
    ("/reset", {"seed": -1}, 422, "bad_request", "seed: Input should be greater than or equal to 0"),
    ("/reset", {"seed": "1"}, 422, "bad_request", "seed: Input should be a valid integer"),
    ("/reset", {"difficulty": "easy", "frobnicate": 1}, 400, "bad_option", "unknown option(s) 'frobnicate'"),
    ("/reset", {"uniform_speed": "yes"}, 400, "bad_option", "is a flag: expected true or false"),
    ("/reset", {"session_id": "gone"}, 404, "unknown_session", "unknown session_id 'gone'"),
    ("/grader", {"session_id": "SID"}, 409, "episode_not_over", "the episode is not over"),
    ("/close", {"session_id": 5}, 422, "bad_request", "session_id: Input should be a valid string"),
]


@pytest.mark.parametrize(("route", "body", "status", "code", "message"), BAD_REQUESTS, ids=lambda x: None)
def test_bad_request_is_refused_by_name_and_harms_no_session(url, route, body, status, code, message):
    bystander = reset(url, seed=1)
    victim = reset(url, seed=2)
    if isinstance(body, dict):
        body = {k: victim["session_id"] if v == "SID" else v for k, v in body.items()}
    r = post(url, route, body)
    assert (r.status_code, r.json()["error"]) == (status, code), r.text
    assert message in r.json()["detail"]
    for s in (bystander, victim):  # both sessions still step normally
        slot = s["info"]["action_mask"].index(True)
        ok = post(url, "/step", {"session_id": s["session_id"], "action": {"slot": slot}})
        assert ok.status_code == 200, ok.text
    assert httpx.get(url + "/health").json()["status"] == "healthy"


def test_illegal_action_can_be_a_noop_as_in_the_gymnasium_env(url):
    s = reset(url, seed=2)
    r = post(url, "/step", {"session_id": s["session_id"], "action": {"slot": 99}, "on_illegal": "noop"})
    body = r.json()
    assert r.status_code == 200 and body["info"]["illegal_action"] and body["reward"] == 0.0
    assert body["observation"] == s["observation"] and not body["done"]


def test_step_after_done_is_refused(url):
    env = RemoteEnv(url, options={"difficulty": "easy", "num_jobs": 3, "window": 4})
    env.reset(seed=0)
    done = False
    while not done:
        _, _, done, _, _ = env.step(int(np.flatnonzero(env.action_masks())[0]))
    r = post(url, "/step", {"session_id": env.session_id, "action": {"slot": 0}})
    assert r.status_code == 409 and r.json()["error"] == "episode_over"
    assert "POST /reset starts a new one" in r.json()["detail"]
    env.reset(seed=1)  # a new episode in the same session steps again
    env.step(int(np.flatnonzero(env.action_masks())[0]))
    env.close()


# -- sessions: limit, expiry, close -----------------------------------------------------------------------------


def test_session_limit_then_close_frees_a_place(url):
    ids = [reset(url, seed=i)["session_id"] for i in range(MAX_SESSIONS)]
    r = post(url, "/reset", {"seed": 9, **OPTIONS, "open_session": True})
    assert r.status_code == 429 and r.json()["error"] == "too_many_sessions"
    assert f"--max_sessions {MAX_SESSIONS}" in r.json()["detail"] and r.headers["retry-after"] == "1"
    for _ in range(3 * MAX_SESSIONS):  # OpenEnv's bare /reset keeps nothing: never refused for lack of places
        bare = post(url, "/reset", {"seed": 9, **OPTIONS})
        assert bare.status_code == 200 and bare.json()["session_id"] is None
    r = post(
        url, "/reset", {"session_id": ids[0], "seed": 9, **OPTIONS}
    )  # a new episode of an open one is fine
    assert r.status_code == 200 and r.json()["session_id"] == ids[0]
    assert post(url, "/close", {"session_id": ids[1]}).json() == {"session_id": ids[1], "closed": True}
    r = post(url, "/close", {"session_id": ids[1]})
    assert r.status_code == 404 and "closed (POST /close)" in r.json()["detail"]
    r = post(url, "/step", {"session_id": ids[1], "action": {"slot": 0}})
    assert r.status_code == 404 and "closed (POST /close)" in r.json()["detail"]
    assert reset(url, seed=10)["session_id"] not in ids
    assert httpx.get(url + "/health").json() == {
        "status": "healthy",
        "sessions": MAX_SESSIONS,
        "max_sessions": MAX_SESSIONS,
    }


def test_a_full_pool_closes_the_longest_idle_http_session(served, url):
    """Dead HTTP clients hold no place for the whole TTL: with every place taken, a session unused for
    --evict_idle_s (60 s) makes room for a new one; one used more recently does not."""
    _, _, clock = served
    ids = [reset(url, seed=i)["session_id"] for i in range(MAX_SESSIONS)]
    clock.now_s = 30.0
    httpx.get(url + "/state", params={"session_id": ids[2]})
    clock.now_s = 59.0
    httpx.get(url + "/state", params={"session_id": ids[0]})  # ids[1], unused since 0 s, is the longest idle
    assert (
        post(url, "/reset", {"seed": 9, **OPTIONS, "open_session": True}).status_code == 429
    )  # none idle 60 s
    clock.now_s = 89.5  # ids[2] idle 59.5 s: kept; ids[1] idle 89.5 s: closed for the new session
    new = reset(url, seed=9)["session_id"]
    r = httpx.get(url + "/state", params={"session_id": ids[1]})
    assert r.status_code == 404 and "to make room for a new session" in r.json()["detail"]
    assert {
        s: httpx.get(url + "/state", params={"session_id": s}).status_code for s in (ids[0], ids[2], new)
    } == {
        ids[0]: 200,
        ids[2]: 200,
        new: 200,
    }


def test_idle_session_expires_after_the_ttl(served, url):
    _, _, clock = served
    idle = reset(url, seed=1)["session_id"]
    clock.now_s = 60.0
    busy = reset(url, seed=2)["session_id"]
    clock.now_s = 60.0 + TTL_S  # idle unused for 160 s > TTL, busy for exactly the TTL: still open
    r = httpx.get(url + "/state", params={"session_id": idle})
    assert r.status_code == 404 and f"expired after {TTL_S:g} s unused" in r.json()["detail"]
    assert (
        httpx.get(url + "/state", params={"session_id": busy}).status_code == 200
    )  # used now: clock restarts
    clock.now_s = 60.0 + 2 * TTL_S
    assert httpx.get(url + "/state", params={"session_id": busy}).status_code == 200
    clock.now_s = 60.0 + 3 * TTL_S + 0.5
    assert httpx.get(url + "/health").json()["sessions"] == 0


# -- concurrency: a slow step holds its own session only ------------------------------------------------------------


class _Blocking(gym.Wrapper):
    """A scheduling env whose steps wait for `release` (a step that takes as long as the test wants)."""

    release = threading.Event()

    def step(self, action):
        assert self.release.wait(20)
        return self.env.step(action)


def test_a_slow_session_does_not_block_the_others(served, url, monkeypatch):
    base = tasks.TASKS["scheduling"]
    slow_task = tasks.Task(**{**base.__dict__, "name": "slow", "make": lambda o: _Blocking(base.make(o))})
    monkeypatch.setitem(tasks.TASKS, "slow", slow_task)
    _Blocking.release.clear()
    slow = reset(url, task="slow", seed=1)
    fast = reset(url, seed=1)
    pending = {}
    thread = threading.Thread(
        target=lambda: pending.update(
            r=post(url, "/step", {"session_id": slow["session_id"], "action": {"slot": 0}})
        )
    )
    thread.start()
    try:
        for _ in range(5):  # the other session steps while the slow step is in flight
            t0 = time.monotonic()
            r = post(url, "/step", {"session_id": fast["session_id"], "action": {"slot": 4}})
            assert r.status_code == 200 and time.monotonic() - t0 < 5
        assert "r" not in pending
        busy = post(url, "/step", {"session_id": slow["session_id"], "action": {"slot": 0}, "timeout_s": 0.3})
        assert (busy.status_code, busy.json()["error"]) == (
            504,
            "timeout",
        )  # waited 0.3 s for it, did nothing
        assert "timeout_s (0.3 s)" in busy.json()["detail"]
        served[2].now_s = 2 * TTL_S  # both idle past the TTL, but the slow one is in the middle of a step
        assert httpx.get(url + "/state", params={"session_id": fast["session_id"]}).status_code == 404
    finally:
        _Blocking.release.set()
        thread.join(20)
    assert pending["r"].status_code == 200
    assert (
        httpx.get(url + "/state", params={"session_id": slow["session_id"]}).json()["step_count"] == 1
    )  # not 2


# -- WebSocket --------------------------------------------------------------------------------------------------


def ws_url(url: str) -> str:
    return "ws" + url.removeprefix("http") + "/ws"


def test_ws_session_protocol_errors_and_close(url):
    with connect(ws_url(url)) as ws:

        def ask(message) -> dict:
            ws.send(message if isinstance(message, str) else json.dumps(message))
            return json.loads(ws.recv())

        assert ask({"type": "step", "data": {"slot": 0}})["data"]["code"] == "no_episode"
        assert ask("{oops")["data"]["code"] == "malformed_json"
        assert ask({"type": "dance"})["data"]["code"] == "unknown_type"
        bad = ask({"type": "reset", "data": {"num_jobs": 0}})
        assert bad["type"] == "error" and bad["data"]["message"] == "--num_jobs must be > 0, got 0"
        first = ask({"type": "reset", "data": {"seed": 4, **OPTIONS}})
        assert first["type"] == "observation" and first["data"]["seed"] == 4
        assert httpx.get(url + "/health").json()["sessions"] == 1
        illegal = ask({"type": "step", "data": {"slot": 99}})
        assert illegal["type"] == "error" and illegal["data"]["code"] == "illegal_action"
        assert ask({"type": "step", "data": {"slot": "x"}})["data"]["code"] == "bad_action"
        step = ask({"type": "step", "data": {"slot": first["data"]["info"]["action_mask"].index(True)}})
        assert step["type"] == "observation" and set(step["data"]) == {
            "observation",
            "reward",
            "done",
            "truncated",
            "info",
        }
        rpc = ask(
            {
                "type": "mcp",
                "data": {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "state"}},
            }
        )
        assert (
            rpc["type"] == "mcp" and rpc["data"]["result"]["structuredContent"]["step_count"] == 1
        )  # this socket's
        state = ask({"type": "state"})
        assert state["type"] == "state" and state["data"]["step_count"] == 1
        sid = state["data"]["session_id"]
        assert httpx.get(url + "/state", params={"session_id": sid}).json()["step_count"] == 1  # same session
        ws.send(json.dumps({"type": "close"}))
    deadline = time.monotonic() + 5
    while httpx.get(url + "/health").json()["sessions"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert httpx.get(url + "/health").json()["sessions"] == 0  # the session ended with its socket


def test_ws_disconnect_closes_the_session(url):
    with connect(ws_url(url)) as ws:
        ws.send(json.dumps({"type": "reset", "data": {"seed": 1, **OPTIONS}}))
        sid = json.loads(ws.recv())["data"]["session_id"]
    # no close message: the socket just went away
    deadline = time.monotonic() + 5
    while httpx.get(url + "/state", params={"session_id": sid}).status_code == 200:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert "its WebSocket closed" in httpx.get(url + "/state", params={"session_id": sid}).json()["detail"]


# -- discovery routes -------------------------------------------------------------------------------------------


def test_tasks_schema_and_health(url):
    listed = httpx.get(url + "/tasks").json()["tasks"]
    scheduling = next(t for t in listed if t["name"] == "scheduling")
    names = [o["name"] for o in scheduling["options"]]
    assert names == list(SCENARIO_OPTIONS + ENV_OPTIONS)
    window = next(o for o in scheduling["options"] if o["name"] == "window")
    assert window["type"] == "integer" and window["default"] == 16
    assert "uniform-random legal" in scheduling["grader"]
    assert all(algo in scheduling["grader"] for algo in scheduling_suite())
    schema = httpx.get(url + "/schema").json()
    assert (
        schema["action"]["required"] == ["slot"] and schema["action"]["properties"]["slot"]["maximum"] == 16
    )
    assert {"action", "observation", "state"} <= set(schema)
    assert httpx.get(url + "/schema", params={"task": "chess"}).status_code == 404
    assert httpx.get(url + "/health").json()["status"] == "healthy"
    assert httpx.get(url + "/state").json() == {"episode_id": None, "step_count": 0, "session_id": None}


# -- grader -------------------------------------------------------------------------------------------------------


def test_grade_lower_better_by_hand():
    assert grade_lower_better(80.0, trivial=100.0, reference=60.0) == 0.5  # (100 - 80) / (100 - 60)
    assert grade_lower_better(70.0, trivial=100.0, reference=60.0) == 0.75  # (100 - 70) / 40
    assert (
        grade_lower_better(50.0, trivial=100.0, reference=60.0) == 1.0
    )  # better than the reference: clipped
    assert grade_lower_better(120.0, trivial=100.0, reference=60.0) == 0.0  # worse than FCFS: clipped
    assert (
        grade_lower_better(100.0, trivial=100.0, reference=100.0) == 1.0
    )  # reference no better: 1 iff <= it
    assert grade_lower_better(100.5, trivial=100.0, reference=100.0) == 0.0
    assert grade_lower_better(float("nan"), trivial=100.0, reference=60.0) == 0.0


@given(st.floats(1, 1e6), st.floats(1, 1e6), st.floats(1, 1e6), st.floats(1, 1e6))
def test_grade_is_in_0_1_and_never_rises_with_the_objective(a, b, trivial, reference):
    lo, hi = sorted((a, b))
    g_lo, g_hi = grade_lower_better(lo, trivial, reference), grade_lower_better(hi, trivial, reference)
    assert 0.0 <= g_hi <= g_lo <= 1.0


def random_play_jct_s(cfg, scenario, rollouts: int = tasks.RANDOM_ROLLOUTS) -> float:
    """The best avg JCT (summary.csv's metric) of uniform-random legal episodes, rollout k drawing from
    default_rng([seed, k]) (a plain second implementation of the grader's score-0 anchor)."""
    values = []
    for k in range(rollouts):
        rng = np.random.default_rng([scenario.seed, k])
        env = GPUClusterEnv(cfg, scenario=scenario, max_steps=2**62)
        _, info = env.reset(seed=scenario.seed)
        done = False
        while not done:
            _, _, done, _, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        values.append(summarize(env.sim.result("random", scenario.seed)).avg_jct_s)
    return min(values)


def test_grader_scores_an_sjf_episode_against_random_play_and_the_best_heuristic(url):
    """Drive SJF through the server; its grade must be (R - SJF) / (R - B) with R the mean of random legal play
    (the best of 5 random legal episodes) and B the best non-preemptive heuristic run natively, every avg JCT taken from summary.csv's metric."""
    options = {"difficulty": "easy", "num_jobs": 80, "cluster": "2xA100:8,1xV100:4", "window": 16}
    remote = RemoteEnv(url, options=options)
    local = in_process_env(options)
    # seed 4: random play is worse than the best heuristic there (on the default profile's seed 3 it is not)
    lockstep(remote, local, seed=4)
    grade = remote.grade()
    scenario = local.scenario
    jct = {}
    for algo in scheduling_suite():
        sim = scenario.simulator()
        sim.run(POLICIES[algo])
        jct[algo] = summarize(sim.result(algo, scenario.seed)).avg_jct_s
    assert set(jct) == {"fcfs", "sjf", "easy", "cbf", "sjf_gate", "ect"}  # no preemptive one: the task cannot
    random_jct = random_play_jct_s(local.config, scenario)
    agent = summarize(local.sim.result("agent", scenario.seed)).avg_jct_s
    best = min(jct.values())
    assert random_jct > best  # a loaded cluster: the grade is a real interpolation
    expected = min(1.0, max(0.0, (random_jct - agent) / (random_jct - best)))
    assert 0.0 < expected < 1.0 and grade["score"] == pytest.approx(expected, rel=1e-12)
    assert grade["value"] == pytest.approx(agent, rel=1e-12)
    assert (
        grade["trivial_value"] == pytest.approx(random_jct, rel=1e-12) and grade["trivial_policy"] == "random"
    )
    assert grade["reference_policy"] == min(a for a, v in jct.items() if v == best)  # ties: the first by name
    remote.close()


# -- the command line --------------------------------------------------------------------------------------------


def test_main_mode_serve_serves(tmp_path):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    proc = subprocess.Popen(
        [sys.executable, "main.py", "--mode", "serve", "--port", str(port), "--max_sessions", "2"],
        cwd=Path(__file__).resolve().parents[1],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert f"serving on http://127.0.0.1:{port}" in proc.stdout.readline()
        deadline = time.monotonic() + 30
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/health").json()
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.1)
        assert health == {"status": "healthy", "sessions": 0, "max_sessions": 2}
    finally:
        proc.terminate()
        proc.wait(10)


def test_maskable_ppo_trains_against_the_server_exactly_as_in_process(url):
    """sb3-contrib's MaskablePPO (action_masks()) trained on the remote env learns the very same weights as on the
    in-process env with the same seed: the server changes nothing an agent sees."""
    import torch
    from sb3_contrib import MaskablePPO
    from stable_baselines3.common.logger import Logger

    def train(env) -> dict:
        model = MaskablePPO("MlpPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0, device="cpu")
        model.set_logger(
            Logger(folder=None, output_formats=[])
        )  # (SB3's default makes a folder in the temp dir)
        model.learn(total_timesteps=64)
        return model.policy.state_dict()

    torch.set_num_threads(1)
    remote = RemoteEnv(url, options=OPTIONS)
    remote_weights = train(remote)
    local_weights = train(in_process_env())
    remote.close()
    assert remote_weights.keys() == local_weights.keys()
    assert all(torch.equal(remote_weights[k], local_weights[k]) for k in local_weights)


@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("create"), st.just(0)),
            st.tuples(st.just("get"), st.integers(0, 7)),
            st.tuples(st.just("close"), st.integers(0, 7)),
            st.tuples(st.just("wait"), st.integers(0, 150)),
        ),
        max_size=40,
    )
)
def test_session_store_against_a_plain_model(ops):
    """SessionStore against a dict of last-use times: never more than max_sessions open, a session is found iff
    it was created, not closed, and last used at most ttl_s ago."""
    from server.sessions import ApiError, SessionStore

    clock = FakeClock()
    store = SessionStore(max_sessions=3, ttl_s=100.0, clock=clock)
    model: dict[str, float] = {}  # open session id -> last use
    ids: list[str] = []
    for op, arg in ops:
        model = {s: t for s, t in model.items() if clock.now_s - t <= 100.0}
        if op == "create":
            if len(model) < 3:
                sid = store.create().session_id
                ids.append(sid)
                model[sid] = clock.now_s
            else:
                with pytest.raises(ApiError) as err:
                    store.create()
                assert err.value.status == 429
        elif op == "wait":
            clock.now_s += arg
        elif arg < len(ids):
            sid = ids[arg]
            if op == "get":
                if sid in model:
                    assert store.get(sid).session_id == sid
                    model[sid] = clock.now_s
                else:
                    with pytest.raises(ApiError) as err:
                        store.get(sid)
                    assert err.value.status == 404
            else:
                assert store.close(sid) == (sid in model)
                model.pop(sid, None)
        assert len(store) == len({s for s, t in model.items() if clock.now_s - t <= 100.0}) <= 3


@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("create"), st.just(0)),
            st.tuples(st.just("get"), st.integers(0, 7)),
            st.tuples(st.just("wait"), st.integers(0, 80)),
        ),
        max_size=40,
    )
)
def test_session_store_eviction_against_a_plain_model(ops):
    """With every place taken, create() closes the session unused longest if unused >= evict_idle_s (50 s),
    else refuses: a plain model of last-use times agrees on which sessions are open after every operation."""
    from server.sessions import ApiError, SessionStore

    clock = FakeClock()
    store = SessionStore(max_sessions=3, ttl_s=100.0, clock=clock, evict_idle_s=50.0)
    model: dict[str, float] = {}
    ids: list[str] = []
    for op, arg in ops:
        model = {s: t for s, t in model.items() if clock.now_s - t <= 100.0}
        if op == "create":
            if len(model) >= 3:
                oldest = min(model, key=lambda s: (model[s], s))
                if clock.now_s - model[oldest] >= 50.0:
                    ties = [s for s in model if model[s] == model[oldest]]
                    del model[max(ties)]  # the store breaks ties of equal idle time by the larger id
                else:
                    with pytest.raises(ApiError) as err:
                        store.create()
                    assert err.value.status == 429
                    continue
            sid = store.create().session_id
            ids.append(sid)
            model[sid] = clock.now_s
        elif op == "wait":
            clock.now_s += arg
        elif arg < len(ids) and ids[arg] in model:
            store.get(ids[arg])
            model[ids[arg]] = clock.now_s
        live = {s for s, t in model.items() if clock.now_s - t <= 100.0}
        assert len(store) == len(live) <= 3  # len() expires the idle ones first
        assert {s for s in ids if store.is_open(s)} == live
