"""`upsertsink batches`: the batch ledger of a table (issue #48). Exit 0, or 1 when an id of --expect or
--expect-dates is not committed; 2 for usage and other errors."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from upsertsink.cli_common import require_extras, run

EXIT_OK, EXIT_MISSING = 0, 1

_DETAIL_COLUMNS = [("batch_id", "batch"), ("version", "version"), ("time", "time (UTC)"),
                   ("operation", "operation"), ("inserted", "inserted"), ("updated", "updated"),
                   ("deleted", "deleted"), ("late", "late"), ("marker_only", "marker only"),
                   ("fingerprint", "fingerprint")]
_NUMERIC = {"batch_id", "version", "inserted", "updated", "deleted"}


def _expected(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """--expect and --expect-dates as ranges of ids; a bad range is a usage error (exit 2)."""
    if value is None:
        return None
    from upsertsink.errors import InvalidInputError
    from upsertsink.table.batch_ledger import parse_dates, parse_ids

    try:
        return parse_dates(value) if param.name == "expect_dates" else parse_ids(value)
    except InvalidInputError as err:
        raise click.BadParameter(str(err)) from None


@click.command("batches")
@click.argument("path", metavar="[PATH[@N]]", required=False)
@click.option("--table", "table_name", metavar="NAME[@N]",
              help="Instead of PATH: a Delta table named in Spark's catalog (NAME@N: at version N).")
@click.option("--app-id", help="Only this app's batches (default: every app that wrote the table).")
@click.option("--expect", metavar="LOW..HIGH", callback=_expected,
              help="Check that these batch ids are committed (0..99; a list: 0..9,12,20..29): exit 1 naming "
                   "the missing ones, 0 when every one is committed.")
@click.option("--expect-dates", metavar="DAY..DAY", callback=_expected,
              help="Check the days' batch ids, written YYYYMMDD: 2026-11-01..2026-11-30 (or "
                   "20261101..20261130; a single day; a list). Exit codes as --expect.")
@click.option("--detail", is_flag=True,
              help="One line per batch: its commit's version and time, rows inserted, updated and deleted, late, "
                   "marker only, fingerprint. The newest --limit batches of each app; --all: every one; with "
                   "--expect or --expect-dates: the expected ones.")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True,
              help="With --detail: how many of each app's newest batches to show.")
@click.option("--all", "show_all", is_flag=True,
              help="With --detail: every committed batch (reads as much of the log as that takes).")
@click.option("--spark-only", is_flag=True,
              help="With --table: read the table's history through Spark SQL on its name (DESCRIBE HISTORY), not its "
                   "files; the default when this process cannot read the files.")
@click.option("--json", "as_json", is_flag=True, help="Print the ledger as one JSON object.")
def batches_command(
    path: str | None, table_name: str | None, app_id: str | None, expect: Any, expect_dates: Any, detail: bool,
    limit: int, show_all: bool, spark_only: bool, as_json: bool,
) -> None:
    """Show which batch ids each app committed to a table, the gaps among them, the ids a RESTORE undid and the
    batches applied late; check that expected ids are committed.

    PATH@N reads the table as it was at version N; --table NAME (NAME@N) the table of that name in Spark's
    catalog. Exit status: 0, or 1 when an id of --expect/--expect-dates is not committed; 2 for errors.
    """
    ctx = click.get_current_context()
    if path is not None and table_name is not None:
        raise click.UsageError("give PATH or --table NAME, not both")
    if path is None and table_name is None:
        raise click.UsageError("missing the table: give PATH or --table NAME")
    if spark_only and table_name is None:
        raise click.UsageError("--spark-only goes with --table NAME")
    if expect is not None and expect_dates is not None:
        raise click.UsageError("give --expect or --expect-dates, not both")
    explicit_limit = ctx.get_parameter_source("limit") != click.core.ParameterSource.DEFAULT
    if (show_all or explicit_limit) and not detail:
        raise click.UsageError(f"{'--all' if show_all else '--limit'} goes with --detail")
    if show_all and explicit_limit:
        raise click.UsageError("give --all or --limit N, not both")
    expected = expect if expect is not None else expect_dates
    flag = "--expect" if expect is not None else "--expect-dates"
    if expected is not None and (show_all or explicit_limit):
        raise click.UsageError(f"with {flag}, --detail shows the expected batches: leave out "
                               f"{'--all' if show_all else '--limit'}")
    if not detail:
        wanted: Any = 0
    elif show_all:
        wanted = "all"
    else:
        wanted = expected if expected is not None else limit

    def work() -> dict[str, Any]:
        require_extras("upsertsink batches", "--table" if table_name is not None else None)
        from upsertsink.io import split_version
        from upsertsink.storage import deltalake_options
        from upsertsink.table import batch_ledger

        location = None
        if table_name is not None:
            from upsertsink.cli_common import catalog_session, split_table_version, table_location
            from upsertsink.table.named import files_readable, named_errors, named_snapshot

            name, version = split_table_version(table_name)
            spark = catalog_session("upsertsink batches --table")
            location = table_location(spark, name)
            if spark_only or not files_readable(location, None)[0]:  # Spark-only mode: the history by name
                snapshot = named_snapshot(spark, name, version)
                with named_errors(name, "reading the ledger of"):
                    found = batch_ledger.read_ledger(snapshot, f"table {name}", app_id, wanted)
                return _report(found, expected, flag, location, spark_only=True)
            label = f"table {name}"
        else:
            assert path is not None
            location, version = split_version(path)
            label = location
        found = batch_ledger.read_path(location, app_id, version, wanted, deltalake_options(location), label=label)
        return _report(found, expected, flag, location)

    report = run(work)
    if as_json:
        click.echo(json.dumps(report["json"], default=str))
    elif _terminal():
        _print_rich(report)
    else:
        click.echo("\n".join(_plain(report)))
    if report["json"].get("all_committed") is False:
        sys.exit(EXIT_MISSING)


def _terminal() -> bool:
    """Is stdout a terminal (rich tables), or piped or a file (plain text)?"""
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def _report(found: Any, expected: Any, flag: str, location: str | None, spark_only: bool = False) -> dict[str, Any]:
    """What the command shows: the ledger and, with an expectation, each app's missing ids; as JSON and as the
    pieces the text outputs draw."""
    data = found.to_dict()
    if location is not None and location != found.table:
        data["location"] = location
    if spark_only:
        data["spark_only"] = True
    checks: dict[str, dict[str, Any]] = {}
    if expected is not None:
        if len(found.apps) > 1:
            raise click.UsageError(
                f"{found.table} was written by {len(found.apps)} apps ({', '.join(sorted(found.apps))}): name the "
                f"one whose batches {flag} checks with --app-id")
        data["expected"] = [list(r) for r in expected]
        for app, ledger in found.apps.items():
            why = ledger.explain_missing(expected)
            checks[app] = why
            data["apps"][app].update({
                "missing": [list(r) for r in why["missing"]],
                "missing_undone": [list(r) for r in why["undone"]],
                "missing_unknown": [list(r) for r in why["unknown"]],
            })
        data["all_committed"] = bool(found.apps) and not any(c["missing"] for c in checks.values())
        if not found.apps:
            data["missing"] = data["expected"]
    return {"ledger": found, "json": data, "checks": checks, "expected": expected, "flag": flag}


# ---------------------------------------------------------------- text


def _undone_text(undone: Any) -> str:
    from upsertsink.table.batch_ledger import format_ranges

    by_restore: dict[int, list[tuple[int, int]]] = {}
    for lo, hi, at in undone:
        by_restore.setdefault(at, []).append((lo, hi))
    return "; ".join(f"{format_ranges(r)} (by the RESTORE at version {at})" for at, r in sorted(by_restore.items()))


def _summary_rows(ledger: Any, check: dict[str, Any] | None, expected: Any) -> list[tuple[str, str]]:
    """(label, text) rows of one app's summary."""
    from upsertsink.table.batch_ledger import ALL, count_ids, format_ranges

    rows = [("committed", format_ranges(ledger.committed) + _how_many(ledger.count))]
    rows.append(("gaps", format_ranges(ledger.gaps) + _how_many(count_ids(ledger.gaps))))
    rows.append(("undone", _undone_text(ledger.undone) or "none"))
    rows.append(("late", format_ranges(ledger.late)))
    if ledger.floor:
        below = "every id" if ledger.floor == ALL else f"ids below {ledger.floor}"
        rows.append(("unknown", f"{below}: {ledger.unknown or 'the record no longer says'}"))
    if check is not None:
        rows.append(("expected", _check_text(check, expected)))
    return rows


