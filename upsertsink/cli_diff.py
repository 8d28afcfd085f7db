"""`upsertsink diff` and `upsertsink replay-check`: exit 0 equal, 1 different, 2 error."""

from __future__ import annotations

import sys
from typing import Any

import click

from upsertsink.cli_common import (
    Progress,
    csv_options,
    require_csv,
    require_extras,
    run,
    split_columns,
    typed_csv_options,
)

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


def _output_format(fmt: str, as_json: bool) -> str:
    """``--json`` (as on every command that prints JSON) is ``--format json``; with ``--format text`` it is a
    usage error."""
    if not as_json:
        return fmt
    source = click.get_current_context().get_parameter_source("fmt")
    if fmt != "json" and source != click.core.ParameterSource.DEFAULT:
        raise click.UsageError("--json and --format text contradict each other: give one of them")
    return "json"


def _sides(paths: list[str], tables: tuple[str, ...]) -> list[tuple[str, str]]:
    """LEFT and RIGHT as ``(kind, text)``, kind ``path`` or ``table``: the PATH arguments first, then the
    ``--table`` names, each in the order given; exactly two in all (else a usage error)."""
    sides = [("path", p) for p in paths] + [("table", t) for t in tables]
    if len(sides) != 2:
        raise click.UsageError(
            f"diff compares two inputs, got {len(sides)}: give LEFT and RIGHT as paths, or name a catalog table "
            "with --table NAME for either (--table a --table b; PATH --table b)"
        )
    return sides


