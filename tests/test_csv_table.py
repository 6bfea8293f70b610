"""metrics/csv_table.py writes the bytes pandas' to_csv wrote (the run files' format before pandas left the run
path): cross-checked against pandas itself on random columns of every kind our tables hold."""

from __future__ import annotations

import csv
import io

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from metrics import csv_table
from metrics.csv_table import FLOAT_FORMAT, Table, float_cells, value_cells

TEXT = st.text(alphabet=st.sampled_from(list('ab ,"\n\r;01é')), max_size=6)
FLOATS = st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from(
    [0.0, -0.0, 1e12, 123456789.123456789]
)
INTS = st.integers(-(2**62), 2**62)
VALUE = st.one_of(
    INTS,
    FLOATS,
    st.none(),
    st.booleans(),
    TEXT,
    INTS.map(np.int64),
    FLOATS.map(np.float64),
)
"""a cell of a table built row by row (summary rows, compare rows, cluster rows)"""


def _pandas_csv(frame: pd.DataFrame) -> str:
    buffer = io.StringIO()
    frame.to_csv(buffer, index=False, float_format=FLOAT_FORMAT, lineterminator="\n", na_rep="")
    return buffer.getvalue()


def _ours(table: Table, tmp_path) -> str:
    return table.write(tmp_path / "t.csv").read_bytes().decode("utf-8")


@settings(max_examples=300, deadline=None)
@given(
    column=st.one_of(
        st.lists(VALUE, max_size=5),  # a mix of kinds
        st.lists(INTS | st.none(), max_size=5),
        st.lists(FLOATS | INTS, max_size=5),
        st.lists(st.booleans() | st.none(), max_size=5),
        st.lists(TEXT | st.none() | FLOATS, max_size=5),
    ),
    alone=st.booleans(),
)
def test_a_row_by_row_column_is_typed_and_written_as_pandas_does(tmp_path_factory, column, alone):
    tmp_path = tmp_path_factory.mktemp("csv")
    records = [[v] if alone else [v, i] for i, v in enumerate(column)]
    names = ["c"] if alone else ["c", "i"]
    frame = pd.DataFrame(records, columns=names)
    columns = {"c": value_cells(column), "i": np.arange(len(column), dtype=np.int64)}
    assert _ours(Table(names, columns), tmp_path) == _pandas_csv(frame)


ARRAYS = st.one_of(
    st.lists(FLOATS, min_size=3, max_size=3).map(lambda v: np.asarray(v, dtype=float)),
    st.lists(INTS, min_size=3, max_size=3).map(lambda v: np.asarray(v, dtype=np.int64)),
    st.lists(st.booleans(), min_size=3, max_size=3).map(lambda v: np.asarray(v, dtype=bool)),
    st.lists(TEXT | st.none() | FLOATS | INTS, min_size=3, max_size=3).map(
        lambda v: np.asarray(v, dtype=object)
    ),
)


@settings(max_examples=200, deadline=None)
@given(arrays=st.lists(ARRAYS, min_size=1, max_size=4))
def test_array_columns_are_written_as_pandas_writes_their_dtype(tmp_path_factory, arrays):
    tmp_path = tmp_path_factory.mktemp("csv")
    names = [f"col{i}" for i in range(len(arrays))]
    columns = dict(zip(names, arrays, strict=True))
    assert _ours(Table(names, columns), tmp_path) == _pandas_csv(pd.DataFrame(columns, columns=names))


WHOLE = st.integers(-(2 * 10**12), 2 * 10**12).map(float) | st.sampled_from(
    [1e12, -1e12, 1e12 - 1, 1 - 1e12, 999999999999.5, 2.0**53, -0.0, 0.0, 1e15]
)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(WHOLE | FLOATS, max_size=8))
def test_float_cells_are_float_format_of_each_value(values):
    """float_cells writes whole numbers through int (a fast path): the cells stay FLOAT_FORMAT's, a whole column,
    a mixed one or none whole alike (the plain formula, one value at a time, is the reference)."""
    expected = ["" if v != v else FLOAT_FORMAT % v for v in values]
    assert float_cells(np.asarray(values, dtype=float)) == expected
    whole = [v for v in values if v == v and abs(v) != float("inf") and v == int(v)]
    assert float_cells(whole) == ["" if v != v else FLOAT_FORMAT % v for v in whole]


def test_hand_computed_cells():
    assert float_cells([3.0, -0.0, 1e12, 999999999999.0, 0.5, float("nan")]) == [
        "3",
        "-0",
        "1e+12",
        "999999999999",
        "0.5",
        "",
    ]
    assert value_cells([1, 2]) == ["1", "2"]
    assert value_cells([1, 2.5, None]) == ["1", "2.5", ""]  # numbers with a float: all as floats
    assert value_cells([10**13, 1.0]) == ["1e+13", "1"]  # in FLOAT_FORMAT, as pandas writes floats
    assert value_cells([10**13]) == ["10000000000000"]  # an integer column keeps every digit
    assert value_cells([True, None]) == ["True", ""]
    assert value_cells(["a", 1.5, float("nan")]) == ["a", "1.5", ""]  # objects: str(value)


def test_columns_of_different_lengths_are_refused():
    try:
        Table(["a", "b"], {"a": ["1"], "b": ["1", "2"]})
    except ValueError as err:
        assert "different lengths" in str(err)
    else:
        raise AssertionError("no error")


def _csv_module(names: list[str], cells: list[list[str]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)
    writer.writerow(names)
    writer.writerows(zip(*cells, strict=True))
    return buffer.getvalue()


@settings(max_examples=200, deadline=None)
@given(
    cells=st.integers(1, 4).flatmap(
        lambda width: st.lists(st.lists(TEXT, min_size=width, max_size=width), max_size=5)
    )
)
def test_cells_are_written_as_the_csv_module_writes_them(tmp_path_factory, cells):
    # the rows without a cell to quote are joined directly, the others go through the csv writer: same bytes
    tmp_path = tmp_path_factory.mktemp("csv")
    width = len(cells[0]) if cells else 2
    names = [f"c{i}" for i in range(width)]
    columns = [list(c) for c in zip(*cells, strict=True)] if cells else [[] for _ in names]
    assert _ours(Table(names, dict(zip(names, columns, strict=True))), tmp_path) == _csv_module(
        names, columns
    )


def test_a_table_longer_than_one_write_is_written_whole(tmp_path):
    n = csv_table._ROWS_PER_WRITE * 2 + 3
    columns = {"a": [str(i) for i in range(n)], "b": ["x" if i % 2 else "" for i in range(n)]}
    text = _ours(Table(["a", "b"], columns), tmp_path)
    assert text == _csv_module(["a", "b"], [columns["a"], columns["b"]])
    assert text.count("\n") == n + 1 and text.endswith(f"\n{n - 2},x\n{n - 1},\n")
    columns["b"][csv_table._ROWS_PER_WRITE + 1] = 'say "a,b"'  # one part of the rows needs quoting
    text = _ours(Table(["a", "b"], columns), tmp_path)
    assert text == _csv_module(["a", "b"], [columns["a"], columns["b"]])
    assert f'\n{csv_table._ROWS_PER_WRITE + 1},"say ""a,b"""\n' in text
