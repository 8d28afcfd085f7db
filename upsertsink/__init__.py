"""upsertsink: idempotent upserts into Delta tables, a determinism linter, and keyed replay diffs."""

from __future__ import annotations

# typing and the errors module cost ~6 ms to import, and `upsertsink lint` served from its run record
# (upsertsink.launch) imports this package and nothing else: every name here loads on first use.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from upsertsink.diffing import DiffResult, diff
    from upsertsink.errors import (
        AggregateOverflowError,
        BatchIdBehindMarkerError,
        ConcurrentWriteError,
        ConstraintViolationError,
        DuplicateKeyError,
        InvalidInputError,
        MergeModeMismatchError,
        NotADeltaTableError,
        ReplayDivergenceError,
        SchemaMismatchError,
        TableNotWritableError,
        UnsupportedTableFeatureError,
        UpsertSinkError,
        WriteFailedError,
    )
    from upsertsink.session import spark_session
    from upsertsink.sink import UpsertSink, WriteResult
    from upsertsink.table.batch_ledger import BatchLedger, batches

__all__ = [
    "AggregateOverflowError",
    "BatchIdBehindMarkerError",
    "BatchLedger",
    "ConcurrentWriteError",
    "ConstraintViolationError",
    "DiffResult",
    "DuplicateKeyError",
    "InvalidInputError",
    "MergeModeMismatchError",
    "NotADeltaTableError",
    "ReplayDivergenceError",
    "SchemaMismatchError",
    "TableNotWritableError",
    "UnsupportedTableFeatureError",
    "UpsertSink",
    "UpsertSinkError",
    "WriteFailedError",
    "WriteResult",
    "__version__",
    "batches",
    "diff",
    "spark_session",
]

_LAZY = {
    "AggregateOverflowError": "upsertsink.errors",
    "MergeModeMismatchError": "upsertsink.errors",
    "BatchIdBehindMarkerError": "upsertsink.errors",
    "ConcurrentWriteError": "upsertsink.errors",
    "ConstraintViolationError": "upsertsink.errors",
    "DuplicateKeyError": "upsertsink.errors",
    "InvalidInputError": "upsertsink.errors",
    "NotADeltaTableError": "upsertsink.errors",
    "ReplayDivergenceError": "upsertsink.errors",
    "SchemaMismatchError": "upsertsink.errors",
    "TableNotWritableError": "upsertsink.errors",
    "UnsupportedTableFeatureError": "upsertsink.errors",
    "UpsertSinkError": "upsertsink.errors",
    "WriteFailedError": "upsertsink.errors",
    "UpsertSink": "upsertsink.sink",
    "WriteResult": "upsertsink.sink",
    "diff": "upsertsink.diffing",
    "DiffResult": "upsertsink.diffing",
    "spark_session": "upsertsink.session",
    "batches": "upsertsink.table.batch_ledger",
    "BatchLedger": "upsertsink.table.batch_ledger",
}
_VERSION: list[str] = []


def _package_version() -> str:
    """The installed distribution's version, read once: importlib.metadata costs ~20 ms to import, which
    `upsertsink lint` (whose start-up counts) does not pay unless it is asked for a version."""
    if not _VERSION:
        from importlib.metadata import PackageNotFoundError, version

        try:
            _VERSION.append(version("upsertsink"))
        except PackageNotFoundError:  # imported from a source tree that was never installed
            _VERSION.append("0+unknown")
    return _VERSION[0]


def __getattr__(name: str) -> Any:
    # The sink and the diff import pandas/pyarrow/deltalake (the extra upsertsink[embedded]); load them on
    # first use only. The session module (threads, logging) and the version are looked up on first use too:
    # the linter's command line needs neither.
    if name == "__version__":
        return _package_version()
    if name == "errors":  # `import upsertsink` then `upsertsink.errors.X`, as when it was imported eagerly
        import importlib

        return importlib.import_module("upsertsink.errors")
    if name in _LAZY:
        import importlib

        # the sink and the batch ledger read tables with deltalake; the diff checks on its first call (its engine
        # may be Spark's)
        if _LAZY[name] in ("upsertsink.sink", "upsertsink.table.batch_ledger"):
            from upsertsink.errors import require_embedded

            require_embedded(f"upsertsink.{name}")
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'upsertsink' has no attribute {name!r}")
