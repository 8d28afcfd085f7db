"""upsertsink: idempotent upserts into Delta tables, a determinism linter, and keyed replay diffs."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version
from typing import TYPE_CHECKING, Any

from upsertsink.errors import (
    BatchIdBehindMarkerError,
    ConcurrentWriteError,
    ConstraintViolationError,
    DuplicateKeyError,
    InvalidInputError,
    NotADeltaTableError,
    ReplayDivergenceError,
    SchemaMismatchError,
    TableNotWritableError,
    UnsupportedTableFeatureError,
    UpsertSinkError,
    WriteFailedError,
)
from upsertsink.session import spark_session

if TYPE_CHECKING:
    from upsertsink.diffing import DiffResult, diff
    from upsertsink.sink import UpsertSink, WriteResult

try:
    __version__ = _dist_version("upsertsink")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

__all__ = [
    "BatchIdBehindMarkerError",
    "ConcurrentWriteError",
    "ConstraintViolationError",
    "DiffResult",
    "DuplicateKeyError",
    "InvalidInputError",
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
    "diff",
    "spark_session",
]

_LAZY = {
    "UpsertSink": "upsertsink.sink",
    "WriteResult": "upsertsink.sink",
    "diff": "upsertsink.diffing",
    "DiffResult": "upsertsink.diffing",
}


def __getattr__(name: str) -> Any:
    # The sink and the diff import pandas/pyarrow/deltalake (the extra upsertsink[embedded]); load them on
    # first use only.
    if name in _LAZY:
        import importlib

        if _LAZY[name] == "upsertsink.sink":  # the diff checks on its first call (its engine may be Spark's)
            from upsertsink.errors import require_embedded

            require_embedded(f"upsertsink.{name}")
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'upsertsink' has no attribute {name!r}")
