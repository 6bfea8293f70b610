"""The server under hostile or careless use, case by case (loopback only): files outside --data_dir, file contents
in errors, oversized bodies and scenarios, episode length, the token, unknown routes, sessions that die (no zombie
socket, RemoteEnv reopens), and the stop signals (drain, exit 128 + signal). Each case asserts the status or exit
code, a one-line message in the documented shape, no traceback, and what is left behind (sessions, processes)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import httpx
import pytest
import uvicorn
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from config import ServeConfig, UserError
from server.app import create_app
from server.cli import serve_config
from server.client import RemoteEnv, SessionLost
from server.processes import uvicorn_config

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "test-token-0123456789abcdef"
AUTH = {"authorization": f"Bearer {TOKEN}"}
SECRET = "SECRET-VALUE-7f3a"
SMALL = {"difficulty": "easy", "num_jobs": 10, "window": 4}
LIMITS = {
    "limit_body_kb": 64,
    "limit_jobs": 500,
    "limit_nodes": 64,
    "limit_gpus": 256,
    "limit_steps": 25,
    "limit_session_mb": 5,
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def running(cfg: ServeConfig, port: int | None = None):
    """uvicorn serving create_app(cfg) in a thread on loopback: yields (base URL, app)."""
    app = create_app(cfg)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port or 0))
    server = uvicorn.Server(uvicorn_config(app, cfg))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}", app
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    """A data folder with good and bad files, and a file outside it (the symlink's target)."""
    root = tmp_path_factory.mktemp("safety")
    inside, outside = root / "data", root / "private"
    inside.mkdir()
    outside.mkdir()
    rows = "".join(f"{10 * i},{600 + i},1\n" for i in range(12))
    (inside / "jobs.csv").write_text("arrival_time,runtime,gpus\n" + rows)
    (inside / "secret.csv").write_text(f"{SECRET},runtime,gpus\n1,2,3\n")
    (inside / "badrow.csv").write_text(f"arrival_time,runtime,gpus\n0,{SECRET},1\n")
    (inside / "many.csv").write_text(
        "arrival_time,runtime,gpus\n" + "".join(f"{i},60,1\n" for i in range(600))
    )
    (inside / "cluster.csv").write_text(f"node_id,gpu_type,num_gpus\n{SECRET},A100,8\nn1,NOT-A-GPU,8\n")
    (outside / "passwd").write_text(f"root:{SECRET}:0:0\n")
    (inside / "link.csv").symlink_to(outside / "passwd")
    return inside


@pytest.fixture(scope="module")
def guarded(data):
    """A server with a token, one data folder and small limits: (base URL, app)."""
    cfg = ServeConfig(max_sessions=4, token=TOKEN, data_dirs=(str(data),), **LIMITS)
    with running(cfg) as served:
        yield served


def sessions(base: str) -> int:
    return httpx.get(base + "/health").json()["sessions"]


def one_line_error(r: httpx.Response) -> dict:
    """The documented error shape, one line, no traceback, no file contents."""
    body = r.json()
    assert set(body) <= {"error", "detail", "request_id"} and body["error"] and body["detail"], body
    assert "\n" not in body["detail"] and "Traceback" not in r.text and SECRET not in r.text, body
    return body


# -- the table: request -> status, error code, a fragment of the one-line message ------------------------------

CASES = [
    # files: only under --data_dir, never their contents
    (
        "abs path outside",
        {"workload_type": "csv", "workload_path": "/etc/passwd"},
        403,
        "forbidden_path",
        "outside",
    ),
    (
        "relative escape",
        {"workload_type": "csv", "workload_path": "../private/passwd"},
        403,
        "forbidden_path",
        "outside",
    ),
    ("symlink out", {"workload_type": "csv", "workload_path": "link.csv"}, 403, "forbidden_path", "outside"),
    (
        "cluster outside",
        {"cluster_path": "/etc/hostname", "num_jobs": 10},
        403,
        "forbidden_path",
        "--data_dir",
    ),
    (
        "missing inside",
        {"workload_type": "csv", "workload_path": "nope.csv"},
        404,
        "no_such_file",
        "nope.csv",
    ),
    (
        "path not a string",
        {"workload_type": "csv", "workload_path": 5},
        400,
        "bad_option",
        "must be a file name",
    ),
    (
        "header contents",
        {"workload_type": "csv", "workload_path": "secret.csv"},
        400,
        "bad_option",
        "secret.csv:1",
    ),
    (
        "row contents",
        {"workload_type": "csv", "workload_path": "badrow.csv"},
        400,
        "bad_option",
        "badrow.csv:2",
    ),
    ("cluster contents", {"cluster_path": "cluster.csv", "num_jobs": 10}, 400, "bad_option", "cluster.csv"),
    ("folder as a CSV", {"workload_type": "csv", "workload_path": "."}, 400, "bad_option", "workload_path ."),
    # sizes: refused before anything is built, naming the server option
    ("2M jobs", {"num_jobs": 2_000_000}, 422, "limit_exceeded", "--limit_jobs"),
    ("1M nodes", {"cluster": "1000000xA100:8", "num_jobs": 10}, 422, "limit_exceeded", "--limit_nodes"),
    ("huge count", {"cluster": "9" * 40 + "xA100:8", "num_jobs": 10}, 422, "limit_exceeded", "--limit_nodes"),
    ("GPUs per node", {"cluster": "2xA100:1000", "num_jobs": 10}, 422, "limit_exceeded", "--limit_gpus"),
    (
        "memory estimate",
        {"num_jobs": 400, "cluster": "60xA100:4"},
        422,
        "limit_exceeded",
        "--limit_session_mb",
    ),
    ("big window", {"window": 100_000}, 422, "limit_exceeded", "window 100000"),
    (
        "trace over limit",
        {"workload_type": "csv", "workload_path": "many.csv"},
        422,
        "limit_exceeded",
        "600 jobs",
    ),
    # malformed requests keep the shape
    ("seed not int", {"seed": "x"}, 422, "bad_request", "seed: Input should be a valid integer"),
    ("episode_id long", {"episode_id": "e" * 300}, 422, "bad_request", "episode_id"),
    ("timeout zero", {"timeout_s": 0}, 422, "bad_request", "timeout_s"),
    ("unknown task", {"task": "chess"}, 404, "unknown_task", "chess"),
]


@pytest.mark.parametrize(("name", "body", "status", "code", "fragment"), CASES, ids=[c[0] for c in CASES])
def test_reset_case(guarded, name, body, status, code, fragment):
    base, _ = guarded
    for open_session in (False, True):  # stateless and in a new session: the same answer, nothing kept
        r = httpx.post(
            base + "/reset", content=json.dumps({**body, "open_session": open_session}), headers=AUTH
        )
        assert (r.status_code, one_line_error(r)["error"]) == (status, code), r.text
        assert fragment in r.json()["detail"], r.json()["detail"]
        assert sessions(base) == 0


def test_a_file_inside_the_data_folder_is_read(guarded, data):
    base, _ = guarded
    for path in ("jobs.csv", str(data / "jobs.csv")):  # relative to the folder, or absolute inside it
        r = httpx.post(
            base + "/reset", content=json.dumps({"workload_type": "csv", "workload_path": path}), headers=AUTH
        )
        assert r.status_code == 200 and r.json()["seed"] >= 0, r.text


def test_without_data_dir_no_file_is_read():
    with running(ServeConfig()) as (base, _):
        r = httpx.post(
            base + "/reset", content=json.dumps({"workload_type": "csv", "workload_path": "/etc/passwd"})
        )
        assert (r.status_code, one_line_error(r)["error"]) == (403, "forbidden_path")
        assert "started without --data_dir" in r.json()["detail"] and "root" not in r.text


@pytest.mark.parametrize(
    ("name", "content", "headers"),
    [
        ("too long", b"{" + b" " * (65 * 1024) + b"}", {}),
        ("chunked too long", iter([b" " * (40 * 1024)] * 3), {}),
    ],
    ids=lambda x: x if isinstance(x, str) else "",
)
def test_body_over_the_limit_is_413(guarded, name, content, headers):
    base, _ = guarded
    with httpx.Client(timeout=30) as client:
        r = client.post(base + "/reset", content=content, headers={**AUTH, **headers})
    assert (r.status_code, one_line_error(r)["error"]) == (413, "body_too_large")
    assert "--limit_body_kb" in r.json()["detail"] and sessions(base) == 0


def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_read(guarded):
    base, _ = guarded
    port = int(base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        head = f"POST /reset HTTP/1.1\r\nhost: x\r\ncontent-length: {10**9}\r\nauthorization: Bearer {TOKEN}\r\n\r\n"
        sock.sendall(head.encode() + b"{}")  # 2 of the 10^9 bytes announced: the answer comes all the same
        reply = sock.recv(65536).decode()
    assert reply.startswith("HTTP/1.1 413") and '"error": "body_too_large"' in reply and sessions(base) == 0


def test_ws_message_over_the_limit_closes_the_socket_and_its_session(guarded):
    base, _ = guarded
    with connect(base.replace("http", "ws", 1) + "/ws", additional_headers=AUTH, max_size=None) as ws:
        ws.send(json.dumps({"type": "reset", "data": {**SMALL, "seed": 1}}))
        assert json.loads(ws.recv())["type"] == "observation" and sessions(base) == 1
        ws.send("x" * (65 * 1024))
        with pytest.raises(ConnectionClosed) as closed:
            ws.recv()
    assert closed.value.rcvd.code == 1009  # message too big
    wait_for(lambda: sessions(base) == 0)


def test_episode_is_truncated_at_limit_steps_and_done_says_so(guarded):
    base, _ = guarded
    with httpx.Client(base_url=base, headers=AUTH, timeout=30) as c:
        s = c.post(
            "/reset", content=json.dumps({**SMALL, "num_jobs": 60, "seed": 1, "open_session": True})
        ).json()
        sid, body = s["session_id"], s
        for _ in range(LIMITS["limit_steps"]):
            body = c.post("/step", content=json.dumps({"session_id": sid, "action": {"slot": 4}})).json()
        assert body["done"] and body["truncated"] and body["observation"]["truncated"]
        r = c.post("/step", content=json.dumps({"session_id": sid, "action": {"slot": 4}}))
        assert (r.status_code, one_line_error(r)["error"]) == (409, "episode_over") and "truncated" in r.text
        c.post("/close", content=json.dumps({"session_id": sid}))


# -- the token ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"authorization": "Bearer wrong-token-0123456789"}, 401),
        ({"authorization": TOKEN}, 401),
        (AUTH, 200),
    ],
    ids=["none", "wrong", "not bearer", "right"],
)
def test_every_route_but_health_needs_the_token(guarded, headers, status):
    base, _ = guarded
    for method, path in (("GET", "/tasks"), ("GET", "/metadata"), ("POST", "/mcp"), ("GET", "/nope")):
        r = httpx.request(method, base + path, headers=headers, content=b"{}" if method == "POST" else None)
        expected = 404 if status == 200 and path == "/nope" else status
        assert r.status_code == expected, (path, r.text)
        if status == 401:
            assert one_line_error(r)["error"] == "unauthorized" and r.headers["www-authenticate"] == "Bearer"
    assert httpx.get(base + "/health").status_code == 200  # a load balancer's check needs no token


