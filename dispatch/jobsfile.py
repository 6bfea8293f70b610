"""The jobs file: one shell command a line with optional `[key=value ...]` attributes; its parser, with file:line
errors, and each line's stable identity (a hash of the command + its occurrence among identical commands).

```
# comments and blank lines are skipped
[vram=18G] python train.py --config a.yaml
[vram=30G gpus=2 est=2h] torchrun --nproc_per_node=2 train_big.py
[vram=8G retries=2 timeout=3h priority=1] python sweep.py --seed 3
python eval.py
```

A line starts with attributes only when its first `[` is followed by `key=`; so a shell test such as
`[ -f done ] || python a.py` is a command. The file is the user's: it is only ever read.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path

ATTRIBUTES = ("vram", "gpus", "est", "retries", "timeout", "priority")
_ATTR_BLOCK = re.compile(r"^\[\s*[A-Za-z_]+\s*=")
_SIZE = re.compile(r"^(\d+(?:\.\d+)?)\s*(|m|mb|mib|g|gb|gib)$", re.IGNORECASE)
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)([dhms])")
_UNIT_S = {"d": 86_400.0, "h": 3_600.0, "m": 60.0, "s": 1.0}


class JobsFileError(ValueError):
    """A malformed jobs file; the message starts with `file:line:`."""


@dataclass(frozen=True)
class JobSpec:
    """One line of the jobs file. `vram_mib` is per GPU (None: no declaration, the job gets idle GPUs alone);
    `est_s` the runtime estimate policies see (None: the dispatcher's default); `timeout_s` None: none."""

    job_id: str
    line: int
    command: str
    vram_mib: int | None = None
    gpus: int = 1
    est_s: float | None = None
    retries: int = 0
    timeout_s: float | None = None
    priority: int = 0

    def attrs(self) -> dict:
        """The attributes as the journal records them."""
        return {
            "vram_mib": self.vram_mib,
            "gpus": self.gpus,
            "est_s": self.est_s,
            "retries": self.retries,
            "timeout_s": self.timeout_s,
            "priority": self.priority,
            "command": self.command,
            "line": self.line,
        }


def parse_size_mib(text: str) -> int:
    """`18G`, `18GiB`, `18GB` (all GiB: 1024 MiB), `512M`, `512MiB` or `512` (MiB) -> MiB, rounded up."""
    m = _SIZE.match(text.strip())
    if not m:
        raise ValueError(f"{text!r} is not a size; write MiB (e.g. 18000 or 18000M) or GiB (e.g. 18G)")
    value = float(m.group(1))
    unit = m.group(2).lower()
    mib = value * 1024 if unit.startswith("g") else value
    if mib <= 0:
        raise ValueError(f"{text!r}: a VRAM declaration must be > 0")
    return math.ceil(mib)


def parse_duration_s(text: str) -> float:
    """`90` (seconds), `30s`, `90m`, `2h`, `1h30m`, `1d` -> seconds."""
    t = text.strip().lower()
    try:
        value = float(t)
    except ValueError:
        parts = _DURATION_PART.findall(t)
        if not parts or "".join(n + u for n, u in parts) != t:
            raise ValueError(f"{text!r} is not a duration; e.g. 90 (seconds), 30s, 90m, 2h, 1h30m") from None
        value = sum(float(n) * _UNIT_S[u] for n, u in parts)
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{text!r}: a duration must be > 0")
    return value


def _int(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an integer") from None
    if value < least:
        raise ValueError(f"{value} must be >= {least}")
    return value


def _attributes(block: str) -> dict:
    found: dict = {}
    for token in block.split():
        key, eq, value = token.partition("=")
        key = key.lower()
        if not eq or not value:
            raise ValueError(f"{token!r} is not key=value")
        if key not in ATTRIBUTES:
            raise ValueError(f"unknown attribute {key!r} (known: {', '.join(ATTRIBUTES)})")
        if key in found:
            raise ValueError(f"attribute {key!r} given twice")
        try:
            if key == "vram":
                found[key] = parse_size_mib(value)
            elif key in ("est", "timeout"):
                found[key] = parse_duration_s(value)
            elif key == "gpus":
                found[key] = _int(value, 1)
            elif key == "retries":
                found[key] = _int(value, 0)
            else:
                found[key] = _int(value, -(10**9))
        except ValueError as e:
            raise ValueError(f"{key}: {e}") from None
    return found


def job_id(command: str, occurrence: int) -> str:
    """The stable identity of the `occurrence`-th line (1-based) with this command."""
    return f"{hashlib.sha256(command.encode()).hexdigest()[:10]}#{occurrence}"


def parse_jobs_text(text: str, name: str) -> tuple[JobSpec, ...]:
    """Every job of a jobs file's text, in file order; JobsFileError `name:line: ...` on the first bad line."""
    specs = []
    seen: dict[str, int] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        attrs: dict = {}
        command = line
        if _ATTR_BLOCK.match(line):
            close = line.find("]")
            if close < 0:
                raise JobsFileError(f"{name}:{n}: the attribute list has no closing ']'")
            try:
                attrs = _attributes(line[1:close])
            except ValueError as e:
                raise JobsFileError(f"{name}:{n}: {e}") from None
            command = line[close + 1 :].strip()
        if not command:
            raise JobsFileError(f"{name}:{n}: no command after the attributes")
        seen[command] = seen.get(command, 0) + 1
        specs.append(
            JobSpec(
                job_id(command, seen[command]),
                n,
                command,
                attrs.get("vram"),
                attrs.get("gpus", 1),
                attrs.get("est"),
                attrs.get("retries", 0),
                attrs.get("timeout"),
                attrs.get("priority", 0),
            )
        )
    return tuple(specs)


def parse_jobs_file(path: str | Path) -> tuple[JobSpec, ...]:
    """Read and parse a jobs file (see parse_jobs_text); OSError if it cannot be read, JobsFileError for a
    line that is not UTF-8."""
    path = Path(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise JobsFileError(f"{path}:{line}: not UTF-8 text; save the file as UTF-8") from None
    return parse_jobs_text(text, str(path))
