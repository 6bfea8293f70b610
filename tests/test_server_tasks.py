"""The node tasks (power, autoscaling) over real HTTP on loopback: /tasks and /schema describe them, /reset takes
their options and refuses bad ones by name, /step reads every JSON action form, an episode equals the in-process
env bit for bit (RemoteEnv over HTTP and WebSocket, and raw JSON actions), /state and /grader after the end."""

from __future__ import annotations

import contextlib
import json
from functools import cache

import httpx
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st
from websockets.sync.client import connect

from cli.json_options import SCENARIO_OPTIONS
from cli.parser import build_parser
from config import TaskConfig
from env.node_heuristics import node_manager
from env.node_tasks import (
    GRADER_DOCS,
    GRADERS,
    NODE_TASK_OPTIONS,
    REFERENCE_MANAGER,
    NodeActionError,
    read_node_action,
)
from server.client import RemoteEnv
from server.tasks import make_task_env
from sim.power import STATE_NAMES
from tests.test_server import post, served, url  # noqa: F401 - the uvicorn fixture, shared

POWER = {"difficulty": "easy", "num_jobs": 5, "load_factor": 0.5, "synthetic_profile": "legacy"}
OPTIONS = {"power": POWER, "autoscaling": {"preset": "easy"}}
TASKS = ("power", "autoscaling")


def reset(base: str, task: str, **body) -> dict:
    r = post(
        base, "/reset", {"task": task, **OPTIONS[task], "open_session": "session_id" not in body, **body}
    )
    assert r.status_code == 200, r.text
    return r.json()


def json_action(env, a: int, n: int) -> dict:
    """Env action `a` in one of the three JSON forms, chosen by step number n (each form used in turn)."""
    if n % 2 == 0:
        return {"index": a}
    if a == env.keep_action:
        return {"change": 0}
    t, off = divmod(a, 2)
    return {"gpu_type": env.type_names[t], "change": -1 if off else 1}


def actions(env, n: int) -> int:
    """The reference manager's action, KEEP every 5th step (so nodes stay on longer and the episodes differ
    from the reference's), a masked action every 7th (an illegal no-op: index 2T + 1 when nothing is masked)."""
    mask = env.action_masks()
    if n % 7 == 0:
        masked = np.flatnonzero(~mask)
        return int(masked[0]) if masked.size else env.keep_action + 1
    if n % 5 == 0:
        return env.keep_action
    return node_manager(REFERENCE_MANAGER[env.task_name])(env.fleet_view())


def local_env(task: str):
    env = make_task_env(task, OPTIONS[task])
    env.task_name = task
    return env


# -- what the server says about the tasks --------------------------------------------------------------------------


def test_tasks_lists_the_node_tasks_with_their_options_help_and_defaults(url):  # noqa: F811
    listed = {t["name"]: t for t in httpx.get(url + "/tasks").json()["tasks"]}
    assert list(listed) == ["scheduling", "power", "autoscaling"]
    flags = {a.dest: a for a in build_parser()._actions}
    cli = {"scheduler": "task_scheduler", "preset": "autoscale_preset", "jct_weight": "jct_weight"}
    cli["recheck_s"] = "recheck_s"  # JSON name -> the command line's dest
    defaults = TaskConfig()
    env_default = {  # what a /reset without the option builds (the env's own attribute)
        "scheduler": defaults.scheduler,
        "jct_weight": defaults.jct_weight_eur_per_job_h,
        "recheck_s": defaults.recheck_s,
        "preset": defaults.autoscale_preset,
    }
    for task in TASKS:
        t = listed[task]
        names = [o["name"] for o in t["options"]]
        own = list(NODE_TASK_OPTIONS[task])
        assert names == (own if task == "autoscaling" else list(SCENARIO_OPTIONS) + own)
        assert t["grader"] == GRADER_DOCS[task] and '{"index": i}' in listed["power"]["description"]
        for o in t["options"]:
            if o["name"] in own:  # the command line's help text, type and default under its JSON name
                a = flags[cli[o["name"]]]
                assert o["help"] == a.help and o["default"] == a.default == env_default[o["name"]]
        rows = {o["name"]: o for o in t["options"]}
        assert rows["scheduler"]["choices"][:3] == ["fcfs", "sjf", "easy"]
        assert rows["recheck_s"]["type"] == "number"
    assert listed["autoscaling"]["options"][0] == {
        "name": "preset",
        "type": "string",
        "default": "easy",
        "help": flags["autoscale_preset"].help,
        "choices": ["easy", "medium", "hard"],
    }
    assert {o["name"]: o["type"] for o in listed["power"]["options"]}["jct_weight"] == "number"
    built = make_task_env("power", POWER)  # the listed defaults are what an env without the options gets
    assert (built.scheduler, built.jct_weight_eur_per_job_h, built.recheck_s) == (
        defaults.scheduler,
        defaults.jct_weight_eur_per_job_h,
        defaults.recheck_s,
    )