def test_ws_without_the_token_is_refused_at_the_handshake(guarded):
    base, _ = guarded
    with pytest.raises(InvalidStatus) as refused:
        with connect(base.replace("http", "ws", 1) + "/ws"):
            pass
    assert refused.value.response.status_code == 403 and sessions(base) == 0
    env = RemoteEnv(base, options=SMALL, transport="ws", token=TOKEN)  # with it: a normal session
    env.reset(seed=0)
    env.close()


# -- the shape of every error ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "content", "status", "code"),
    [
        ("GET", "/nope", None, 404, "no_such_route"),
        ("DELETE", "/reset", None, 405, "method_not_allowed"),
        ("GET", "/schema?task=chess", None, 404, "unknown_task"),
        ("GET", "/state?session_id=gone", None, 404, "unknown_session"),
        ("GET", "/state?jobs=maybe", None, 422, "bad_request"),
        ("POST", "/step", "[1]", 422, "bad_request"),
        ("POST", "/grader", "{", 400, "malformed_json"),
        ("POST", "/step", '{"action": {"slot": 0}}', 409, "no_session"),
    ],
)
def test_unknown_routes_and_validation_errors_have_the_documented_shape(
    guarded, method, path, content, status, code
):
    base, _ = guarded
    r = httpx.request(method, base + path, content=content, headers=AUTH)
    assert (r.status_code, one_line_error(r)["error"]) == (status, code), r.text


