"""File skipping that follows the batch: a clustered batch reads and rewrites only the files it must."""

from __future__ import annotations

import json
import random

import numpy as np
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from sink_helpers import read_rows

from upsertsink import UpsertSink
from upsertsink.pruning import file_ranges, sql_literal

FILES = 8
ROWS_PER_FILE = 1000


def _table(path: str) -> None:
    """A table of FILES files, each holding one contiguous range of keys (as a clustered table does)."""
    for f in range(FILES):
        ids = np.arange(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE)
        data = pa.table({"id": ids, "v": ids.astype(str), "seq": np.zeros(len(ids), np.int64)})
        write_deltalake(path, data, mode="append")


def _removed_files(path: str) -> int:
    metrics = DeltaTable(path).history(1)[0]["operationMetrics"]
    return int(metrics.get("num_target_files_removed", metrics.get("numTargetFilesRemoved", -1)))


def test_ranges_cover_only_the_files_holding_batch_keys(tmp_path):
    path = str(tmp_path / "t")
    _table(path)
    batch = pa.table({"id": pa.array([2500, 2501, 5999, 10_000_000, 10_000_001], pa.int64())})
    found = file_ranges(DeltaTable(path), ("id",), batch)
    assert found is not None and found.total_files == FILES
    # two files hold batch keys; the new keys need no file, but the condition still covers them (a racing
    # writer may insert them: the MERGE must match them and the conflict check must see them)
    assert found.files == 2 and found.ranges == ((2000, 2999), (5000, 5999), (10_000_000, 10_000_001))
    only_new = file_ranges(DeltaTable(path), ("id",), pa.table({"id": pa.array([-5, 9_999_999], pa.int64())}))
    assert only_new is not None and (only_new.files, only_new.ranges) == (0, ((-5, -5), (9_999_999, 9_999_999)))


def test_every_batch_key_is_inside_the_ranges_and_new_keys_read_no_file(tmp_path):
    """Property over random batches: the condition is a superset of the batch keys, and counts its files."""
    path = str(tmp_path / "t")
    _table(path)
    table = DeltaTable(path)
    actions = pa.table(table.get_add_actions(flatten=True))
    lo, hi = actions["min.id"].to_pylist(), actions["max.id"].to_pylist()
    rng = random.Random(7)
    for _ in range(50):
        keys = [rng.randrange(-1000, 12_000) for _ in range(rng.randrange(1, 40))]
        found = file_ranges(table, ("id",), pa.table({"id": pa.array(keys, pa.int64())}))
        assert found is not None
        assert all(any(a <= k <= b for a, b in found.ranges) for k in keys), (keys, found.ranges)
        holding = sum(any(a <= k <= b for k in keys) for a, b in zip(lo, hi, strict=True))
        reading = sum(any(a <= f_hi and f_lo <= b for a, b in found.ranges) for f_lo, f_hi in zip(lo, hi, strict=True))
        assert found.files == reading >= holding


def test_sql_literals_are_rendered_from_typed_values_only():
    import datetime

    assert sql_literal(42) == "42" and sql_literal("it's \\ ok") == "'it''s \\ ok'"
    assert sql_literal(datetime.date(2026, 1, 2)) == "CAST('2026-01-02' AS DATE)"
    with pytest.raises(TypeError):
        sql_literal(1.5)