@pytest.mark.parametrize("task", TASKS)
def test_schema_describes_the_three_action_forms_and_the_infos_keys(url, task):  # noqa: F811
    r = httpx.get(url + "/schema", params={"task": task})
    assert r.status_code == 200, r.text
    schema = r.json()
    forms = schema["action"]["oneOf"]
    assert [sorted(f["required"]) for f in forms] == [["index"], ["change", "gpu_type"], ["change"]]
    assert all(f["additionalProperties"] is False for f in forms)
    assert schema["state"]["properties"]["nodes"] == {"type": "array"}
    assert schema["state"]["properties"]["episode_return"] == {"type": "number"}
    body = reset(url, task, seed=0)
    assert set(schema["info"]) == set(body["info"])  # every info key documented, none stale
    assert len(body["observation"]["features"]) == body["spaces"]["observation"]["shape"][0]
    assert set(schema["observation"]["required"]) == set(
        body["observation"]
    )  # features, action_mask, truncated
    assert body["observation"]["action_mask"] == body["info"]["action_mask"]


# -- /reset options ---------------------------------------------------------------------------------------------

BAD_OPTIONS = [
    ({"task": "power", "scheduler": "lifo"}, "unknown --task_scheduler 'lifo'; choose one of fcfs"),
    ({"task": "power", "jct_weight": -1}, "--jct_weight must be a finite number >= 0 EUR per job-hour"),
    ({"task": "power", "jct_weight": "high"}, "option 'jct_weight' must be a number, got 'high'"),
    ({"task": "power", "jct_weight": True}, "option 'jct_weight' must be a number, got True"),
    ({"task": "power", "recheck_s": 0}, "--recheck_s must be a finite number of seconds > 0"),
    ({"task": "power", "scheduler": 3}, "option 'scheduler' must be a string, got 3"),
    ({"task": "power", "preset": "easy"}, "power: unknown option(s) 'preset'; the options are workload_type"),
    ({"task": "power", "window": 4}, "unknown option(s) 'window'"),
    ({"task": "power", "num_jobs": -3}, "--num_jobs must be > 0, got -3"),
    ({"task": "power", "uniform_speed": "yes"}, "option 'uniform_speed' is a flag: expected true or false"),
    (
        {"task": "autoscaling", "preset": "extreme"},
        "unknown --autoscale_preset 'extreme'; choose one of easy",
    ),
    ({"task": "autoscaling", "num_jobs": 5}, "its workload and fleet are the preset's"),
    ({"task": "autoscaling", "jct_weight": 1}, "unknown option(s) 'jct_weight' for task autoscaling"),
]


@pytest.mark.parametrize(("body", "message"), BAD_OPTIONS, ids=lambda x: None)
def test_bad_task_option_is_a_400_naming_it_and_opens_no_session(url, body, message):  # noqa: F811
    r = post(url, "/reset", {**body, "open_session": True})
    assert (r.status_code, r.json()["error"]) == (400, "bad_option"), r.text
    assert message in r.json()["detail"]
    assert httpx.get(url + "/health").json()["sessions"] == 0


