"""Open a local HTML file in headless Chromium through the DevTools protocol (websockets, already pinned) and
report what a reader's browser would see: console errors, uncaught exceptions, failed requests, and a screenshot."""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from websockets.sync.client import connect

CHROMIUM = next(
    (shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None
)


@dataclass(frozen=True)
class PageLoad:
    errors: tuple[str, ...]
    """console errors, uncaught exceptions, log entries of level error and failed requests, as text"""
    screenshot_png: bytes


def load_page(path: Path, width_px: int = 390, height_px: int = 1600, timeout_s: float = 60.0) -> PageLoad:
    """Load `path` (file://) in a fresh headless Chromium at a phone's width and collect what went wrong."""
    assert CHROMIUM is not None
    # Chromium's helper processes can still write into the scratch profile while it is removed (a flaky "Directory
    # not empty"): the browser runs in its own process group, killed whole, and what is left of the profile is
    # not an error
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
        proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0",
             f"--user-data-dir={profile}", "--no-first-run", "about:blank"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )  # fmt: skip
        try:
            port = _devtools_port(proc, timeout_s)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout_s) as r:
                page = next(t for t in json.load(r) if t["type"] == "page")
            with connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=timeout_s) as ws:
                return _drive(ws, path, width_px, height_px, timeout_s)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:  # (the group is gone already)
                pass
            proc.wait()


def _devtools_port(proc: subprocess.Popen, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    assert proc.stderr is not None
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        found = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
        if found:
            return int(found.group(1))
        if not line and proc.poll() is not None:
            break
    raise RuntimeError("chromium did not open its DevTools port")


def _drive(ws, path: Path, width_px: int, height_px: int, timeout_s: float) -> PageLoad:
    ids = iter(range(1, 1_000_000))
    errors: list[str] = []

    def call(method: str, **params) -> dict:
        i = next(ids)
        ws.send(json.dumps({"id": i, "method": method, "params": params}))
        while True:
            msg = json.loads(ws.recv(timeout=timeout_s))
            if msg.get("id") == i:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            note(msg)

    def note(msg: dict) -> None:
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            errors.append(
                "console: " + " ".join(str(a.get("value", a.get("description"))) for a in p["args"])
            )
        elif method == "Runtime.exceptionThrown":
            errors.append("exception: " + p["exceptionDetails"].get("text", ""))
        elif method == "Log.entryAdded" and p["entry"]["level"] == "error":
            errors.append(f"log: {p['entry']['text']} {p['entry'].get('url', '')}")
        elif method == "Network.loadingFailed":
            errors.append(f"request failed: {p.get('errorText')} ({p.get('type')})")
        elif method == "Page.loadEventFired":
            loaded.append(True)

    loaded: list[bool] = []
    for domain in ("Runtime", "Log", "Network", "Page"):
        call(f"{domain}.enable")
    call(
        "Emulation.setDeviceMetricsOverride",
        width=width_px,
        height=height_px,
        deviceScaleFactor=1,
        mobile=True,
    )
    call("Page.navigate", url=path.resolve().as_uri())
    deadline = time.monotonic() + timeout_s
    while not loaded and time.monotonic() < deadline:
        note(json.loads(ws.recv(timeout=timeout_s)))
    if not loaded:
        raise RuntimeError(f"{path}: no load event within {timeout_s} s")
    shot = call("Page.captureScreenshot", format="png")
    call("Runtime.evaluate", expression="0")  # drain events that arrived with the screenshot
    return PageLoad(tuple(errors), base64.b64decode(shot["data"]))
