"""What a table allows, checked before a write and read from an engine's refusal after one.

Permanent conditions are told apart from conflicts here, so that only a lost commit race is retried:

- an append-only table (``delta.appendOnly``) cannot take updates or deletes: refused before anything runs;
- a writer feature the embedded engine (delta-rs 1.6) cannot write (liquid clustering, identity columns, row
  tracking, type widening, domain metadata): refused before anything runs, naming the feature and the engine
  that can write it; the same refusal read from delta-rs's own error text (for features not listed here);
- a CHECK or NOT NULL constraint that rows of the batch break: a :class:`ConstraintViolationError` naming
  the constraint and a key of a row that breaks it (found by evaluating the constraint on the batch with the
  engine's own SQL, as the engine did).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from upsertsink.errors import ConstraintViolationError, TableNotWritableError, UnsupportedTableFeatureError

log = logging.getLogger(__name__)

CONSTRAINT_PREFIX = "delta.constraints."

# Delta writer features delta-rs 1.6 refuses to write, with the name users know them by.
EMBEDDED_UNWRITABLE = {
    "clustering": "liquid clustering",
    "identityColumns": "identity columns",
    "rowTracking": "row tracking",
    "typeWidening": "type widening",
    "domainMetadata": "domain metadata",
}  # others delta-rs refuses are still named, from its own error text (unsupported_feature)

_UNSUPPORTED_TEXT = re.compile(r"Unsupported table features required:\s*\[([^\]]*)\]")


def check_writable(snapshot: Any, engine: str, target: str) -> None:
    """Refuse, before anything is prepared, a table that this engine's writes can never succeed on."""
    if not snapshot.exists:
        return
    table = snapshot.table
    conf = table.metadata().configuration
    if str(conf.get("delta.appendOnly", "false")).strip().lower() == "true":
        raise TableNotWritableError(
            f"table {target} is append-only (delta.appendOnly=true): the sink updates and deletes rows by key, "
            "which such a table refuses. Write it with a plain append, or unset the property "
            f"(ALTER TABLE delta.`{target}` SET TBLPROPERTIES ('delta.appendOnly' = 'false')). Nothing was written."
        )
    if engine != "embedded":
        return
    features = table.protocol().writer_features or []
    blocked = [f for f in features if f in EMBEDDED_UNWRITABLE]
    if blocked:
        raise feature_error(target, [EMBEDDED_UNWRITABLE[f] + f" ({f})" for f in blocked])


def feature_error(target: str, features: list[str]) -> UnsupportedTableFeatureError:
    return UnsupportedTableFeatureError(
        f"table {target} uses {', '.join(features)}, which the embedded engine (deltalake) cannot write. "
        "Write it with the Spark engine (a Spark DataFrame, or `upsertsink write --engine spark`; delta-spark "
        "writes every table feature), or create the table without the feature. Nothing was written; "
        "retrying with this engine cannot help."
    )


def unsupported_feature(err: BaseException, target: str) -> UnsupportedTableFeatureError | None:
    """The refusal of delta-rs to write a table feature, read from its error, else None."""
    found = _UNSUPPORTED_TEXT.search(str(err))
    if found is None:
        return None
    return feature_error(target, [f.strip() for f in found.group(1).split(",") if f.strip()])


def constraints(snapshot: Any) -> dict[str, str]:
    """The table's CHECK constraints: name -> SQL expression."""
    if not snapshot.exists:
        return {}
    conf = snapshot.table.metadata().configuration
    return {k[len(CONSTRAINT_PREFIX):]: v for k, v in conf.items() if k.startswith(CONSTRAINT_PREFIX)}


def not_null_columns(snapshot: Any) -> list[str]:
    """Top-level columns the table declares NOT NULL."""
    import pyarrow as pa

    schema = pa.schema(snapshot.table.schema().to_arrow())
    return [f.name for f in schema if not f.nullable]


def _describe_key(keys: tuple[str, ...], row: dict[str, Any] | None) -> str:
    if not row:
        return ""
    return " (for example the row with key " + ", ".join(f"{k}={row.get(k)!r}" for k in keys) + ")"


def violation_error(
    target: str, keys: tuple[str, ...], what: str | None, row: dict[str, Any] | None, detail: str
) -> ConstraintViolationError:
    where = what or "a CHECK or NOT NULL constraint of the table"
    return ConstraintViolationError(
        f"rows of the batch break {where} of table {target}{_describe_key(keys, row)}: {detail}. This is bad "
        "data, not a passing failure: sending the same rows again fails the same way. Fix or drop those rows. "
        "Nothing was written."
    )


def arrow_violation(snapshot: Any, rows: Any, keys: tuple[str, ...]) -> tuple[str, dict[str, Any] | None] | None:
    """The first constraint that the Arrow ``rows`` (the rows the MERGE writes) break, and a key of a row
    that breaks it; evaluated with DataFusion, as delta-rs does."""
    import pyarrow.compute as pc

    for name in not_null_columns(snapshot):
        if name in rows.column_names and rows[name].null_count:
            hit = rows.filter(pc.is_null(rows[name])).slice(0, 1).select(list(keys)).to_pylist()
            return f"NOT NULL column {name!r}", (hit[0] if hit else None)
    checks = constraints(snapshot)
    if not checks:
        return None
    from datafusion import SessionContext

    ctx = SessionContext()
    ctx.register_record_batches("batch", [rows.to_batches()])
    cols = ", ".join('"' + k.replace('"', '""') + '"' for k in keys)
    for name, expr in checks.items():
        try:
            found = ctx.sql(f"SELECT {cols} FROM batch WHERE NOT coalesce(({expr}), true) LIMIT 1").to_arrow_table()
        except Exception as err:  # noqa: BLE001 - an expression DataFusion cannot evaluate: name it unchecked
            log.debug("constraint %s (%s) not evaluated on the batch: %s", name, expr, err)
            continue
        if found.num_rows:
            return f"CHECK constraint {name!r} ({expr})", found.to_pylist()[0]
    return None


def spark_violation(snapshot: Any, df: Any, keys: tuple[str, ...]) -> tuple[str, dict[str, Any] | None] | None:
    """As :func:`arrow_violation`, for a Spark DataFrame (evaluated with Spark SQL, as delta-spark does)."""
    from upsertsink.sparkapi import F
    from upsertsink.spec import quote

    for name in not_null_columns(snapshot):
        if name in df.columns:
            hit = df.where(F.col(quote(name, "spark")).isNull()).select(*[quote(k, "spark") for k in keys]).first()
            if hit is not None:
                return f"NOT NULL column {name!r}", hit.asDict()
    for name, expr in constraints(snapshot).items():
        try:
            hit = df.where(f"NOT coalesce(({expr}), true)").select(*[quote(k, "spark") for k in keys]).first()
        except Exception as err:  # noqa: BLE001 - an expression that cannot be evaluated on the batch alone
            log.debug("constraint %s (%s) not evaluated on the batch: %s", name, expr, err)
            continue
        if hit is not None:
            return f"CHECK constraint {name!r} ({expr})", hit.asDict()
    return None


# delta-spark's error classes of a constraint that rows break
SPARK_CONSTRAINT_CLASSES = (
    "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES", "DELTA_NOT_NULL_CONSTRAINT_VIOLATED", "DELTA_CHECK_CONSTRAINT_VIOLATED",
    "DELTA_NOT_NULL_NESTED_FIELD",
)