def test_power_options_reach_the_env_and_null_is_the_default(served, url):  # noqa: F811
    body = reset(url, "power", seed=3, scheduler="fcfs", jct_weight=0.5, recheck_s=None)
    env = session_env(served, body["session_id"])
    assert (env.scheduler, env.jct_weight_eur_per_job_h, env.recheck_s) == (
        "fcfs",
        0.5,
        TaskConfig().recheck_s,
    )
    state = httpx.get(url + "/state", params={"session_id": body["session_id"]}).json()
    assert state["options"] == {**POWER, "scheduler": "fcfs", "jct_weight": 0.5, "recheck_s": None}
    a = reset(url, "autoscaling", preset="medium", recheck_s=300)
    medium = session_env(served, a["session_id"])
    assert medium.preset.horizon_h == 16.0 and medium.recheck_s == 300.0  # medium's horizon: 16 h


def session_env(served, sid: str):  # noqa: F811
    """The server's env of session sid (the fixture's app runs in this process)."""
    return served[1].state.env_server.store.get(sid).env.unwrapped


# -- /step: every JSON action form, illegal actions ------------------------------------------------------------


def test_each_json_action_form_steps_the_env_as_its_index(url):  # noqa: F811
    """autoscaling starts with every node OFF: turn one T4 on by index and by name, KEEP by index and by
    change 0; each pair gives the same answer (one session, reset to the same seed before each step)."""
    sid = None
    for pair in (({"index": 2}, {"gpu_type": "T4", "change": 1}), ({"index": 4}, {"change": 0})):
        bodies = []
        for form in pair:
            s = reset(url, "autoscaling", seed=5, **({"session_id": sid} if sid else {}))
            sid = s["session_id"]
            assert s["info"]["action_mask"][2]  # index 2 = 2 x type 1 (T4): one T4 node on; 4 = 2T: KEEP
            r = post(url, "/step", {"session_id": sid, "action": form})
            assert r.status_code == 200, r.text
            bodies.append(r.json())
        assert bodies[0] == bodies[1]
    assert bodies[0]["info"]["elapsed_s"] > 0  # KEEP lets time pass
    state = httpx.get(url + "/state", params={"session_id": sid}).json()
    assert state["step_count"] == 1 and state["sim_time_s"] == bodies[0]["info"]["sim_time_s"]


@cache
def reset_env(task: str):
    env = make_task_env(task, OPTIONS[task])
    env.reset(seed=0, options={"scenario_seed": 0})
    return env


@settings(max_examples=60, deadline=None)
@given(
    task=st.sampled_from(TASKS),
    i=st.integers(0, 40),
    change=st.one_of(st.integers(-3, 3), st.booleans(), st.floats(-2, 2), st.text(max_size=2)),
)
def test_every_json_form_reads_back_to_its_index_and_nothing_else_is_read(task, i, change):
    """{"index": i} reads as i; the named forms of index i (json_action) read as i; a "change" other than the
    JSON integers 1, -1 (named) or 0 (KEEP) is refused, booleans and floats included (false == 0 in Python)."""
    env = reset_env(task)
    i %= env.keep_action + 1
    assert read_node_action(env, {"index": i}) == i
    assert read_node_action(env, json_action(env, i, 1)) == i
    ok = isinstance(change, int) and not isinstance(change, bool)
    for action in ({"change": change}, {"gpu_type": env.type_names[0], "change": change}):
        legal = ok and (change == 0 if len(action) == 1 else change in (1, -1))
        if legal:
            assert read_node_action(env, action) == (
                env.keep_action if change == 0 else (0 if change == 1 else 1)
            )
        else:
            with pytest.raises(NodeActionError):
                read_node_action(env, action)


BAD_ACTIONS = [
    ({"slot": 0}, 422, "bad_action", 'an action is {"index": i}'),
    ({"index": "0"}, 422, "bad_action", '"index" must be an integer'),
    ({"index": 1.0}, 422, "bad_action", '"index" must be an integer'),
    (
        {"gpu_type": "K80", "change": 1},
        422,
        "bad_action",
        "'K80' is not a type of this cluster (A100-80GB, T4)",
    ),
    ({"gpu_type": "T4", "change": 2}, 422, "bad_action", '"change" must be 1 (turn one on) or -1'),
    ({"gpu_type": "T4", "change": True}, 422, "bad_action", '"change" must be 1 (turn one on) or -1'),
    ({"change": 1}, 422, "bad_action", 'an action is {"index": i}'),
    ({"change": False}, 422, "bad_action", 'an action is {"index": i}'),
    ({"change": 0, "gpu_type": "T4"}, 422, "bad_action", '"change" must be 1 (turn one on) or -1'),
    ({"index": 99}, 409, "illegal_action", "legal actions (info.action_mask): [0, 2, 4]"),
    ({"index": -1}, 409, "illegal_action", "legal actions (info.action_mask): [0, 2, 4]"),
    ({"gpu_type": "T4", "change": -1}, 409, "illegal_action", "legal actions"),  # every node is OFF
]


