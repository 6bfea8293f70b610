"""Study files: parse and validate a TOML study and expand it into the ordered list of runs it names."""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from config import UserError

SCALAR = str | int | float | bool
TOP_KEYS = ("name", "description", "options", "grid", "runs", "train", "resources")
TRAIN_KEYS = ("options", "grid", "runs", "resources")
RESOURCE_KEYS = ("num_cpus", "num_gpus", "timeout_s")
# Set by the sweep itself, never by a study: where each run writes and how it reports.
STUDY_SET = ("log_dir", "no_progress", "overwrite", "study", "workers", "backend", "address", "help")
SERVE_ONLY = ("host", "port", "max_sessions", "session_ttl_s")
"""options of --mode serve, which a study cannot run"""
MODEL_NAMED_BY = ("algo", "seed")
"""a training run's models are named <algo>_seed<S>_*.pt: the training options other than these that vary make
model sets, each with its own folder models/<set> in the study"""
TRAIN_FIXED = ("mode", "models_dir")
"""training options a study cannot vary (every training run is mode train and writes into its model set's folder)"""
SEED_KEYS = ("seed", "seeds")


@dataclass(frozen=True)
class Resources:
    """What each run of a phase asks for ([resources] for evaluations, [train.resources] for training runs)."""

    num_cpus: float = 1.0
    """Ray: CPUs reserved per run (the local backend runs --workers runs at a time)"""
    num_gpus: float = 0.0
    """Ray: GPUs reserved per run (fractions share a GPU); the run sees them as CUDA_VISIBLE_DEVICES"""
    timeout_s: float | None = None
    """wall-clock limit per run (every backend): past it the run gets Ctrl-C, then SIGKILL 5 s later, and is
    recorded as failed; None: no limit"""


@dataclass(frozen=True)
class RunSpec:
    """One run of a study: the CLI options it is given (log_dir and models_dir are added per study folder)."""

    index: int
    name: str
    """subfolder under runs/: train_NNN_... or NNN_..., named by the options that vary"""
    phase: str
    """train | eval (every train run finishes before any eval run starts)"""
    options: tuple[tuple[str, SCALAR | tuple[SCALAR, ...]], ...]
    """option name (no dashes) -> value, in the study's order: fixed options, then grid or run keys"""
    models: str = ""
    """its --models_dir relative to the study folder: models or models/<set> (training runs and evaluations that
    run an agent, in a study with [train]); '' for runs that load or write no model"""
    model_set: tuple[tuple[str, SCALAR | tuple[SCALAR, ...] | None], ...] = ()
    """the varying training options (other than algo and seed) of the model set it writes or loads; () when the
    study has a single model set or the run uses none"""
    resources: Resources = Resources()

    @property
    def key(self) -> str:
        """The run's identity in its study folder: a hash of its phase, its options (in canonical order) and its
        model set's folder. The study folder, the run's name (its index in the study) and its resources are not
        part of it, so a grown study finds its earlier runs again."""
        options = {k: list(v) if isinstance(v, tuple) else v for k, v in self.options}
        canonical = json.dumps(
            {"phase": self.phase, "options": options, "models": self.models},
            sort_keys=True,
            separators=(",", ":"),
        )
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def value(self, key: str) -> Any:
        """An option's value; train_<key>: the value of <key> in the run's model set."""
        if key.startswith("train_") and key not in dict(self.options):
            return dict(self.model_set).get(key[len("train_") :])
        return dict(self.options).get(key)


@dataclass(frozen=True)
class Study:
    path: Path
    name: str
    sha256: str
    runs: tuple[RunSpec, ...]
    params: tuple[str, ...]
    """every option a run of the study sets, in order: the columns of results.csv"""
    varying: tuple[str, ...]
    """the options that vary between runs (grid and [[runs]] keys; a model set's keys as train_<key>)"""
    has_train: bool


def parser_actions() -> dict[str, argparse.Action]:
    """dest -> action of every option of main.py a study may set."""
    from cli.parser import build_parser

    return {
        a.dest: a
        for a in build_parser()._actions
        if a.option_strings and a.dest not in STUDY_SET + SERVE_ONLY and a.dest != argparse.SUPPRESS
    }


