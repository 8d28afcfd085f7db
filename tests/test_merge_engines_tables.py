"""Merge engines (issue #47) on tables the sink did not create: a DDL's table, filled by another writer."""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from merge_engine_models import aggregate, rows
from sink_helpers import read_rows

from upsertsink import UpsertSink


def test_aggregate_first_last_on_a_table_filled_by_another_writer_place_stored_values_by_their_row(tmp_path):
    # the stored values have no order column of the sink's: their row's sequence places them
    path = str(tmp_path / "t")
    base = [{"id": 1, "status": "a", "clicks": 1, "seq": 5}, {"id": 2, "status": None, "clicks": None, "seq": 5}]
    write_deltalake(path, pa.Table.from_pylist(base))
    batch = [{"id": 1, "status": "late", "clicks": 2, "seq": 3}, {"id": 2, "status": "x", "clicks": 1, "seq": 1},
             {"id": 1, "status": None, "clicks": 1, "seq": 9}]
    options = {"clicks": "sum", "status": "last"}
    sink = UpsertSink(path, keys=["id"], sequence_by="seq", merge_engine="aggregate", aggregates=options)
    sink.write(pa.Table.from_pylist(batch), batch_id=0)
    cols = ["id", "status", "clicks", "seq"]
    got = [tuple(r[c] for c in cols) for r in read_rows(path)]
    assert got == rows(aggregate([base, batch], ["id"], options, "seq"), cols) == [(1, "a", 4, 9), (2, "x", 1, 5)]
    assert "__upsertsink_order_status" in read_rows(path)[0]  # added by the sink's MERGE
    assert sink.write(pa.Table.from_pylist(batch), batch_id=0).skipped


@pytest.mark.parametrize("option", [{"restate": True}, {"dry_run": True}])
def test_restate_and_dry_run_are_upserts_only(tmp_path, option):
    sink = UpsertSink(str(tmp_path / "t"), keys=["id"], merge_engine="aggregate", aggregates={"c": "sum"})
    with pytest.raises(ValueError, match="merge_engine='aggregate'"):
        sink.write(pa.table({"id": [1], "c": [1]}), batch_id=0, **option)
    assert not (tmp_path / "t").exists()


def test_scd_type_2_with_a_merge_engine_is_a_value_error(tmp_path):
    with pytest.raises(ValueError, match="scd_type"):
        UpsertSink(str(tmp_path / "t"), keys=["id"], sequence_by="s", merge_engine="first_row", scd_type=2)
