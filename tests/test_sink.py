"""The write protocol, on both engines: each semantic of issue #2 §3 is a test here."""

from __future__ import annotations

import itertools
import json
import time
from datetime import timedelta

import pyarrow as pa
import pytest
from sink_helpers import read_rows, version

from upsertsink import (
    BatchIdBehindMarkerError,
    DuplicateKeyError,
    InvalidInputError,
    NotADeltaTableError,
    ReplayDivergenceError,
    SchemaMismatchError,
    UpsertSink,
    UpsertSinkError,
)

SCHEMA = {"id": pa.int64(), "name": pa.string(), "seq": pa.int64()}
CDC = {"id": pa.int64(), "name": pa.string(), "seq": pa.int64(), "op": pa.string()}


def rows(*triples):
    return [{"id": i, "name": n, "seq": s} for i, n, s in triples]


def cdc(*quads):
    return [{"id": i, "name": n, "seq": s, "op": o} for i, n, s, o in quads]


def strip(table_rows, *cols):
    return [{k: v for k, v in r.items() if k in cols} for r in table_rows]


# 1. upsert by key ------------------------------------------------------------------------------


def test_upsert_inserts_new_keys_and_updates_existing_ones_with_counts(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, ["id"])
    first = sink.write(engine.frame(rows((1, "a", 1), (2, "b", 1)), SCHEMA), batch_id=0)
    assert (first.inserted, first.updated, first.deleted, first.skipped) == (2, 0, 0, False)
    second = sink.write(engine.frame(rows((2, "B", 2), (3, "c", 2)), SCHEMA), batch_id=1)
    assert (second.inserted, second.updated, second.deleted) == (1, 1, 0)
    assert second.version == version(path) and second.batch_id == 1
    assert read_rows(path) == rows((1, "a", 1), (2, "B", 2), (3, "c", 2))


# 2. batch markers --------------------------------------------------------------------------------


