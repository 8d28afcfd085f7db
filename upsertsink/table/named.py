"""Spark-only mode: a Delta table named in Spark's catalog, reached only by its name, through Spark SQL.

Under a governed catalog (Unity Catalog) a job may be allowed to query and MERGE into a table by name and yet
have no access to its files. For such a table (``UpsertSink.for_table(..., file_access=False)``, or the
default when the location cannot be read with deltalake) everything the write protocol reads or writes goes
through the batch's Spark session, by name, with SQL, on classic and Spark Connect sessions alike:

- markers, the record of committed batch ids and the commit of a batch come from ``DESCRIBE HISTORY <name>``
  (the sink's commits carry their app id, batch id, fingerprint and record in ``userMetadata``):
  :class:`NamedSnapshot`, read newest first with ``LIMIT`` (the whole history only when the recent commits
  do not answer);
- tombstones live in a companion Delta table registered next to the target,
  ``<catalog.schema.>`<table>__upsertsink_tombstones>``` (:class:`NamedTombstoneStore`), read with a semi-join
  on the batch's keys and appended to before the data commit (the file store's crash ordering);
- the table's schema, properties and features come from the analysed table and ``DESCRIBE DETAIL``;
- the data MERGE is ``MERGE INTO <name>`` (``spark_merge.py``), with the same txn and metadata settings.

No deltalake, pyarrow file system or ``os`` access to the table's location or the companion's happens here.

What it cannot see: Delta's ``txn`` actions are not in ``DESCRIBE HISTORY``, so an app's marker is the batch id
of its newest commit in the history (delta-spark skips a commit whose txn version is not above the table's,
so that is the same number). Once log cleanup has removed every commit of an app, its marker is unknown:
replays of its batches are then skipped by Delta itself and reported as a conflict, never applied twice.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from upsertsink.conflicts import spark_conflict, spark_error_class
from upsertsink.errors import UpsertSinkError, first_line
from upsertsink.sidecar.folder import now_us
from upsertsink.sidecar.tombstones import (
    APP,
    BATCH,
    DELETED_AT,
    EXPIRES_AT,
    READ,
    SEQUENCE,
    TABLE,
    TombstoneStore,
    key_column,
)
from upsertsink.table.commit_log import RECENT_COMMITS, decode_metadata

log = logging.getLogger(__name__)

TOMBSTONE_SUFFIX = "__upsertsink_tombstones"
SCOPE = "scope"
# The companion table is cleaned (expired tombstones deleted, files compacted) by the writer whose record
# brings its version to a multiple of this.
COMPACT_EVERY_VERSIONS = 100
# A batch of at most this many rows has its keys broadcast when they are matched with the tombstone table
# (another join than the no-op filter's, whose limit is spark_merge.BROADCAST_MAX_ROWS: keys only, and a
# table of tombstones rather than the target).
TOMBSTONE_KEYS_BROADCAST_MAX_ROWS = 1_000_000


class CatalogTableError(UpsertSinkError):
    """Spark refused a statement on a table named in the catalog (Spark-only mode); the message names it."""


@contextmanager
def named_errors(name: str, what: str) -> Iterator[None]:
    """Turn a raw Spark error into a :class:`CatalogTableError` naming the table (conflicts pass through)."""
    try:
        yield
    except UpsertSinkError:
        raise
    except Exception as err:
        from upsertsink.conflicts import RetryableConflict

        if isinstance(err, RetryableConflict):
            raise
        conflict = spark_conflict(err)
        if conflict is not None:
            raise conflict from err
        cls = spark_error_class(err)
        hint = ""
        if cls and ("PERMISSION" in cls or "INSUFFICIENT" in cls or "UNAUTHORIZED" in cls):
            hint = (" The job's principal needs SELECT and MODIFY on the table, and CREATE TABLE on its schema "
                    "for the tombstone table (docs/user-guide.md, \"Spark Connect and catalogs\").")
        raise CatalogTableError(f"{what} table {name} failed: {first_line(err)}.{hint}") from err


# ---------------------------------------------------------------- names


_PART = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|`(?:[^`]|``)+`")


def split_name(name: str) -> list[str]:
    """``a.`b c`.d`` as its parts, unquoted (``["a", "b c", "d"]``)."""
    parts, pos = [], 0
    while pos < len(name):
        found = _PART.match(name, pos)
        if found is None:
            raise ValueError(name)
        text = found.group(0)
        parts.append(text[1:-1].replace("``", "`") if text.startswith("`") else text)
        pos = found.end() + 1  # the dot
    return parts


def quote_name(parts: list[str]) -> str:
    return ".".join("`" + p.replace("`", "``") + "`" for p in parts)


def tombstone_table_name(name: str) -> str:
    """The companion table of ``name``: in the same catalog and schema, ``<table>__upsertsink_tombstones``."""
    parts = split_name(name)
    return quote_name([*parts[:-1], parts[-1] + TOMBSTONE_SUFFIX])


# ---------------------------------------------------------------- the table


class _Schema:
    def __init__(self, spark_schema: Any):
        self.spark_schema = spark_schema
        self.fields = [_Field(f.name, dict(f.metadata or {})) for f in spark_schema]

    def to_arrow(self) -> pa.Schema:
        from pyspark.sql.pandas.types import to_arrow_schema

        return to_arrow_schema(self.spark_schema, timezone="UTC")


@dataclass
class _Field:
    name: str
    metadata: dict[str, Any]


@dataclass
class _Metadata:
    configuration: dict[str, str]


@dataclass
class _Protocol:
    writer_features: list[str] | None


class NamedTable:
    """The target of one write in Spark-only mode: its name, the session that reaches it, and what
    ``DESCRIBE DETAIL`` said. It answers the few questions ``table_checks`` and the engines ask of a deltalake
    handle (``schema()``, ``metadata()``, ``protocol()``), from Spark."""

    def __init__(self, spark: Any, name: str, detail: dict[str, Any] | None = None):
        self.spark = spark
        self.name = name
        self.sql_name = quote_name(split_name(name))
        self.table_uri = f"catalog:{self.sql_name}"
        self._detail = detail
        self._schema: _Schema | None = None
        self._version: int | None = None
        # what ``detail()`` and ``schema()`` hold is kept between the writes of one sink while every commit
        # since (version, timestamp) ``_described`` is one of this sink's own data commits (``_own``)
        self._described: tuple[int, Any] | None = None
        self._own: set[int] = set()

    def detail(self) -> dict[str, Any]:
        if self._detail is None:
            with named_errors(self.name, "describing"):
                self._detail = self.spark.sql(f"DESCRIBE DETAIL {self.sql_name}").collect()[0].asDict()
        return self._detail

    def schema(self) -> _Schema:
        if self._schema is None:
            with named_errors(self.name, "reading the schema of"):
                self._schema = _Schema(self.spark.table(self.sql_name).schema)
        return self._schema

    def metadata(self) -> _Metadata:
        return _Metadata({str(k): str(v) for k, v in (self.detail().get("properties") or {}).items()})

    def protocol(self) -> _Protocol:
        return _Protocol(list(self.detail().get("tableFeatures") or []))

    def version(self) -> int | None:
        return self._version

    def frame(self) -> Any:
        return self.spark.table(self.sql_name)

    # ------------------------------------------------------------ history

    def history(self, limit: int | None) -> list[dict[str, Any]]:
        """Commit infos newest first (``limit`` of them, or every one the log holds), as deltalake gives them."""
        text = f"DESCRIBE HISTORY {self.sql_name}" + (f" LIMIT {int(limit)}" if limit is not None else "")
        with named_errors(self.name, "reading the history of"):
            rows = self.spark.sql(text).collect()
        out = []
        for r in rows:
            d = r.asDict()
            out.append({
                "version": int(d["version"]), "timestamp": d.get("timestamp"), "operation": d.get("operation"),
                "operationMetrics": dict(d.get("operationMetrics") or {}), "userMetadata": d.get("userMetadata"),
                "operationParameters": dict(d.get("operationParameters") or {}),
            })
        return out

    def latest_version(self) -> int | None:
        found = self.history(1)
        return found[0]["version"] if found else None

    def find_write(self, token: str | None, after: int, latest: int) -> int | None:
        """The version in (after, latest] whose metadata carries write token ``token``."""
        if token is None or latest <= after:
            return None
        return self._find_in(self.history(latest - after + RECENT_COMMITS), token, after, latest)

    def latest_and_write(self, token: str | None, after: int) -> tuple[int | None, int | None]:
        """(the latest version, the version in (after, latest] carrying write token ``token``) from one read of
        the recent history (a second, longer one only when more than RECENT_COMMITS commits came since)."""
        recent = self.history(RECENT_COMMITS)
        latest = recent[0]["version"] if recent else None
        if token is None or latest is None or latest <= after:
            return latest, None
        if recent[-1]["version"] > after + 1 and len(recent) == RECENT_COMMITS:
            recent = self.history(latest - after + RECENT_COMMITS)
        return latest, self._find_in(recent, token, after, latest)

    @staticmethod
    def _find_in(commits: list[dict[str, Any]], token: str, after: int, latest: int) -> int | None:
        for commit in commits:
            if after < commit["version"] <= latest:
                meta = decode_metadata(commit)
                if meta and meta.get("write") == token:
                    return commit["version"]
        return None

    def note_own(self, version: int | None) -> None:
        """``version`` is a data commit of this sink that changed neither the schema nor the table's settings."""
        if version is not None:
            self._own.add(version)

    def _validate(self, recent: list[dict[str, Any]]) -> None:
        """Forget ``DESCRIBE DETAIL`` and the schema unless every commit since they were known is this sink's own
        (another writer's commit, an ALTER, a re-created table all make the next write describe it again)."""
        at = recent[0] if recent else None
        if self._described is not None:
            version, stamp = self._described
            keep = at is not None and at["version"] >= version
            if keep:
                by_version = {c["version"]: c for c in recent}
                base = by_version.get(version)
                keep = (base is not None and base["timestamp"] == stamp
                        and all(v in self._own for v in range(version + 1, at["version"] + 1)))
            if not keep:
                self._detail, self._schema = None, None
        self._described = None if at is None else (at["version"], at["timestamp"])
        self._own.clear()

    def snapshot(self) -> NamedSnapshot:
        return NamedSnapshot(self)

    def stored_sequences(self, keys: tuple[str, ...], sequence: str, wanted: pa.Table) -> pa.Table:
        """The table's (k0..kN, sequence) for the keys in ``wanted`` (k0..kN): a semi-join on the name."""
        from upsertsink.sparkapi import F
        from upsertsink.spec import quote

        kc = [key_column(i) for i in range(len(keys))]
        with named_errors(self.name, "reading keys of"):
            schema = self.schema().spark_schema
            probe = self.spark.createDataFrame(wanted.select(kc)).select(
                *[F.col(c).cast(schema[k].dataType).alias(f"__w{i}") for i, (c, k) in enumerate(zip(kc, keys, strict=True))]
            )
            cond = None
            for i, k in enumerate(keys):
                part = F.col(quote(k, "spark")) == F.col(f"__w{i}")
                cond = part if cond is None else cond & part
            rows = (self.frame().select(*[F.col(quote(c, "spark")) for c in (*keys, sequence)])
                    .join(F.broadcast(probe), on=cond, how="left_semi").toArrow())
        return rows.rename_columns([*kc, SEQUENCE])


