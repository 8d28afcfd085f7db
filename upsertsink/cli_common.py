"""What every ``upsertsink`` subcommand shares: one error style, flag names in messages, progress on stderr.

- Errors: ``upsertsink: error: <one line>`` on stderr and exit status 2 (:func:`fail`), for usage errors
  of the group and its subcommands as much as for errors raised while a command runs (:func:`run`).
- Messages name CLI flags (``--ignore-column``), not Python parameters: :func:`run` executes a command's
  work under :func:`upsertsink.errors.cli_option_names`.
- Progress (:class:`Progress`) is drawn on stderr when stderr is a terminal, whatever stdout is.
- Interrupts: SIGTERM is handled as SIGINT (Ctrl-C); an interrupted command prints one line,
  ``upsertsink: interrupted`` (``write`` says whether its batch was committed: :mod:`upsertsink.interrupts`),
  and exits with 130 (3 for a write interrupted after its commit).
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NoReturn, Self, TypeVar

import click

from upsertsink.errors import UpsertSinkError, cli_option_names

EXIT_ERROR = 2
EXIT_INTERRUPTED = 130  # the same as upsertsink.interrupts.EXIT_INTERRUPTED (not imported: the light start-up)
T = TypeVar("T")


def error_line(exc: BaseException) -> str:
    """One line for an exception: its first line, prefixed with its type unless it is an UpsertSinkError
    (a deliberate message) or a plain ValueError/OSError (bad input, worded by whoever raised it)."""
    lines = str(exc).strip().splitlines()
    message = " ".join(lines[0].split()) if lines else type(exc).__name__
    if not isinstance(exc, (UpsertSinkError, ValueError, OSError)):
        message = f"{type(exc).__name__}: {message}"
    return message


def fail(message: str, code: int = EXIT_ERROR) -> NoReturn:
    """Print ``upsertsink: error: MESSAGE`` (one line) on stderr and exit with ``code`` (2)."""
    text = " ".join(str(message).split())
    click.echo(f"upsertsink: error: {text}", err=True)
    sys.exit(code)


def run(work: Callable[[], T], on_interrupt: Callable[[], tuple[str, int]] | None = None) -> T:
    """Run a command's work with CLI flag names in messages; any error becomes :func:`fail`. An interrupt
    (Ctrl-C, SIGTERM) prints one line and exits: ``on_interrupt()`` gives the line and the exit status, by
    default ``upsertsink: interrupted`` and 130."""
    from upsertsink.session import no_console_progress

    try:
        with cli_option_names(), no_console_progress():
            return work()
    except KeyboardInterrupt:
        line, code = on_interrupt() if on_interrupt is not None else ("upsertsink: interrupted", EXIT_INTERRUPTED)
        click.echo(line, err=True)
        sys.exit(code)
    except (SystemExit, click.exceptions.Exit, click.ClickException):
        raise
    except Exception as exc:  # every failure is one line on stderr and exit code 2
        import logging  # here, not at the top: `upsertsink lint`'s start-up does not pay for it

        logging.getLogger(__name__).debug("command failed", exc_info=True)
        fail(error_line(exc))


# A Rust panic report as the standard library prints it: "thread 'tokio-rt-worker' (14780) panicked at
# src/buffered.rs:369:41:", its message, and a backtrace or a note on how to get one.
_PANIC = re.compile(r"^thread '[^']*'(?: \(\d+\))? panicked at ")
_PANIC_TAIL = re.compile(r"^(\s|stack backtrace:|note: |$)")


def without_panics(text: str) -> tuple[str, list[str]]:
    """``text`` without the Rust panic reports in it, and those reports (one string each)."""
    kept: list[str] = []
    panics: list[str] = []
    lines = text.splitlines(keepends=True)
    i = 0
    while i < len(lines):
        if not _PANIC.match(lines[i]):
            kept.append(lines[i])
            i += 1
            continue
        while kept and not kept[-1].strip():  # the blank line the report starts with
            kept.pop()
        start, i = i, i + 2  # the header and the message's first line
        while i < len(lines) and _PANIC_TAIL.match(lines[i]) and not _PANIC.match(lines[i]):
            i += 1
        panics.append("".join(lines[start:i]).strip())
    return "".join(kept), panics


@contextmanager
def engine_panics_kept_off_the_terminal() -> Iterator[None]:
    """Run the block with the process's native stderr (fd 2) in a temporary file, so that a panic a native
    engine prints there (delta-rs: ``thread 'tokio-rt-worker' panicked at ... Already shut down`` when it
    cannot write a file) does not reach the user's terminal: the command's own one-line error says what went
    wrong. Python's ``sys.stderr`` (messages, progress) keeps writing to the real stderr meanwhile; what native
    code printed other than panics is written there afterwards, and the panics go to the debug log.

    Only for work that starts no other process: a JVM started inside would keep the temporary file as its
    stderr."""
    import tempfile

    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no real stderr (an embedding host): nothing to keep off
        yield
        return
    python_stderr = sys.stderr
    encoding = getattr(python_stderr, "encoding", None) or "utf-8"
    with tempfile.TemporaryFile() as capture, open(os.dup(saved), "w", buffering=1, encoding=encoding,
                                                    errors="backslashreplace") as own:
        os.dup2(capture.fileno(), 2)
        sys.stderr = own
        try:
            yield
        finally:
            own.flush()
            sys.stderr = python_stderr
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            text, panics = without_panics(capture.read().decode("utf-8", "replace"))
            if panics:
                import logging

                for report in panics:
                    logging.getLogger(__name__).debug("a native engine panicked (kept off the terminal): %s", report)
            if text:
                python_stderr.write(text)
                python_stderr.flush()


def require_extras(command: str, spark_flag: str | None = None) -> None:
    """Name the missing extra in one error before a command imports anything heavy: ``[spark]`` (which brings
    the embedded extra) when ``spark_flag`` (``--engine spark``, ``--table``) puts the command on Spark, else
    ``[embedded]`` (the sink, the tables' logs and the Arrow diff)."""
    from upsertsink.errors import require_embedded
    from upsertsink.session import require_spark

    if spark_flag is not None:
        require_spark(f"{command} {spark_flag}")
    require_embedded(command)


def typed_csv_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--schema``, ``--null-value`` and ``--timestamp-format``: how a command reads csv inputs (the command
    takes them as ``csv_schema``, ``null_values`` and ``timestamp_format``; :func:`csv_options` checks them)."""
    options = [
        click.option("--schema", "csv_schema", metavar="DDL",
                     help="Column types of csv inputs as Spark DDL, e.g. \"id long, amount decimal(10,2), ts "
                          "timestamp\" (by header name; other columns keep inferred types)."),
        click.option("--null-value", "null_values", multiple=True, metavar="TEXT",
                     help="Text that means null in csv inputs, besides an empty field (repeat for more).",),
        click.option("--timestamp-format", metavar="FORMAT",
                     help="strptime format of timestamps in csv inputs, e.g. '%d/%m/%Y %H:%M:%S' (default: ISO "
                          "8601; a time without a zone offset is UTC)."),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def csv_options(
    csv_schema: str | None, null_values: Sequence[str], timestamp_format: str | None, several: bool = False
) -> Any:
    """The checked ``typed_csv.CsvOptions`` of :func:`typed_csv_options`' flags (None when none is given); a
    schema or format that cannot be used is a usage error naming its flag. ``several``: for a command with
    several inputs, each csv file types the columns of the schema it has (:func:`require_csv` checks that each
    is in one of them)."""
    if csv_schema is None and not null_values and timestamp_format is None:
        return None
    from upsertsink import typed_csv
    from upsertsink.errors import InvalidInputError

    try:
        schema = typed_csv.parse_schema(csv_schema) if csv_schema is not None else ()
        fmt = typed_csv.check_timestamp_format(timestamp_format) if timestamp_format is not None else None
    except InvalidInputError as err:
        raise click.UsageError(str(err)) from None
    return typed_csv.CsvOptions(schema, tuple(null_values), fmt, partial=several)


def require_csv(options: Any, inputs: Sequence[Any], what: str) -> None:
    """Typed csv options given for inputs none of which is a csv file: say so (they would change nothing); with
    several inputs, a column of the schema that no csv input has is a misspelling: say so too."""
    from upsertsink.errors import InvalidInputError

    if options is None:
        return
    files = [f for src in inputs if getattr(src, "fmt", None) == "csv" for f in src.files]
    if not files:
        raise InvalidInputError(
            f"{options.describe()} says how to read csv files, but {what} (parquet, json and Delta tables carry "
            "their own types); leave these options out"
        )
    if options.partial:
        from upsertsink.typed_csv import check_inputs

        check_inputs(options, files)


def split_columns(values: Sequence[str]) -> list[str]:
    """Column flags as ruff-style lists: ``--key a,b`` and ``--key a --key b`` mean the same."""
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


class ErrorStyleGroup(click.Group):
    """A click group whose usage errors (unknown option, missing argument...) use :func:`fail`'s style."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None, **extra: Any) -> Any:
        standalone = extra.pop("standalone_mode", True)
        try:
            with sigterm_as_interrupt():
                rv = super().main(args, prog_name, standalone_mode=False, **extra)
        except click.exceptions.Abort:  # an interrupt outside a command's work (click's prompt, parsing)
            click.echo("upsertsink: interrupted", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except click.ClickException as exc:
            message = exc.format_message()
            ctx = getattr(exc, "ctx", None)
            if isinstance(exc, click.UsageError) and ctx is not None:
                message = f"{message.rstrip('.')} (see '{ctx.command_path} --help')"
            fail(message, exc.exit_code)
        except OSError as exc:  # e.g. a closed pipe while printing
            if getattr(exc, "errno", None) == 32:
                sys.exit(1)
            raise
        if not standalone:
            return rv
        sys.exit(rv if isinstance(rv, int) else 0)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While the block runs in the main thread, SIGTERM (a scheduler stopping the job, ``kill``) raises
    KeyboardInterrupt as Ctrl-C does, so a command says what it left behind instead of vanishing."""
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous is signal.SIG_IGN:  # started with SIGTERM ignored: keep it so
        yield
        return
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


class SparkStop:
    """What :func:`spark_interrupts` saw: ``requested`` after the first signal, ``jvm_stopped`` after the
    second (the JVM was stopped to end the write at once)."""

    requested = False
    jvm_stopped = False


def _cancel_spark_jobs(spark: Any) -> None:
    try:
        if hasattr(spark, "sparkContext") and not _is_connect(spark):
            spark.sparkContext.cancelAllJobs()
        else:  # Spark Connect: this client's operations
            spark.interruptAll()
    except Exception:  # the write ends by itself then; only slower
        import logging

        logging.getLogger(__name__).debug("cancelling Spark's jobs failed", exc_info=True)


def _is_connect(spark: Any) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


def _stop_jvm() -> bool:
    """Stop this process's own JVM (pyspark's gateway process) and wait for it: no commit of it can land
    after that. False when there is none to stop (a Spark Connect server elsewhere)."""
    try:
        from pyspark import SparkContext

        proc = getattr(SparkContext._gateway, "proc", None)
        if proc is None:
            return False
        proc.kill()
        proc.wait(timeout=30)
        return True
    except Exception:  # noqa: BLE001 - best effort: the log is read either way
        return False


@contextmanager
def spark_interrupts(spark: Any) -> Iterator[SparkStop]:
    """While a write runs on Spark in this process's main thread: the first SIGINT or SIGTERM cancels Spark's
    jobs (from a thread of its own: the main thread's connection to the JVM is busy with the write's call) and
    lets that call end, so that what the write committed is settled when it returns; a second one stops the
    JVM and interrupts at once (the log is then read with no JVM left to commit). pyspark's own handler
    would raise in the middle of the call, leaving a commit in flight behind the report."""
    import signal

    state = SparkStop()
    if threading.current_thread() is not threading.main_thread():
        yield state
        return

    def handler(signum: int, frame: Any) -> None:
        if state.requested:
            state.jvm_stopped = _stop_jvm()
            raise KeyboardInterrupt
        state.requested = True
        from upsertsink import faults

        faults.interrupt_at_next_point()  # the write stops at its next step, between two Spark calls
        threading.Thread(target=_cancel_spark_jobs, args=(spark,), daemon=True).start()  # or its job fails

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig, before in previous.items():
        if before is not signal.SIG_IGN:
            signal.signal(sig, handler)
    try:
        yield state
    finally:
        for sig, before in previous.items():
            signal.signal(sig, before)
        from upsertsink import faults

        faults.interrupt_at_next_point(False)


class Progress:
    """A rich spinner on stderr that appears only when stderr is a terminal and the work takes longer than
    ``delay`` seconds; calling it with a message updates the text."""

    def __init__(self, delay: float = 1.0, enabled: bool | None = None) -> None:
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.delay = delay
        self.message = "working"
        self._status: Any = None
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()

    def __enter__(self) -> Self:
        if self.enabled:
            self._timer = threading.Timer(self.delay, self._start)
            self._timer.daemon = True
            self._timer.start()
        return self

    def _start(self) -> None:
        try:
            from rich.console import Console
        except ImportError:  # no rich (the light install): no spinner
            return

        with self._lock:
            if self._timer is None:
                return
            self._status = Console(stderr=True).status(self.message)
            self._status.start()

    def __call__(self, message: str) -> None:
        with self._lock:
            self.message = message
            if self._status is not None:
                self._status.update(message)

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._status is not None:
                self._status.stop()
                self._status = None


# ---------------------------------------------------------------------------- tables named in Spark's catalog

#: Where the docs say how a command run on its own (a new process, a new Spark session) finds the tables of
#: a persistent metastore.
_METASTORE_DOCS = "docs/cli.md, 'Tables by name'"


def split_table_version(text: str, flag: str = "--table") -> tuple[str, int | None]:
    """``NAME`` -> ``(NAME, None)``; ``NAME@N`` -> ``(NAME, N)``, the table at version N. NAME is ``table``,
    ``schema.table`` or ``catalog.schema.table`` (a back-quoted part may hold an ``@`` of its own)."""
    from upsertsink.errors import InvalidInputError
    from upsertsink.table import catalog

    text = text.strip()
    try:
        return catalog.check_name(text), None
    except InvalidInputError:
        name, sep, version = text.rpartition("@")
        if not sep:
            raise
    if not version.isdigit():
        raise InvalidInputError(f"{flag} {text!r}: the version after '@' must be a number, e.g. {name}@3")
    return catalog.check_name(name), int(version)


def catalog_session(feature: str, master: str = "local[*]") -> Any:
    """The Spark session that finds tables by name: the active one of this process (classic, or Spark
    Connect: e.g. a test's session, whose catalog may live in memory), else ``current_or_new_session``."""
    from upsertsink.session import current_or_new_session, require_spark
    from upsertsink.table.catalog import find_active_session

    require_spark(feature)
    active = find_active_session()
    return active if active is not None else current_or_new_session("upsertsink-cli", master, feature)


def table_location(spark: Any, name: str, version: int | None = None, reads_files: str | None = None) -> str:
    """Where the Delta table ``name`` lives (``LOCATION@N`` with a version), as the path-based commands
    take it; a table the catalog does not know is an InvalidInputError naming it. ``reads_files`` (the
    command, for one that reads the table's files): a location this process cannot read is an
    InvalidInputError naming the table (not the engine's raw error)."""
    from upsertsink.errors import InvalidInputError
    from upsertsink.table import catalog

    found = catalog.location(spark, name)
    if found is not None and reads_files is not None:
        from upsertsink.table.named import files_readable

        readable, why = files_readable(found, None)
        if not readable:
            raise InvalidInputError(
                f"table {name}: {reads_files} reads the table's files at {found}, which this process cannot read "
                f"({why}). Only `write --table` and `status --table` work through Spark on the name alone "
                "(Spark-only mode, docs/user-guide.md \"Spark Connect and catalogs\"); run this command where the "
                "files can be read"
            )
    if found is None:
        raise _not_in_catalog(spark, name)
    return found if version is None else f"{found}@{version}"


def _not_in_catalog(spark: Any, name: str) -> Exception:
    from upsertsink.errors import InvalidInputError

    hint = ""
    try:
        in_memory = spark.conf.get("spark.sql.catalogImplementation", "in-memory") == "in-memory"
    except Exception:  # noqa: BLE001 - only a hint: a session that cannot say has none
        in_memory = False
    if in_memory:
        hint = (
            f" (this Spark session's catalog is in memory and empty in a new process: point the session "
            f"at your metastore, see {_METASTORE_DOCS})"
        )
    return InvalidInputError(f"table {name} does not exist in Spark's catalog{hint}")


def table_frame(spark: Any, name: str, version: int | None = None) -> Any:
    """The Delta table ``name`` (at ``version``) as a Spark DataFrame read on its name alone: no access to its
    files from this process (Spark-only mode works). A table the catalog does not know, or a version it does
    not have, is an InvalidInputError naming the table."""
    from upsertsink.table import catalog
    from upsertsink.table.named import named_errors

    if catalog.location(spark, name) is None:
        raise _not_in_catalog(spark, name)
    reader = spark.read if version is None else spark.read.option("versionAsOf", int(version))
    with named_errors(name, "reading" if version is None else f"reading version {version} of"):
        return reader.table(name)


def locate_table(text: str, feature: str, flag: str = "--table", master: str = "local[*]") -> str:
    """``NAME`` or ``NAME@N`` given to ``flag`` as the table's location (``LOCATION@N``)."""
    name, version = split_table_version(text, flag)
    return table_location(catalog_session(feature, master), name, version)
