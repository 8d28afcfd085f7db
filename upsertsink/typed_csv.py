"""Typed CSV: column types given as Spark DDL, null markers and a timestamp format, read the same way for both
engines (the CLI's ``--schema``, ``--null-value`` and ``--timestamp-format``).

A CSV file has no types. Without options, each engine guesses them. With them, the file is read once, by
pyarrow's CSV reader, with every typed column as text, and each typed column is then converted by the rules
below; the Spark engine receives that Arrow table (``spark.createDataFrame``), so both engines see the same
values. A value that does not convert is an :class:`InvalidInputError` naming the file, its line (1-based,
the header is line 1) and the column.

- ``--schema "id long, amount decimal(10,2), ts timestamp"``: Spark DDL column definitions, parsed with
  sqlglot's Spark dialect. Columns are matched by name (the header); columns the schema leaves out keep the
  types the reader infers; a schema column missing from the file is an error.
- Types: tinyint/byte, smallint/short, int/integer, bigint/long, float/real, double, decimal(p,s) (decimal
  alone is decimal(10,0), as in Spark), boolean (true/false/1/0, any case), string (char(n) and varchar(n) are
  read as string), date (yyyy-mm-dd), timestamp (an instant: a value without a zone offset is read as UTC),
  timestamp_ntz (a wall-clock time; a value with an offset is converted to UTC first). Nested and binary types
  cannot be read from CSV.
- Integers and decimals are exact: ``1.0`` is not a bigint, ``10.555`` does not fit decimal(10,2).
- An empty field is null; ``--null-value TEXT`` (repeatable) names other text that means null. Nothing else is
  null (``n/a`` and ``NULL`` are text unless named).
- Timestamps are ISO 8601 (``2026-01-03 10:00:00``, ``2026-01-03T10:00:00.25+02:00``, a date alone is midnight)
  unless ``--timestamp-format`` gives a format in Python's ``strptime`` directives (``%d/%m/%Y %H:%M``,
  ``%Y-%m-%dT%H:%M:%S%z``); ``%f`` (1 to 6 digits of fractions of a second) must follow a ``.`` or ``,``.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from typing import Any

from upsertsink.errors import InvalidInputError

# Spark DDL type (as sqlglot's Spark dialect names it) -> the type's name in messages and the Spark DDL.
_TYPES = {
    "TINYINT": "tinyint", "SMALLINT": "smallint", "INT": "int", "BIGINT": "bigint", "FLOAT": "float",
    "DOUBLE": "double", "DECIMAL": "decimal", "BOOLEAN": "boolean", "TEXT": "string", "VARCHAR": "string",
    "CHAR": "string", "NCHAR": "string", "NVARCHAR": "string", "DATE": "date", "TIMESTAMP": "timestamp",
    "TIMESTAMPTZ": "timestamp", "TIMESTAMPLTZ": "timestamp", "TIMESTAMPNTZ": "timestamp_ntz",
}


@dataclass(frozen=True)
class Column:
    """One column of ``--schema``: its name and its Spark type in Spark's spelling (``decimal(10,2)``)."""

    name: str
    type: str

    def arrow_type(self) -> Any:
        import pyarrow as pa

        simple = {
            "tinyint": pa.int8(), "smallint": pa.int16(), "int": pa.int32(), "bigint": pa.int64(),
            "float": pa.float32(), "double": pa.float64(), "boolean": pa.bool_(), "string": pa.string(),
            "date": pa.date32(), "timestamp": pa.timestamp("us", tz="UTC"), "timestamp_ntz": pa.timestamp("us"),
        }
        if self.type in simple:
            return simple[self.type]
        precision, scale = (int(p) for p in self.type[len("decimal("):-1].split(","))
        return pa.decimal128(precision, scale)


