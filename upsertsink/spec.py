"""The engine-neutral MERGE plan: conditions and assignments built only from quoted identifiers.

Both engines run the same plan. Spark SQL quotes identifiers with backticks, DataFusion (deltalake) with
double quotes; the plan takes the dialect and never puts a value into SQL text.

    ON       t.k1 = s.k1 AND ...                                   (keys are never null: checked before)
    MATCHED  AND s.<delete> AND <newer>                     THEN DELETE
    MATCHED  AND NOT s.<delete> AND <newer> AND <changed>   THEN UPDATE SET <non-key columns>
    NOT MATCHED AND NOT s.<delete>                          THEN INSERT <all columns>

<newer> is ``t.seq IS NULL OR s.seq > t.seq`` with ``sequence_by`` (equal is a no-op) and TRUE without;
<changed> is true when any non-key column differs null-safely, so a re-sent row rewrites nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Dialect = Literal["spark", "datafusion"]

# The per-row delete flag the sink adds to the source; never written to the table.
DELETE_FLAG = "__upsertsink_delete"
TARGET = "t"
SOURCE = "s"


def quote(name: str, dialect: Dialect) -> str:
    """Quote one identifier for the dialect (the quote character inside the name is doubled)."""
    if dialect == "spark":
        return "`" + name.replace("`", "``") + "`"
    return '"' + name.replace('"', '""') + '"'


@dataclass(frozen=True)
class MergePlan:
    """What one MERGE does, independent of the engine that runs it."""

    keys: tuple[str, ...]
    columns: tuple[str, ...]  # every column written, keys and sequence included, in table order
    sequence: str | None = None
    deletes: bool = False
    upserts: bool = True  # False: a repair plan, whose source holds only deletes (no UPDATE/INSERT clauses)
    new_columns: tuple[str, ...] = ()  # columns this MERGE adds to the table (schema evolution)
    # columns holding maps (at any depth): Spark's <=> cannot compare maps, so Spark compares their JSON text
    # (two equal maps written in another entry order then count as changed: one needless, harmless rewrite)
    map_columns: tuple[str, ...] = ()

    @property
    def value_columns(self) -> tuple[str, ...]:
        return tuple(c for c in self.columns if c not in self.keys)

    def ref(self, alias: str, column: str, dialect: Dialect) -> str:
        return f"{alias}.{quote(column, dialect)}"

    def on(self, dialect: Dialect) -> str:
        return " AND ".join(
            f"{self.ref(TARGET, k, dialect)} = {self.ref(SOURCE, k, dialect)}" for k in self.keys
        )

    def _newer(self, dialect: Dialect) -> str | None:
        if self.sequence is None:
            return None
        t, s = self.ref(TARGET, self.sequence, dialect), self.ref(SOURCE, self.sequence, dialect)
        return f"(({t} IS NULL) OR ({s} > {t}))"

    def _changed(self, dialect: Dialect) -> str | None:
        if not self.value_columns:
            return None
        parts = []
        for c in self.value_columns:
            t, s = self.ref(TARGET, c, dialect), self.ref(SOURCE, c, dialect)
            if c in self.new_columns:  # the table has no such column yet: every stored value is null
                parts.append(f"({s} IS NOT NULL)")
            else:
                if dialect == "spark" and c in self.map_columns:
                    parts.append(f"NOT (to_json({t}) <=> to_json({s}))")
                else:
                    parts.append(f"NOT ({t} <=> {s})" if dialect == "spark" else f"({t} IS DISTINCT FROM {s})")
        return "(" + " OR ".join(parts) + ")"

    def _flag(self, dialect: Dialect, negate: bool) -> str | None:
        if not self.deletes:
            return None
        flag = self.ref(SOURCE, DELETE_FLAG, dialect)
        return f"NOT {flag}" if negate else flag

    @staticmethod
    def _all(*parts: str | None) -> str | None:
        kept = [p for p in parts if p]
        return " AND ".join(kept) if kept else None

    def delete_condition(self, dialect: Dialect) -> str | None:
        """Condition of the WHEN MATCHED ... DELETE clause; None when the plan has no deletes."""
        if not self.deletes:
            return None
        return self._all(self._flag(dialect, negate=False), self._newer(dialect))

    def update_condition(self, dialect: Dialect) -> str | None:
        return self._all(self._flag(dialect, negate=True), self._newer(dialect), self._changed(dialect))

    @property
    def has_update(self) -> bool:
        return self.upserts and bool(self.value_columns)

    def insert_condition(self, dialect: Dialect) -> str | None:
        return self._flag(dialect, negate=True)

    def update_set(self, dialect: Dialect) -> dict[str, str]:
        return {quote(c, dialect): self.ref(SOURCE, c, dialect) for c in self.value_columns}

    def insert_values(self, dialect: Dialect) -> dict[str, str]:
        return {quote(c, dialect): self.ref(SOURCE, c, dialect) for c in self.columns}