# ---------------------------------------------------------------- the snapshot, from DESCRIBE HISTORY


def _chain_value(meta: dict[str, Any] | None, txn_app: str) -> int | None:
    """The txn version a commit of ours set for ``txn_app`` (an app id, or its late-chain id), else None."""
    from upsertsink.table.records import LATE_PREFIX

    if not meta:
        return None
    if txn_app.startswith(LATE_PREFIX):
        if meta.get("app_id") == txn_app[len(LATE_PREFIX):] and isinstance(meta.get("late"), int):
            return int(meta["late"])
        return None
    if meta.get("app_id") == txn_app and meta.get("late") is None and isinstance(meta.get("batch_id"), int):
        return int(meta["batch_id"])
    return None


@dataclass
class NamedSnapshot:
    """The table at the version its recent history was read at: the questions ``ledger`` and ``markers``
    ask of a :class:`upsertsink.table.files.Snapshot`, answered from ``DESCRIBE HISTORY``."""

    named: NamedTable
    spark_only: bool = True
    storage_options: None = None
    _recent: list[dict[str, Any]] = field(default_factory=list)
    _all: list[dict[str, Any]] | None = None
    _at: int | None = None

    def __post_init__(self) -> None:
        self._recent = self.named.history(RECENT_COMMITS)
        self._at = self._recent[0]["version"] if self._recent else None
        self.named._version = self._at
        self.named._validate(self._recent)

    @property
    def table(self) -> NamedTable:
        return self.named

    @property
    def path(self) -> str:
        return self.named.name

    @property
    def exists(self) -> bool:
        return self._at is not None

    @property
    def version(self) -> int | None:
        return self._at

    @property
    def uri(self) -> str:
        return self.named.table_uri

    def recent_commits(self) -> list[dict[str, Any]]:
        return self._recent

    def all_commits(self) -> list[dict[str, Any]]:
        if self._all is None:
            if len(self._recent) < RECENT_COMMITS:
                self._all = list(self._recent)  # the recent ones are all there is
            else:
                at = self._at if self._at is not None else -1
                self._all = [c for c in self.named.history(None) if c["version"] <= at]
        return self._all

    def _commits_for(self, txn_app: str, recent_first: bool = True) -> Iterator[tuple[int, int]]:
        """(version, chain value) of the chain's commits, newest first."""
        seen_recent = set()
        for c in self._recent:
            seen_recent.add(c["version"])
            value = _chain_value(decode_metadata(c), txn_app)
            if value is not None:
                yield c["version"], value
        for c in self.all_commits():
            if c["version"] in seen_recent:
                continue
            value = _chain_value(decode_metadata(c), txn_app)
            if value is not None:
                yield c["version"], value

    def last_batch(self, app_id: str) -> int | None:
        """The app's marker: the batch id (or late counter) of the chain's newest commit in the history."""
        for _, value in self._commits_for(app_id):
            return value
        return None

    def txn_at(self, app_id: str, version: int) -> int | None:
        for v, value in self._commits_for(app_id):
            if v <= version:
                return value
        return None

    def first_version_reaching(self, app_id: str, at_least: int) -> int | None:
        found = None
        for v, value in self._commits_for(app_id):
            if value >= at_least:
                found = v
            else:
                break
        return found

    def earliest_version(self) -> int | None:
        commits = self.all_commits()
        return min(c["version"] for c in commits) if commits else None

    def commit_info(self, version: int) -> dict[str, Any] | None:
        for c in (*self._recent, *self.all_commits()):
            if c["version"] == version:
                return c
        return None

    def stored_sequences(self, keys: tuple[str, ...], sequence: str, wanted: pa.Table) -> pa.Table:
        return self.named.stored_sequences(keys, sequence, wanted)

    # ------------------------------------------------------------ what the ledger asks of a lineage

    @property
    def table_id(self) -> str | None:
        """The table's identity (:func:`commit_log.identity`; the ``metaData.id`` of ``DESCRIBE DETAIL`` stands
        for the id a commit set, which SQL cannot read for an older version)."""
        if not self.exists:
            return None
        if "_identity" not in self.__dict__:
            from upsertsink.table.commit_log import identity

            found = self.named.detail().get("id")
            current = None if found is None else str(found)
            self.__dict__["_identity"] = identity(self, current, lambda v: current)
        return self.__dict__["_identity"]

    def origin_id(self) -> str | None:
        """Every tombstone of a named table is recorded with its identity: none is matched by its origin."""
        return self.table_id

    def restored_version(self, info: dict[str, Any], at: int) -> int | None:
        from upsertsink.table.commit_log import restored_version

        return restored_version(self, info, at)

    def commit_times(self, up_to: int) -> dict[int, int]:
        """Version -> the commit time Delta's time travel goes by (``DESCRIBE HISTORY``'s timestamp), in ms."""
        out = {}
        for c in self.all_commits():
            if c["version"] <= up_to and c.get("timestamp") is not None:
                out[c["version"]] = _millis(c["timestamp"])
        return out

    def files_at(self, version: int) -> int:
        with named_errors(self.named.name, "reading a version of"):
            return len(self.named.spark.sql(f"SELECT * FROM {self.named.sql_name} VERSION AS OF {int(version)}")
                       .inputFiles())

    def clone_state(self, info: dict[str, Any], app_id: str) -> Any:
        return ("it is a clone, and in Spark-only mode (no access to the table's files) the sink cannot take "
                "over its source's remembered deletes and batch records; write it with file_access=None or True "
                "from a job that can read the clone's and the source's files")

    def sidecar(self, relative: str) -> None:
        return None  # nothing is kept beside a table known by name only

    def names_at(self, version: int) -> dict[str, str]:
        return {}  # Spark does not show a name-only table's physical column names

    def column_mapping(self) -> dict[str, str]:
        return {}

    def physical_names(self, names: tuple[str, ...]) -> None:
        return None

    def find_write(self, token: str | None, after: int, latest: int) -> int | None:
        return self.named.find_write(token, after, latest)


