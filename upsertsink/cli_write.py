"""`upsertsink write` and `upsertsink status`."""

from __future__ import annotations

import dataclasses
import datetime
import json
import os
import sys
from typing import Any

import click

from upsertsink.cli_common import csv_options, fail, require_extras, run, split_columns, typed_csv_options


def _table_location(target: str) -> str:
    """A local target as an absolute path (Spark takes a relative ``delta.`t``` for a table name); URIs as
    given."""
    from upsertsink.io import is_uri

    return target if is_uri(target) else os.path.abspath(target)


def merge_engine_options(
    name: str, aggregates: tuple[str, ...], groups: tuple[str, ...]
) -> dict[str, Any]:
    """The sink's merge-engine options from ``--merge-engine``, ``--aggregate COL=FN`` and
    ``--sequence-group SEQ=COL,COL`` (the sink checks what they say)."""

    def pairs(values: tuple[str, ...], flag: str) -> list[tuple[str, str]]:
        out = []
        for value in values:
            left, sep, right = value.partition("=")
            if not sep or not left.strip() or not right.strip():
                raise click.BadParameter(f"{value!r} is not NAME=VALUE", param_hint=flag)
            out.append((left.strip(), right.strip()))
        return out

    options: dict[str, Any] = {"merge_engine": name}
    if aggregates:
        options["aggregates"] = dict(pairs(aggregates, "--aggregate"))
    if groups:
        options["sequence_groups"] = {seq: split_columns([cols]) for seq, cols in pairs(groups, "--sequence-group")}
    return options


@click.command("write")
@click.argument("source", metavar="SOURCE")
@click.option("--target", metavar="PATH", help="Delta table path or URI (created on the first write).")
@click.option("--table", "table_name", metavar="NAME",
              help="Instead of --target: a Delta table named in Spark's catalog (table, schema.table or "
                   "catalog.schema.table; created under that name on the first write). Implies --engine spark.")
@click.option("--key", "keys", multiple=True, required=True,
              help="Merge key column (repeat, or separate with commas: --key a,b).")
@click.option("--sequence-by", help="A row replaces the stored row only if this column is greater.")
@click.option("--delete-when",
              help="SQL predicate over the source row that marks a delete, e.g. \"op = 'D'\".")
@click.option("--batch-id", type=click.IntRange(min=0),
              help="Batch id recorded with the commit; replays skip.")
@click.option("--app-id", help="Writer identity for batch markers (default: derived from --target; "
                                "upsertsink:NAME with --table).")
@click.option("--engine", type=click.Choice(["spark", "embedded"]), default="embedded", show_default=True,
              help="embedded: deltalake, no JVM; spark: delta-spark on a local SparkSession (always with "
                   "--table).")
@click.option("--schema-evolution", is_flag=True, help="Add new source columns to the table.")
@click.option("--late-batches", type=click.Choice(["refuse", "apply"]), default="refuse", show_default=True,
              help="A --batch-id below the app's marker that was never committed: refuse it (exit 2), or "
                   "apply it under the --sequence-by rules (a backfill).")
@click.option("--scd-type", type=click.IntRange(1, 2), default=1, show_default=True,
              help="2: a history table (one row per version of a key, with __START_AT and __END_AT); needs "
                   "--sequence-by.")
@click.option("--track-history", "track_history", multiple=True,
              help="With --scd-type 2: only these columns open a new version when they change (repeat, or "
                   "separate with commas).")
@click.option("--track-history-except", "track_history_except", multiple=True,
              help="With --scd-type 2: every column but these opens a new version when it changes.")
@click.option("--ignore-null-updates", is_flag=True, help="A null in an update keeps the stored value.")
@click.option("--merge-engine", type=click.Choice(["upsert", "first_row", "partial_update", "aggregate"]),
              default="upsert", show_default=True,
              help="How a row combines with the stored row of its key: upsert (the newest wins), first_row (the "
                   "first wins), partial_update (a null never overwrites), aggregate (see --aggregate).")
@click.option("--aggregate", "aggregate_options", multiple=True, metavar="COL=FN",
              help="With --merge-engine aggregate: COL's function (sum, count, min, max, first, last, bool_and, "
                   "bool_or); repeat for each column. Other columns: last.")
@click.option("--sequence-group", "sequence_group_options", multiple=True, metavar="SEQ=COL,COL",
              help="With --merge-engine partial_update: columns updated only when SEQ grows; repeat per group.")
