"""upsertsink.io: one place that reads inputs (files, folders, Delta tables and versions) and knows frames."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import write_deltalake

from upsertsink import InvalidInputError, NotADeltaTableError, io

ROWS = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "name": ["a", None, "c"]})


@pytest.fixture
def inputs(tmp_path):
    pq.write_table(ROWS, tmp_path / "rows.parquet")
    (tmp_path / "rows.csv").write_text("id,name\n1,a\n2,\n3,c\n")
    folder = tmp_path / "json_parts"  # a folder as Spark writes it: parts, _SUCCESS, .crc files
    folder.mkdir()
    (folder / "part-0.json").write_text('{"id": 1, "name": "a"}\n{"id": 2, "name": null}\n')
    (folder / "part-1.json").write_text('{"id": 3, "name": "c"}\n')
    (folder / "_SUCCESS").write_text("")
    (folder / ".part-0.json.crc").write_text("x")
    write_deltalake(str(tmp_path / "delta"), ROWS.slice(0, 1))
    write_deltalake(str(tmp_path / "delta"), ROWS, mode="overwrite")
    return tmp_path


def rows(table) -> list[tuple]:
    return sorted((r["id"], r["name"]) for r in table.to_pylist())


def test_frame_kind_without_importing_pyspark(spark):
    assert io.frame_kind(ROWS) == "arrow"
    assert io.frame_kind(ROWS.to_batches()[0]) == "arrow"
    assert io.frame_kind(ROWS.to_pandas()) == "pandas"
    assert io.frame_kind(spark.range(1)) == "spark" and io.is_spark_frame(spark.range(1))
    for other in (42, "path", [1], pd.Series([1]), {"id": 1}):
        assert io.frame_kind(other) is None
    assert io.to_arrow_table(ROWS.to_pandas()).equals(ROWS)
    assert io.to_arrow_table(ROWS.to_batches()[0]).equals(ROWS)


def test_every_format_reads_the_same_rows_on_arrow(inputs):
    expected = rows(ROWS)
    for name in ("rows.parquet", "rows.csv", "json_parts", "delta"):
        src = io.resolve_path(str(inputs / name))
        assert rows(io.read_arrow(src)) == expected, name  # csv: an empty field is null, as on Spark
    assert io.resolve_path(str(inputs / "json_parts")).files == (
        str(inputs / "json_parts" / "part-0.json"), str(inputs / "json_parts" / "part-1.json"))  # fmt: skip
    old = io.resolve_path(f"{inputs / 'delta'}@0")
    assert (old.kind, old.version) == ("delta", 0) and rows(io.read_arrow(old)) == [(1, "a")]


def test_every_format_reads_the_same_rows_on_spark(spark, inputs):
    expected = rows(ROWS)
    for name in ("rows.parquet", "rows.csv", "json_parts", "delta"):
        df = io.read_spark(spark, io.resolve_path(str(inputs / name)))
        assert sorted((r["id"], r["name"]) for r in df.collect()) == expected, name
    assert io.read_spark(spark, io.resolve_path(f"{inputs / 'delta'}@0")).count() == 1


def test_paths_are_checked_once_with_clear_errors(inputs):
    (inputs / "mixed").mkdir()
    (inputs / "mixed" / "a.csv").write_text("id\n1\n")
    (inputs / "mixed" / "b.parquet").write_bytes(b"")
    (inputs / "empty").mkdir()
    (inputs / "notes.txt").write_text("hello")
    cases = [
        (str(inputs / "nope"), InvalidInputError, "source: '.*nope' does not exist"),
        (f"{inputs / 'delta'}@7", InvalidInputError, "has no version 7 \\(latest is 1\\)"),
        (f"{inputs / 'delta'}@x", InvalidInputError, "the version after '@' must be a number"),
        (f"{inputs / 'rows.csv'}@0", InvalidInputError, "a version \\(@0\\) needs a Delta table"),
        (str(inputs / "mixed"), NotADeltaTableError, "not a Delta table .* \\(found \\['.csv', '.parquet'\\]\\)"),
        (str(inputs / "empty"), NotADeltaTableError, "found no files"),
        (str(inputs / "notes.txt"), InvalidInputError, "parquet, csv or json"),
    ]
    for spec, error, words in cases:
        with pytest.raises(error, match=words):
            io.resolve_path(spec, "source")


def test_unreadable_files_name_the_file(inputs):
    (inputs / "broken.parquet").write_text("not parquet")
    with pytest.raises(InvalidInputError, match="input: cannot read '.*broken.parquet' as parquet"):
        io.read_arrow(io.resolve_path(str(inputs / "broken.parquet")))


def test_at_signs_and_uris(tmp_path):
    odd = tmp_path / "v@2"  # an existing path keeps its @
    write_deltalake(str(odd), ROWS)
    src = io.resolve_path(str(odd))
    assert (src.path, src.version) == (str(odd), None)
    remote = io.resolve_path("s3://bucket/tables/orders@12")
    assert (remote.kind, remote.path, remote.version) == ("delta", "s3://bucket/tables/orders", 12)
    assert io.is_uri("abfss://c@acct.dfs.core.windows.net/t") and not io.is_uri("file:///tmp/t")
    local = io.resolve_path(f"file://{odd}")
    assert local.path == str(odd)
