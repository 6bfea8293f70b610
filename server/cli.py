"""`python main.py --mode serve`: its options checked, then the environment server run with uvicorn."""

from __future__ import annotations

import argparse
import math
import socket
import sys

from cli.parser import SERVE_OPTIONS, add_serve_options
from config import ServeConfig, UserError


def serve_config(argv: list[str]) -> ServeConfig:
    """argv of `--mode serve` -> ServeConfig; UserError for any other option or a value out of range."""
    from cli.checks import usage_error

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
    d = ServeConfig()
    cfg = ServeConfig(
        host=d.host if args.host is None else args.host,
        port=d.port if args.port is None else args.port,
        max_sessions=d.max_sessions if args.max_sessions is None else args.max_sessions,
        session_ttl_s=d.session_ttl_s if args.session_ttl_s is None else args.session_ttl_s,
    )
    if not cfg.host.strip():
        raise UserError("--host is empty")
    if not 1 <= cfg.port <= 65535:
        raise UserError(f"--port must be between 1 and 65535, got {cfg.port}")
    if cfg.max_sessions < 1:
        raise UserError(f"--max_sessions must be >= 1, got {cfg.max_sessions}")
    if not (math.isfinite(cfg.session_ttl_s) and cfg.session_ttl_s > 0):
        raise UserError(f"--session_ttl_s must be a finite number of seconds > 0, got {cfg.session_ttl_s}")
    return cfg


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
    import uvicorn

    from server.app import create_app

    print(
        f"serving on http://{cfg.host}:{cfg.port} (at most {cfg.max_sessions} sessions, closed after "
        f"{cfg.session_ttl_s:g} s unused); routes: GET /tasks, /health, /schema, /state; POST /reset, /step, "
        "/grader, /close; WS /ws; Ctrl-C stops",
        flush=True,
    )
    # websockets-sansio: uvicorn's implementation on the maintained websockets API (the tested one)
    uvicorn.run(create_app(cfg), host=cfg.host, port=cfg.port, log_level="warning", ws="websockets-sansio")
    return 0