def _how_many(n: int) -> str:
    return "" if not n else "  (1 id)" if n == 1 else f"  ({n} ids)"


def _check_text(check: dict[str, Any], expected: Any) -> str:
    from upsertsink.table.batch_ledger import count_ids, format_ranges

    total = count_ids(expected)
    if not check["missing"]:
        return f"{format_ranges(expected)}: all {total} committed"
    text = f"{format_ranges(expected)}: {count_ids(check['missing'])} of {total} missing: {format_ranges(check['missing'])}"
    notes = []
    if check["undone"]:
        notes.append(f"undone by a RESTORE: {format_ranges(check['undone'])}")
    if check["unknown"]:
        notes.append(f"unknown (below the record's floor): {format_ranges(check['unknown'])}")
    return text + (f" ({'; '.join(notes)})" if notes else "")


def _cells(record: Any) -> dict[str, str]:
    values = record.to_dict()
    out = {}
    for key, _ in _DETAIL_COLUMNS:
        value = values.get(key)
        if key in ("late", "marker_only"):
            out[key] = "yes" if value else ""
        elif not record.in_log and key != "batch_id":
            out[key] = "committed; its commit is not in the log" if key == "version" else ""
        else:
            out[key] = "" if value is None else str(value)
    if record.reapplied and record.in_log:
        out["operation"] += " (reapplied)"
    return out