@pytest.mark.parametrize("spark_pruning", ["always", "default"])
def test_a_clustered_batch_rewrites_only_the_file_it_updates(engine, tmp_path, spark_pruning, monkeypatch):
    """On Spark the condition is added only when the files it skips hold SPARK_PRUNE_MIN_SKIPPED_ROWS rows
    (Delta's data-skipping query costs more below): the commit then says the MERGE could read every file,
    and Delta still rewrites only the one it updates."""
    from upsertsink.engines import spark_merge

    if spark_pruning == "always":
        monkeypatch.setattr(spark_merge, "SPARK_PRUNE_MIN_SKIPPED_ROWS", 0)
    path = str(tmp_path / "t")
    _table(path)
    updates = [{"id": i, "v": f"new{i}", "seq": 1} for i in range(3000, 3050)]
    inserts = [{"id": i, "v": f"ins{i}", "seq": 1} for i in range(100_000, 100_050)]
    schema = {"id": pa.int64(), "v": pa.string(), "seq": pa.int64()}
    result = UpsertSink(path, "id", sequence_by="seq").write(engine.frame(updates + inserts, schema), batch_id=0)
    assert (result.inserted, result.updated) == (50, 50)
    assert _removed_files(path) == 1
    rows = {r["id"]: r["v"] for r in read_rows(path)}
    assert len(rows) == FILES * ROWS_PER_FILE + 50
    assert rows[3000] == "new3000" and rows[3999] == "3999" and rows[100_049] == "ins100049"
    meta = json.loads(DeltaTable(path).history(1)[0]["userMetadata"])
    pruned = engine.name == "embedded" or spark_pruning == "always"
    assert meta["files_scanned"] == (1 if pruned else FILES)


def test_string_keys_with_quotes_and_backslashes_merge_with_pruning(engine, tmp_path):
    path = str(tmp_path / "t")
    schema = {"id": pa.string(), "v": pa.int64()}
    first = [{"id": k, "v": 1} for k in ["a'b", "c\\d", "plain", "z''z"]]
    sink = UpsertSink(path, "id")
    sink.write(engine.frame(first, schema), batch_id=0)
    sink.write(engine.frame([{"id": "a'b", "v": 2}, {"id": "c\\d", "v": 3}, {"id": "new'", "v": 4}], schema), batch_id=1)
    assert {r["id"]: r["v"] for r in read_rows(path)} == {"a'b": 2, "c\\d": 3, "plain": 1, "z''z": 1, "new'": 4}


def test_a_batch_of_only_new_keys_rewrites_no_file(engine, tmp_path):
    path = str(tmp_path / "t")
    _table(path)
    schema = {"id": pa.int64(), "v": pa.string(), "seq": pa.int64()}
    result = UpsertSink(path, "id").write(engine.frame([{"id": 50_000, "v": "x", "seq": 0}], schema), batch_id=0)
    assert result.inserted == 1 and _removed_files(path) == 0


def test_status_shows_the_files_each_commit_scanned_and_rewrote(tmp_path):
    """A user sees from `upsertsink status` whether batches touch few files (clustered) or all (not)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    path = str(tmp_path / "t")
    _table(path)
    schema = {"id": pa.int64(), "v": pa.string(), "seq": pa.int64()}
    sink = UpsertSink(path, "id", sequence_by="seq")
    clustered = [{"id": i, "v": "c", "seq": 1} for i in range(2000, 2010)] + [{"id": 50_000, "v": "n", "seq": 1}]
    spread = [{"id": f * ROWS_PER_FILE + 5, "v": "s", "seq": 2} for f in range(FILES)]
    sink.write(pa.Table.from_pylist(clustered, schema=pa.schema(schema)), batch_id=0)
    sink.write(pa.Table.from_pylist(spread, schema=pa.schema(schema)), batch_id=1)
    cli = str(Path(sys.executable).with_name("upsertsink"))
    env = {**os.environ, "NO_COLOR": "1"}
    info = json.loads(subprocess.run([cli, "status", path, "--json"], capture_output=True, text=True, env=env,
                                     check=True).stdout)
    newest, older = info["commits"][0], info["commits"][1]
    assert (newest["batch_id"], newest["files_scanned"], newest["files_rewritten"]) == (1, FILES, FILES)
    assert (older["batch_id"], older["files_scanned"], older["files_rewritten"]) == (0, 1, 1)
    text = subprocess.run([cli, "status", path], capture_output=True, text=True, env=env, check=True).stdout
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("version"))
    assert header.split()[-4:] == ["files", "scanned", "files", "rewritten"]
    assert lines[lines.index(header) + 1].split()[-2:] == [str(FILES), str(FILES)]
    assert lines[lines.index(header) + 2].split()[-2:] == ["1", "1"]
