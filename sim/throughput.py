"""Per-job-type GPU speeds from a Gavel-shaped throughput matrix: loading, validation, and one job's speed on
each GPU type of a cluster (solo, spread over nodes, co-located).

The file (`--job_types gavel` = Gavel's `simulation_throughputs.json`, OSDI'20, staged in
../shared/traces/gavel-throughputs) maps `worker type -> "('<model>', <scale factor>)" -> {"null": solo
throughput, "<other key>": [own, other] co-located throughputs}`, in training steps per second; `scale factor`
is the job's GPU count; `<worker>_unconsolidated` columns hold the throughput of the same multi-GPU job spread
over servers instead of packed on one.

Speeds (a job's `runtime_s` stays its duration on the catalog's reference type, A100 = speed 1.0):

- measured types: K80 <- column `k80`, P100 <- `p100`, V100-16GB and V100-32GB <- `v100`. A job of type T runs
  on measured type t at `speed(V100) x thr_T(t) / thr_T(v100)`, where speed(V100) = 0.5 is the catalog's
  (sim/catalog.py: A100 ~ 2x V100, NVIDIA A100 whitepaper). So V100 is always 0.5 and K80/P100 vary per job
  (in Gavel's file, 1-GPU entries: V100 over K80 from 0.66x to 11.6x, V100 over P100 from 0.43x to 1.84x).
- every other catalog type (A100, H100, T4, A10, ...): no measurement exists, so its ratio to V100 is the
  catalog's (its `source` column: NVIDIA whitepapers, MLPerf/Lambda benchmarks) for every job type: the speed
  is the catalog speed.
- a job of k GPUs uses the entry of the largest measured scale factor <= k of its model (16 GPUs -> the 8-GPU
  entry; a model measured on 1 GPU only -> its 1-GPU entry).
- spread over several nodes: the `<column>_unconsolidated` throughput replaces the solo one (instead of the
  global --multi_node_factor); unmeasured types take V100's unconsolidated/solo ratio. Where the file lacks
  that entry (Gavel's `k80_unconsolidated` misses 6 ResNet-50 keys) the global factor applies, counted in
  the workload report.
- a fractional (co-located) job runs at its solo speed x its co-location factor: the median, over the
  partners the file measured it with on that column, of `own co-located throughput / solo throughput`
  (pairs where it could not run, throughput 0, are left out; 0 when it ran with none, as ResNet-50 bs 128 on
  K80: a fractional job of that type cannot use K80s; 1 when the file measured no partner; unmeasured types
  take the v100 factor). One
  factor per job type and column rather than the actual partner's pair value: a running job's duration is
  fixed when it starts, and the partner on a GPU changes while it runs.
- a throughput of 0 (Gavel: ResNet-50 bs 128 on 2+ K80s does not fit) makes that type unacceptable to the job.
"""

from __future__ import annotations

import ast
import json
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sim.catalog import CATALOG

GAVEL_KEYWORD = "gavel"
GAVEL_FILE = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "traces"
    / "gavel-throughputs"
    / "simulation_throughputs.json"
)
ANCHOR_COLUMN = "v100"
ANCHOR_TYPE = "V100-16GB"  # its catalog speed anchors the measured columns
MEASURED_COLUMN = {"K80": "k80", "P100": "p100", "V100-16GB": "v100", "V100-32GB": "v100"}
SPREAD_SUFFIX = "_unconsolidated"


class ThroughputError(ValueError):
    """A throughput matrix file that cannot be used as asked (names the file and the key)."""


@dataclass(frozen=True, slots=True)
class JobSpeeds:
    """One job's speeds, aligned with the layout's `type_names`: reference seconds of work per second."""

    solo: tuple[float, ...]
    """on one node (fractional jobs: already x the co-location factor)"""
    spread: tuple[float | None, ...]
    """spread over nodes; None: the file has no unconsolidated entry (use the global multi-node factor)"""


