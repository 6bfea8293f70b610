"""Options given as JSON (a server's POST /reset body) turned into a RunConfig by the command line's own parser and
checks, so a remote client gets exactly the `error:` message `python main.py` would print for the same mistake."""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from dataclasses import replace

from cli.checks import TRACE_ONLY
from config import RunConfig, UserError

ENV_OPTIONS = ("window", "reward")
"""options of the Gymnasium env itself (the CLI takes them for agents)"""
SCENARIO_OPTIONS = (
    "workload_type",
    "workload_path",
    "difficulty",
    "num_jobs",
    "load_factor",
    "synthetic_profile",
    "kill_at_estimate",
    *TRACE_ONLY,
    "google_unit",
    "cluster",
    "cluster_path",
    "uniform_speed",
    "multi_node_factor",
    "runtime_info",
)
"""every workload, cluster and policy-information option of the command line"""


def _raise(message: str):
    raise UserError(message)


def _parser() -> argparse.ArgumentParser:
    from cli.parser import build_parser

    parser = build_parser()
    parser.exit_on_error = False
    parser.error = _raise  # argparse's own mistakes (bad int, bad choice) as a UserError with its message
    return parser


def _argv(options: Mapping[str, object], allowed: tuple[str, ...], where: str) -> list[str]:
    """The command line that sets `options`; a key or JSON type the command line has no form for is a UserError."""
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise UserError(
            f"{where}: unknown option(s) {', '.join(map(repr, unknown))}; the options are {', '.join(allowed)}"
        )
    flags = {a.dest for a in _parser()._actions if isinstance(a, argparse._StoreTrueAction)}
    argv: list[str] = []
    for key, value in options.items():
        if value is None:  # JSON null: the option's default
            continue
        if key in flags:
            if not isinstance(value, bool):
                raise UserError(f"{where}: option {key!r} is a flag: expected true or false, got {value!r}")
            if value:
                argv.append(f"--{key}")
        elif isinstance(value, bool) or not isinstance(value, str | int | float):
            raise UserError(f"{where}: option {key!r}: expected a number or a string, got {value!r}")
        elif isinstance(value, float) and not math.isfinite(value):
            raise UserError(f"{where}: option {key!r} must be a finite number, got {value!r}")
        else:  # --key=value: a value that starts with '-' is not taken for an option
            argv.append(f"--{key}={value!r}" if isinstance(value, float) else f"--{key}={value}")
    return argv


def run_config_from_options(options: Mapping[str, object], allowed: tuple[str, ...], where: str) -> RunConfig:
    """The RunConfig of an agent evaluation (`--mode eval --algo d3qn`) with these options, checked exactly as the
    command line checks them (ranges, contradictions, options the run would ignore). Env options (window,
    reward) are the env's own: `reward` defaults to the env's default (jct), as in evaluation."""
    from cli.checks import check_command_line, given_options
    from cli.parser import config_from_args, validate

    argv = ["--mode", "eval", "--algo", "d3qn", *_argv(options, allowed, where)]
    try:
        args = _parser().parse_args(argv)
    except argparse.ArgumentError as err:
        raise UserError(str(err)) from None
    given = given_options(_parser(), argv)
    cfg = replace(config_from_args(args), explicit_options=tuple(sorted(given)))
    validate(cfg)
    given.pop("reward", None)  # a training option on the command line; the env's own here
    check_command_line(cfg, given)
    return cfg


TASK_OPTION_FLAGS = {"scheduler": "task_scheduler", "preset": "autoscale_preset"}
"""the node tasks' JSON option names (env/node_tasks.py) that the command line spells differently"""


def option_help(names: tuple[str, ...]) -> list[dict[str, object]]:
    """name, help text (as `python main.py --help` words it), default and choices of each option."""
    actions = {a.dest: a for a in _parser()._actions if a.option_strings}
    out = []
    for name in names:
        a = actions[TASK_OPTION_FLAGS.get(name, name)]
        kind = (
            "boolean"
            if isinstance(a, argparse._StoreTrueAction)
            else {int: "integer", float: "number"}.get(a.type, "string")
        )
        default = a.default if isinstance(a.default, str | int | float | bool) else None
        row: dict[str, object] = {"name": name, "type": kind, "default": default, "help": a.help or ""}
        if a.choices is not None:
            row["choices"] = list(a.choices)
        out.append(row)
    return out
