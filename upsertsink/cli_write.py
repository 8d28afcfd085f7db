"""`upsertsink write` and `upsertsink status`."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import click

from upsertsink.errors import UpsertSinkError

FORMATS = {".parquet": "parquet", ".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json"}


def _fail(command: str, message: str) -> None:
    click.echo(f"upsertsink {command}: error: {' '.join(str(message).split())}", err=True)
    sys.exit(2)


def source_format(source: Path) -> tuple[str, list[Path]]:
    """The format of a file, or of the data files in a folder (all of one format), and those files."""
    if not source.exists():
        raise FileNotFoundError(f"source {source} does not exist")
    files = [source] if source.is_file() else sorted(
        p for p in source.rglob("*") if p.is_file() and not p.name.startswith((".", "_"))
    )
    kinds = {FORMATS.get(p.suffix.lower()) for p in files}
    if not files or None in kinds or len(kinds) != 1:
        names = sorted({p.suffix or p.name for p in files})[:5]
        raise ValueError(
            f"source {source} must be a parquet, csv or json file, or a folder of one of those (found {names})"
        )
    return kinds.pop(), files


def read_embedded(source: Path) -> Any:
    import pyarrow as pa
    import pyarrow.csv as pacsv
    import pyarrow.json as pajson
    import pyarrow.parquet as pq

    fmt, files = source_format(source)
    if fmt == "parquet":
        tables = [pq.read_table(p) for p in files]
    elif fmt == "csv":
        tables = [pacsv.read_csv(p) for p in files]
    else:
        tables = [pajson.read_json(p) for p in files]
    return pa.concat_tables(tables, promote_options="permissive")


def read_spark(source: Path) -> Any:
    from upsertsink.session import spark_session

    fmt, _ = source_format(source)
    reader = spark_session("upsertsink-cli").read.format(fmt)
    if fmt == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    return reader.load(str(source))


@click.command("write")
@click.argument("source", type=click.Path(path_type=Path))
@click.option("--target", required=True, help="Delta table path or URI (created on the first write).")
@click.option("--key", "keys", multiple=True, required=True, help="Merge key column (repeat for several).")
@click.option("--sequence-by", help="A row replaces the stored row only if this column is greater.")
@click.option("--delete-when", help="SQL predicate over the source row that marks a delete, e.g. \"op = 'D'\".")
@click.option("--batch-id", type=click.IntRange(min=0), help="Batch id recorded with the commit; replays skip.")
@click.option("--app-id", help="Writer identity for batch markers (default: derived from the target).")
@click.option("--engine", type=click.Choice(["spark", "embedded"]), default="embedded", show_default=True,
              help="embedded: deltalake, no JVM; spark: delta-spark on a local SparkSession.")
@click.option("--schema-evolution", is_flag=True, help="Add new source columns to the table.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
def write(source: Path, target: str, keys: tuple[str, ...], sequence_by: str | None, delete_when: str | None,
          batch_id: int | None, app_id: str | None, engine: str, schema_evolution: bool, as_json: bool) -> None:
    """Upsert SOURCE (a parquet, csv or json file or folder) into the Delta table at --target."""
    from upsertsink.sink import UpsertSink

    try:
        sink = UpsertSink(target, list(keys), sequence_by=sequence_by, delete_when=delete_when, app_id=app_id,
                          schema_evolution=schema_evolution)
        data = read_spark(source) if engine == "spark" else read_embedded(source)
        result = sink.write(data, batch_id=batch_id)
    except (UpsertSinkError, ValueError, FileNotFoundError, OSError) as err:
        _fail("write", str(err))
        return
    if as_json:
        click.echo(json.dumps({"target": target, **dataclasses.asdict(result)}))
    elif result.skipped:
        click.echo(f"batch {result.batch_id} already committed for {result.app_id}: skipped "
                   f"(table {target} stays at version {result.version})")
    else:
        click.echo(f"batch {result.batch_id} -> {target} version {result.version}: {result.inserted} inserted, "
                   f"{result.updated} updated, {result.deleted} deleted")


@click.command("status")
@click.argument("path")
@click.option("--limit", default=10, show_default=True, help="How many recent commits to show.")
@click.option("--json", "as_json", is_flag=True, help="Print the status as one JSON object.")
def status(path: str, limit: int, as_json: bool) -> None:
    """Show a table's version, the last batch id per app id, and recent commits with their counts."""
    from upsertsink import markers

    if not markers.table_exists(path):
        _fail("status", f"{path} is not a Delta table")
    info = markers.status(path, limit=limit)
    if as_json:
        click.echo(json.dumps(info, default=str))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    console.print(f"[bold]{path}[/bold]  version {info['version']}")
    if info["batches"]:
        for app, last in info["batches"].items():
            console.print(f"  app {app}: last batch id {last}")
    else:
        console.print("  no batch markers written by upsertsink")
    table = Table("version", "operation", "app id", "batch", "inserted", "updated", "deleted", box=None)
    for c in info["commits"]:
        table.add_row(*[("" if c[k] is None else str(c[k])) for k in
                        ("version", "operation", "app_id", "batch_id", "inserted", "updated", "deleted")])
    console.print(table)