@dataclass(frozen=True)
class CsvOptions:
    """How to read CSV files: column types, the text that means null (besides an empty field), the
    timestamp format (None: ISO 8601)."""

    schema: tuple[Column, ...] = ()
    null_values: tuple[str, ...] = ()
    timestamp_format: str | None = None
    # several inputs (diff, replay-check): a file types the schema's columns it has (check_inputs checks that
    # each column is in one of them); one source (write): every file has every column
    partial: bool = False

    def describe(self) -> str:
        """The options as the command line gives them, for messages."""
        parts = []
        if self.schema:
            parts.append("--schema " + repr(", ".join(f"{c.name} {c.type}" for c in self.schema)))
        parts += [f"--null-value {v!r}" for v in self.null_values]
        if self.timestamp_format is not None:
            parts.append(f"--timestamp-format {self.timestamp_format!r}")
        return " ".join(parts)


def parse_schema(ddl: str, flag: str = "--schema") -> tuple[Column, ...]:
    """Spark DDL column definitions (``id long, amount decimal(10,2)``) as columns; anything else (a column
    without a type, an unknown type, a type CSV cannot hold, a name given twice) is an InvalidInputError."""
    import sqlglot
    from sqlglot import exp
    from sqlglot.errors import ParseError

    text = ddl.strip().rstrip(",")
    if not text:
        raise InvalidInputError(f"{flag} is empty: give column definitions, e.g. \"id long, ts timestamp\"")
    try:
        created = sqlglot.parse_one(f"CREATE TABLE t ({text})", read="spark")
    except ParseError as err:
        found = err.errors[0] if err.errors else {}
        near = found.get("highlight") or ""
        raise InvalidInputError(
            f"{flag} {ddl!r} is not a list of Spark DDL column definitions (name type, ...)"
            + (f": it goes wrong at {near!r}" if near else "")
            + "; e.g. \"id long, amount decimal(10,2), ts timestamp\""
        ) from None
    schema = created.this if isinstance(created, exp.Create) else None
    if not isinstance(schema, exp.Schema):
        raise InvalidInputError(f"{flag} {ddl!r} is not a list of Spark DDL column definitions (name type, ...)")
    columns: list[Column] = []
    for item in schema.expressions:
        if not isinstance(item, exp.ColumnDef) or item.args.get("kind") is None:
            raise InvalidInputError(
                f"{flag}: column {item.sql(dialect='spark')!r} has no type; give one, e.g. "
                f"\"{item.sql(dialect='spark')} string\""
            )
        kind = item.args["kind"]
        name = item.name
        base = _TYPES.get(kind.this.name)
        if base is None:
            raise InvalidInputError(
                f"{flag}: column {name!r} has type {kind.sql(dialect='spark').lower()}, which a CSV file cannot "
                "hold; use one of tinyint, smallint, int, bigint, float, double, decimal(p,s), boolean, string, "
                "date, timestamp, timestamp_ntz"
            )
        if base == "decimal":
            args = [int(e.sql()) for e in kind.expressions] if kind.expressions else [10, 0]
            precision, scale = (args + [0])[:2]
            if not 1 <= precision <= 38 or not 0 <= scale <= precision:
                raise InvalidInputError(f"{flag}: column {name!r}: decimal({precision},{scale}) is not a Spark "
                                        "decimal (precision 1 to 38, scale 0 to the precision)")
            base = f"decimal({precision},{scale})"
        if any(c.name == name for c in columns):
            raise InvalidInputError(f"{flag}: column {name!r} is given twice")
        columns.append(Column(name, base))
    return tuple(columns)


def check_timestamp_format(fmt: str, flag: str = "--timestamp-format") -> str:
    """A strptime format the reader can apply (``%f`` only after ``.`` or ``,``, once)."""
    if not fmt or "%" not in fmt:
        raise InvalidInputError(f"{flag} {fmt!r} has no strptime directive; e.g. '%d/%m/%Y %H:%M:%S'")
    if fmt.count("%f") > 1 or ("%f" in fmt and not re.search(r"[.,]%f", fmt)):
        raise InvalidInputError(
            f"{flag} {fmt!r}: %f (fractions of a second) must follow a '.' or ',' and appear once, e.g. "
            "'%Y-%m-%d %H:%M:%S.%f'"
        )
    return fmt