@pytest.mark.parametrize(("action", "status", "code", "message"), BAD_ACTIONS, ids=lambda x: None)
def test_bad_or_illegal_action_is_refused_and_changes_nothing(url, action, status, code, message):  # noqa: F811
    s = reset(url, "autoscaling", seed=5)
    r = post(url, "/step", {"session_id": s["session_id"], "action": action})
    assert (r.status_code, r.json()["error"]) == (status, code), r.text
    assert message in r.json()["detail"]
    state = httpx.get(url + "/state", params={"session_id": s["session_id"]}).json()
    assert state["step_count"] == 0 and state["sim_time_s"] == 0.0 and state["episode_return"] == 0.0
    ok = post(url, "/step", {"session_id": s["session_id"], "action": {"change": 0}})
    assert ok.status_code == 200, ok.text


def test_illegal_node_action_can_be_a_noop(url):  # noqa: F811
    s = reset(url, "autoscaling", seed=5)
    r = post(url, "/step", {"session_id": s["session_id"], "action": {"index": 1}, "on_illegal": "noop"})
    body = r.json()
    assert r.status_code == 200 and body["info"]["illegal_action"] and body["reward"] == 0.0
    assert body["observation"] == s["observation"] and body["info"]["elapsed_s"] == 0.0


# -- whole episodes: the same over HTTP as in process -----------------------------------------------------------


class RawSession:
    """POST /step over one HTTP connection, or step messages over one WebSocket (the same server.step)."""

    def __init__(self, base: str, transport: str, task: str, seed: int):
        self.transport = transport
        if transport == "http":
            self.http = httpx.Client(base_url=base, timeout=30)  # one connection for the episode
            self.first = reset(base, task, seed=seed)
            self.sid = self.first["session_id"]
        else:
            self.stack = contextlib.ExitStack()  # websockets wants its sync connection used as a context
            self.ws = self.stack.enter_context(connect(base.replace("http", "ws", 1) + "/ws", max_size=None))
            self.ws.send(json.dumps({"type": "reset", "data": {"task": task, **OPTIONS[task], "seed": seed}}))
            self.first = json.loads(self.ws.recv())["data"]
            self.sid = self.first["session_id"]

    def step(self, action: dict) -> dict:
        if self.transport == "http":
            body = {"session_id": self.sid, "action": action, "on_illegal": "noop"}
            r = self.http.post("/step", content=json.dumps(body))
            assert r.status_code == 200, r.text
            return r.json()
        self.ws.send(json.dumps({"type": "step", "data": {"action": action, "on_illegal": "noop"}}))
        reply = json.loads(self.ws.recv())
        assert reply["type"] == "observation", reply
        return reply["data"]

    def close(self) -> None:
        if self.transport == "http":
            self.http.close()
        else:
            self.stack.close()