def test_request_id_and_episode_id_are_honoured(guarded):
    base, _ = guarded
    with httpx.Client(base_url=base, headers=AUTH, timeout=30) as c:
        body = {**SMALL, "seed": 2, "open_session": True, "episode_id": "ep-7", "request_id": "r1"}
        s = c.post("/reset", content=json.dumps(body)).json()
        assert s["episode_id"] == "ep-7" and s["request_id"] == "r1"
        step = {"session_id": s["session_id"], "action": {"slot": 4}, "request_id": "r2", "timeout_s": 5}
        assert c.post("/step", content=json.dumps(step)).json()["request_id"] == "r2"
        state = c.get("/state", params={"session_id": s["session_id"]}).json()
        assert state["episode_id"] == "ep-7" and state["step_count"] == 1
        c.post("/close", content=json.dumps({"session_id": s["session_id"]}))


# -- sessions that die -------------------------------------------------------------------------------------------


def wait_for(condition, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def test_a_silent_socket_is_closed_with_its_session_no_zombie():
    with running(ServeConfig(session_ttl_s=1.0)) as (base, _):
        with connect(base.replace("http", "ws", 1) + "/ws") as ws:
            ws.send(json.dumps({"type": "reset", "data": {**SMALL, "seed": 1}}))
            assert json.loads(ws.recv())["type"] == "observation" and sessions(base) == 1
            expired = json.loads(ws.recv(timeout=10))  # nothing sent for the TTL
            assert expired["type"] == "error" and expired["data"]["code"] == "session_expired"
            with pytest.raises(ConnectionClosed):  # the socket is gone too: no reset can reuse a dead session
                ws.send(json.dumps({"type": "reset", "data": {**SMALL, "seed": 2}}))
                ws.recv(timeout=10)
        assert sessions(base) == 0


def test_closing_a_sockets_session_over_http_closes_the_socket():
    with running(ServeConfig()) as (base, _):
        with connect(base.replace("http", "ws", 1) + "/ws") as ws:
            ws.send(json.dumps({"type": "reset", "data": {**SMALL, "seed": 1}}))
            sid = json.loads(ws.recv())["data"]["session_id"]
            assert httpx.post(base + "/close", content=json.dumps({"session_id": sid})).status_code == 200
            ws.send(json.dumps({"type": "step", "data": {"slot": 4}}))
            gone = json.loads(ws.recv())
            assert (
                gone["data"]["code"] == "unknown_session"
                and "closed (POST /close)" in gone["data"]["message"]
            )
            with pytest.raises(ConnectionClosed):
                ws.recv(timeout=10)
        assert sessions(base) == 0


@pytest.mark.parametrize("transport", ["http", "ws"])
def test_remote_env_reopens_its_session_after_a_server_restart(transport):
    port = free_port()
    with running(ServeConfig(), port) as (base, _):
        env = RemoteEnv(base, options=SMALL, transport=transport)
        env.reset(seed=1)
        env.step(4)
    with running(ServeConfig(), port) as (base, _):  # a new server: it knows no session
        with pytest.raises(SessionLost):
            env.step(4)
        with pytest.warns(UserWarning, match="the server lost this env's session"):
            obs, info = env.reset(seed=2)
        assert obs.shape == env.observation_space.shape and sessions(base) == 1
        env.step(4)  # the new session steps
        env.close()
        assert sessions(base) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env.close()  # closing twice, with the server gone: nothing raised


def test_remote_env_close_never_raises_when_the_server_is_gone():
    with running(ServeConfig()) as (base, _):
        http, ws = RemoteEnv(base, options=SMALL), RemoteEnv(base, options=SMALL, transport="ws")
    for env in (http, ws):
        env.close()  # the server is gone: nothing raised, nothing left open
        assert env.session_id is None


# -- the command line and the stop signals -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--host", "0.0.0.0"], {}, "--host 0.0.0.0 serves other machines: give a token"),
        (["--token", "short"], {}, "at least 16 printable characters"),
        (["--data_dir", "/no/such/folder"], {}, "--data_dir /no/such/folder: no such folder"),
        (["--limit_jobs", "0"], {}, "--limit_jobs must be >= 1, got 0"),
        (["--processes", "0"], {}, "--processes must be >= 1, got 0"),
        (["--drain_s", "-1"], {}, "--drain_s must be a finite number of seconds > 0"),
        (["--evict_idle_s", "nan"], {}, "--evict_idle_s must be a finite number of seconds > 0"),
        (["--limit_body_kb", "x"], {}, "argument --limit_body_kb: invalid int value: 'x'"),
    ],
)
def test_serve_option_mistakes_exit_2_with_one_line(argv, env, message):
    out = subprocess.run(
        [sys.executable, "main.py", "--mode", "serve", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env, "SERVE_TOKEN": ""},
    )
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and message in lines[0], out.stderr
    assert lines[0].startswith("error: ") and "Traceback" not in out.stderr and out.stdout == ""


