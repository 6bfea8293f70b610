"""The bench scripts' checks of their own arguments: a bad value ends the script with one `error:` line and status 2,
before any work and without a traceback."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Collection, Iterator
from typing import NoReturn


def fail(message: str) -> NoReturn:
    """Exit with status 2 after printing `error: message` (one line) on stderr."""
    print(f"error: {message}", file=sys.stderr)
    sys.exit(2)


def names(option: str, text: str, known: Collection[str]) -> list[str]:
    """The comma-separated names of `text`, each one of `known` (else exit naming the first that is not)."""
    items = text.split(",")
    for name in items:
        if name not in known:
            fail(f"unknown {option} {name!r}; choose one of {', '.join(sorted(known))}")
    return items


def at_least(option: str, value: int, low: int = 1) -> int:
    """`value` if it is >= `low`, else exit."""
    if value < low:
        fail(f"{option} must be >= {low}, got {value}")
    return value


def counts(option: str, text: str) -> list[int]:
    """The comma-separated integers >= 1 of `text` (else exit)."""
    try:
        values = [int(item) for item in text.split(",")]
    except ValueError:
        fail(f"{option} must be comma-separated integers, got {text!r}")
    for value in values:
        at_least(option, value)
    return values


@contextlib.contextmanager
def user_errors() -> Iterator[None]:
    """Around the steps that read the user's values (a cluster spec, a load, a manager): their ValueError (and
    config.UserError, one of them) ends the script with its message as the `error:` line."""
    try:
        yield
    except ValueError as err:
        fail(str(err))