# ---------------------------------------------------------------- tombstones in a companion table


_EXISTS: set[str] = set()
_EXISTS_LOCK = threading.Lock()


class NamedTombstoneStore(TombstoneStore):
    """The tombstones of one key set in the companion Delta table ``<table>__upsertsink_tombstones``.

    Columns: ``scope`` (the key set and sequence column, as the file store's folder name), ``k0..kN`` (key
    values in sorted-key-name order, typed as the target's keys), ``sequence``, ``deleted_at_us``,
    ``expires_at_us``, ``batch_id``. Recording is a blind append (appends never conflict with each other), made
    before the data commit; the store's ``version()`` is the companion table's Delta version."""

    def __init__(self, named: NamedTable, keys: tuple[str, ...], sequence: str, snapshot: Any = None,
                 in_effect: Any = None):
        super().__init__(named.name, keys, sequence, None)
        self.table_id = None if snapshot is None else snapshot.table_id
        self.in_effect = in_effect
        self.named = named
        self.spark = named.spark
        self.table_name = tombstone_table_name(named.name)
        self.path = self.table_name
        self._last_version: int | None = None

    # ------------------------------------------------------------ the companion table

    def _exists(self) -> bool:
        with _EXISTS_LOCK:
            if self.table_name in _EXISTS:
                return True
        with named_errors(self.table_name, "looking up"):
            found = bool(self.spark.catalog.tableExists(self.table_name))
        if found:
            with _EXISTS_LOCK:
                _EXISTS.add(self.table_name)
        return found

    def _schema(self) -> Any:
        from pyspark.sql.types import LongType, StringType, StructField, StructType

        target = self.named.schema().spark_schema
        ordered = sorted(self.keys)
        return StructType([
            StructField(SCOPE, StringType()),
            *[StructField(key_column(i), target[k].dataType) for i, k in enumerate(ordered)],
            StructField(SEQUENCE, target[self.sequence].dataType),
            StructField(DELETED_AT, LongType()), StructField(EXPIRES_AT, LongType()), StructField(BATCH, LongType()),
        ])

    @staticmethod
    def _provenance_schema() -> list[Any]:
        """The columns saying which write recorded a tombstone (added to a companion table of an earlier
        version by its first append from this one: schema evolution)."""
        from pyspark.sql.types import LongType, StringType, StructField

        return [StructField(APP, StringType()), StructField(TABLE, StringType()), StructField(READ, LongType())]

    def _ensure(self) -> None:
        if self._exists():
            return
        from upsertsink.table.catalog import save_new_table

        writer = self.spark.createDataFrame([], self._schema()).write.format("delta").mode("ignore")
        try:
            save_new_table(self.spark, self.table_name, writer)  # a lost creation race is fine there
        except Exception as err:  # noqa: BLE001 - anything else is named
            raise CatalogTableError(
                f"the tombstone table {self.table_name} of table {self.named.name} could not be created: "
                f"{first_line(err)}. Spark-only mode keeps remembered deletes there: the job needs CREATE TABLE "
                "on the table's schema (or create it once, as a Delta table, with an owner that has)."
            ) from None
        log.info("created the tombstone table %s for %s", self.table_name, self.named.name)
        with _EXISTS_LOCK:
            _EXISTS.add(self.table_name)

    def _frame(self) -> Any:
        from upsertsink.sparkapi import F

        with named_errors(self.table_name, "reading"):
            frame = self.spark.table(self.table_name)
            missing = [c for c in self._schema().names if c not in frame.columns]
            if missing:
                raise CatalogTableError(
                    f"the tombstone table {self.table_name} lacks the column(s) {missing} that the sink's keys "
                    f"{list(self.keys)} need (another sink with more keys created it?): give this sink its own keys "
                    "or drop that table when it holds no live tombstones"
                )
            return frame.where(F.col(SCOPE) == F.lit(self.scope))

    # ------------------------------------------------------------ reading

    def refresh(self) -> list[str]:
        return []

    def version(self) -> int | None:  # type: ignore[override]
        if not self._exists():
            return None
        with named_errors(self.table_name, "reading the history of"):
            row = self.spark.sql(f"DESCRIBE HISTORY {self.table_name} LIMIT 1").collect()
        self._last_version = int(row[0]["version"]) if row else None
        return self._last_version

    def version_before_read(self) -> int | None:
        """The companion's version before the write reads its tombstones (tombstones only accumulate: what is
        read later holds at least those of this version)."""
        return self.version()

    def version_seen(self, before: object, recorded: bool) -> int | None:  # type: ignore[override]
        """``before`` unless this write's own record is the only commit since: another writer's delete recorded
        after ``before`` must leave the version apart from the one the repair check meets after the commit
        (else a delete recorded while this write read the tombstones would not be repaired)."""
        if not recorded:
            return before  # type: ignore[return-value]
        now = self.version()
        # our append is one commit; when the table was new, its creation (empty) is one more
        if now is not None and (now == 1 if before is None else now == int(before) + 1):  # type: ignore[arg-type]
            return now
        return before  # type: ignore[return-value]

    def _collect(self, frame: Any) -> pa.Table:
        cols = [*[key_column(i) for i in range(len(self.keys))], SEQUENCE, EXPIRES_AT, BATCH]
        cols += [c for c in (APP, TABLE, READ) if c in frame.columns]
        with named_errors(self.table_name, "reading"):
            table = frame.select(*cols).toArrow()
        if table.num_rows == 0:
            return self._empty()
        for c, kind in ((APP, pa.string()), (TABLE, pa.string()), (READ, pa.int64())):
            if c not in table.column_names:
                table = table.append_column(c, pa.nulls(table.num_rows, kind))
        return self._to_sink_order(self._acting(table))

    def read(self, ranges: dict[str, tuple[object, object]] | None = None) -> pa.Table:
        if not self._exists():
            return self._empty()
        return self._collect(self._frame())

    def matching_batch(self, data: Any, sample: pa.Table | None, rows: int | None = None) -> pa.Table:
        """The live tombstones (newest per key) of the keys of ``data`` (the batch, a Spark DataFrame, of
        ``rows`` rows): a semi-join on the server, the batch's keys broadcast when it is small; only the
        matches come back."""
        from upsertsink.sparkapi import F
        from upsertsink.spec import quote

        if not self._exists():
            return self._empty()
        ordered = sorted(self.keys)
        batch_keys = data.select(*[F.col(quote(k, "spark")).alias(f"__b{ordered.index(k)}") for k in self.keys])
        cond = None
        for i in range(len(self.keys)):
            part = F.col(key_column(i)) == F.col(f"__b{i}")
            cond = part if cond is None else cond & part
        if rows is not None and rows <= TOMBSTONE_KEYS_BROADCAST_MAX_ROWS:
            batch_keys = F.broadcast(batch_keys)
        tombs = self._collect(self._frame().join(batch_keys, on=cond, how="left_semi"))
        if sample is not None and tombs.num_rows:
            tombs = self._cast_keys(tombs, sample)
        return tombs

    def matching_prepared(self, prepared: Any, sample: pa.Table | None) -> pa.Table:
        return self.matching_batch(prepared.data, sample, prepared.rows)

    def matching(self, key_hashes: Any, sample: pa.Table | None = None,
                 ranges: dict[str, tuple[object, object]] | None = None) -> pa.Table:
        tombs = self.read(ranges)
        return self._cast_keys(tombs, sample) if sample is not None and tombs.num_rows else tombs

    # ------------------------------------------------------------ writing

    def record(
        self, rows: pa.Table, batch_id: int | None, retention_us: int | None, app_id: str | None = None,
        read_version: int | None = None,
    ) -> None:
        if rows.num_rows == 0:
            return
        from upsertsink.sparkapi import F

        self._ensure()
        now = now_us()
        n = rows.num_rows
        canonical: list[Any] = [None] * len(self.keys)
        for i in range(len(self.keys)):
            canonical[self._order[i]] = rows[key_column(i)]
        table = pa.table(
            [pa.array([self.scope] * n, pa.string()), *canonical, rows[SEQUENCE], pa.array([now] * n, pa.int64()),
             pa.array([None if retention_us is None else now + retention_us] * n, pa.int64()),
             pa.array([batch_id] * n, pa.int64()), pa.array([app_id] * n, pa.string()),
             pa.array([self.table_id] * n, pa.string()), pa.array([read_version] * n, pa.int64())],
            names=[SCOPE, *self.key_columns, SEQUENCE, DELETED_AT, EXPIRES_AT, BATCH, APP, TABLE, READ],
        )
        fields = [*self._schema(), *self._provenance_schema()]
        with named_errors(self.table_name, "recording deletes in"):
            frame = self.spark.createDataFrame(table).select(
                *[F.col(f.name).cast(f.dataType).alias(f.name) for f in fields]
            )
            frame.write.format("delta").mode("append").option("mergeSchema", "true").saveAsTable(self.table_name)

    def needs_compaction(self) -> bool:
        v = self._last_version
        return v is not None and v > 0 and v % COMPACT_EVERY_VERSIONS == 0

    def compact(self) -> dict[str, int]:
        """Delete the scope's expired tombstones and compact the companion table's files (``OPTIMIZE``).
        Superseded tombstones stay (a read keeps the newest per key)."""
        if not self._exists():
            return {"tombstones": 0, "expired": 0}
        with named_errors(self.table_name, "compacting"):
            rows = self.spark.sql(
                f"DELETE FROM {self.table_name} WHERE {SCOPE} = '{self.scope}' AND {EXPIRES_AT} IS NOT NULL "
                f"AND {EXPIRES_AT} <= {now_us()}"
            ).collect()
            self.spark.sql(f"OPTIMIZE {self.table_name}").collect()
        expired = int(rows[0][0]) if rows and rows[0][0] is not None else 0
        log.info("compacted the tombstone table %s (scope %s): %d expired removed", self.table_name, self.scope, expired)
        return {"expired": expired}


