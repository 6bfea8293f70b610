"""What a request may make the server do: which files it may read (under --data_dir only), how large a session
may be (jobs, nodes, GPUs, estimated memory), and what an error about a data file may say (its name and line,
never its contents)."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from config import DIFFICULTIES, ServeConfig
from server.sessions import ApiError

FILE_OPTIONS = ("workload_path", "cluster_path")
"""the task options that name a file or folder the server reads"""
JOB_KB = 3.2
"""estimated memory per job, KiB: the env's records (1.5 KiB measured at 50,000 jobs) and the grader's native
heuristic run on the same scenario"""
NODE_KB = 1.0
"""estimated memory per cluster node, KiB (4.3 MB measured for 4,096 nodes)"""
BASE_MB = 4.0
"""estimated memory of an empty session, MB"""
_SPEC_ITEM = re.compile(r"^\s*(\d+)\s*[xX]\s*[A-Za-z0-9_\-]+\s*:\s*(\d+)\s*$")

log = logging.getLogger("server")


@dataclass(frozen=True)
class DataFile:
    option: str
    given: str
    """the path as the request wrote it"""
    resolved: str
    """the real path the server reads"""


def resolve_data_files(options: Mapping[str, object], data_dirs: tuple[str, ...]) -> list[DataFile]:
    """The files `options` name, each resolved under one of `data_dirs` (a relative path: in the first folder
    that holds it; an absolute one: must lie in one). ApiError 403 for a path outside them (the same answer
    whether or not it exists, so nothing is learnt about the server's files), 404 for one missing inside."""
    files = []
    roots = [os.path.realpath(d) for d in data_dirs]
    for option in FILE_OPTIONS:
        given = options.get(option)
        if given is None:
            continue
        if not isinstance(given, str) or not given:
            raise ApiError(
                400, "bad_option", f"option {option!r} must be a file name (a string), got {given!r:.80}"
            )
        if not roots:
            raise ApiError(
                403,
                "forbidden_path",
                f"{option} {given!r:.200}: this server reads no files (it was started without --data_dir); "
                "use the built-in scenarios (difficulty, num_jobs, cluster, ...)",
            )
        candidates = [given] if os.path.isabs(given) else [os.path.join(r, given) for r in roots]
        inside = [c for c in (os.path.realpath(c) for c in candidates) if any(_within(c, r) for r in roots)]
        if not inside:
            raise ApiError(
                403,
                "forbidden_path",
                f"{option} {given!r:.200} is outside the server's data folders (--data_dir); name a file in "
                "them, relative to one of them",
            )
        found = next((c for c in inside if os.path.exists(c)), None)
        if found is None:
            raise ApiError(
                404,
                "no_such_file",
                f"{option} {given!r:.200}: no such file or folder in the server's --data_dir",
            )
        files.append(DataFile(option, given, found))
    return files


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def file_error(message: str, files: list[DataFile], task: str, options: Mapping[str, object]) -> str:
    """The client's copy of an error raised while reading `files`: the file (as the client named it) and line
    number only; the full message goes to the server's log. A message that names none of the files and quotes
    nothing (e.g. "--num_jobs must be > 0") is kept as it is."""
    named = [f for f in files if f.resolved in message or f.given in message]
    if not named and "'" not in message and '"' not in message:
        return message
    log.warning("%s: %s", task, message)
    f = named[0] if named else files[0]
    line = next(
        (m.group(1) for p in (f.resolved, f.given) if (m := re.search(re.escape(p) + r":(\d+)", message))),
        None,
    )
    where = f"{f.given}:{line}" if line else f.given
    kind = (
        f"a {options.get('workload_type') or 'synthetic'} workload"
        if f.option == "workload_path"
        else "a cluster file"
    )
    return (
        f"{f.option} {where}: cannot be read as {kind} (the server's log says why; file contents are never "
        "sent back)"
    )


def _spec_size(spec: str) -> tuple[int, int]:
    """(nodes, GPUs) a --cluster spec text asks for, counted without building it (0, 0 if malformed: the
    command line's parser then says why)."""
    nodes = gpus = 0
    for item in spec.split(","):
        m = _SPEC_ITEM.match(item)
        if m:
            n, per = (int(g) if len(g) <= 12 else 10**12 for g in m.groups())  # no 10**4000-digit ints
            nodes, gpus = nodes + n, gpus + n * per
    return nodes, gpus


def estimated_mb(jobs: int, nodes: int) -> float:
    return BASE_MB + (jobs * JOB_KB + nodes * NODE_KB) / 1024


def check_size(cfg: ServeConfig, jobs: int | None, nodes: int | None, gpus: int | None, what: str) -> None:
    """ApiError 422 `limit_exceeded` naming the server option when a size is over its limit (None: unknown)."""
    for value, limit, option, unit in (
        (jobs, cfg.limit_jobs, "limit_jobs", "jobs"),
        (nodes, cfg.limit_nodes, "limit_nodes", "nodes"),
        (gpus, cfg.limit_gpus, "limit_gpus", "GPUs"),
    ):
        if value is not None and value > limit:
            raise ApiError(
                422,
                "limit_exceeded",
                f"{what} has {value:,} {unit}; this server allows at most {limit:,} per session (its --{option})",
            )
    if jobs is not None and nodes is not None and estimated_mb(jobs, nodes) > cfg.limit_session_mb:
        raise ApiError(
            422,
            "limit_exceeded",
            f"{what} ({jobs:,} jobs, {nodes:,} nodes) needs about {estimated_mb(jobs, nodes):,.0f} MB; this "
            f"server allows {cfg.limit_session_mb:,} MB per session (its --limit_session_mb)",
        )


def check_requested_size(cfg: ServeConfig, options: Mapping[str, object]) -> None:
    """Refuse, before anything is built, a synthetic scenario or --cluster spec over the limits."""
    preset = DIFFICULTIES.get(options.get("difficulty") or "medium")
    jobs = options.get("num_jobs")
    if not isinstance(jobs, int) or isinstance(jobs, bool):
        jobs = preset.num_jobs if preset and not options.get("workload_path") else None
    spec = options.get("cluster")
    if isinstance(spec, str):
        nodes, gpus = _spec_size(spec)
    elif preset and not options.get("cluster_path"):
        nodes, gpus = _spec_size(preset.cluster)
    else:
        nodes = gpus = None
    check_size(cfg, jobs, nodes, gpus, "the requested scenario")


def check_built_size(cfg: ServeConfig, env) -> None:
    """Refuse a built scenario (a trace, a cluster file) over the limits."""
    sc = env.unwrapped.scenario
    check_size(
        cfg,
        len(sc.workload.jobs),
        sc.layout.num_nodes,
        sum(n.num_gpus for n in sc.cluster.nodes),
        "the scenario",
    )