@typed_csv_options
@click.option("--restate", is_flag=True,
              help="SOURCE is the corrected content of --batch-id, committed before: its rows replace stored rows "
                   "at the same sequence or an older one, its deletes are applied, and it becomes the batch's content.")
@click.option("--dry-run", is_flag=True,
              help="Say what the write would do (counts, a replay, or why it would be refused); commit nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as one JSON object.")
def write(
    source: str, target: str | None, table_name: str | None, keys: tuple[str, ...], sequence_by: str | None,
    delete_when: str | None, batch_id: int | None, app_id: str | None, engine: str, schema_evolution: bool,
    late_batches: str, scd_type: int, track_history: tuple[str, ...], track_history_except: tuple[str, ...],
    ignore_null_updates: bool, merge_engine: str, aggregate_options: tuple[str, ...],
    sequence_group_options: tuple[str, ...], csv_schema: str | None, null_values: tuple[str, ...],
    timestamp_format: str | None, restate: bool, dry_run: bool, as_json: bool,
) -> None:
    """Upsert SOURCE into the Delta table at --target, or into the table named --table in Spark's catalog.

    SOURCE is a parquet, csv or json file, a folder of such files, or a Delta table (PATH@N: version N). A csv
    source is typed with --schema, --null-value and --timestamp-format, the same way on both engines.

    Exit status: 0 written (or skipped as a replay); 1 with --dry-run when the write would be refused; 2 an
    error (nothing written); 3 and 130 interrupted (see docs/cli.md).
    """
    if restate and batch_id is None:
        raise click.UsageError("--restate needs --batch-id: the id of the batch whose content it corrects")
    csv = csv_options(csv_schema, null_values, timestamp_format)
    if target is not None and table_name is not None:
        raise click.UsageError("give --target PATH or --table NAME, not both")
    if target is None and table_name is None:
        raise click.UsageError("missing the table to write: give --target PATH or --table NAME")
    if table_name is not None:
        ctx = click.get_current_context()
        if engine == "embedded" and ctx.get_parameter_source("engine") != click.core.ParameterSource.DEFAULT:
            raise click.UsageError("--table writes through Spark: --engine embedded cannot write a table by name "
                                   "(leave --engine out, or give --target PATH)")
        engine = "spark"
    options = {"sequence_by": sequence_by, "delete_when": delete_when, "app_id": app_id,
               "schema_evolution": schema_evolution, "late_batches": late_batches, "scd_type": scd_type,
               "track_history": split_columns(track_history) or None,
               "track_history_except": split_columns(track_history_except) or None,
               "ignore_null_updates": ignore_null_updates,
               **merge_engine_options(merge_engine, aggregate_options, sequence_group_options)}
    sink: Any = None
    created = False  # did this write create the table?
    written: Any = None  # the write's result, once it has returned
    on_spark: Any = None  # the SparkStop of a write on Spark

    def interrupted() -> tuple[str, int]:
        """The line and exit status of an interrupted write: whether its batch was committed, from the log."""
        from upsertsink import interrupts

        if written is not None:  # the write had returned: its commit is done
            found = interrupts.Outcome(written.batch_id, True, written.version)
        elif interrupts.last() is not None:  # the sink read the log when the interrupt reached it
            found = interrupts.last()
        elif interrupts.started():  # a write on Spark that a cancelled job ended: its call is over
            found = interrupts.report()
        else:  # before the write began (reading the source)
            found = interrupts.Outcome(batch_id, False)
        if on_spark is not None and on_spark.jvm_stopped:  # no JVM left for pyspark's exit hooks to stop
            from upsertsink.launch import _hard_exit

            click.echo(found.line(), err=True)
            _hard_exit(found.exit_code)
        return found.line(), found.exit_code

    def work() -> Any:
        nonlocal sink, created, written, on_spark
        import logging

        from upsertsink import interrupts

        interrupts.forget()
        # the sink logs the interrupted line too: here it is printed once, by interrupted()
        quiet = logging.getLogger("upsertsink.interrupts")
        if not any(isinstance(h, logging.NullHandler) for h in quiet.handlers):
            quiet.addHandler(logging.NullHandler())
        on_spark = "--table" if table_name is not None else "--engine spark" if engine == "spark" else None
        require_extras("upsertsink write", on_spark)
        from upsertsink import io
        from upsertsink.sink import UpsertSink

        if table_name is not None:  # for_table checks the name
            sink = UpsertSink.for_table(table_name, split_columns(keys), **options)
        else:
            assert target is not None
            sink = UpsertSink(_table_location(target), split_columns(keys), **options)
        src = io.resolve_path(source, "source", csv)
        if csv is not None and src.fmt != "csv":
            from upsertsink.cli_common import require_csv

            require_csv(csv, [src], f"the source {source} is not a csv file")
        existed = True
        if table_name is None:
            from upsertsink.storage import deltalake_options
            from upsertsink.table.files import table_exists

            existed = table_exists(sink.target, deltalake_options(sink.target))
        if table_name is not None:
            from upsertsink.cli_common import catalog_session
            from upsertsink.table import catalog

            spark = catalog_session("upsertsink write --table")
            existed = catalog.detail(spark, sink.table_name) is not None
            data = io.read_spark(spark, src)
        elif engine == "spark":
            from upsertsink.session import spark_session

            data = io.read_spark(spark_session("upsertsink-cli"), src)
        else:
            data = io.read_arrow(src)
        if engine == "embedded":  # no JVM in this process: delta-rs's panics stay off the terminal
            from upsertsink.cli_common import engine_panics_kept_off_the_terminal

            # delta-rs finishes its call before Python sees a signal: the interrupt reaches the sink after it
            with engine_panics_kept_off_the_terminal():
                result = written = sink.write(data, batch_id=batch_id, restate=restate, dry_run=dry_run)
        else:
            from upsertsink.cli_common import spark_interrupts

            with spark_interrupts(data.sparkSession) as on_spark:
                try:
                    result = written = sink.write(data, batch_id=batch_id, restate=restate, dry_run=dry_run)
                except Exception:
                    if on_spark.requested:  # the cancelled jobs ended the write: report it as interrupted
                        raise KeyboardInterrupt from None
                    raise
            if on_spark.requested:
                raise KeyboardInterrupt
        # a table's first write is its version 0 (data and marker in one commit: a writer that raced this one to
        # create it made version 0 itself); a table created by name gets an empty version 0 first
        created = not existed and not result.skipped and not result.dry_run and (
            result.version == 0 or table_name is not None)
        return result

    result = run(work, on_interrupt=interrupted)
    if table_name is not None:
        target = table_name  # the messages name the table; the JSON gives its location too
    if as_json:
        where = {"table": table_name, "target": sink.target} if table_name is not None else {"target": target}
        click.echo(json.dumps({**where, **dataclasses.asdict(result), "created": created}))
        if result.refused is not None:
            sys.exit(1)
        return
    if result.dry_run:
        _print_dry_run(result, target)
        return
    if created:  # a misspelled --target makes a new table: say so, with the full location
        named = f" {table_name}" if table_name is not None else ""
        click.echo(f"created a new table{named} at {sink.target}")
    counts = f"{result.inserted} inserted, {result.updated} updated, {result.deleted} deleted{_left_alone(result)}"
    if result.skipped:
        click.echo(f"batch {result.batch_id} already committed for {result.app_id}: skipped "
                   f"(table {target} stays at version {result.version})")  # fmt: skip
    elif result.batch_id is None:
        click.echo(f"{target} version {result.version}: {counts} (no batch id: a re-run writes again)")
    else:
        late = " (late: below the app's marker, applied under the sequence rules)" if result.late else ""
        late += " (restated: the batch's corrected content)" if result.restated else ""
        click.echo(f"batch {result.batch_id} -> {target} version {result.version}: {counts}{late}")
    if result.ignored_equal_sequence:
        click.echo(f"note: {result.ignored_equal_sequence} row(s) at the stored sequence with other content were "
                   "ignored (equal sequence keeps the stored row); to correct a committed batch send it again with "
                   "--restate, or send the rows at a higher sequence")