def load_study(path: str | Path) -> Study:
    """Read, validate and expand a study file; any problem is a UserError naming the file and the key."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as err:
        raise UserError(f"--study {path}: cannot read it ({err.strerror})") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text") from None
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{path}: not valid TOML: {err}") from None
    return expand(data, path, hashlib.sha256(raw).hexdigest())


def expand(data: dict[str, Any], path: Path, sha256: str = "") -> Study:
    actions = parser_actions()
    where = str(path)
    _known(data, TOP_KEYS, where, "top level")
    name = data.get("name", path.stem)
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_.-]+", name):
        raise UserError(f"{where}: key 'name': expected letters, digits, '_', '.', '-', got {name!r}")
    train = data.get("train", {})
    if not isinstance(train, dict):
        raise UserError(f"{where}: key 'train': expected a table ([train.options], [train.grid])")
    _known(train, TRAIN_KEYS, where, "[train]")

    runs: list[RunSpec] = []
    params: list[str] = []
    varying: list[str] = []
    if train:
        t_options = _options(train.get("options", {}), actions, where, "[train.options]")
        if t_options.get("mode", "train") != "train":
            raise UserError(f"{where}: [train.options] key 'mode': training runs are mode 'train'")
        if "models_dir" in t_options:
            raise UserError(
                f"{where}: [train.options] key 'models_dir': the study's models live in its folder"
            )
        t_options = {"mode": "train", **{k: v for k, v in t_options.items() if k != "mode"}}
        combos, keys = _combos(train, actions, where, "[train.grid]", "[[train.runs]]")
        _set_once(
            train.get("options", {}), keys, train, where, "[train.options]", "[train.grid]", "[[train.runs]]"
        )
        t_resources = _resources(train.get("resources", {}), where, "[train.resources]")
        for key in keys:
            if key in TRAIN_FIXED:
                what = "[train.grid]" if key in train.get("grid", {}) else "[[train.runs]]"
                raise UserError(
                    f"{where}: {what} key {key!r}: training runs are mode 'train' and write into the study's "
                    "models/ folder; it cannot vary"
                )
        set_keys = [k for k in keys if k not in MODEL_NAMED_BY]
        sets = list(dict.fromkeys(tuple((k, c.get(k)) for k in set_keys) for c in combos))
        set_dirs = _model_set_dirs(sets) if set_keys else {(): "models"}
        _extend(params, list(t_options) + keys + [f"train_{k}" for k in set_keys])
        _extend(varying, [f"train_{k}" for k in set_keys] + [k for k in keys if k in MODEL_NAMED_BY])
        for i, combo in enumerate(combos):
            options = {**t_options, **combo}
            model_set = tuple((k, combo.get(k)) for k in set_keys)
            runs.append(
                RunSpec(
                    len(runs),
                    _folder_name(f"train_{i:03d}", combo),
                    "train",
                    _freeze(options),
                    set_dirs[model_set],
                    model_set,
                    t_resources,
                )
            )
    else:
        sets, set_dirs = [()], {(): ""}

    options = _options(data.get("options", {}), actions, where, "[options]")
    if train and "models_dir" in options:
        raise UserError(f"{where}: [options] key 'models_dir': with [train], runs use the study's models/")
    combos, keys = _combos(data, actions, where, "[grid]", "[[runs]]")
    _set_once(data.get("options", {}), keys, data, where, "[options]", "[grid]", "[[runs]]")
    resources = _resources(data.get("resources", {}), where, "[resources]")
    if train and "models_dir" in keys:
        what = "[grid]" if "models_dir" in data.get("grid", {}) else "[[runs]]"
        raise UserError(f"{where}: {what} key 'models_dir': with [train], runs use the study's models/")
    _extend(params, ["mode"] + list(options) + keys)
    _extend(varying, keys)
    i = 0
    for combo in combos:
        merged = {"mode": "eval", **options, **combo}
        if merged["mode"] == "train":
            raise UserError(
                f"{where}: key 'mode': training runs go in [train] (they finish before evaluations)"
            )
        if merged["mode"] in ("sweep", "serve"):
            raise UserError(f"{where}: key 'mode': a study cannot run a {merged['mode']}")
        # an evaluation that runs an agent is crossed with every model set; one that runs none is run once
        agent = _runs_agent(merged, actions)
        for model_set in sets if agent else [()]:
            set_parts = {f"train_{k}": v for k, v in model_set if v is not None}
            run_name = _folder_name(f"{i:03d}", set_parts | combo)
            models = set_dirs[model_set] if agent else ""
            runs.append(RunSpec(len(runs), run_name, "eval", _freeze(merged), models, model_set, resources))
            i += 1
    seen: dict[str, str] = {}
    for spec in runs:
        if spec.key in seen:
            raise UserError(
                f"{where}: runs {seen[spec.key]} and {spec.name} have the same options: each run once (a "
                "repeated [[runs]] case?)"
            )
        seen[spec.key] = spec.name
    return Study(path, name, sha256, tuple(runs), tuple(params), tuple(varying), bool(train))


def _set_once(given: Any, keys: list[str], table: dict[str, Any], where: str, *what: str) -> None:
    """A key is fixed (`given`, the options table as written) or varied ([grid], [[runs]]), never both: which value
    a run gets would be a guess, and results.csv would name it twice."""
    options_what, grid_what, runs_what = what
    for key in keys:
        if key in given:
            where_varied = grid_what if key in (table.get("grid") or {}) else runs_what
            raise UserError(
                f"{where}: key {key!r} is set in both {options_what} and {where_varied}: set it in one place"
            )


def _resources(table: Any, where: str, what: str) -> Resources:
    if not isinstance(table, dict):
        raise UserError(f"{where}: {what}: expected a table (num_cpus, num_gpus, timeout_s)")
    _known(table, RESOURCE_KEYS, where, what)
    values: dict[str, float] = {}
    for key, value in table.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise UserError(f"{where}: {what} key {key!r}: expected a number, got {value!r}")
        if value < 0 or (key in ("num_cpus", "timeout_s") and value == 0):
            bound = ">= 0" if key == "num_gpus" else "> 0"
            raise UserError(f"{where}: {what} key {key!r}: expected a number {bound}, got {value!r}")
        values[key] = float(value)
    return Resources(**values)


def _runs_agent(options: dict[str, Any], actions: dict[str, argparse.Action]) -> bool:
    """Whether an evaluation runs an RL agent (eval: --algo, default easy; compare: --algos, default heuristics)."""
    from cli.parser import AGENTS

    if options["mode"] == "report":  # evaluates every model of its --models_dir
        return True
    if options["mode"] == "compare":
        algos = options.get("algos")
        names = actions["algos"].type(_text(algos)) if algos is not None else actions["algos"].default
        return any(str(a).lower() in AGENTS for a in names)
    return str(options.get("algo", actions["algo"].default)).lower() in AGENTS


def _model_set_dirs(sets: list[tuple[tuple[str, Any], ...]]) -> dict[tuple[tuple[str, Any], ...], str]:
    """models/<key=value_...> per model set (the values its training runs set; 'default' when they set none);
    names that would coincide (paths with the same file name) get a hash of the set's values."""
    names = {
        s: _folder_name("", {k: v for k, v in s if v is not None}).lstrip("_") or "default" for s in sets
    }
    counts: dict[str, int] = {}
    for n in names.values():
        counts[n] = counts.get(n, 0) + 1
    return {
        s: "models/"
        + (n if counts[n] == 1 else f"{n[:71]}_{hashlib.sha256(repr(s).encode()).hexdigest()[:8]}")
        for s, n in names.items()
    }