def _header(report: dict[str, Any]) -> str:
    data = report["json"]
    where = f" (at {data['location']})" if data.get("location") else ""
    mode = "; read through Spark SQL on its name" if data.get("spark_only") else ""
    return f"{data['table']}{where}  version {data['version']}{mode}"


def _closing(report: dict[str, Any]) -> list[str]:
    """The check's verdict (with --expect/--expect-dates)."""
    from upsertsink.table.batch_ledger import count_ids, format_ranges

    expected = report["expected"]
    if expected is None:
        return []
    found = report["ledger"]
    if not found.apps:
        missing = f"all {count_ids(expected)} expected ids are missing ({format_ranges(expected)})"
        return [f"no app has committed batches: {missing}"]
    app, check = next(iter(report["checks"].items()))
    if check["missing"]:
        return [f"missing for app {app}: {format_ranges(check['missing'])}"]
    return [f"all {count_ids(expected)} expected ids committed for app {app}"]


def _plain(report: dict[str, Any]) -> list[str]:
    """Plain text (piped or written to a file): no box drawing, no colour."""
    found = report["ledger"]
    lines = [_header(report)]
    if not found.apps:
        lines.append("  no batches committed by upsertsink")
    for app, ledger in found.apps.items():
        lines.append(f"app {app}")
        rows = _summary_rows(ledger, report["checks"].get(app), report["expected"])
        width = max(len(label) for label, _ in rows)
        lines += [f"  {label.ljust(width)}  {text}" for label, text in rows]
        if ledger.records:
            lines += ["", *("  " + line for line in _columns_text([_cells(r) for r in ledger.records])), ""]
    closing = _closing(report)
    return [*lines, *closing]


def _columns_text(cells: list[dict[str, str]]) -> list[str]:
    heads = [h for _, h in _DETAIL_COLUMNS]
    widths = [max([len(h), *(len(c[k]) for c in cells)]) for (k, _), h in zip(_DETAIL_COLUMNS, heads)]

    def line(values: list[str]) -> str:
        parts = [v.rjust(w) if k in _NUMERIC else v.ljust(w) for (k, _), v, w in zip(_DETAIL_COLUMNS, values, widths)]
        return "  ".join(parts).rstrip()

    return [line(heads), *(line([c[k] for k, _ in _DETAIL_COLUMNS]) for c in cells)]


def _print_rich(report: dict[str, Any]) -> None:
    """Rich tables on a terminal: the summary of each app, and its batches with --detail."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=sys.stdout, highlight=False)
    found = report["ledger"]
    console.print(_header(report), style="bold", markup=False)
    if not found.apps:
        console.print("no batches committed by upsertsink", markup=False)
    for app, ledger in found.apps.items():
        summary = Table(title=f"app {app}", title_justify="left", show_header=False, box=None, padding=(0, 2))
        summary.add_column(style="bold")
        summary.add_column()
        check = report["checks"].get(app)
        for label, text in _summary_rows(ledger, check, report["expected"]):
            style = None
            if label == "expected":
                style = "red" if check and check["missing"] else "green"
            elif label in ("gaps", "undone", "unknown") and text != "none":
                style = "yellow"
            summary.add_row(label, text, style=style)
        console.print(summary)
        if ledger.records:
            table = Table(show_lines=False)
            for key, head in _DETAIL_COLUMNS:
                table.add_column(head, justify="right" if key in _NUMERIC else "left",
                                 no_wrap=key in ("time", "fingerprint"))
            for record in ledger.records:
                cells = _cells(record)
                table.add_row(*(cells[k] for k, _ in _DETAIL_COLUMNS), style=None if record.in_log else "dim")
            console.print(table)
    for line in _closing(report):
        console.print(line, style="bold red" if "missing" in line else "bold green", markup=False)