def _side_argument(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """LEFT and RIGHT are required unless --table names a side (the count is checked by :func:`_sides`)."""
    if value is None and not ctx.params.get("tables"):
        raise click.MissingParameter(ctx=ctx, param=param, param_hint=f"'{str(param.name).upper()}'")
    return value


@click.command("diff")
# --table is declared before LEFT and RIGHT: their callbacks see it (click processes parameters missing from
# the command line in declaration order)
@click.option("--table", "tables", multiple=True, metavar="NAME[@N]",
              help="A Delta table named in Spark's catalog as LEFT or RIGHT (NAME@N: version N); repeat for both. "
                   "Path arguments come first: PATH --table b compares PATH with b.")
@click.argument("left", required=False, callback=_side_argument)
@click.argument("right", required=False, callback=_side_argument)
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
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object (--format json).")
@click.option("--limit", type=click.IntRange(min=0), default=10, show_default=True, help="Sample rows shown.")
@typed_csv_options
def diff_command(
    tables: tuple[str, ...],
    left: str | None,
    right: str | None,
    keys: tuple[str, ...],
    ignore: tuple[str, ...],
    columns: tuple[str, ...],
    tolerance: float | None,
    engine: str,
    fmt: str,
    as_json: bool,
    limit: int,
    csv_schema: str | None,
    null_values: tuple[str, ...],
    timestamp_format: str | None,
) -> None:
    """Compare two tables row by row by key.

    LEFT and RIGHT are Delta tables (PATH@N for version N), or parquet, csv or json files or folders; --table
    NAME (NAME@N) names a Delta table in Spark's catalog instead, for the side(s) no path was given for. csv
    inputs are typed with --schema, --null-value and --timestamp-format. Exit status: 0 equal, 1 different,
    2 error.
    """
    fmt = _output_format(fmt, as_json)
    csv = csv_options(csv_schema, null_values, timestamp_format, several=True)
    sides = _sides([p for p in (left, right) if p is not None], tables)

    def work() -> tuple[Any, str]:
        on_spark = "--table" if tables else "--engine spark" if engine == "spark" else None
        require_extras("upsertsink diff", on_spark)
        from upsertsink.diffing import diff, render

        with Progress() as progress:
            inputs: list[Any] = [text for _, text in sides]
            if tables:
                from upsertsink.cli_common import catalog_session, split_table_version, table_location

                progress("finding the tables in Spark's catalog")
                spark = catalog_session("upsertsink diff --table")
                for i, (kind, text) in enumerate(sides):
                    if kind == "table":
                        inputs[i] = table_location(spark, *split_table_version(text), reads_files="diff --table")
            if csv is not None:  # csv inputs read with the typed options (others carry their own types)
                from upsertsink import io

                inputs = [io.resolve_path(text, side, csv) for text, side in zip(inputs, ("left", "right"))]
                require_csv(csv, inputs, "neither LEFT nor RIGHT is a csv file")
            result = diff(
                inputs[0],
                inputs[1],
                split_columns(keys),
                columns=split_columns(columns) or None,
                ignore_columns=split_columns(ignore) or None,
                tolerance=tolerance,
                engine=engine,
                sample_size=max(limit, 1),
                progress=progress,
            )
            for (kind, spec), side in zip(sides, ("left", "right")):
                if kind == "table":
                    setattr(result, f"{side}_label", f"table {spec}")
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


def _parse_tables(values: tuple[str, ...], taken: dict[str, str]) -> dict[str, str]:
    """``--table INPUT=NAME[@N]`` (or ``--table NAME[@N]``: the input is named after the table's last part)
    as ``{input: NAME[@N]}``; an input name given twice (here or by --input) is a usage error."""
    from upsertsink.cli_common import split_table_version
    from upsertsink.errors import InvalidInputError

    out: dict[str, str] = {}
    for value in values:
        head, sep, rest = value.partition("=")
        given = bool(sep) and head.isidentifier()  # INPUT=NAME (a back-quoted table name may hold an '=')
        spec = rest if given else value
        try:
            name, _ = split_table_version(spec)
        except InvalidInputError as exc:
            raise click.BadParameter(str(exc), param_hint="'--table'") from None
        input_name = head if given else name.rsplit(".", 1)[-1].strip("`")
        if not input_name.isidentifier():
            raise click.BadParameter(
                f"{value!r}: name the input, INPUT=NAME with INPUT a Python identifier", param_hint="'--table'"
            )
        if input_name in out or input_name in taken:
            raise click.BadParameter(f"input {input_name!r} is given twice", param_hint="'--table'")
        out[input_name] = spec
    return out


@click.command("replay-check")
@click.argument("target", metavar="MODULE:FUNCTION")
@click.option("--key", "-k", "keys", multiple=True, required=True,
              help="Key column of the job's output (repeat, or separate with commas).")
@click.option(
    "--input", "inputs", multiple=True, metavar="NAME=PATH", help="A named input (Delta, parquet, csv, json)."
)
@click.option(
    "--table", "tables", multiple=True, metavar="[INPUT=]NAME[@N]",
    help="A named input read from the Delta table NAME in Spark's catalog (NAME@N: version N); without INPUT= "
         "the input is named after the table's last part (--table sales.orders: orders).",
)
@click.option(
    "--runs", type=click.IntRange(min=2), default=2, show_default=True, help="How many times to run."
)
@click.option("--tolerance", type=float, default=None, help="Absolute tolerance for float/decimal columns.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object (--format json).")
@click.option("--limit", type=click.IntRange(min=0), default=10, show_default=True, help="Sample rows shown.")
@click.option("--master", default="local[*]", show_default=True, help="Spark master of the local session.")
@typed_csv_options
def replay_check_command(
    target: str,
    keys: tuple[str, ...],
    inputs: tuple[str, ...],
    tables: tuple[str, ...],
    runs: int,
    tolerance: float | None,
    fmt: str,
    as_json: bool,
    limit: int,
    master: str,
    csv_schema: str | None,
    null_values: tuple[str, ...],
    timestamp_format: str | None,
) -> None:
    """Run a job several times on the same inputs, varying partitioning and row order, and diff by key.

    The job is FUNCTION(spark, **inputs) -> DataFrame; inputs are files and tables by path (--input) or
    Delta tables named in Spark's catalog (--table). csv inputs are typed with --schema, --null-value and
    --timestamp-format. Exit status: 0 all runs equal, 1 different, 2 error.
    """
    fmt = _output_format(fmt, as_json)
    csv = csv_options(csv_schema, null_values, timestamp_format, several=True)
    named = _parse_inputs(inputs)
    named_tables = _parse_tables(tables, named)

    def work() -> tuple[Any, str]:
        from upsertsink.errors import require_embedded
        from upsertsink.session import current_or_new_session, require_spark

        require_spark("upsertsink replay-check")
        require_embedded("upsertsink replay-check")  # the spark extra brings it
        from upsertsink import io
        from upsertsink.replay import load_job, replay_check

        job = load_job(target)
        sources = {name: io.resolve_path(path, f"input {name!r}", csv) for name, path in named.items()}
        require_csv(csv, list(sources.values()), "no --input is a csv file")
        with Progress() as progress:
            progress("starting Spark")
            spark = current_or_new_session("upsertsink-replay-check", master, "upsertsink replay-check")
            frames = {name: io.read_spark(spark, src) for name, src in sources.items()}
            if named_tables:
                from upsertsink.cli_common import split_table_version, table_frame

                # read through Spark on the name alone: the tables' files need not be readable from here
                progress("finding the tables in Spark's catalog")
                frames.update({name: table_frame(spark, *split_table_version(spec))
                               for name, spec in named_tables.items()})  # fmt: skip
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