def test_committed_batch_id_is_skipped_without_a_commit(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id", app_id="orders-job")
    batch = engine.frame(rows((1, "a", 1)), SCHEMA)
    sink.write(batch, batch_id=5)
    v = version(path)
    again = sink.write(batch, batch_id=5)
    assert again.skipped and again.version == v == version(path)
    assert (again.inserted, again.updated, again.deleted) == (0, 0, 0)
    # an older id that was never committed is not a replay: it is refused, not skipped (issue #19)
    with pytest.raises(BatchIdBehindMarkerError, match="batch 3 .* never committed"):
        sink.write(engine.frame(rows((9, "zz", 9)), SCHEMA), batch_id=3)
    assert version(path) == v
    assert sink.last_batch_id() == 5
    assert read_rows(path) == rows((1, "a", 1))


def test_marker_is_a_delta_transaction_identifier_in_the_data_commit(engine, tmp_path):
    from deltalake import DeltaTable

    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id", app_id="job-a")
    sink.write(engine.frame(rows((1, "a", 1)), SCHEMA), batch_id=7)
    table = DeltaTable(path)
    # the first batch creates the table: data and marker in one commit, version 0, no empty table before it
    assert table.version() == 0 and table.transaction_version("job-a") == 7
    assert json.loads(table.history(1)[0]["userMetadata"])["batch_id"] == 7
    sink.write(engine.frame(rows((2, "b", 1)), SCHEMA), batch_id=8)
    table = DeltaTable(path)
    assert table.version() == 1 and table.transaction_version("job-a") == 8
    commit = table.history(1)[0]
    assert commit["operation"] == "MERGE"  # marker and data in the same commit
    assert json.loads(commit["userMetadata"])["batch_id"] == 8
    other = UpsertSink(path, "id", app_id="job-b")
    assert other.last_batch_id() is None


def test_engines_continue_each_others_tables(spark, tmp_path):
    from sink_helpers import Engine

    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id")
    emb, spk = Engine("embedded"), Engine("spark", spark)
    sink.write(emb.frame(rows((1, "a", 1)), SCHEMA), batch_id=0)
    assert sink.write(spk.frame(rows((1, "a", 1)), SCHEMA), batch_id=0).skipped
    assert not sink.write(spk.frame(rows((2, "b", 1)), SCHEMA), batch_id=1).skipped
    assert sink.write(emb.frame(rows((2, "b", 1)), SCHEMA), batch_id=1).skipped
    sink.write(emb.frame(rows((3, "c", 1)), SCHEMA), batch_id=2)
    assert sink.last_batch_id() == 2
    assert read_rows(path) == rows((1, "a", 1), (2, "b", 1), (3, "c", 1))


def test_no_batch_id_means_idempotent_by_key_only(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id")
    batch = engine.frame(rows((1, "a", 1), (2, "b", 1)), SCHEMA)
    sink.write(batch)
    result = sink.write(batch)
    assert not result.skipped and (result.inserted, result.updated) == (0, 0)
    assert sink.last_batch_id() is None
    assert read_rows(path) == rows((1, "a", 1), (2, "b", 1))


# 3. replay divergence ----------------------------------------------------------------------------


def test_replaying_last_batch_with_different_content_raises_and_writes_nothing(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id")
    sink.write(engine.frame(rows((1, "a", 1), (2, "b", 1)), SCHEMA), batch_id=0)
    v = version(path)
    with pytest.raises(ReplayDivergenceError, match="batch 0"):
        sink.write(engine.frame(rows((1, "a", 1), (2, "CHANGED", 1)), SCHEMA), batch_id=0)
    assert issubclass(ReplayDivergenceError, UpsertSinkError)
    assert version(path) == v
    assert read_rows(path) == rows((1, "a", 1), (2, "b", 1))


def test_replay_with_same_rows_in_another_order_is_not_divergent(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id")
    sink.write(engine.frame(rows((1, "a", 1), (2, "b", 1), (3, "c", 1)), SCHEMA), batch_id=0)
    assert sink.write(engine.frame(rows((3, "c", 1), (1, "a", 1), (2, "b", 1)), SCHEMA), batch_id=0).skipped


# 4. no-op updates --------------------------------------------------------------------------------


def test_unchanged_rows_are_not_rewritten_or_counted(engine, tmp_path):
    from deltalake import DeltaTable

    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id", sequence_by="seq")
    batch = rows((1, "a", 1), (2, "b", 1))
    sink.write(engine.frame(batch, SCHEMA), batch_id=0)
    files = set(DeltaTable(path).file_uris())
    result = sink.write(engine.frame(batch, SCHEMA), batch_id=1)
    assert not result.skipped and (result.inserted, result.updated, result.deleted) == (0, 0, 0)
    assert set(DeltaTable(path).file_uris()) == files  # no data file was rewritten
    assert sink.last_batch_id() == 1  # the marker still advanced


# 5. sequence_by ----------------------------------------------------------------------------------


def test_greater_sequence_wins_equal_or_smaller_is_ignored(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id", sequence_by="seq")
    sink.write(engine.frame(rows((1, "v5", 5), (2, "v5", 5), (3, "v5", 5)), SCHEMA), batch_id=0)
    r = sink.write(engine.frame(rows((1, "v6", 6), (2, "same-seq", 5), (3, "older", 4)), SCHEMA), batch_id=1)
    assert r.updated == 1
    assert read_rows(path) == rows((1, "v6", 6), (2, "v5", 5), (3, "v5", 5))


def test_replays_in_any_order_converge(engine, tmp_path):
    batches = [
        rows((1, "a1", 1), (2, "b1", 1)),
        rows((1, "a3", 3), (3, "c2", 2)),
        rows((1, "a2", 2), (2, "b4", 4), (3, "c1", 1)),
    ]
    results = []
    for n, order in enumerate(itertools.permutations(range(3))):
        if n % 2 and engine.name != "embedded":
            continue  # three orders on Spark keep the suite quick; all six on the embedded engine
        path = str(tmp_path / f"t{n}")
        sink = UpsertSink(path, "id", sequence_by="seq")
        for i in order:
            sink.write(engine.frame(batches[i], SCHEMA))
        results.append(read_rows(path))
    assert all(r == rows((1, "a3", 3), (2, "b4", 4), (3, "c2", 2)) for r in results)


# 6. duplicate keys in one batch ------------------------------------------------------------------


def test_exact_duplicates_collapse(engine, tmp_path):
    path = str(tmp_path / "t")
    result = UpsertSink(path, "id").write(engine.frame(rows((1, "a", 1), (1, "a", 1), (2, "b", 1)), SCHEMA))
    assert result.inserted == 2
    assert read_rows(path) == rows((1, "a", 1), (2, "b", 1))


def test_greatest_sequence_wins_within_a_batch_whatever_the_row_order(engine, tmp_path):
    data = rows((1, "old", 1), (1, "new", 3), (1, "mid", 2), (2, "b", 1))
    for n, ordered in enumerate([data, list(reversed(data))]):
        path = str(tmp_path / f"t{n}")
        UpsertSink(path, "id", sequence_by="seq").write(engine.frame(ordered, SCHEMA))
        assert read_rows(path) == rows((1, "new", 3), (2, "b", 1))


def test_duplicates_without_sequence_fail_naming_at_most_five_keys(engine, tmp_path):
    path = str(tmp_path / "t")
    data = [r for i in range(7) for r in rows((i, "x", 1), (i, f"y{i}", 1))]
    with pytest.raises(DuplicateKeyError) as err:
        UpsertSink(path, "id").write(engine.frame(data, SCHEMA))
    text = str(err.value)
    assert isinstance(err.value, ValueError)
    assert "id=0" in text and "id=4" in text and "id=5" not in text
    assert not (tmp_path / "t" / "_delta_log").exists() or version(path) == 0


def test_sequence_tie_with_different_content_fails(engine, tmp_path):
    with pytest.raises(DuplicateKeyError, match="id=1"):
        UpsertSink(str(tmp_path / "t"), "id", sequence_by="seq").write(
            engine.frame(rows((1, "a", 2), (1, "b", 2)), SCHEMA)
        )


# 7. deletes and tombstones -----------------------------------------------------------------------


def test_delete_when_deletes_subject_to_sequence(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'")
    sink.write(engine.frame(cdc((1, "a", 5, "I"), (2, "b", 5, "I"), (3, "c", 5, "I")), CDC), batch_id=0)
    r = sink.write(engine.frame(cdc((1, "a", 6, "D"), (2, "b", 4, "D"), (4, "d", 6, "D")), CDC), batch_id=1)
    assert r.deleted == 1 and r.inserted == 0
    assert strip(read_rows(path), "id", "seq") == [{"id": 2, "seq": 5}, {"id": 3, "seq": 5}]


def test_deleted_key_does_not_come_back_with_an_older_insert(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'")
    sink.write(engine.frame(cdc((1, "a", 1, "I"), (2, "b", 1, "I")), CDC), batch_id=0)
    sink.write(engine.frame(cdc((1, "a", 2, "D")), CDC), batch_id=1)
    late = sink.write(engine.frame(cdc((1, "a", 1, "I"), (5, "e", 1, "D")), CDC), batch_id=2)
    assert late.inserted == 0 and late.stale == 1
    assert [r["id"] for r in read_rows(path)] == [2]
    newer = sink.write(engine.frame(cdc((1, "again", 3, "I")), CDC), batch_id=3)
    assert newer.inserted == 1
    assert [r["id"] for r in read_rows(path)] == [1, 2]
    assert list((tmp_path / "t" / "_upsertsink" / "tombstones").iterdir())  # the sink's own folder


def test_tombstones_expire_after_the_configured_retention(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'",
                      tombstone_retention=timedelta(milliseconds=200))
    sink.write(engine.frame(cdc((1, "a", 1, "I")), CDC), batch_id=0)
    sink.write(engine.frame(cdc((1, "a", 2, "D")), CDC), batch_id=1)
    time.sleep(0.5)
    sink.write(engine.frame(cdc((7, "z", 9, "D")), CDC), batch_id=2)  # recording a delete expires old ones
    back = sink.write(engine.frame(cdc((1, "a", 1, "I")), CDC), batch_id=3)
    assert back.inserted == 1


def test_delete_when_that_names_an_unknown_column_or_is_not_sql_is_refused(engine, tmp_path):
    path = str(tmp_path / "t")
    batch = engine.frame(cdc((1, "a", 1, "I")), CDC)
    with pytest.raises(InvalidInputError, match="opp"):
        UpsertSink(path, "id", delete_when="opp = 'D'").write(batch)
    with pytest.raises(InvalidInputError, match="delete_when"):
        UpsertSink(path, "id", delete_when="op = = 'D'").write(batch)
    with pytest.raises(InvalidInputError, match="boolean"):
        UpsertSink(path, "id", delete_when="seq + 1").write(batch)
    assert not (tmp_path / "t").exists()


# 8. bad input: a clear error and an untouched table ----------------------------------------------


@pytest.fixture
def existing(engine, tmp_path):
    path = str(tmp_path / "t")
    UpsertSink(path, "id").write(engine.frame(rows((1, "a", 1)), SCHEMA), batch_id=0)
    return path


def _untouched(path):
    assert version(path) == 0  # the first write's one commit, nothing after it
    assert read_rows(path) == rows((1, "a", 1))


def test_null_key_is_refused_naming_column_and_count(engine, existing):
    data = [{"id": None, "name": "x", "seq": 1}, {"id": None, "name": "y", "seq": 1}, *rows((2, "b", 1))]
    with pytest.raises(InvalidInputError, match=r"'id' has 2 null"):
        UpsertSink(existing, "id").write(engine.frame(data, SCHEMA), batch_id=1)
    _untouched(existing)


def test_null_sequence_is_refused(engine, existing):
    with pytest.raises(InvalidInputError, match=r"'seq' has 1 null"):
        UpsertSink(existing, "id", sequence_by="seq").write(
            engine.frame([{"id": 2, "name": "b", "seq": None}], SCHEMA), batch_id=1
        )
    _untouched(existing)


def test_missing_key_or_sequence_column_is_refused(engine, existing):
    batch = engine.frame(rows((2, "b", 1)), SCHEMA)
    with pytest.raises(SchemaMismatchError, match="order_id"):
        UpsertSink(existing, "order_id").write(batch, batch_id=1)
    with pytest.raises(SchemaMismatchError, match="version"):
        UpsertSink(existing, "id", sequence_by="version").write(batch, batch_id=1)
    _untouched(existing)


def test_extra_columns_need_schema_evolution(engine, existing):
    wide = {**SCHEMA, "email": pa.string()}
    batch = engine.frame([{"id": 2, "name": "b", "seq": 1, "email": "b@x"}], wide)
    with pytest.raises(SchemaMismatchError, match="email"):
        UpsertSink(existing, "id").write(batch, batch_id=1)
    _untouched(existing)
    result = UpsertSink(existing, "id", schema_evolution=True).write(batch, batch_id=1)
    assert result.inserted == 1
    assert read_rows(existing) == [
        {"id": 1, "name": "a", "seq": 1, "email": None},
        {"id": 2, "name": "b", "seq": 1, "email": "b@x"},
    ]


def test_incompatible_types_are_refused_naming_the_column(engine, existing):
    bad = {"id": pa.int64(), "name": pa.string(), "seq": pa.string()}
    with pytest.raises(SchemaMismatchError, match="'seq'"):
        UpsertSink(existing, "id").write(engine.frame([{"id": 2, "name": "b", "seq": "one"}], bad), batch_id=1)
    _untouched(existing)


def test_narrower_compatible_types_are_cast(engine, existing):
    narrow = {"id": pa.int32(), "name": pa.string(), "seq": pa.int32()}
    assert UpsertSink(existing, "id").write(engine.frame(rows((2, "b", 1)), narrow), batch_id=1).inserted == 1


def test_target_that_is_not_a_delta_table_is_refused(engine, tmp_path):
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "data.csv").write_text("id\n1\n")
    with pytest.raises(NotADeltaTableError, match="not a Delta table"):
        UpsertSink(str(folder), "id").write(engine.frame(rows((1, "a", 1)), SCHEMA))
    assert sorted(p.name for p in folder.iterdir()) == ["data.csv"]


def test_bad_settings_are_value_errors():
    with pytest.raises(ValueError):
        UpsertSink("/tmp/x", [])
    with pytest.raises(ValueError):
        UpsertSink("/tmp/x", "id", sequence_by="id")
    with pytest.raises(InvalidInputError):
        UpsertSink("/tmp/x", "id").write(pa.table({"id": [1]}), batch_id=-1)
    with pytest.raises(InvalidInputError, match="DataFrame"):
        UpsertSink("/tmp/x", "id").write([{"id": 1}])


# 9. awkward column names ---------------------------------------------------------------------------


WEIRD = {"order id": pa.int64(), 'na"me': pa.string(), "we`ird": pa.string(), "größe": pa.int64()}


def test_column_names_with_spaces_quotes_backticks_and_non_ascii(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, ["order id"], sequence_by="größe", delete_when="`we``ird` = 'D'")
    first = [{"order id": 1, 'na"me': "a", "we`ird": "x", "größe": 1}, {"order id": 2, 'na"me': "b", "we`ird": "x", "größe": 1}]
    sink.write(engine.frame(first, WEIRD), batch_id=0)
    second = [{"order id": 1, 'na"me': "A", "we`ird": "y", "größe": 2}, {"order id": 2, 'na"me': "b", "we`ird": "D", "größe": 2}]
    r = sink.write(engine.frame(second, WEIRD), batch_id=1)
    assert (r.updated, r.deleted) == (1, 1)
    assert read_rows(path, "order id") == [{"order id": 1, 'na"me': "A", "we`ird": "y", "größe": 2}]


def test_values_never_go_into_sql_text(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, ["id"], delete_when="op = 'D'")
    evil = "x' OR 1=1 --"
    sink.write(engine.frame(cdc((1, evil, 1, "I"), (2, "b", 1, "I")), CDC), batch_id=0)
    sink.write(engine.frame(cdc((1, evil, 1, "I")), CDC), batch_id=1)
    assert [r["name"] for r in read_rows(path)] == [evil, "b"]


# streaming ---------------------------------------------------------------------------------------------


def test_foreach_batch_uses_the_epoch_id_as_batch_id(spark, tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    spark.createDataFrame([(1, "a", 1), (2, "b", 1)], "id long, name string, seq long").write.parquet(str(src / "p1"))
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id", sequence_by="seq")
    stream = spark.readStream.schema("id long, name string, seq long").parquet(str(src / "p1"))
    query = (
        stream.writeStream.foreachBatch(sink.foreach_batch)
        .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start()
    )
    query.awaitTermination()
    assert sink.last_batch_id() == 0
    assert read_rows(path) == rows((1, "a", 1), (2, "b", 1))


def test_vacuum_keeps_the_tombstone_table(engine, tmp_path):
    from deltalake import DeltaTable

    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'")
    sink.write(engine.frame(cdc((1, "a", 1, "I"), (2, "b", 1, "I")), CDC), batch_id=0)
    sink.write(engine.frame(cdc((1, "a", 2, "D")), CDC), batch_id=1)
    if engine.name != "embedded":
        # VACUUM lists the table in spark.sql.sources.parallelPartitionDiscovery.parallelism tasks (10,000 by
        # default): on local[2] that was 90-180 s for this two-file table, so the test lists it in 4
        confs = {"spark.databricks.delta.retentionDurationCheck.enabled": "false",
                 "spark.sql.sources.parallelPartitionDiscovery.parallelism": "4"}
        for conf, value in confs.items():
            engine.spark.conf.set(conf, value)
        try:
            engine.spark.sql(f"VACUUM delta.`{path}` RETAIN 0 HOURS").collect()
        finally:
            for conf in confs:
                engine.spark.conf.unset(conf)
    else:
        DeltaTable(path).vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=False)
    from upsertsink.sidecar.tombstones import TombstoneStore, forget_indexes

    forget_indexes()  # read the files again, as a new process would
    tombstones = TombstoneStore(path, ("id",), "seq", None).read().to_pylist()
    assert [(t["k0"], t["sequence"]) for t in tombstones] == [(1, 2)]
    assert sink.write(engine.frame(cdc((1, "a", 1, "I")), CDC), batch_id=2).inserted == 0


def test_partition_by_creates_a_partitioned_table_and_default_app_id_comes_from_the_target(engine, tmp_path):
    from deltalake import DeltaTable

    path = str(tmp_path / "orders")
    schema = {**SCHEMA, "region": pa.string()}
    sink = UpsertSink(path, "id", partition_by=["region"])
    assert sink.app_id == "upsertsink:orders"
    data = [{"id": 1, "name": "a", "seq": 1, "region": "eu"}, {"id": 2, "name": "b", "seq": 1, "region": "us"}]
    sink.write(engine.frame(data, schema), batch_id=0)
    assert DeltaTable(path).metadata().partition_columns == ["region"]
    assert DeltaTable(path).transaction_version("upsertsink:orders") == 0
    with pytest.raises(InvalidInputError, match="country"):
        UpsertSink(str(tmp_path / "other"), "id", partition_by=["country"]).write(engine.frame(data, schema))
