"""Helpers shared by the sink tests (a unique module name: tests/lint has a conftest.py of its own)."""

from __future__ import annotations

import pyarrow as pa
from deltalake import DeltaTable, QueryBuilder


class Engine:
    """Builds batches for one engine and reads tables back the same way for both."""

    def __init__(self, name: str, spark=None):
        self.name = name
        self.spark = spark

    def frame(self, rows: list[dict], schema: dict[str, pa.DataType]):
        table = pa.Table.from_pylist(rows, schema=pa.schema(list(schema.items())))
        if self.name == "embedded":
            return table
        return self.spark.createDataFrame(table)

    def __repr__(self) -> str:
        return self.name


def read_rows(path: str, order_by: str | list[str] = "id") -> list[dict]:
    keys = [order_by] if isinstance(order_by, str) else order_by
    # QueryBuilder (DataFusion), not to_pyarrow_table(): deltalake 1.6's Arrow reader returns nulls for
    # tables with column mapping, which Spark creates for column names with spaces.
    result = QueryBuilder().register("t", DeltaTable(str(path))).execute("SELECT * FROM t").read_all()
    rows = pa.table(result).to_pylist()
    return sorted(rows, key=lambda r: tuple(r[k] for k in keys))


def version(path) -> int:
    return DeltaTable(str(path)).version()


def named_cdc_sink(name: str, **kw):
    """A sink for the catalog table ``name`` keyed on ``id``, sequenced by ``seq``, deleting where op = 'D'."""
    from upsertsink import UpsertSink

    return UpsertSink.for_table(name, keys="id", sequence_by="seq", delete_when="op = 'D'", **kw)