def test_a_token_from_the_environment_allows_other_hosts():
    cfg = serve_config(["--host", "0.0.0.0"], environ={"SERVE_TOKEN": TOKEN})
    assert cfg.token == TOKEN and "token" not in repr(cfg)  # never printed with the config
    with pytest.raises(UserError, match="give a token"):
        serve_config(["--host", "0.0.0.0"], environ={})
    assert serve_config(["--host", "localhost"], environ={}).token is None  # loopback by name


def start_serving(*argv: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "main.py", "--mode", "serve", "--port", str(port), *argv],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(base + "/health")
            return proc, base
        except httpx.TransportError:
            assert time.monotonic() < deadline and proc.poll() is None, (
                proc.stderr.read() if proc.poll() else ""
            )
            time.sleep(0.1)


@pytest.mark.parametrize(
    ("sig", "argv"),
    [
        (signal.SIGTERM, ()),
        (signal.SIGINT, ()),
        (signal.SIGUSR1, ()),
        (signal.SIGTERM, ("--processes", "2")),
        (signal.SIGHUP, ("--processes", "2")),
    ],
    ids=["sigterm", "sigint", "sigusr1", "sigterm-2-processes", "sighup-2-processes"],
)
def test_a_stop_signal_drains_closes_every_session_and_exits_128_plus_it(sig, argv):
    proc, base = start_serving(*argv)
    try:
        http = RemoteEnv(base, options=SMALL)
        http.reset(seed=1)
        with connect(base.replace("http", "ws", 1) + "/ws") as ws:
            ws.send(json.dumps({"type": "reset", "data": {**SMALL, "seed": 1}}))
            assert json.loads(ws.recv())["type"] == "observation"
            assert sessions(base) == 2
            proc.send_signal(sig)
            with pytest.raises(ConnectionClosed) as closed:
                ws.recv(timeout=30)
        assert closed.value.rcvd is None or closed.value.rcvd.code == 1012  # "service restart"
        assert proc.wait(60) == 128 + sig
    finally:
        if proc.poll() is None:
            proc.kill()
    err = proc.stderr.read().strip().splitlines()
    shown = "Ctrl-C" if sig == signal.SIGINT else sig.name
    assert err == [f"stopped by {shown}: requests in flight answered, the 2 open session(s) closed"], err
    assert "serving on" in proc.stdout.read()
    with pytest.raises(httpx.TransportError):  # nothing listens any more
        httpx.get(base + "/health", timeout=2)
    http.close()  # the server is gone: close() says nothing


def test_processes_share_one_pool_and_pass_requests_to_the_sessions_process():
    proc, base = start_serving("--processes", "2", "--max_sessions", "4")
    try:
        ids = set()
        for seed in range(4):  # a new connection each: the kernel spreads them over both processes
            r = httpx.post(base + "/reset", content=json.dumps({**SMALL, "seed": seed, "open_session": True}))
            ids.add(r.json()["session_id"])
        assert {sid.split("-", 1)[0] for sid in ids} <= {"p0", "p1"} and sessions(base) == 4
        r = httpx.post(base + "/reset", content=json.dumps({**SMALL, "open_session": True}))
        assert r.status_code == 429  # one pool for both processes
        for sid in ids:  # whichever process a connection reaches, each session answers
            for _ in range(3):
                step = httpx.post(
                    base + "/step", content=json.dumps({"session_id": sid, "action": {"slot": 4}})
                )
                assert step.status_code == 200, step.text
            assert httpx.get(base + "/state", params={"session_id": sid}).json()["step_count"] == 3
            assert httpx.post(base + "/close", content=json.dumps({"session_id": sid})).json()["closed"]
        assert sessions(base) == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 143