def forget() -> None:
    """Forget which companion tables exist (tests)."""
    with _EXISTS_LOCK:
        _EXISTS.clear()


def _millis(stamp: Any) -> Any:
    """A history timestamp (a datetime from Spark, local time when naive) as epoch milliseconds, as deltalake
    gives it."""
    return int(stamp.timestamp() * 1000) if hasattr(stamp, "timestamp") else stamp


# ---------------------------------------------------------------- choosing the mode


def files_readable(location: str, storage_options: dict[str, str] | None) -> tuple[bool, str]:
    """Can this process read the table's log at ``location`` with deltalake? (answer, reason)."""
    try:
        from deltalake import DeltaTable

        from upsertsink.sidecar.folder import deltalake_uri

        DeltaTable(deltalake_uri(location), storage_options=storage_options).version()
    except Exception as err:  # noqa: BLE001 - refused, unreachable, no credentials, an unknown scheme: all mean no
        return False, f"{type(err).__name__}: {first_line(err)}"
    return True, "readable"


__all__ = ["CatalogTableError", "NamedSnapshot", "NamedTable", "NamedTombstoneStore", "named_snapshot", "tombstone_table_name"]


def named_snapshot(spark: Any, name: str, version: int | None = None) -> Any:
    """The table ``name`` known by name only (Spark-only mode: ``DESCRIBE HISTORY``), at ``version``."""
    named = NamedTable(spark, name)
    with named_errors(name, "reading the history of"):
        snapshot = named.snapshot()
    latest = snapshot.version
    if version is None or latest is None:
        return snapshot
    if version > latest:
        raise CatalogTableError(f"table {name} has no version {version} (latest is {latest})")
    if version < latest:  # the snapshot's questions answered from the history up to that version
        listed = named.history(latest - version + RECENT_COMMITS)
        snapshot._recent = [c for c in listed if c["version"] <= version][:RECENT_COMMITS]
        snapshot._at, snapshot._all = version, None
    return snapshot