def _left_alone(result: Any) -> str:
    """The rows a write left alone, by why, for its one-line summary (nothing when there are none)."""
    parts = [f"{n} {what}" for n, what in (
        (result.unchanged, "unchanged"), (result.ignored_equal_sequence, "ignored at an equal sequence"),
        (result.older, "older than stored"), (result.stale, "stale (older than a remembered delete)")) if n]
    return "; " + ", ".join(parts) if parts else ""


def _print_dry_run(result: Any, target: str | None) -> None:
    """A dry run's report; exit status 1 when the write would be refused."""
    at = f"table {target} at version {result.version}" if result.version is not None else f"{target}"
    if result.refused is not None:
        click.echo(f"dry run: batch {result.batch_id} would be refused: {result.refused}")
        sys.exit(1)
    if result.skipped:
        click.echo(f"dry run: batch {result.batch_id} is already committed for {result.app_id}: it would be skipped "
                   f"(replay check: {result.replay_check}); nothing would change in {at}")
        return
    counts = f"{result.inserted} inserted, {result.updated} updated, {result.deleted} deleted{_left_alone(result)}"
    what = "restated" if result.restated else "written"
    new = "" if result.version is not None else " (a new table)"
    click.echo(f"dry run: batch {result.batch_id} would be {what} into {at}{new}: {counts}. Nothing was committed.")


