"""`upsertsink diff` and `upsertsink replay-check`: exit 0 equal, 1 different, 2 error."""

from __future__ import annotations

import sys
from typing import Any

import click

from upsertsink.cli_common import Progress, run, split_columns

EXIT_EQUAL, EXIT_DIFFERENT = 0, 1

_COLOURS = {
    "equal": {"fg": "green"},
    "different": {"fg": "red", "bold": True},
    "changed": {"fg": "yellow"},
    "only_in_left": {"fg": "blue"},
    "only_in_right": {"fg": "blue"},
    "duplicate_key": {"fg": "magenta"},
    "left": {"fg": "red"},
    "right": {"fg": "green"},
}


def _styler() -> Any:
    """Colours for the report when stdout is a terminal (and NO_COLOR is unset); plain text otherwise."""
    import os

    if not sys.stdout.isatty() or os.environ.get("NO_COLOR"):
        return None
    return lambda text, role: click.style(text, **_COLOURS.get(role, {}))


@click.command("diff")
@click.argument("left")
@click.argument("right")
@click.option(
    "--key", "-k", "keys", multiple=True, required=True,
    help="Key column (repeat, or separate with commas, for a compound key: --key a,b).",
)
@click.option("--ignore-column", "ignore", multiple=True,
              help="A column to leave out of the comparison (repeat, or separate with commas).")
@click.option("--column", "columns", multiple=True,
              help="Compare only these columns and the keys (repeat, or separate with commas).")
@click.option("--tolerance", type=float, default=None, help="Absolute tolerance for float/decimal columns.")
@click.option(
    "--engine",
    type=click.Choice(["auto", "spark", "embedded"]),
    default="auto",
    show_default=True,
    help="Where to compare: Spark, or the embedded engine (Arrow, no JVM) used by auto for small inputs.",
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
    """Compare two tables row by row by key.

    LEFT and RIGHT are Delta tables (PATH@N for version N), or parquet, csv or json files or folders.
    Exit status: 0 equal, 1 different, 2 error.
    """

    def work() -> tuple[Any, str]:
        from upsertsink.diffing import diff, render

        with Progress() as progress:
            result = diff(
                left,
                right,
                split_columns(keys),
                columns=split_columns(columns) or None,
                ignore_columns=split_columns(ignore) or None,
                tolerance=tolerance,
                engine=engine,
                sample_size=max(limit, 1),
                progress=progress,
            )
            text = result.to_json(limit) if fmt == "json" else render(result, limit, _styler())
        return result, text

    result, text = run(work)
    click.echo(text)
    sys.exit(EXIT_EQUAL if result.equal else EXIT_DIFFERENT)


def _parse_inputs(values: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name.isidentifier() or not path:
            raise click.BadParameter(
                f"{value!r} must be NAME=PATH with NAME a Python identifier", param_hint="'--input'"
            )
        if name in out:
            raise click.BadParameter(f"input {name!r} is given twice", param_hint="'--input'")
        out[name] = path
    return out


@click.command("replay-check")
@click.argument("target", metavar="MODULE:FUNCTION")
@click.option("--key", "-k", "keys", multiple=True, required=True,
              help="Key column of the job's output (repeat, or separate with commas).")
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

    def work() -> tuple[Any, str]:
        from upsertsink.replay import load_job, read_input, replay_check
        from upsertsink.session import current_or_new_session, require_spark

        require_spark("upsertsink replay-check")
        job = load_job(target)
        with Progress() as progress:
            progress("starting Spark")
            spark = current_or_new_session("upsertsink-replay-check", master, "upsertsink replay-check")
            frames = {name: read_input(spark, path, f"input {name!r}") for name, path in named.items()}
            result = replay_check(
                job, spark, split_columns(keys), kwargs=frames, runs=runs, progress=progress, tolerance=tolerance
            )
            if fmt == "json":
                import json

                return result, json.dumps(result.to_dict(limit), allow_nan=False)
            return result, result.format_text(limit, _styler())

    result, text = run(work)
    click.echo(text)
    sys.exit(EXIT_EQUAL if result.equal else EXIT_DIFFERENT)