# ---------------------------------------------------------------------------------------- reading


def check_inputs(options: CsvOptions, files: list[str]) -> None:
    """Every column of the schema is in the header of one of ``files`` (the csv inputs of a command that reads
    several): a column in none of them is a misspelling, named with the headers found."""
    headers: dict[str, list[str]] = {}
    for path in files:
        try:
            with open(path, newline="", encoding="utf-8", errors="replace") as f:
                headers[path] = next((record for record in csv.reader(f) if record), [])
        except (OSError, csv.Error):
            headers[path] = []
    found = {name for header in headers.values() for name in header}
    missing = [c.name for c in options.schema if c.name not in found]
    if missing:
        seen = "; ".join(f"{path}: {', '.join(header)}" for path, header in headers.items())
        raise InvalidInputError(f"--schema names column(s) {missing} that no csv input has (headers: {seen})")


def read_csv(path: str, options: CsvOptions | None, what: str) -> Any:
    """One CSV file (a header row) as a pyarrow Table, typed by ``options`` (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    options = options or CsvOptions()
    typed = {c.name: c for c in options.schema}
    convert = pacsv.ConvertOptions(
        null_values=["", *options.null_values], strings_can_be_null=True, quoted_strings_can_be_null=True,
        column_types={name: pa.string() for name in typed},
    )
    parse = pacsv.ParseOptions(newlines_in_values=True)
    try:
        table = pacsv.read_csv(path, convert_options=convert, parse_options=parse)
    except (pa.ArrowException, OSError) as exc:
        from upsertsink.io import first_line

        raise InvalidInputError(f"{what}: cannot read {path!r} as csv: {first_line(exc)}") from exc
    missing = [name for name in typed if name not in table.column_names]
    if options.partial:
        typed = {name: column for name, column in typed.items() if name not in missing}
    elif missing:
        raise InvalidInputError(
            f"{what}: --schema names column(s) {missing} that {path!r} does not have (its header: "
            f"{', '.join(table.column_names)})"
        )
    for name, column in typed.items():
        index = table.column_names.index(name)
        values = table.column(name).combine_chunks()
        converted = _convert(values, column, options.timestamp_format)
        if isinstance(converted, _Bad):
            raise _bad_value(path, what, column, values[converted.row].as_py(), converted, options)
        table = table.set_column(index, pa.field(name, converted.type), converted)
    return table


@dataclass(frozen=True)
class _Bad:
    row: int  # 0-based data row of the file
    reason: str | None = None


def _convert(values: Any, column: Column, timestamp_format: str | None) -> Any:
    """The string array as ``column``'s type, or where the first value that does not convert is."""
    import pyarrow as pa
    import pyarrow.compute as pc

    target = column.arrow_type()
    if column.type == "string":
        return values
    if not pa.types.is_timestamp(target):
        return _cast(values, target)
    utc = pa.timestamp("us", tz="UTC")
    if timestamp_format is None:  # ISO 8601: with a zone offset, or a wall-clock time read as UTC
        zoned = pc.fill_null(pc.match_substring_regex(values, _ZONE), False)
        none = pa.scalar(None, pa.string())
        naive = _cast(pc.if_else(zoned, none, values), pa.timestamp("us"))
        with_zone = _cast(pc.if_else(zoned, values, none), utc)
        bad = [r.row for r in (naive, with_zone) if isinstance(r, _Bad)]
        if bad:
            return _Bad(min(bad))
        parsed = pc.if_else(zoned, with_zone, naive.cast(utc))
    else:
        parsed = _strptime(values, timestamp_format)
        failed = pc.and_(pc.is_valid(values), pc.is_null(parsed))
        if pc.any(failed).as_py():
            return _Bad(_first_true(failed))
    return parsed if target.tz is not None else parsed.cast(pa.timestamp("us"))


