"""The exceptions upsertsink raises. Bad input is always both an UpsertSinkError and a ValueError."""

from __future__ import annotations


class UpsertSinkError(Exception):
    """Base class of every error upsertsink raises on purpose."""


class InvalidInputError(UpsertSinkError, ValueError):
    """The batch or the sink's settings are not usable; nothing was written."""


class SchemaMismatchError(InvalidInputError):
    """The batch's columns or types do not fit the target table; nothing was written."""


class DuplicateKeyError(InvalidInputError):
    """A batch holds the same key more than once and no rule says which row wins; nothing was written."""


class NotADeltaTableError(InvalidInputError):
    """The target path exists but does not hold a Delta table; nothing was written."""


class ReplayDivergenceError(UpsertSinkError, ValueError):
    """A committed batch id was sent again with different content: the job is not deterministic."""


class ConcurrentWriteError(UpsertSinkError):
    """Concurrent writers kept conflicting with this write after every retry; nothing was written."""
