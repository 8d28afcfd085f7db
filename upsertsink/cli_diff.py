"""`upsertsink diff` and `upsertsink replay-check`: exit 0 equal, 1 different, 2 error."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, NoReturn, Self

import click

EXIT_EQUAL, EXIT_DIFFERENT, EXIT_ERROR = 0, 1, 2


class _Progress:
    """A rich spinner on stderr that appears only if the work takes longer than ``delay`` seconds, and
    only when stderr is a terminal; calling it updates the message."""

    def __init__(self, enabled: bool, delay: float = 1.0) -> None:
        self.enabled, self.delay = enabled, delay
        self.message = "comparing"
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
        from rich.console import Console

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


def _fail(exc: BaseException) -> NoReturn:
    lines = str(exc).strip().splitlines()
    message = lines[0] if lines else type(exc).__name__
    from upsertsink.errors import UpsertSinkError

    if not isinstance(exc, UpsertSinkError):
        message = f"{type(exc).__name__}: {message}"
    click.echo(f"error: {message}", err=True)
    sys.exit(EXIT_ERROR)


def _run(work: Callable[[Callable[[str], None]], Any]) -> Any:
    """Run ``work(progress)``; any exception becomes a one-line error on stderr and exit code 2."""
    try:
        with _Progress(sys.stderr.isatty()) as progress:
            return work(progress)
    except (KeyboardInterrupt, SystemExit):
        raise
    except Exception as exc:  # noqa: BLE001 - every failure is one line on stderr and exit code 2
        _fail(exc)


def _cell(value: Any) -> str:
    from rich.markup import escape

    return (
        "[dim]null[/dim]" if value is None else escape(repr(value) if isinstance(value, str) else str(value))
    )


def _print_text(result: Any, limit: int) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 200, highlight=False)
    console.print(f"left:  {result.left_label} ({result.rows_left} rows)", markup=False)
    console.print(f"right: {result.right_label} ({result.rows_right} rows)", markup=False)
    console.print(result.summary(), markup=False, style="green" if result.equal else "bold red")
    if result.equal or limit == 0:
        return
    samples = result.samples(limit)
    table = Table(show_lines=False, header_style="bold")
    for k in result.keys:
        table.add_column(k, style="cyan")
    table.add_column("status")
    for c in result.columns:
        table.add_column(c)
    for rec in samples.to_dict(orient="records"):
        status = rec["status"]
        cells = [_cell(rec[k]) for k in result.keys]
        if status == "duplicate_key":
            cells.append(
                f"[magenta]duplicate key[/magenta] ({rec['count_left']} left, {rec['count_right']} right)"
            )
            cells += ["" for _ in result.columns]
        elif status == "changed":
            cells.append("[yellow]changed[/yellow]")
            for c in result.columns:
                left, right = rec[f"left_{c}"], rec[f"right_{c}"]
                if c in rec["differs"]:
                    cells.append(f"[red]{_cell(left)}[/red] -> [green]{_cell(right)}[/green]")
                else:
                    cells.append(f"[dim]{_cell(left)}[/dim]")
        else:
            side = "left" if status == "only_in_left" else "right"
            cells.append(f"[blue]only in {side}[/blue]")
            cells += [_cell(rec[f"{side}_{c}"]) for c in result.columns]
        table.add_row(*cells)
    console.print(table)
    console.print(
        f"showing {len(samples)} of {result.differences} differing keys, in key order", markup=False
    )


@click.command("diff")
@click.argument("left")
@click.argument("right")
@click.option(
    "--key", "-k", "keys", multiple=True, required=True, help="Key column (repeat for a compound key)."
)
@click.option("--ignore-column", "ignore", multiple=True, help="A column to leave out of the comparison.")
@click.option("--column", "columns", multiple=True, help="Compare only these columns (and the keys).")
@click.option("--tolerance", type=float, default=None, help="Absolute tolerance for float/decimal columns.")
@click.option(
    "--engine",
    type=click.Choice(["auto", "spark", "embedded"]),
    default="auto",
    show_default=True,
    help="Where to compare: Spark, or the embedded engine (no JVM) used by auto for small tables.",
)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--limit", type=click.IntRange(min=0), default=10, show_default=True, help="Sample rows shown.")
def diff_command(
    left: str,
    right: str,
    keys: tuple[str, ...],
    ignore: tuple[str, ...],
    columns: tuple[str, ...],
    tolerance: float | None,
    engine: str,
    fmt: str,
    limit: int,
) -> None:
    """Compare two Delta tables (or versions, PATH@N) row by row by key.

    Exit status: 0 equal, 1 different, 2 error.
    """

    def work(progress: Callable[[str], None]) -> Any:
        from upsertsink.keyed_diff import diff

        result = diff(
            left,
            right,
            list(keys),
            columns=list(columns) or None,
            ignore_columns=list(ignore) or None,
            tolerance=tolerance,
            engine=engine,
            sample_size=max(limit, 1),
            progress=progress,
        )
        return result, (result.to_json(limit) if fmt == "json" else None)

    result, text = _run(work)
    if fmt == "json":
        click.echo(text)
    else:
        _print_text(result, limit)
    sys.exit(EXIT_EQUAL if result.equal else EXIT_DIFFERENT)


def _parse_inputs(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name.isidentifier() or not path:
            raise click.BadParameter(
                f"{value!r} must be NAME=PATH with NAME a Python identifier", param_hint="--input"
            )
        if name in out:
            raise click.BadParameter(f"input {name!r} is given twice", param_hint="--input")
        out[name] = path
    return out


@click.command("replay-check")
@click.argument("target", metavar="MODULE:FUNCTION")
@click.option("--key", "-k", "keys", multiple=True, required=True, help="Key column of the job's output.")
@click.option(
    "--input", "inputs", multiple=True, metavar="NAME=PATH", help="A named input (Delta, parquet, csv, json)."
)
@click.option(
    "--runs", type=click.IntRange(min=2), default=2, show_default=True, help="How many times to run."
)
@click.option("--tolerance", type=float, default=None, help="Absolute tolerance for float/decimal columns.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--limit", type=click.IntRange(min=0), default=10, show_default=True, help="Sample rows shown.")
@click.option("--master", default="local[*]", show_default=True, help="Spark master of the local session.")
def replay_check_command(
    target: str,
    keys: tuple[str, ...],
    inputs: tuple[str, ...],
    runs: int,
    tolerance: float | None,
    fmt: str,
    limit: int,
    master: str,
) -> None:
    """Run a job several times on the same inputs, varying partitioning and row order, and diff by key.

    The job is FUNCTION(spark, **inputs) -> DataFrame. Exit status: 0 all runs equal, 1 different, 2 error.
    """
    named = _parse_inputs(inputs)

    def work(progress: Callable[[str], None]) -> Any:
        from upsertsink.replay import load_job, read_input, replay_check

        job = load_job(target)
        progress("starting Spark")
        from pyspark.sql import SparkSession

        from upsertsink.session import spark_session

        spark = SparkSession.getActiveSession() or spark_session("upsertsink-replay-check", master)
        frames = {name: read_input(spark, path) for name, path in named.items()}
        result = replay_check(
            job, spark, list(keys), kwargs=frames, runs=runs, progress=progress, tolerance=tolerance
        )
        if fmt == "json":
            import json

            return result, json.dumps(result.to_dict(limit), allow_nan=False)
        return result, result.format_text(limit)

    result, text = _run(work)
    click.echo(text)
    sys.exit(EXIT_EQUAL if result.equal else EXIT_DIFFERENT)