@dataclass(frozen=True)
class ThroughputMatrix:
    """A loaded matrix: flat `(column, model, scale) -> value` tables (no nested dicts leave this module)."""

    path: str
    solo_thr: dict[tuple[str, str, int], float] = field(repr=False)
    """solo throughput (steps/s)"""
    coloc_factor: dict[tuple[str, str, int], float] = field(repr=False)
    """median own co-located / solo throughput over measured partners it ran with (0: it ran with none)"""
    columns: frozenset[str]
    model_scales: dict[str, tuple[int, ...]] = field(repr=False)
    """model -> measured scale factors (GPU counts), ascending"""

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(self.model_scales)

    def scale_for(self, model: str, num_gpus: int) -> int:
        """The measured scale factor a job of `model` on `num_gpus` GPUs uses (largest <= num_gpus)."""
        scales = self.model_scales.get(model)
        if scales is None:
            raise ThroughputError(
                f"{self.path}: unknown job type {model!r}; the file has {_list(self.models)}"
            )
        fitting = [s for s in scales if s <= num_gpus]
        if not fitting:
            raise ThroughputError(
                f"{self.path}: job type {model!r} has no entry for {num_gpus} GPU(s) or fewer (scales {scales})"
            )
        return fitting[-1]

    def column_of(self, gpu_type: str) -> str:
        """The file column a catalog type's speeds come from (measured column or the anchor); checks it exists."""
        col = MEASURED_COLUMN.get(gpu_type, ANCHOR_COLUMN)
        for c in {col, ANCHOR_COLUMN}:
            if c not in self.columns:
                raise ThroughputError(
                    f"{self.path}: no worker type {c!r} (needed for GPU type {gpu_type}); "
                    f"the file has {_list(sorted(self.columns))}"
                )
        return col

    def check_types(self, type_names: Iterable[str]) -> None:
        """Raise ThroughputError naming the file and key if a cluster GPU type has no usable column."""
        for t in type_names:
            self.column_of(t)

    def speeds(self, model: str, num_gpus: int, fractional: bool, type_names: Sequence[str]) -> JobSpeeds:
        """A job's speeds on each of `type_names` (see the module docstring)."""
        scale = self.scale_for(model, num_gpus)
        anchor = self._thr(ANCHOR_COLUMN, model, scale)
        if not anchor > 0:
            raise ThroughputError(
                f"{self.path}: job type {model!r} at {scale} GPU(s) has throughput {anchor} on {ANCHOR_COLUMN!r}; "
                "the reference column needs a positive value"
            )
        v_ref = CATALOG[ANCHOR_TYPE].speed
        solo: list[float] = []
        spread: list[float | None] = []
        for t in type_names:
            col = self.column_of(t)
            measured = t in MEASURED_COLUMN
            ratio = self._thr(col, model, scale) / anchor if measured else CATALOG[t].speed / v_ref
            v = v_ref * ratio
            solo.append(v * self.coloc_factor.get((col, model, scale), 1.0) if fractional else v)
            spread_thr = self.solo_thr.get((col + SPREAD_SUFFIX, model, scale))
            if spread_thr is None:
                spread.append(None)
            elif measured:
                spread.append(v_ref * spread_thr / anchor)
            else:  # V100's measured spread slowdown carried over
                spread.append(v * spread_thr / anchor)
        return JobSpeeds(tuple(solo), tuple(spread))

    def _thr(self, col: str, model: str, scale: int) -> float:
        value = self.solo_thr.get((col, model, scale))
        if value is None:
            raise ThroughputError(f"{self.path}: worker type {col!r} has no entry {str((model, scale))!r}")
        return value


def _list(names: Sequence[str], limit: int = 8) -> str:
    shown = ", ".join(repr(n) for n in names[:limit])
    return shown + (f", ... ({len(names)} in all)" if len(names) > limit else "")


def resolve_path(job_types: str) -> Path:
    """`gavel` -> the staged Gavel file; anything else is a path."""
    return GAVEL_FILE if job_types == GAVEL_KEYWORD else Path(job_types)


def load_matrix(job_types: str) -> ThroughputMatrix:
    """Load `--job_types` (`gavel` or a path); raises ThroughputError naming the file and the bad key."""
    path = resolve_path(job_types)
    if not path.is_file():
        hint = (
            " (the Gavel matrix is read from ../shared/traces/gavel-throughputs/)"
            if job_types == "gavel"
            else ""
        )
        raise ThroughputError(f"--job_types {path}: no such file{hint}")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ThroughputError(f"{path}: not a JSON throughput matrix ({e})") from None
    if not isinstance(raw, dict) or not raw:
        raise ThroughputError(f"{path}: expected an object of worker types (k80, p100, v100, ...)")
    solo: dict[tuple[str, str, int], float] = {}
    pairs: dict[tuple[str, str, int], list[float]] = {}
    scales: dict[str, set[int]] = {}
    for col, entries in raw.items():
        if not isinstance(entries, dict):
            raise ThroughputError(f"{path}: worker type {col!r}: expected an object of job types")
        for key, entry in entries.items():
            model, scale = _parse_key(path, col, key)
            if not isinstance(entry, dict) or "null" not in entry:
                raise ThroughputError(
                    f"{path}: {col!r} / {key!r}: expected an object with a 'null' throughput"
                )
            own = _number(path, col, key, "null", entry["null"])
            solo[(col, model, scale)] = own
            if not col.endswith(SPREAD_SUFFIX):
                scales.setdefault(model, set()).add(scale)
            ratios = []
            measured_pairs = 0
            for other, value in entry.items():
                if other == "null":
                    continue
                if not (isinstance(value, list) and len(value) == 2):
                    raise ThroughputError(
                        f"{path}: {col!r} / {key!r} / {other!r}: expected [own, other] throughputs"
                    )
                shared = _number(path, col, key, other, value[0])
                measured_pairs += 1
                if own > 0 and shared > 0:
                    ratios.append(shared / own)
            if measured_pairs:  # pairs measured but none ran: it cannot share this GPU type (factor 0)
                pairs[(col, model, scale)] = ratios
    coloc = {k: statistics.median(r) if r else 0.0 for k, r in pairs.items()}
    # unmeasured types use the anchor's factor: their column is the anchor's (column_of)
    return ThroughputMatrix(
        str(path),
        solo,
        coloc,
        frozenset(raw),
        {m: tuple(sorted(s)) for m, s in scales.items()},
    )


def _parse_key(path: Path, col: str, key: str) -> tuple[str, int]:
    """`"('ResNet-50 (batch size 64)', 4)"` -> (model, scale), as Gavel's parse_job_type_tuple reads it."""
    try:
        value = ast.literal_eval(key)
    except (ValueError, SyntaxError):
        value = None
    if not (
        isinstance(value, tuple)
        and len(value) == 2
        and isinstance(value[0], str)
        and isinstance(value[1], int)
        and value[1] >= 1
    ):
        raise ThroughputError(f"{path}: {col!r}: job key {key!r} is not \"('<model>', <GPUs >= 1>)\"")
    return value[0], value[1]


def _number(path: Path, col: str, key: str, other: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise ThroughputError(
            f"{path}: {col!r} / {key!r} / {other!r}: throughput {value!r} is not a number >= 0"
        )
    return float(value)