def _known(table: dict[str, Any], allowed: tuple[str, ...], where: str, what: str) -> None:
    for key in table:
        if key not in allowed:
            raise UserError(f"{where}: {what} key {key!r} is unknown; allowed: {', '.join(allowed)}")


def _options(table: Any, actions: dict[str, argparse.Action], where: str, what: str) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise UserError(f"{where}: {what}: expected a table of options")
    return {key: _checked(key, value, actions, where, what) for key, value in table.items()}


def _combos(
    table: dict[str, Any], actions: dict[str, argparse.Action], where: str, grid_what: str, runs_what: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """Each explicit run (one table of options; a single empty one when there is no list) crossed with the grid's
    cartesian product (keys in file order, last key fastest): runs outer, grid inner."""
    grid = table.get("grid")
    runs = table.get("runs")
    if grid is None and runs is None:
        raise UserError(
            f"{where}: no runs: give {grid_what} (lists of values) or {runs_what} (one table per run)"
        )
    cases: list[dict[str, Any]] = [{}]
    keys: list[str] = []
    if runs is not None:
        if not isinstance(runs, list) or not runs or not all(isinstance(r, dict) for r in runs):
            raise UserError(f"{where}: {runs_what}: expected one or more tables of options")
        cases = []
        for n, run in enumerate(runs):
            checked = {k: _checked(k, v, actions, where, f"{runs_what} #{n + 1}") for k, v in run.items()}
            _extend(keys, list(checked))
            cases.append(checked)
    points: list[dict[str, Any]] = [{}]
    if grid is not None:
        if not isinstance(grid, dict):
            raise UserError(f"{where}: {grid_what}: expected a table of lists")
        if not grid:
            raise UserError(f"{where}: {grid_what} is empty: give each varied option a list of values")
        values = []
        for key, vals in grid.items():
            if key in keys:
                raise UserError(
                    f"{where}: {grid_what} key {key!r} is also set in {runs_what}: set it in one place"
                )
            if not isinstance(vals, list):
                raise UserError(f"{where}: {grid_what} key {key!r}: expected a list of values, got {vals!r}")
            if not vals:
                raise UserError(f"{where}: {grid_what} key {key!r}: empty list (the grid would have no runs)")
            checked = [_checked(key, v, actions, where, grid_what) for v in vals]
            repeated = [v for n, v in enumerate(checked) if v in checked[:n]]
            if repeated:
                raise UserError(
                    f"{where}: {grid_what} key {key!r}: {cell(repeated[0])} is listed twice (each value is one "
                    "set of runs; repeat a run with another seed instead)"
                )
            values.append(checked)
        points = [dict(zip(grid, c, strict=True)) for c in itertools.product(*values)]
        _extend(keys, list(grid))
    return [{**case, **point} for case in cases for point in points], keys


def _checked(key: str, value: Any, actions: dict[str, argparse.Action], where: str, what: str) -> Any:
    """The value as the option's type accepts it; a wrong type or choice is a UserError naming file and key."""
    action = actions.get(key)
    if action is None:
        if key in SERVE_ONLY:
            raise UserError(
                f"{where}: {what} key {key!r} is an option of --mode serve, which a study cannot run"
            )
        if key in STUDY_SET:
            raise UserError(
                f"{where}: {what} key {key!r} is set by the sweep itself (per study, not per run)"
            )
        raise UserError(
            f"{where}: {what} key {key!r} is not an option of main.py (see python main.py --help)"
        )

    def bad(expected: str) -> UserError:
        return UserError(f"{where}: {what} key {key!r}: expected {expected}, got {value!r}")

    if isinstance(action, argparse._StoreTrueAction):
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    kind = action.type
    if kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("an integer")
    elif kind is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise bad("a number")
        value = float(value)
    elif kind is None:
        if not isinstance(value, str):
            raise bad("a string")
    else:  # list options (--algos, --seeds, --validation_seeds): a TOML list or the CLI's comma-separated text
        if isinstance(value, list):
            if not all(isinstance(v, str | int) and not isinstance(v, bool) for v in value):
                raise bad("a list of strings or integers")
            value = tuple(value)
        elif not isinstance(value, str):
            raise bad("a list or comma-separated text")
        try:
            kind(_text(value))
        except (argparse.ArgumentTypeError, ValueError) as err:
            raise UserError(f"{where}: {what} key {key!r}: {err}") from None
    if action.choices is not None and value not in action.choices:
        raise UserError(
            f"{where}: {what} key {key!r}: {value!r} is not one of {', '.join(map(str, action.choices))}"
        )
    return value


def _text(value: Any) -> str:
    """A value as written on the command line."""
    if isinstance(value, tuple):
        return ",".join(map(str, value))
    if isinstance(value, float):
        return repr(value)
    return str(value)


def argv_of(options: tuple[tuple[str, Any], ...]) -> list[str]:
    """The command line (after `python main.py`) that sets these options."""
    argv: list[str] = []
    for key, value in options:
        if value is True:
            argv.append(f"--{key}")
        elif value is not False:
            argv += [f"--{key}", _text(value)]
    return argv


def cell(value: Any) -> str:
    """A parameter value as written in results.csv (the command line's text; '' when a run does not set it)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return _text(value)


def _freeze(options: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return tuple(options.items())


def _extend(into: list[str], keys: list[str]) -> None:
    """Append the keys not yet in `into`, each once (`mode` of [options] is also the column every study has)."""
    for key in keys:
        if key not in into:
            into.append(key)


def _folder_name(prefix: str, combo: dict[str, Any]) -> str:
    """prefix + _key=value per varied option (paths by their file name), at most 80 characters (then a hash)."""
    parts = [prefix] + [
        f"{k}={Path(cell(v)).name if k.endswith('_path') else cell(v)}" for k, v in combo.items()
    ]
    name = re.sub(r"[^A-Za-z0-9.=,_-]+", "-", "_".join(parts))
    if len(name) > 80:
        name = name[:71] + "_" + hashlib.sha256(name.encode()).hexdigest()[:8]
    return name