def _commit_time(ms: Any) -> str:
    """A commit timestamp (milliseconds since the epoch) as UTC time, e.g. ``2026-11-22 05:41:23Z``."""
    if ms is None:
        return ""
    moment = datetime.datetime.fromtimestamp(int(ms) / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%SZ")


_COLUMNS = [("version", "version"), ("time", "time (UTC)"), ("operation", "operation"), ("app_id", "app id"),
            ("batch_id", "batch"), ("inserted", "inserted"), ("updated", "updated"), ("deleted", "deleted"),
            ("files_scanned", "files scanned"), ("files_rewritten", "files rewritten")]


def _columns_text(rows: list[dict[str, Any]]) -> list[str]:
    """Plain aligned columns (no box drawing): numbers right-aligned, text left-aligned."""
    cells = [[("" if r.get(k) is None else str(r[k])) for k, _ in _COLUMNS] for r in rows]
    heads = [h for _, h in _COLUMNS]
    widths = [max([len(h), *(len(c[i]) for c in cells)]) for i, h in enumerate(heads)]
    numeric = {"version", "batch_id", "inserted", "updated", "deleted", "files_scanned", "files_rewritten"}

    def line(values: list[str]) -> str:
        parts = [v.rjust(w) if k in numeric else v.ljust(w) for (k, _), v, w in zip(_COLUMNS, values, widths)]
        return "  ".join(parts).rstrip()

    return [line(heads), *(line(c) for c in cells)]


def _labelled(info: dict[str, Any]) -> dict[str, Any]:
    for commit in info["commits"]:
        commit["time"] = _commit_time(commit.get("timestamp"))
        labels = [label for label, on in (("marker only", commit["marker_only"]), ("late", commit["late"]),
                                          ("restated", commit.get("restated"))) if on]
        if labels:
            commit["operation"] = f"{commit['operation']} ({', '.join(labels)})"
    return info


def _one_table(path: str | None, table_name: str | None) -> str:
    """The table a command was given: PATH or --table NAME, exactly one of them (else a usage error)."""
    if path is not None and table_name is not None:
        raise click.UsageError("give PATH or --table NAME, not both")
    if path is None and table_name is None:
        raise click.UsageError("missing the table: give PATH or --table NAME")
    return path if path is not None else str(table_name)


@click.command("status")
@click.argument("path", metavar="[PATH[@N]]", required=False)
@click.option("--table", "table_name", metavar="NAME[@N]",
              help="Instead of PATH: a Delta table named in Spark's catalog (NAME@N: at version N).")
@click.option("--limit", default=10, show_default=True, type=click.IntRange(min=0),
              help="How many recent commits to show.")
@click.option("--spark-only", is_flag=True,
              help="With --table: read the table's history through Spark SQL on its name (DESCRIBE HISTORY), not its "
                   "files; the default when this process cannot read the files.")
@click.option("--json", "as_json", is_flag=True, help="Print the status as one JSON object.")
def status(path: str | None, table_name: str | None, limit: int, spark_only: bool, as_json: bool) -> None:
    """Show a table's version, the last batch id per app id, and recent commits with their time and counts.

    PATH@N shows the table as it was at version N; --table NAME (NAME@N) the table of that name in Spark's
    catalog (through Spark SQL alone when its files cannot be read here, or with --spark-only).
    """
    label = _one_table(path, table_name)
    if spark_only and table_name is None:
        raise click.UsageError("--spark-only goes with --table NAME")

    def work() -> dict[str, Any]:
        require_extras("upsertsink status", "--table" if table_name is not None else None)
        from upsertsink.io import split_version
        from upsertsink.table import files, status

        if table_name is not None:
            from upsertsink.cli_common import catalog_session, split_table_version, table_location

            name, version = split_table_version(table_name)
            spark = catalog_session("upsertsink status --table")
            table = table_location(spark, name)
            shown = f"table {name} (at {table})"
            from upsertsink.table.named import files_readable

            if spark_only or not files_readable(table, None)[0]:  # Spark-only mode: the history by name
                from upsertsink.table.status import named_status

                info = named_status(spark, name, limit, version)
                info = {"table": table_name, "location": table, "spark_only": True, **info}
                return _labelled(info)
        else:
            assert path is not None
            table, version = split_version(path)
            shown = table
        if not files.table_exists(table):
            fail(f"{shown} is not a Delta table")
        latest = files.latest_version(table)
        if version is not None and latest is not None and version > latest:
            fail(f"{shown} has no version {version} (latest is {latest})")
        info = status.status(table, limit=limit, version=version)
        if table_name is not None:
            info = {"table": table_name, "location": table, **info}
        return _labelled(info)

    info = run(work)
    if as_json:
        click.echo(json.dumps(info, default=str))
        return
    at = "" if info.get("latest_version") is None else f" (latest is {info['latest_version']})"
    lines = [f"{label}  version {info['version']}{at}"]
    if info.get("scd_type") == 2:
        lines.append("  history table (SCD type 2): one row per version of a key, keyed by the key and __START_AT")
    if info.get("merge_engine") not in (None, "upsert"):
        lines.append(f"  merge engine: {info['merge_engine']}")
    if info["batches"]:
        undone = info.get("undone") or {}
        for app, last in info["batches"].items():
            gone = ", ".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in undone.get(app, ()))
            lines.append(f"  app {app}: last batch id {last}" + (f" (undone by a RESTORE: {gone})" if gone else ""))
            if app in (info.get("ledger") or {}):  # the batch ledger's summary (upsertsink batches: the rest)
                from upsertsink.table.batch_ledger import summary_text

                lines.append(f"    {summary_text(info['ledger'][app])}")
    else:
        lines.append("  no batch markers written by upsertsink")
    if info["commits"]:
        lines += ["", *_columns_text(info["commits"])]
    click.echo("\n".join(lines))


