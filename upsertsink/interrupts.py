"""What an interrupted write left in the table, read from the table's log (issue #45).

A write stopped by Ctrl-C (``KeyboardInterrupt``), by SIGTERM in the command line, or by its streaming query's
``stop()`` has either committed its batch or not: the commit is one atomic log entry. Which of the two it is
is not guessed: every commit attempt of a write carries a random write token in its commit metadata, and the
protocol tells this module, just before each attempt's commit, the version the attempt read and its token
(:func:`attempting`). After the interruption the log is searched above that version for the token: found,
the batch is committed at that version; not found (or no attempt got that far), nothing of it was. Either
way sending the batch again is safe (a committed batch id is skipped as a replay), and the line says which:

    upsertsink: interrupted after the commit of batch 42 (version 7): nothing to re-send
    upsertsink: interrupted before the commit: nothing was written; sending batch 42 again is safe

``UpsertSink.write`` logs that line (WARNING, on this module's logger) and raises the interrupt unchanged;
the command line prints it and exits with :data:`EXIT_INTERRUPTED` or :data:`EXIT_INTERRUPTED_COMMITTED`.

A streaming query stopped while ``foreach_batch`` writes interrupts the query's thread in the JVM: the
write's Spark call fails with an ``InterruptedException``. Spark recognises such a stop only by matching the
text of the Python function's traceback against a regular expression
(``py4j.protocol.Py4JJavaError: An error occurred while calling((.|\\r\\n|\\r|\\n)*)(java.lang.InterruptedException|...)``,
``StreamExecution.PROXY_ERROR``), whose alternation inside a loop recurses once per character: on the long
traceback of a wrapped Py4JJavaError (Python frames and the Java stack trace, chained) Java's regex engine
overflows the thread's stack (``java.lang.StackOverflowError`` in ``java.util.regex``, a thousand lines on
stderr) instead of answering. :func:`stream_stopped` turns such a failure into a :class:`StreamStoppedError`
whose traceback is short, unchained and matched at once, so Spark ends the query quietly, and the one line
above is logged.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from upsertsink.errors import WriteFailedError

log = logging.getLogger(__name__)

#: The command line's exit status when a write was interrupted before its commit (nothing written; send the
#: batch again), or when what it committed could not be read: 128 + SIGINT, as shells report an interrupt.
EXIT_INTERRUPTED = 130
#: The command line's exit status when a write was interrupted after its commit (the batch is in the table).
EXIT_INTERRUPTED_COMMITTED = 3

# Java exceptions of an interrupted thread, as Spark's StreamExecution.IO_EXCEPTION_NAMES lists them.
_INTERRUPTIONS = ("java.lang.InterruptedException", "java.io.InterruptedIOException",
                  "java.nio.channels.ClosedByInterruptException")


@dataclass(frozen=True)
class Outcome:
    """What an interrupted write left: ``committed`` True (at ``version``), False (nothing), None (unknown:
    ``why``)."""

    batch_id: int | None
    committed: bool | None
    version: int | None = None
    why: str | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_INTERRUPTED_COMMITTED if self.committed else EXIT_INTERRUPTED

    def line(self) -> str:
        """The one line the command prints and the sink logs."""
        batch = f"batch {self.batch_id}" if self.batch_id is not None else "the batch (it has no batch id)"
        if self.committed:
            what = f"of batch {self.batch_id} " if self.batch_id is not None else ""
            return f"upsertsink: interrupted after the commit {what}(version {self.version}): nothing to re-send"
        if self.committed is False:
            again = f"batch {self.batch_id}" if self.batch_id is not None else "the same data"
            return f"upsertsink: interrupted before the commit: nothing was written; sending {again} again is safe"
        return (f"upsertsink: interrupted; whether {batch} was committed could not be read from the table's log "
                f"({self.why}); sending it again is safe (a committed batch id is skipped)")


# ---------------------------------------------------------------- the write in progress, per thread


class _Current(threading.local):
    request: Any = None
    attempts: list[tuple[int, str | None]]
    last: Outcome | None = None

    def __init__(self) -> None:
        self.attempts = []


_current = _Current()


def begin(request: Any) -> None:
    """A write of ``request`` (an ``engines.base.WriteRequest``) starts on this thread (the protocol's entry)."""
    _current.request = request
    _current.attempts = []


def attempting(after: int | None, token: str | None) -> None:
    """The write's next commit goes on top of version ``after`` (None: it creates the table) with write
    token ``token`` in its metadata (the protocol calls this just before each commit)."""
    _current.attempts.append((-1 if after is None else int(after), token))


def forget() -> None:
    """Forget this thread's write and its last outcome (the command line, before its write)."""
    _current.request = None
    _current.attempts = []
    _current.last = None


def started() -> bool:
    """Has a write begun on this thread since :func:`forget`?"""
    return _current.request is not None


def last() -> Outcome | None:
    """The outcome :func:`report` found last on this thread."""
    return _current.last


def outcome() -> Outcome:
    """What the log says about this thread's current write (see the module docstring)."""
    request = _current.request
    batch_id = None if request is None else request.batch_id
    if request is None or not _current.attempts:
        return Outcome(batch_id, False)  # no commit was attempted
    try:
        for after, token in _current.attempts:
            version = _find(request, after, token)
            if version is not None:
                return Outcome(batch_id, True, version)
    except Exception as err:  # noqa: BLE001 - an unreadable log: say so, never guess
        from upsertsink.conflicts import first_line

        return Outcome(batch_id, None, why=f"{type(err).__name__}: {first_line(err)}")
    return Outcome(batch_id, False)


def _find(request: Any, after: int, token: str | None) -> int | None:
    if token is None:
        return None
    if request.catalog is not None:  # Spark-only mode: the history by name
        return request.catalog.latest_and_write(token, after)[1]
    from upsertsink.sidecar.folder import deltalake_uri
    from upsertsink.table import commit_log

    latest = _latest_version(deltalake_uri(request.target), request.storage_options)
    if latest is None or latest <= after:
        return None
    return commit_log.find_write(request.target, token, after, latest, request.storage_options)


def _latest_version(uri: str, storage_options: dict[str, str] | None) -> int | None:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(uri, storage_options=storage_options).version()
    except TableNotFoundError:
        return None


def report() -> Outcome:
    """Find this thread's interrupted write's outcome, log its line (WARNING) and keep it for :func:`last`."""
    found = outcome()
    _current.last = found
    log.warning("%s", found.line())
    return found


# ---------------------------------------------------------------- a streaming query stopped mid-batch


class StreamStoppedError(WriteFailedError):
    """The streaming query running ``foreach_batch`` was stopped while the batch was being written; the
    message says whether the batch was committed (the restarted query sends it again either way)."""


def _interrupted(err: BaseException) -> bool:
    """Does ``err``, or an exception it was raised from, come from an interrupted JVM thread?"""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        try:
            text = str(current)
        except Exception:  # noqa: BLE001 - a JVM exception whose message cannot be fetched any more
            text = ""
        java = getattr(current, "java_exception", None)
        if java is not None:
            try:
                text += " " + str(java.getClass().getName())
            except Exception as gone:  # noqa: BLE001 - the JVM is going away
                log.debug("the class of a Java exception could not be read: %s", gone)
        if any(name in text for name in _INTERRUPTIONS):
            return True
        current = current.__cause__ or current.__context__
    return False


def _query_stopped(df: Any) -> bool | None:
    """Has the streaming query whose batch ``df`` is been stopped (``stop()`` marks it inactive before it
    interrupts its thread)? None when that cannot be told (not a batch of a classic Spark query)."""
    if type(df).__module__.startswith("pyspark.sql.connect") or not hasattr(df, "sparkSession"):
        return None
    try:
        spark = df.sparkSession
        query_id = spark.sparkContext.getLocalProperty("sql.streaming.queryId")
        if not query_id:
            return None
        query = spark.streams.get(query_id)
        return query is None or not query.isActive
    except Exception as err:  # noqa: BLE001 - cannot tell: the error's own text decides
        log.debug("whether the query was stopped could not be read: %s", err)
        return None


def stream_stopped(df: Any, err: BaseException) -> StreamStoppedError | None:
    """For a ``foreach_batch`` write that failed with ``err``: when its query was stopped meanwhile (the JVM
    interrupted the query's thread), the error to raise instead (and the line logged); else None."""
    stopped = _query_stopped(df)
    if not (stopped if stopped is not None else _interrupted(err)):
        return None
    found = report()
    text = found.line().removeprefix("upsertsink: ")
    # the marker Spark's StreamExecution.PROXY_ERROR looks for, kept short (see the module docstring)
    return StreamStoppedError(
        f"the streaming query was stopped while the batch was being written ({text}) "
        f"[py4j.protocol.Py4JJavaError: An error occurred while calling foreachBatch: {_INTERRUPTIONS[0]}]"
    )
