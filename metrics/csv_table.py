"""CSV tables written without pandas, byte for byte as pandas' `to_csv(index=False, float_format=FLOAT_FORMAT,
lineterminator="\\n", na_rep="")` wrote them before (importing pandas cost every run 0.2-0.3 s of CPU).

A table is its column names and one list of cells (strings) per column. Columns come from numpy arrays
(`array_cells`: float -> FLOAT_FORMAT, NaN -> ""; integer -> decimal; bool -> True/False; object -> str(value),
None and NaN -> "") or from Python values in a table built row by row (`value_cells`, which infers the column's
type as pandas' DataFrame constructor does: all integers, all bools, numbers with missing values as floats, else
objects). The rows go through the standard library's csv writer with pandas' settings (minimal quoting, `"`
doubled), so quoting is the same too; a table with no cell to quote is joined with commas directly (the same
bytes, in a third of the time).
"""

from __future__ import annotations

import csv
import numbers
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

FLOAT_FORMAT = "%.12g"  # 12 significant digits: 1 ms resolution up to 1e8 s; 4.0 is written as 4


def float_cells(x) -> list[str]:
    """FLOAT_FORMAT applied to every value, NaN as ""."""
    a = np.asarray(x, dtype=float)
    # a whole number below 1e12 in magnitude is written in all its digits, as str(int(v)) writes it (in half
    # the time; simulated times are mostly whole seconds); -0.0 is not ("-0")
    with np.errstate(invalid="ignore"):
        whole = (a == np.trunc(a)) & (np.abs(a) < _ALL_DIGITS_BELOW) & ~(np.signbit(a) & (a == 0))
    if whole.all():
        return list(map(str, a.astype(np.int64).tolist()))
    if not whole.any():
        return ["" if v != v else FLOAT_FORMAT % v for v in a.tolist()]
    ints = np.where(whole, a, 0).astype(np.int64).tolist()
    return [
        str(i) if w else "" if v != v else FLOAT_FORMAT % v
        for v, i, w in zip(a.tolist(), ints, whole.tolist(), strict=True)
    ]


_ALL_DIGITS_BELOW = 1e12
"""FLOAT_FORMAT's 12 significant digits write every whole number below this in all its digits (no exponent)"""


def _object_cell(v) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return ""
    return str(v)


def array_cells(x: np.ndarray | list[str]) -> list[str]:
    """One column's cells from an array, as pandas writes a column of that array's dtype (a list is taken as
    cells already formatted)."""
    if isinstance(x, list):
        return x
    if x.dtype.kind == "f":
        return float_cells(x)
    if x.dtype.kind in "iu":
        return [str(v) for v in x.tolist()]
    if x.dtype.kind == "b":
        return ["True" if v else "False" for v in x.tolist()]
    values = x.tolist()
    if set(map(type, values)) <= {str}:  # (the usual object column: its cells as they are)
        return values
    return [_object_cell(v) for v in values]


def _is_missing(v) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def value_cells(values: Sequence) -> list[str]:
    """One column's cells from Python values, typed as pandas' DataFrame constructor types a column of a
    row-by-row table: all bools -> bool; all integers -> int64; numbers (some float or missing) -> float64, with
    None and NaN missing; anything else -> object (str of each value, None and NaN as "")."""
    present = [v for v in values if not _is_missing(v)]
    bools = [isinstance(v, bool | np.bool_) for v in present]
    if present and len(present) == len(values) and all(bools):
        return ["True" if v else "False" for v in values]
    numeric = not any(bools) and all(isinstance(v, numbers.Number) for v in present)
    if (
        present
        and numeric
        and len(present) == len(values)
        and all(isinstance(v, numbers.Integral) for v in values)
    ):
        return [str(int(v)) for v in values]
    if present and numeric:
        return float_cells([np.nan if _is_missing(v) else v for v in values])
    return [_object_cell(v) for v in values]


class Table:
    """A CSV file's content: the column names, in order, and each column's cells (`names` picks and orders the
    columns of `columns`; an array is formatted by `array_cells`, a list is taken as cells)."""

    def __init__(self, names: Sequence[str], columns: Mapping[str, np.ndarray | list[str]]):
        self.names = list(names)
        self.cells = [array_cells(columns[name]) for name in self.names]
        lengths = sorted({len(c) for c in self.cells})
        if len(lengths) > 1:
            raise ValueError(f"columns of different lengths {lengths}")

    def write(self, path: str | Path) -> Path:
        """Write the header and the rows (parent folders created); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
            writer.writerow(self.names)
            n = len(self.cells[0]) if self.cells else 0
            for a in range(0, n, _ROWS_PER_WRITE):
                cells = [c[a : a + _ROWS_PER_WRITE] for c in self.cells]
                if len(cells) < 2 or any(_needs_quoting(c) for c in cells):
                    writer.writerows(zip(*cells, strict=True))
                else:  # no cell to quote: the writer would join each row's cells with commas, so join them in C
                    f.write("\n".join(map(",".join, zip(*cells, strict=True))))
                    f.write("\n")
        return path


_ROWS_PER_WRITE = 5_000  # rows written at a time (bounds the memory that joining them takes)


def _needs_quoting(cells: list[str]) -> bool:
    """Whether the csv writer (minimal quoting, "\\n" line ends) would quote some cell of a column: one holding
    the delimiter, the quote character or a line break. (A row of one empty cell is quoted too: tables of one
    column take the writer's path.)"""
    s = "".join(cells)
    return "," in s or '"' in s or "\n" in s or "\r" in s
