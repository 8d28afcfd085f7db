"""Recognising a lost commit race: the one exception type the write protocol retries.

Each engine maps its own conflict exceptions to :class:`RetryableConflict` by type (deltalake's
``CommitFailedError``, delta-spark's concurrent-modification exceptions, a version-0 race while two writers
create one table); everything else is not retried.
"""

from __future__ import annotations

import logging
import re

log = logging.getLogger(__name__)


class RetryableConflict(Exception):
    """A concurrent commit won the race; the attempt may be repeated on a fresh snapshot."""


# delta-spark's Python exception classes (delta.exceptions) that mean "a concurrent commit won".
_SPARK_CONFLICTS = (
    "DeltaConcurrentModificationException", "ConcurrentWriteException", "MetadataChangedException",
    "ProtocolChangedException", "ConcurrentAppendException", "ConcurrentDeleteReadException",
    "ConcurrentDeleteDeleteException", "ConcurrentTransactionException",
)
# The same exceptions by their Spark error class (condition), as a Spark Connect client sees them: over
# Connect the Java exception arrives as a generic one whose error class names the conflict.
_SPARK_CONFLICT_CLASSES = (
    "DELTA_CONCURRENT_APPEND", "DELTA_CONCURRENT_DELETE_READ", "DELTA_CONCURRENT_DELETE_DELETE",
    "DELTA_CONCURRENT_TRANSACTION", "DELTA_CONCURRENT_WRITE", "DELTA_METADATA_CHANGED", "DELTA_PROTOCOL_CHANGED",
)
# Spark error classes of a lost race to create the table (both writers saw no table).
_SPARK_CREATE_RACE = ("DELTA_PATH_EXISTS", "DELTA_TABLE_ALREADY_EXISTS", "DELTA_CREATE_TABLE_WITH_NON_EMPTY_LOCATION")


def deltalake_conflict(err: BaseException) -> RetryableConflict | None:
    """A RetryableConflict for a deltalake exception that means a concurrent commit won, else None."""
    from deltalake.exceptions import CommitFailedError, DeltaError

    if isinstance(err, CommitFailedError):
        return RetryableConflict(str(err))
    if type(err) is DeltaError:
        text = str(err)
        # the put-if-absent of a commit file lost (two writers creating version N, e.g. the table itself)
        if "already exists" in text and ("Version" in text or "table" in text.lower()):
            return RetryableConflict(text)
    return None


def spark_conflict(err: BaseException) -> RetryableConflict | None:
    """A RetryableConflict for a delta-spark exception that means a concurrent commit won, else None."""
    names = {cls.__name__ for cls in type(err).__mro__}
    if names & set(_SPARK_CONFLICTS):
        return RetryableConflict(first_line(err))
    condition = spark_error_class(err)
    if condition in _SPARK_CREATE_RACE:
        return RetryableConflict(first_line(err))
    if condition is not None and condition.split(".", 1)[0] in _SPARK_CONFLICT_CLASSES:
        return RetryableConflict(first_line(err))
    java = getattr(err, "java_exception", None) or getattr(err, "_java_exception", None)
    if java is not None and "FileAlreadyExistsException" in str(java.getClass().getName()):
        return RetryableConflict(first_line(err))
    return None


def spark_error_class(err: BaseException) -> str | None:
    """Spark's error class (condition) of an exception, such as ``DELTA_VIOLATE_CONSTRAINT_WITH_VALUES``."""
    error_class = getattr(err, "getCondition", None) or getattr(err, "getErrorClass", None)
    if callable(error_class):
        try:
            found = error_class()
        except Exception:  # noqa: BLE001 - an exception without an error class
            found = None
        if found:
            return str(found)
    java = getattr(err, "java_exception", None)  # py4j's Py4JJavaError: ask the Java SparkThrowable
    if java is not None:
        for name in ("getCondition", "getErrorClass"):
            try:
                found = getattr(java, name)()
            except Exception:  # noqa: BLE001 - not a SparkThrowable, or the JVM is gone
                found = None
            if found:
                return str(found)
    try:
        text = str(err)[:2000]
    except Exception:  # noqa: BLE001 - a JVM exception whose message cannot be fetched any more
        return None
    match = re.search(r"\[([A-Z][A-Z0-9_]+(?:\.[A-Z0-9_]+)?)\]", text)
    return match.group(1) if match else None


def first_line(err: BaseException) -> str:
    """The first line of an exception's message (py4j errors can fail to render: then the type's name)."""
    try:
        text = str(err).strip()
    except Exception:  # noqa: BLE001 - a JVM exception whose message cannot be fetched any more
        text = ""
    return text.splitlines()[0] if text else type(err).__name__


# How a denied permission reads in the engines' errors: Python's PermissionError, delta-rs/object_store's
# "Permission denied (os error 13)" and "Read-only file system (os error 30)", Hadoop's AccessDeniedException
# and AccessControlException, an object store's 403 AccessDenied.
_DENIED = re.compile(
    r"Permission denied|os error 13|Read-only file system|os error 30|AccessDeniedException|"
    r"AccessControlException|AccessDenied|Access Denied"
)
_DENIED_FILE = re.compile(r"(?:Unable to open file|Unable to (?:create|rename|copy|delete)[^/]*?|file) (/\S+?)(?:#\d+)?:?\s")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def permission_denied(err: BaseException) -> str | None:
    """What was denied (a file, or the engine's words) when ``err`` or an exception it was raised from is a
    permission problem: a read-only folder, a user without write access, an object store's 403; else None.
    Such a write fails the same way however often it is retried."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, PermissionError) or (isinstance(current, OSError) and current.errno in (13, 30)):
            name = current.filename
            return f"{name}: {current.strerror}" if name and current.strerror else first_line(current)
        try:
            text = _ANSI.sub("", str(current))
        except Exception:  # noqa: BLE001 - a JVM exception whose message cannot be fetched any more
            text = ""
        if _DENIED.search(text):
            found = _DENIED_FILE.search(text + " ")
            reason = _DENIED.search(text)
            assert reason is not None
            return f"{found.group(1)}: {reason.group(0)}" if found else " ".join(text.split())[:300]
        current = current.__cause__ or current.__context__
    return None
