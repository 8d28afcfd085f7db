"""A merge engine's batch preparation takes a short path when every key occurs once (no group-by over every
column: it cost the embedded engine time and memory, issue #47's targets). Group sequences may be null;
``sequence_by`` values may not (the sink refuses a null one before any mode sees the batch). The short path must prepare the same
rows as the general one. Property: a batch and the same batch with one of its rows sent twice (identical rows
are one row, but a repeated key takes the general path) prepare to the same rows, for any keys and nulls.
No table or engine is involved: this is the Arrow step the MERGE's source comes from.
"""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from upsertsink.modes.base import unique_keys
from upsertsink.modes.first_row import FirstRow
from upsertsink.modes.partial_update import PartialUpdate

SCHEMA = pa.schema([("id", pa.int64()), ("g", pa.int64()), ("a", pa.int64()), ("b", pa.string()),
                    ("s2", pa.int64()), ("c", pa.string()), ("seq", pa.int64()), ("x", pa.int64())])
GROUPS = {"g": ["a", "b"], "s2": ["c"]}

small = st.one_of(st.none(), st.integers(0, 5))
text = st.one_of(st.none(), st.sampled_from(["a", "b", "c"]))
row = st.fixed_dictionaries({"g": small, "a": small, "b": text, "s2": small, "c": text, "seq": st.integers(0, 5), "x": small})


@st.composite
def batches(draw):
    ids = draw(st.lists(st.integers(0, 50), min_size=1, max_size=25, unique=True))
    rows = [{"id": i, **draw(row)} for i in ids]
    return pa.Table.from_pylist(rows, schema=SCHEMA), draw(st.integers(0, len(rows) - 1))


def _canon(table: pa.Table) -> list[str]:
    return sorted(repr(sorted(r.items())) for r in table.to_pylist())


def _with_a_row_twice(table: pa.Table, index: int) -> pa.Table:
    return pa.concat_tables([table, table.slice(index, 1)])


def test_unique_keys_tells_a_repeated_key_of_any_kind():
    assert unique_keys(pa.table({"id": [3, 1, 2]}), ("id",))
    assert not unique_keys(pa.table({"id": [3, 1, 3]}), ("id",))
    assert not unique_keys(pa.table({"id": ["x", "y", "x"]}), ("id",))
    assert unique_keys(pa.table({"id": [1, 1], "k": ["a", "b"]}), ("id", "k"))
    assert not unique_keys(pa.table({"id": [1, 1], "k": ["a", "a"]}), ("id", "k"))


@settings(max_examples=150, deadline=None)
@given(batches(), st.sampled_from([None, "seq"]))
def test_partial_update_prepares_one_row_a_key_as_the_general_path_does(drawn, sequence):
    table, index = drawn
    if sequence is None:
        table = table.drop_columns(["seq"])
    mode = PartialUpdate(("id",), sequence, GROUPS)
    short = mode.prepare(table)
    general = mode.prepare(_with_a_row_twice(table, index))
    assert short.schema == general.schema
    assert _canon(short) == _canon(general)


@settings(max_examples=100, deadline=None)
@given(batches(), st.sampled_from([None, "seq"]))
def test_first_row_prepares_one_row_a_key_as_the_general_path_does(drawn, sequence):
    table, index = drawn
    mode = FirstRow(("id",), sequence)
    assert _canon(mode.prepare(table)) == _canon(mode.prepare(_with_a_row_twice(table, index)))
