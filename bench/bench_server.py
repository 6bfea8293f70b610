"""Benchmark: the environment server under concurrent sessions on loopback: steps/s, latency, errors, memory.

Starts `python main.py --mode serve` in a subprocess, warms it up (one reset: the lazy imports), then N client sessions (asyncio, one connection each) step
as fast as the server answers for a given time: each resets (`/reset`, its own seed), starts the job in slot 0
(the shortest startable job: the window is ordered by runtime) until the episode ends, and resets again.

python bench/bench_server.py                                   # 32 sessions, 60 s, medium, HTTP
python bench/bench_server.py --duration_s 10 --transport ws    # one WebSocket per session
python bench/bench_server.py --processes 2                     # two server processes (one per core)
python bench/bench_server.py --duration_s 10 --task power       # a node task: KEEP when legal, else the first
                                                               # legal index (autoscaling: --difficulty = preset)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def tree(pid: int) -> list[int]:
    """pid and its descendants (the server's processes with --processes N), Linux /proc."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return []
    return [pid, *(p for c in children for p in tree(int(c)))]


def cpu_s(pid: int) -> float:
    """User + system CPU seconds process `pid` and its descendants have used (Linux /proc)."""
    total = 0.0
    for p in tree(pid):
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def rss_mb(pid: int) -> float:
    """Resident memory of process `pid` and its descendants in MB (Linux /proc)."""
    total = 0.0
    for p in tree(pid):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024
    return total


def next_action(task: str, info: dict) -> dict:
    """scheduling: slot 0 (the shortest startable job); a node task: KEEP (the last index) when legal, else the
    first legal index."""
    if task == "scheduling":
        return {"slot": 0}
    mask = info["action_mask"]
    return {"index": len(mask) - 1 if mask[-1] else mask.index(True)}


def task_options(task: str, difficulty: str) -> dict:
    """The /reset options of the run (without seed): autoscaling's workload is its preset's."""
    return {"task": task, "preset" if task == "autoscaling" else "difficulty": difficulty}


class Tally:
    def __init__(self):
        self.step_latency_s: list[float] = []
        self.reset_latency_s: list[float] = []
        self.errors: list[str] = []
        self.episodes = 0


async def http_session(base: str, i: int, options: dict, stop_at: float, tally: Tally, ready: asyncio.Event):
    async with httpx.AsyncClient(base_url=base, timeout=120) as client:
        sid = None
        seed = 1000 * i
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            body = {**options, "seed": seed, **({"session_id": sid} if sid else {"open_session": True})}
            r = await client.post("/reset", content=json.dumps(body))
            tally.reset_latency_s.append(time.perf_counter() - t0)
            if r.status_code != 200:
                tally.errors.append(f"reset {r.status_code} {r.text[:200]}")
                return
            sid, info = r.json()["session_id"], r.json()["info"]
            ready.set()
            seed += 1
            done = False
            while not done and time.perf_counter() < stop_at:
                t0 = time.perf_counter()
                action = next_action(options.get("task", "scheduling"), info)
                r = await client.post("/step", content=json.dumps({"session_id": sid, "action": action}))
                tally.step_latency_s.append(time.perf_counter() - t0)
                if r.status_code != 200:
                    tally.errors.append(f"step {r.status_code} {r.text[:200]}")
                    return
                done, info = r.json()["done"], r.json()["info"]
            tally.episodes += done
        if sid:
            await client.post("/close", content=json.dumps({"session_id": sid}))


async def ws_session(base: str, i: int, options: dict, stop_at: float, tally: Tally, ready: asyncio.Event):
    from websockets.asyncio.client import connect

    async with connect("ws" + base.removeprefix("http") + "/ws", max_size=None) as ws:
        seed = 1000 * i
        while time.perf_counter() < stop_at:
            t0 = time.perf_counter()
            await ws.send(json.dumps({"type": "reset", "data": {**options, "seed": seed}}))
            reply = json.loads(await ws.recv())
            tally.reset_latency_s.append(time.perf_counter() - t0)
            if reply["type"] != "observation":
                tally.errors.append(f"reset {reply}")
                return
            ready.set()
            seed += 1
            done, info = False, reply["data"]["info"]
            while not done and time.perf_counter() < stop_at:
                t0 = time.perf_counter()
                action = next_action(options.get("task", "scheduling"), info)
                await ws.send(json.dumps({"type": "step", "data": action}))
                reply = json.loads(await ws.recv())
                tally.step_latency_s.append(time.perf_counter() - t0)
                if reply["type"] != "observation":
                    tally.errors.append(f"step {reply}")
                    return
                done, info = reply["data"]["done"], reply["data"]["info"]
            tally.episodes += done
        await ws.send(json.dumps({"type": "close"}))


async def drive(a, base: str, server_pid: int) -> tuple[Tally, float, float, float]:
    options = task_options(a.task, a.difficulty)
    tally = Tally()
    idle_mb = rss_mb(server_pid)
    run = http_session if a.transport == "http" else ws_session
    t0 = time.perf_counter()
    stop_at = t0 + a.duration_s
    events = [asyncio.Event() for _ in range(a.sessions)]
    tasks = [asyncio.create_task(run(base, i, options, stop_at, tally, events[i])) for i in range(a.sessions)]
    await asyncio.wait([asyncio.create_task(e.wait()) for e in events], timeout=a.duration_s)
    open_mb = rss_mb(server_pid)  # every session holds an episode now
    await asyncio.gather(*tasks)
    return tally, time.perf_counter() - t0, idle_mb, open_mb


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sessions", type=int, default=32)
    p.add_argument("--duration_s", type=float, default=60.0)
    p.add_argument("--difficulty", default="medium")
    p.add_argument("--transport", choices=("http", "ws"), default="http")
    p.add_argument("--task", choices=("scheduling", "power", "autoscaling"), default="scheduling")
    p.add_argument("--processes", type=int, default=1, help="the server's --processes")
    a = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [
            sys.executable,
            "main.py",
            "--mode",
            "serve",
            "--port",
            str(port),
            "--max_sessions",
            str(a.sessions),
            "--processes",
            str(a.processes),
        ],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(base + "/health")
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or server.poll() is not None:
                    sys.exit("error: the server did not start")
                time.sleep(0.1)
        warm = httpx.post(
            base + "/reset",
            content=json.dumps({**task_options(a.task, a.difficulty), "seed": 0}),
            timeout=120,
        )
        httpx.post(
            base + "/close", content=json.dumps({"session_id": warm.json()["session_id"]})
        )  # imports done
        cpu0_s, client0_s = cpu_s(server.pid), time.process_time()
        tally, wall_s, idle_mb, open_mb = asyncio.run(drive(a, base, server.pid))
        server_cpu_s, client_cpu_s = cpu_s(server.pid) - cpu0_s, time.process_time() - client0_s
        health = httpx.get(base + "/health").json()
    finally:
        server.terminate()
        server.wait(10)
    lat = np.array(tally.step_latency_s or [np.nan]) * 1000  # nan: no step answered in time (slow resets)
    reset_ms = np.array(tally.reset_latency_s or [np.nan]) * 1000
    print(
        f"{a.sessions} sessions, {a.transport}, {a.task}, {a.difficulty}, {wall_s:.1f} s: "
        f"{len(tally.step_latency_s) / wall_s:,.0f} steps/s, "
        f"step latency p50 {np.percentile(lat, 50):.1f} ms, p99 {np.percentile(lat, 99):.1f} ms; "
        f"{len(tally.reset_latency_s)} resets (p50 {np.percentile(reset_ms, 50):.0f} ms), {tally.episodes} episodes finished; "
        f"errors {len(tally.errors)}; server memory {idle_mb:.0f} MB idle, {open_mb:.0f} MB with {a.sessions} "
        f"sessions open: {(open_mb - idle_mb) / a.sessions:.1f} MB per session; sessions left open {health['sessions']}; "
        f"CPU: server {server_cpu_s / wall_s:.0%} of a core ({1000 * server_cpu_s / max(1, len(tally.step_latency_s)):.2f} "
        f"ms per step), this client {client_cpu_s / wall_s:.0%}; {a.processes} server process(es)"
    )
    for e in tally.errors[:5]:
        print("  ", e)
    if tally.errors:
        sys.exit(1)


if __name__ == "__main__":
    main()
