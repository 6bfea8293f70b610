"""Running the server: uvicorn with this project's settings, stopped by any stop signal (SIGINT, SIGTERM, SIGHUP,
SIGUSR1: interrupts.py) after draining (requests in flight finish, sockets close, every session is closed), in one
process or `--processes N`.

With N processes each listens on the port (SO_REUSEPORT: the kernel spreads connections over them) and on a
private Unix socket in a 0700 folder. A session lives in the process that opened it (its id starts with `pK-`);
a request for it that reaches another process is passed on over that process's Unix socket and its answer
returned unchanged. One shared count holds the sessions of all processes to --max_sessions.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import signal
import socket
import tempfile
import time

import uvicorn
from fastapi import Request
from fastapi.responses import Response

from config import ServeConfig
from interrupts import on_stop_signals
from server.sessions import SharedCount


def uvicorn_config(app, cfg: ServeConfig, **kwargs) -> uvicorn.Config:
    """uvicorn's settings for `app`: the WebSocket implementation on the maintained websockets API (the tested
    one), --limit_body_kb as the largest WebSocket message, --drain_s as the shutdown's wait."""
    return uvicorn.Config(
        app,
        log_level="warning",
        ws="websockets-sansio",
        ws_max_size=cfg.limit_body_kb * 1024,
        timeout_graceful_shutdown=cfg.drain_s,
        **kwargs,
    )


class DrainingServer(uvicorn.Server):
    """uvicorn's server that records the signal that stopped it instead of raising it again after the drain
    (serve_main turns it into the exit status 128 + signal)."""

    stop_signal: int | None = None
    open_at_stop = 0
    """sessions open (in every process) when the signal came"""
    count = None
    """the shared session count (SessionStore.count)"""

    def capture_signals(self):
        """uvicorn's drain on every stop signal of interrupts.py (a second one: stop at once)."""
        return on_stop_signals(self.handle_exit)

    def handle_exit(self, sig: int, frame) -> None:
        if self.stop_signal is None:
            self.stop_signal = sig
            self.open_at_stop = self.count.value if self.count is not None else 0
        super().handle_exit(sig, frame)


def serve_one(
    cfg: ServeConfig, app, sockets: list[socket.socket] | None = None, count=None
) -> tuple[int | None, int]:
    """Serve `app` until a stop signal: (the signal or None if uvicorn stopped by itself, sessions open then)."""
    kwargs = {} if sockets else {"host": cfg.host, "port": cfg.port}
    server = DrainingServer(uvicorn_config(app, cfg, **kwargs))
    server.count = count
    server.run(sockets=sockets)
    return server.stop_signal, server.open_at_stop


def _owner(prefixes: dict[str, str]):
    """forward(sid, request, body) for create_app: the answer of the process whose prefix starts `sid`."""
    import httpx

    clients: dict[str, httpx.AsyncClient] = {}

    async def forward(sid: str, request: Request, body: bytes) -> Response | None:
        prefix = sid.split("-", 1)[0] + "-" if "-" in sid else None
        path = prefixes.get(prefix)
        if path is None:
            return None
        if prefix not in clients:  # created in the serving event loop, kept for the process's life
            clients[prefix] = httpx.AsyncClient(
                transport=httpx.AsyncHTTPTransport(uds=path), base_url="http://peer", timeout=None
            )
        headers = {k: v for k, v in request.headers.items() if k in ("authorization", "content-type")}
        r = await clients[prefix].request(
            request.method, request.url.path, params=request.query_params, content=body, headers=headers
        )
        return Response(
            r.content,
            r.status_code,
            headers={k: v for k, v in r.headers.items() if k == "retry-after"},
            media_type="application/json",
        )

    return forward


def _reuse_port_socket(cfg: ServeConfig) -> socket.socket:
    family = socket.getaddrinfo(cfg.host, cfg.port, type=socket.SOCK_STREAM)[0][0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((cfg.host, cfg.port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _worker(
    k: int, cfg: ServeConfig, count, public: socket.socket, private: socket.socket, paths: dict
) -> None:
    from server.app import create_app

    # the parent passes every stop signal on as SIGTERM; a terminal's Ctrl-C reaches every process of the group
    app = create_app(
        cfg, count=count, prefix=f"p{k}-", forward=_owner({p: s for p, s in paths.items() if p != f"p{k}-"})
    )
    serve_one(cfg, app, [public, private])


def _end_all(procs) -> None:
    """SIGTERM to every server process: each drains and exits."""
    for p in procs:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p.pid, signal.SIGTERM)


def serve_processes(cfg: ServeConfig) -> tuple[int | None, int]:
    """Serve with cfg.processes processes until a stop signal: (the signal, sessions open when it came).
    RuntimeError when a process died by itself."""
    ctx = multiprocessing.get_context("fork")  # the sockets and the shared count are inherited
    count = SharedCount(ctx)
    folder = tempfile.mkdtemp(prefix="serve-")  # 0700: only this user may pass requests between processes
    paths = {f"p{k}-": os.path.join(folder, f"p{k}.sock") for k in range(cfg.processes)}
    procs = []
    stop: list[int] = []
    open_at_stop = [0]

    def on_signal(sig, frame):
        if not stop:
            stop.append(sig)
            open_at_stop[0] = count.value
        _end_all(procs)

    with on_stop_signals(on_signal):
        try:
            for k in range(cfg.processes):
                public = _reuse_port_socket(cfg)
                private = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                private.bind(paths[f"p{k}-"])
                private.listen(2048)
                p = ctx.Process(target=_worker, args=(k, cfg, count, public, private, paths), daemon=False)
                p.start()
                public.close()
                private.close()
                procs.append(p)
            while all(p.is_alive() for p in procs):
                time.sleep(0.2)
            if not stop:  # one died by itself: stop the others
                _end_all(procs)
            for p in procs:
                p.join(cfg.drain_s + 30)
            if not stop:
                codes = ", ".join(str(p.exitcode) for p in procs)
                raise RuntimeError(
                    f"a server process stopped by itself (exit statuses {codes}); the server stopped"
                )
            return stop[0], open_at_stop[0]
        finally:
            for p in procs:
                if p.is_alive():
                    p.kill()
            shutil.rmtree(folder, ignore_errors=True)