@pytest.mark.parametrize(
    ("task", "transport"),
    [
        ("power", "http"),
        ("autoscaling", "ws"),
        pytest.param("autoscaling", "http", marks=pytest.mark.slow),  # ~160 HTTP round trips
    ],
)
def test_raw_json_episode_equals_in_process_with_state_and_grade(url, task, transport):  # noqa: F811
    """Every JSON form in turn, with illegal no-ops; rewards and infos equal bit for bit, /state counts the
    nodes as the env's simulator has them, /grader equals the in-process grader on the finished env."""
    local = local_env(task)
    obs, info = local.reset(seed=9, options={"scenario_seed": 9})
    raw = RawSession(url, transport, task, seed=9)
    s, sid = raw.first, raw.sid
    assert s["observation"]["features"] == obs.tolist() and s["info"] == {
        **info,
        "action_mask": info["action_mask"].tolist(),
    }
    assert s["spaces"]["action"] == {"type": "Discrete", "n": 2 * local.num_types + 1, "start": 0}
    r = post(url, "/grader", {"session_id": sid})
    assert r.status_code == 409 and r.json()["error"] == "episode_not_over"
    done = truncated = False
    n = 0
    while not (done or truncated):
        n += 1
        a = actions(local, n)
        got = raw.step(json_action(local, a, n) if a <= local.keep_action else {"index": a})
        obs, reward, done, truncated, info = local.step(a)
        assert got["observation"]["features"] == obs.tolist() and got["reward"] == reward, n  # exact floats
        assert got["observation"]["action_mask"] == info["action_mask"].tolist()
        assert (got["done"], got["truncated"]) == (done or truncated, truncated)
        assert got["info"] == {**info, "action_mask": info["action_mask"].tolist()}, n
    assert done and n > 40
    state = httpx.get(url + "/state", params={"session_id": sid, "jobs": True}).json()
    assert state["step_count"] == n and state["done"] and state["episode_return"] == local.episode_return
    layout, power = local.scenario.layout, local.sim.node_power.state
    for t, row in enumerate(state["nodes"]):
        assert row["gpu_type"] == local.type_names[t]
        nodes = [p for n_, p in enumerate(power) if layout.node_type[n_] == t]
        assert [row[name] for name in STATE_NAMES] == [nodes.count(k) for k in range(len(STATE_NAMES))]
    assert len(state["jobs"]) == state["num_jobs"] == len(local.scenario.workload.jobs)
    grade = post(url, "/grader", {"session_id": sid}).json()
    expected = GRADERS[task](local)
    assert {k: grade[k] for k in expected.__dict__} == expected.__dict__
    assert 0.0 < grade["score"] < 1.0  # seed 9 lies between the anchors (power 0.48, autoscaling 0.31)
    assert grade["value"] == local.episode_return
    raw.close()
    if transport == "http":
        r = post(url, "/step", {"session_id": sid, "action": {"change": 0}})
        assert r.status_code == 409 and r.json()["error"] == "episode_over"


@pytest.mark.parametrize(("task", "transport"), [("power", "http"), ("autoscaling", "ws")])
def test_remote_env_episode_equals_in_process(url, task, transport):  # noqa: F811
    """RemoteEnv on a node task: Discrete(2T + 1) actions sent as {"index": i}; same seeding as the local env
    (reset(seed=s) draws the scenario seed from the env's RNG), same steps bit for bit."""
    remote = RemoteEnv(url, task=task, options=OPTIONS[task], transport=transport)
    local = local_env(task)
    assert remote.action_space == local.action_space and remote.observation_space == local.observation_space
    for seed in (21, 22) if transport == "ws" else (21,):  # a second episode in the same session (fast on ws)
        o1, i1 = remote.reset(seed=seed)
        o2, i2 = local.reset(seed=seed)
        assert o1.dtype == o2.dtype and np.array_equal(o1, o2)
        done = truncated = False
        n = 0
        while not (done or truncated):
            n += 1
            a = actions(local, n)
            assert np.array_equal(remote.action_masks(), local.action_masks())
            o1, r1, d1, t1, i1 = remote.step(a)
            o2, r2, d2, t2, i2 = local.step(a)
            assert np.array_equal(o1, o2) and r1 == r2 and (d1, t1) == (d2, t2), n
            assert np.array_equal(i1.pop("action_mask"), i2.pop("action_mask")) and i1 == i2, n
            done, truncated = d1, t1
        assert done and remote.state()["episode_return"] == local.episode_return
    assert remote.grade()["score"] == GRADERS[task](local).score
    remote.close()
    assert httpx.get(url + "/health").json()["sessions"] == 0


def test_remote_power_env_passes_gymnasiums_env_checker(url):  # noqa: F811
    env = RemoteEnv(url, task="power", options=POWER)
    check_env(env, skip_render_check=True)  # random unmasked actions: illegal ones are no-ops
    env.close()
