"""Where the bench scripts find the shared real traces, and the one-line exit when they are not there."""

from __future__ import annotations

import sys
from pathlib import Path

from bench.arguments import fail

DEFAULT_TRACES = (
    Path(__file__).resolve().parents[2] / "shared" / "traces"
)  # ../shared/traces beside the checkout


def require_paths(*paths: Path) -> None:
    """Exit with status 2 and one `error:` line naming the first missing path (no traceback)."""
    for path in paths:
        if not Path(path).exists():
            script = Path(sys.argv[0]).name
            fail(
                f"{path} not found: {script} needs the real traces in ../shared/traces beside the checkout, or in "
                "the folder given with --traces (see docs/traces.md)"
            )
