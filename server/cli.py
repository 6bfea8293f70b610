"""`python main.py --mode serve`: its options checked, then the environment server run until a stop signal.

Exit status: 2 for a mistake in the options (one `error:` line); after a stop signal (SIGTERM, SIGINT (Ctrl-C),
SIGHUP, SIGUSR1: interrupts.py), once requests in flight are answered and every session is closed, 128 + the signal
(143, 130, 129, 138), the convention of the other modes, so that a batch system sees the server was stopped, not
finished."""

from __future__ import annotations

import argparse
import ipaddress
import math
import os
import socket
import sys
from dataclasses import fields

from cli.parser import SERVE_OPTIONS, SERVE_TOKEN_ENV, add_serve_options
from config import ServeConfig, UserError
from interrupts import Stopped, exit_status, signal_name

CONFIG_FIELD = {"data_dir": "data_dirs"}
"""serve options whose ServeConfig field is named otherwise"""


def serve_config(argv: list[str], environ: dict[str, str] | None = None) -> ServeConfig:
    """argv of `--mode serve` -> ServeConfig; UserError for any other option or a value out of range."""
    from cli.checks import usage_error

    environ = os.environ if environ is None else environ
    parser = argparse.ArgumentParser(prog="main.py --mode serve", add_help=False)
    parser.error = usage_error
    parser.add_argument("--mode")
    add_serve_options(parser)
    args, rest = parser.parse_known_args(argv)
    if rest:
        raise UserError(
            f"--mode serve takes only --{', --'.join(SERVE_OPTIONS)}; {' '.join(rest)} would go in a session's POST "
            "/reset body (docs/server.md)"
        )
    given = {CONFIG_FIELD.get(k, k): getattr(args, k) for k in SERVE_OPTIONS if getattr(args, k) is not None}
    given["processes"] = given.pop("processes", ServeConfig().processes)
    if "data_dirs" in given:
        given["data_dirs"] = tuple(given["data_dirs"])
    if "token" not in given and environ.get(SERVE_TOKEN_ENV):
        given["token"] = environ[SERVE_TOKEN_ENV]
    cfg = ServeConfig(**given)
    check_serve_config(cfg)
    return cfg


def check_serve_config(cfg: ServeConfig) -> None:
    if not cfg.host.strip():
        raise UserError("--host is empty")
    if not 1 <= cfg.port <= 65535:
        raise UserError(f"--port must be between 1 and 65535, got {cfg.port}")
    for name in (
        "max_sessions",
        "processes",
        *(f.name for f in fields(ServeConfig) if f.name.startswith("limit_")),
    ):
        if getattr(cfg, name) < 1:
            raise UserError(f"--{name} must be >= 1, got {getattr(cfg, name)}")
    for name in ("session_ttl_s", "evict_idle_s", "drain_s"):
        value = getattr(cfg, name)
        if not (math.isfinite(value) and value > 0):
            raise UserError(f"--{name} must be a finite number of seconds > 0, got {value}")
    if cfg.token is not None and (len(cfg.token) < 16 or not cfg.token.isprintable() or " " in cfg.token):
        raise UserError(
            "the token (--token or $"
            + SERVE_TOKEN_ENV
            + ") must be at least 16 printable characters without "
            "spaces (e.g. python -c 'import secrets; print(secrets.token_urlsafe())')"
        )
    try:
        socket.getaddrinfo(cfg.host, cfg.port, type=socket.SOCK_STREAM)
    except socket.gaierror as err:
        raise UserError(f"--host {cfg.host}: unknown address ({err.strerror})") from None
    if cfg.token is None and not is_loopback(cfg.host):
        raise UserError(
            f"--host {cfg.host} serves other machines: give a token (set ${SERVE_TOKEN_ENV}, or --token); clients "
            "then send Authorization: Bearer TOKEN"
        )
    for d in cfg.data_dirs:
        if not os.path.isdir(d):
            raise UserError(f"--data_dir {d}: no such folder")


def is_loopback(host: str) -> bool:
    """Every address `host` names is this machine's loopback (a name that does not resolve is not)."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except socket.gaierror:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def check_listen(cfg: ServeConfig) -> None:
    """Refuse a host/port we cannot listen on before starting (uvicorn would log a traceback-like error)."""
    try:
        infos = socket.getaddrinfo(cfg.host, cfg.port, type=socket.SOCK_STREAM)
    except socket.gaierror as err:
        raise UserError(f"--host {cfg.host}: unknown address ({err.strerror})") from None
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(address)
        except OSError as err:
            raise UserError(
                f"--port {cfg.port}: cannot listen on {cfg.host}:{cfg.port} ({err.strerror})"
            ) from None


def serve_main(argv: list[str]) -> int:
    try:
        cfg = serve_config(argv)
        check_listen(cfg)
    except UserError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    from server.processes import serve_one, serve_processes

    files = (
        f"files under {', '.join(cfg.data_dirs)}" if cfg.data_dirs else "no files (built-in scenarios only)"
    )
    print(
        f"serving on http://{cfg.host}:{cfg.port} with {cfg.processes} process(es) (at most {cfg.max_sessions} "
        f"sessions, closed after {cfg.session_ttl_s:g} s unused; {'token required' if cfg.token else 'no token'}; "
        f"reads {files}); routes: GET /health, /metadata, /schema, /state, /tasks; POST /reset, /step, /grader, "
        "/close, /mcp; WS /ws; Ctrl-C or SIGTERM stops",
        flush=True,
    )
    if cfg.processes == 1:
        from server.app import create_app

        app = create_app(cfg)
        sig, sessions = serve_one(cfg, app, count=app.state.env_server.store.count)
    else:
        try:
            sig, sessions = serve_processes(cfg)
        except RuntimeError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
    if sig is None:
        return 0
    print(
        f"stopped by {signal_name(sig)}: requests in flight answered, the {sessions} open session(s) closed",
        file=sys.stderr,
        flush=True,
    )
    return exit_status(Stopped(sig))