def _cast(values: Any, target: Any) -> Any:
    """``values`` cast to ``target``, or the first row whose value does not cast (found by halving)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    errors = (pa.ArrowInvalid, pa.ArrowNotImplementedError)
    try:
        return pc.cast(values, target)
    except errors:
        pass
    low, high = 0, len(values)
    while high - low > 1:
        mid = (low + high) // 2
        try:
            pc.cast(values.slice(low, mid - low), target)
            low = mid
        except errors:
            high = mid
    try:
        pc.cast(values.slice(low, 1), target)
        reason = None
    except errors as err:
        reason = str(err)
    return _Bad(low, reason)


def _first_true(mask: Any) -> int:
    import numpy as np

    return int(np.flatnonzero(mask.to_numpy(zero_copy_only=False))[0])


# a zone offset after a time of day (a date's own "-03" is not one)
_ZONE = r":\d{2}(\.\d+)?(Z|[+-]\d{2}(:?\d{2})?)$"


def _strptime(values: Any, fmt: str) -> Any:
    """Strings as timestamp[us, UTC] by a strptime format (a time without ``%z`` is UTC), null where a value
    does not parse. Arrow's strptime has no ``%f``: the fraction is cut out, the rest parsed, the fraction
    added."""
    import pyarrow as pa
    import pyarrow.compute as pc

    utc = pa.timestamp("us", tz="UTC")
    if "%f" not in fmt:
        return pc.strptime(values, format=fmt, unit="us", error_is_null=True).cast(utc)
    sep = fmt[fmt.index("%f") - 1]
    # the last separator followed by 1 to 6 digits (and then the end, or something that is not a digit)
    head, frac, tail = pc.extract_regex(values, rf"^(?P<head>.*)\{sep}(?P<frac>\d{{1,6}})(?P<tail>(?:\D.*)?)$").flatten()
    whole = pc.strptime(pc.binary_join_element_wise(head, tail, ""), format=fmt.replace(f"{sep}%f", ""), unit="us",
                        error_is_null=True).cast(utc)
    digits = pc.utf8_slice_codeunits(pc.binary_join_element_wise(frac, "000000", ""), 0, 6)
    return pc.add(whole, pc.cast(pc.cast(digits, pa.int64()), pa.duration("us")))


def _bad_value(path: str, what: str, column: Column, value: Any, bad: _Bad, options: CsvOptions) -> InvalidInputError:
    line = _line_of(path, bad.row)
    where = f"{path}:{line}" if line is not None else f"{path} (data row {bad.row + 1})"
    if column.type.startswith("timestamp"):
        why = (f"does not match --timestamp-format {options.timestamp_format!r}" if options.timestamp_format
               else "is not an ISO 8601 timestamp (give its format with --timestamp-format)")
    elif column.type.startswith("decimal") and bad.reason and "data loss" in bad.reason:
        why = f"has more decimal places than {column.type} holds"
    elif column.type.startswith("decimal") and bad.reason and "precision" in bad.reason:
        why = f"has more digits than {column.type} holds"
    elif column.type == "date":
        why = "is not a date (yyyy-mm-dd)"
    else:
        why = f"is not a valid {column.type}"
    hint = "" if any(ch.isdigit() for ch in str(value)) else f"; if it means null, add --null-value {value!r}"
    return InvalidInputError(
        f"{what}: {where}: column {column.name!r}: {value!r} {why} (--schema gives {column.name} {column.type})"
        f"{hint}"
    )


def _line_of(path: str, row: int) -> int | None:
    """The 1-based line where data row ``row`` (0-based, after the header) starts, as pyarrow's reader counts
    rows: empty lines skipped, quoted values may hold line breaks."""
    try:
        with open(path, newline="", encoding="utf-8", errors="replace") as f:
            reader = csv.reader(f)
            seen = -1  # the header is row -1
            start = 1
            for record in reader:
                if record:
                    if seen == row:
                        return start
                    seen += 1
                start = reader.line_num + 1
    except (OSError, csv.Error):
        return None
    return None
