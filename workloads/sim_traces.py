"""Job traces of two other research simulators read as Workloads, and any Workload written as our jobs CSV: the
side-by-side runs of tests/test_side_by_side.py and `bench/convert_trace.py`.

- **Tiresias** (github.com/SymbioticLab/Tiresias, simulator/README.md): a CSV with at least
  `job_id,num_gpu,submit_time,duration` (its `iterations,model_name,interval` are read by other schemes, not
  here). `submit_time` and `duration` are whole seconds (its simulator's clock); the duration does not depend on
  the placement (`--scheme=count` counts GPUs), so a job runs `duration` seconds on a speed-1.0 GPU
  (sim/catalog.py's reference type, A100) and the multi-node factor never applies (`runtime_includes_spread`).
- **Gavel** (github.com/stanford-futuredata/gavel, scheduler/utils.py `parse_trace`; written by its generator,
  `Job.__str__` + arrival): ten tab-separated fields per line, `job_type, command, working_directory,
  num_steps_arg, needs_data_dir, total_steps, scale_factor, priority_weight, SLO, arrival_time`. The job runs
  `total_steps` steps at the throughput matrix's rate: its duration on a V100 is total_steps / thr(v100, job
  type, scale factor), so `runtime_s` (the reference type's duration) is that x the V100's catalog speed, and
  with `--job_types` the job gets its measured speed on each type (sim/throughput.py). Jobs are numbered by line
  (Gavel's job ids: 0, 1, ...). Priority weights other than 1 and SLOs are refused (no counterpart here).
Both keep the file's order (arrival times must not decrease, as both simulators assume) and raise ValueError
naming the file and line. A gzip-compressed file is read as the text it holds.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import io
import math
from collections.abc import Iterator
from pathlib import Path

from sim.catalog import CATALOG
from sim.job import FULL_GPU_MILLI, Job, Workload
from sim.throughput import ANCHOR_COLUMN, ANCHOR_TYPE, ThroughputError, ThroughputMatrix

TIRESIAS_COLUMNS = ("job_id", "num_gpu", "submit_time", "duration")
GAVEL_FIELDS = 10


def load_tiresias_trace(path: str | Path) -> Workload:
    """A Tiresias simulator trace (see the module docstring) as a Workload."""
    path = Path(path)
    jobs: list[Job] = []
    with _open_text(path) as f:
        reader = csv.DictReader(f)
        missing = [c for c in TIRESIAS_COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(
                f"{path}:1: missing column(s) {', '.join(missing)}; need {','.join(TIRESIAS_COLUMNS)}"
            )
        for row in reader:
            where = f"{path}:{reader.line_num}"
            try:
                num_gpu = _whole(row["num_gpu"], "num_gpu", 1)
                submit_s = _whole(row["submit_time"], "submit_time", 0)
                duration_s = _whole(row["duration"], "duration", 1)
            except ValueError as e:
                raise ValueError(f"{where}: {e}") from None
            if jobs and submit_s < jobs[-1].arrival_s:
                raise ValueError(f"{where}: submit_time {submit_s} is before the previous job's")
            jobs.append(
                Job(
                    (row["job_id"] or "").strip() or str(len(jobs)),
                    float(submit_s),
                    float(duration_s),
                    num_gpu,
                    runtime_includes_spread=True,
                )
            )
    if not jobs:
        raise ValueError(f"{path}:2: no job rows after the header")
    return Workload(
        path.name, tuple(jobs), {"source": str(path), "format": "tiresias", "rows_read": len(jobs)}
    )


def load_gavel_trace(path: str | Path, matrix: ThroughputMatrix) -> Workload:
    """A Gavel trace (see the module docstring) as a Workload of typed jobs (`job_type` = the model)."""
    path = Path(path)
    v100_speed = CATALOG[ANCHOR_TYPE].speed
    jobs: list[Job] = []
    with _open_text(path) as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}:{line_no}"
            fields = line.rstrip("\n").split("\t")
            if len(fields) != GAVEL_FIELDS:
                raise ValueError(
                    f"{where}: {len(fields)} tab-separated fields; a Gavel trace line has {GAVEL_FIELDS}"
                )
            model, total_steps, scale, weight, slo, arrival = (fields[0], *fields[5:])
            try:
                steps = _number(total_steps, "total_steps")
                num_gpus = _whole(scale, "scale_factor", 1)
                arrival_s = _number(arrival, "arrival_time")
                if _number(weight, "priority_weight") != 1.0:
                    raise ValueError(f"priority_weight {weight} (only 1 is supported)")
                if _number(slo, "SLO") != -1.0:
                    raise ValueError(f"SLO {slo} (SLOs are not supported; -1 = none)")
                thr = matrix.solo_thr.get((ANCHOR_COLUMN, model, matrix.scale_for(model, num_gpus)))
            except ThroughputError as e:
                raise ValueError(f"{where}: {e}") from None
            except ValueError as e:
                raise ValueError(f"{where}: {e}") from None
            if not steps > 0 or not thr:
                raise ValueError(f"{where}: job {model!r} needs total_steps > 0 and a V100 throughput > 0")
            if jobs and arrival_s < jobs[-1].arrival_s:
                raise ValueError(f"{where}: arrival_time {arrival_s} is before the previous job's")
            jobs.append(Job(str(len(jobs)), arrival_s, steps / thr * v100_speed, num_gpus, job_type=model))
    if not jobs:
        raise ValueError(f"{path}: no job lines")
    report = {"source": str(path), "format": "gavel", "rows_read": len(jobs), "job_types": matrix.path}
    return Workload(path.name, tuple(jobs), report)


def write_jobs_csv(workload: Workload, path: str | Path) -> None:
    """Write `workload` as a jobs CSV that workloads/csv_jobs.py reads back into the same jobs (times written
    with repr, so exactly). Only the columns needed are written: job_type when any job has one."""
    jobs = workload.jobs
    typed = any(j.job_type for j in jobs)
    header = ["job_id", "arrival_time", "runtime", "gpus", "runtime_includes_spread"] + (
        ["job_type"] if typed else []
    )
    with Path(path).open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        for j in jobs:
            gpus = repr(j.gpu_milli / FULL_GPU_MILLI) if j.gpu_milli < FULL_GPU_MILLI else str(j.num_gpus)
            row = [j.job_id, repr(j.arrival_s), repr(j.runtime_s), gpus, int(j.runtime_includes_spread)]
            w.writerow(row + ([j.job_type] if typed else []))


def _whole(text: str, column: str, low: int) -> int:
    value = _number(text, column)
    if not value.is_integer() or value < low:
        raise ValueError(f"{column} must be a whole number >= {low}, got {text!r}")
    return int(value)


def _number(text: str | None, column: str) -> float:
    try:
        value = float((text or "").strip())
    except ValueError:
        raise ValueError(f"non-numeric {column} {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"non-finite {column} {text!r}")
    return value


@contextlib.contextmanager
def _open_text(path: Path) -> Iterator[io.TextIOBase]:
    """The file as UTF-8 text, gunzipped when it is gzip-compressed."""
    with path.open("rb") as probe:
        compressed = probe.read(2) == b"\x1f\x8b"
    opener = (
        gzip.open(path, "rt", newline="", encoding="utf-8")
        if compressed
        else path.open(newline="", encoding="utf-8")
    )
    with opener as f:
        yield f
