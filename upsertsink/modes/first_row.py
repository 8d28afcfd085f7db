"""``merge_engine="first_row"``: per key the first row wins; later rows of the key are ignored.

With ``sequence_by`` the row with the lowest sequence wins, even when it arrives late (it replaces the stored
row, every column); an equal sequence keeps the stored row. In one batch, rows of a key that differ and cannot be
ordered (no sequence, or different rows at the lowest one) are a DuplicateKeyError; identical rows are one row.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from upsertsink.modes.base import MergeMode, distinct_per_key, refuse_duplicates, s, t, unique_keys
from upsertsink.spec import Dialect


class FirstRow(MergeMode):
    name = "first_row"
    narrow_batches = False

    def prepare(self, table: pa.Table) -> pa.Table:
        keys = self.keys
        if unique_keys(table, keys):
            return table  # one row a key: it is the first row, whatever its sequence
        if self.sequence is not None:
            low = table.group_by(list(keys)).aggregate([(self.sequence, "min")])
            low = low.rename_columns(["__low" if c == f"{self.sequence}_min" else c for c in low.column_names])
            table = table.join(low, keys=list(keys))
            table = table.filter(pc.equal(table[self.sequence], table["__low"])).drop_columns(["__low"])
        columns = [c for c in table.column_names if c not in keys]
        distinct, counts = distinct_per_key(table, keys, columns)
        reason = (f"different rows at the lowest {self.sequence!r}" if self.sequence
                  else "different rows and no sequence_by to order them")
        refuse_duplicates(counts, keys, "count_all", reason)
        return distinct.select(table.column_names)

    def updates(self) -> bool:
        return self.sequence is not None  # without a sequence the MERGE only inserts new keys

    def update_condition(self, dialect: Dialect, source: pa.Schema) -> str | None:
        assert self.sequence is not None
        return f"{s(self.sequence, dialect)} < {t(self.sequence, dialect)}"

    def assignments(self, column: str, dialect: Dialect, source: pa.Schema) -> str:
        return s(column, dialect)
