"""The exceptions upsertsink raises. Bad input is always both an UpsertSinkError and a ValueError."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class UpsertSinkError(Exception):
    """Base class of every error upsertsink raises on purpose."""


class InvalidInputError(UpsertSinkError, ValueError):
    """The batch or the sink's settings are not usable; nothing was written."""


class MergeModeMismatchError(InvalidInputError):
    """The table was written with another merge engine, or with other options of it (issue #47)."""


class AggregateOverflowError(InvalidInputError, OverflowError):
    """An ``aggregate`` ``sum``/``count`` would leave its column's integer type: the sink never wraps; nothing was
    written. Also an ``OverflowError``."""


class SchemaMismatchError(InvalidInputError):
    """The batch's columns or types do not fit the target table; nothing was written."""


class DuplicateKeyError(InvalidInputError):
    """A batch holds the same key more than once and no rule says which row wins; nothing was written."""


class NotADeltaTableError(InvalidInputError):
    """The target path exists but does not hold a Delta table; nothing was written."""


class ReplayDivergenceError(UpsertSinkError, ValueError):
    """A committed batch id was sent again with different content: the job is not deterministic."""


class BatchIdBehindMarkerError(InvalidInputError):
    """A batch id below the app's marker that was never committed (or cannot be told apart from a replay);
    nothing was written. A new stream or checkpoint needs its own ``app_id``; ``late_batches="apply"``
    applies such batches (backfills)."""


class DivergentBatchBehindMarkerError(ReplayDivergenceError, BatchIdBehindMarkerError):
    """A batch id below the app's marker whose content differs from the batch committed under that id: a
    nondeterministic replay, or a new stream reusing the app id. Nothing was written."""


class ConstraintViolationError(InvalidInputError):
    """Rows of the batch break one of the table's CHECK or NOT NULL constraints; nothing was written, and
    sending the same rows again fails the same way."""


class TableNotWritableError(InvalidInputError):
    """The table cannot take this sink's writes as it is (an append-only table, a table feature the engine
    cannot write); nothing was written, and retrying cannot help."""


class UnsupportedTableFeatureError(TableNotWritableError):
    """The table uses a Delta feature this engine cannot write (the message names it and the engine that
    can); nothing was written."""


class ConcurrentWriteError(UpsertSinkError):
    """Concurrent writers kept conflicting with this write after every retry; nothing was written."""


class WriteFailedError(UpsertSinkError):
    """The write failed for a reason outside the batch (storage, engine, an interruption).

    The table is left as it was, or with this batch fully applied; sending the same batch again is safe.
    """


# ---------------------------------------------------------------- the embedded extra

EMBEDDED_EXTRA_INSTALL = 'pip install "upsertsink[embedded]"'
# What the sink (on either engine: it reads the table's log with deltalake) and the Arrow diff import: the
# extra ``upsertsink[embedded]``, as (module, distribution).
_EMBEDDED_MODULES = (
    ("deltalake", "deltalake"),
    ("pyarrow", "pyarrow"),
    ("pandas", "pandas"),
    ("numpy", "numpy"),
    ("datafusion", "datafusion"),
)


class EmbeddedNotInstalledError(UpsertSinkError, ImportError):
    """The sink or the Arrow diff was used but the ``upsertsink[embedded]`` extra (deltalake, pyarrow, pandas,
    numpy, datafusion) is missing: the base install is the linter and the CLI only."""


def require_embedded(feature: str = "this") -> None:
    """Raise :class:`EmbeddedNotInstalledError` naming ``pip install "upsertsink[embedded]"`` when a package
    of the embedded extra is not installed. ``feature`` names what needs them. Nothing is imported here."""
    missing = [dist for module, dist in _EMBEDDED_MODULES if importlib.util.find_spec(module) is None]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise EmbeddedNotInstalledError(
            f"{feature} needs the embedded extra, but {', '.join(missing)} {verb} not installed: "
            f"{EMBEDDED_EXTRA_INSTALL}"
        )


# ---------------------------------------------------------------- naming settings in messages

# Python parameter name -> the CLI flag that sets it, where the flag is not simply --name-with-dashes.
_FLAGS = {
    "keys": "--key", "ignore_columns": "--ignore-column", "partition_by": "--partition-by", "columns": "--column",
}

_OPTION_STYLE: ContextVar[str] = ContextVar("upsertsink_option_style", default="python")


def option(name: str, python_value: str | None = None, cli_value: str | None = None) -> str:
    """How a message names a setting: ``schema_evolution=True`` in Python, ``--schema-evolution`` in the CLI
    (``--late-batches apply`` when the flag takes ``cli_value``)."""
    if _OPTION_STYLE.get() == "cli":
        flag = _FLAGS.get(name, "--" + name.replace("_", "-"))
        return f"{flag} {cli_value}" if cli_value is not None else flag
    return f"{name}={python_value}" if python_value is not None else name


@contextmanager
def cli_option_names() -> Iterator[None]:
    """Within this block, :func:`option` names CLI flags (the CLI wraps each command in it)."""
    token = _OPTION_STYLE.set("cli")
    try:
        yield
    finally:
        _OPTION_STYLE.reset(token)


def first_line(err: BaseException) -> str:
    """The first line of an exception's message (a JVM error carries its stack trace below it; py4j errors can
    fail to render: then the type's name)."""
    try:
        text = str(err).strip()
    except Exception:  # noqa: BLE001 - a JVM exception whose message cannot be fetched any more
        text = ""
    return text.splitlines()[0] if text else type(err).__name__