@click.command("maintain")
@click.argument("path", required=False)
@click.option("--table", "table_name", metavar="NAME", help="Instead of PATH: a Delta table named in Spark's catalog.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.option("--adopt-clone", is_flag=True,
              help="The table is a clone whose source is gone for good: let the sink write it without the "
                   "source's batch records and remembered deletes.")
def maintain(path: str | None, table_name: str | None, as_json: bool, adopt_clone: bool) -> None:
    """Compact and clean the sink's own bookkeeping in a table, and checkpoint it when due.

    Tombstones of every key set are compacted (expired ones dropped), dead writers' temp files removed, a
    checkpoint written when the newest is an interval behind, and Delta's expired log entries removed. The
    table's data files are not touched (VACUUM stays yours). Writers do all of this as they go. The table is
    PATH, or --table NAME in Spark's catalog. --adopt-clone lets the sink write a clone whose source cannot be
    read any more (a replayed batch of the source is then applied again, and its deletes are not remembered).
    """
    label = _one_table(path, table_name)

    def work() -> Any:
        require_extras("upsertsink maintain", "--table" if table_name is not None else None)
        from upsertsink.storage import deltalake_options
        from upsertsink.table import files
        from upsertsink.table.maintenance import maintain as run_maintenance

        if table_name is not None:
            from upsertsink.cli_common import catalog_session, table_location
            from upsertsink.table import catalog

            table = table_location(catalog_session("upsertsink maintain --table"), catalog.check_name(table_name),
                                   reads_files="maintain --table")
        else:
            table = _table_location(label)
        if not files.table_exists(table, deltalake_options(table)):
            fail(f"{label} is not a Delta table")
        if table_name is not None:  # Spark runs in this process
            return run_maintenance(table, deltalake_options(table), adopt_clone=adopt_clone)
        from upsertsink.cli_common import engine_panics_kept_off_the_terminal

        with engine_panics_kept_off_the_terminal():
            return run_maintenance(table, deltalake_options(table), adopt_clone=adopt_clone)

    report = run(work)
    if as_json:
        click.echo(json.dumps(report.to_dict()))
        return
    click.echo("\n".join(report.lines()))
