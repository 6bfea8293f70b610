"""Bench scripts that need the real traces stop with one `error:` line naming the missing path, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("script", ["trace_table.py", "bench_traces.py"])
def test_missing_traces_fail_clearly(tmp_path, script):
    missing = tmp_path / "no-traces-here"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--traces", str(missing)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {missing} not found: {script} needs"), proc.stderr
    assert "../shared/traces" in lines[0]
