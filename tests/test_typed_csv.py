"""Typed csv sources on the command line (issue #45, item 6): `--schema` (Spark DDL), `--null-value` and
`--timestamp-format` on `write`, `diff` and `replay-check`, read the same way by both engines; a value that does
not parse names the file, the line and the column."""

from __future__ import annotations

import datetime
import decimal
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable
from sink_helpers import read_rows

from upsertsink import InvalidInputError
from upsertsink.cli import main
from upsertsink.typed_csv import Column, CsvOptions, check_timestamp_format, parse_schema, read_csv

CLI = str(Path(sys.executable).with_name("upsertsink"))
JOBS = Path(__file__).parent / "jobs"
SCHEMA = "id long, seq long, amount decimal(10,2), ts timestamp"
UTC = datetime.UTC


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], check=False, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_COLOR": "1"})


@pytest.fixture
def orders(tmp_path) -> Path:
    """A csv whose types no reader can guess right: decimals, timestamps with and without offsets, `n/a`."""
    path = tmp_path / "orders.csv"
    path.write_text(
        "id,seq,amount,ts,note\n"
        "1,1,10.5,2026-01-03 10:00:00,n/a\n"
        "2,1,3,2026-01-03T10:00:00.25+02:00,\"two\nlines\"\n"
        "\n"
        "3,2,0.10,2026-01-04,n/a\n"
    )
    return path


EXPECTED = [
    {"id": 1, "seq": 1, "amount": decimal.Decimal("10.50"), "ts": datetime.datetime(2026, 1, 3, 10, tzinfo=UTC),
     "note": "n/a"},
    {"id": 2, "seq": 1, "amount": decimal.Decimal("3.00"),
     "ts": datetime.datetime(2026, 1, 3, 8, 0, 0, 250000, tzinfo=UTC), "note": "two\nlines"},
    {"id": 3, "seq": 2, "amount": decimal.Decimal("0.10"), "ts": datetime.datetime(2026, 1, 4, tzinfo=UTC),
     "note": "n/a"},
]


def table_types(path: str) -> dict[str, str]:
    return {f.name: str(f.type) for f in pa.schema(DeltaTable(path).schema().to_arrow())}


# ---------------------------------------------------------------------------------------- the schema


def test_spark_ddl_is_parsed_into_spark_types():
    assert parse_schema("id long, `my col` string, d decimal(10,2), x decimal, ts timestamp, n timestamp_ntz, "
                        "b boolean, s short, t tinyint, i int, f float, g double, day date, v varchar(3)") == (
        Column("id", "bigint"), Column("my col", "string"), Column("d", "decimal(10,2)"),
        Column("x", "decimal(10,0)"), Column("ts", "timestamp"), Column("n", "timestamp_ntz"),
        Column("b", "boolean"), Column("s", "smallint"), Column("t", "tinyint"), Column("i", "int"),
        Column("f", "float"), Column("g", "double"), Column("day", "date"), Column("v", "string"))
    assert [c.arrow_type() for c in parse_schema("a decimal(10,2), b timestamp, c timestamp_ntz")] == [
        pa.decimal128(10, 2), pa.timestamp("us", tz="UTC"), pa.timestamp("us")]


@pytest.mark.parametrize(
    "ddl, words",
    [
        ("id lng", "goes wrong at 'lng'"),
        ("id", "column 'id' has no type"),
        ("id long, id int", "column 'id' is given twice"),
        ("s struct<a:int>", "which a CSV file cannot hold"),
        ("a array<int>", "which a CSV file cannot hold"),
        ("d decimal(40,2)", "decimal(40,2) is not a Spark decimal"),
        ("  ", "--schema is empty"),
    ],
)
def test_a_schema_that_cannot_be_used_names_what_is_wrong(ddl, words):
    with pytest.raises(InvalidInputError, match=r"^--schema") as err:
        parse_schema(ddl)
    assert words in str(err.value)


def test_a_timestamp_format_is_checked():
    assert check_timestamp_format("%d/%m/%Y %H:%M:%S.%f") == "%d/%m/%Y %H:%M:%S.%f"
    for bad in ("dd/MM/yyyy", "%H%f", "%S.%f.%f"):
        with pytest.raises(InvalidInputError, match="--timestamp-format"):
            check_timestamp_format(bad)


# ---------------------------------------------------------------------------------------- reading


def test_typed_csv_is_read_with_exact_types_and_only_the_null_markers_given(orders):
    table = read_csv(str(orders), CsvOptions(parse_schema(SCHEMA)), "source")
    assert table.schema == pa.schema([("id", pa.int64()), ("seq", pa.int64()), ("amount", pa.decimal128(10, 2)),
                                      ("ts", pa.timestamp("us", tz="UTC")), ("note", pa.string())])
    assert table.to_pylist() == EXPECTED  # `n/a` is text: only an empty field is null unless --null-value says
    nulls = read_csv(str(orders), CsvOptions(parse_schema(SCHEMA), ("n/a",)), "source")
    assert nulls.column("note").to_pylist() == [None, "two\nlines", None]


def test_a_timestamp_format_with_fractions_and_offsets(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("id,ts,local\n1,03.01.2026 10:00:00.5+0200,03.01.2026 10:00:00.000001+0000\n"
                    "2,31.12.9999 23:59:59.123456+0000,01.01.0001 00:00:00.1+0000\n")
    options = CsvOptions(parse_schema("id int, ts timestamp, local timestamp_ntz"), (),
                         check_timestamp_format("%d.%m.%Y %H:%M:%S.%f%z"))
    rows = read_csv(str(path), options, "source").to_pylist()
    assert rows == [
        {"id": 1, "ts": datetime.datetime(2026, 1, 3, 8, 0, 0, 500000, tzinfo=UTC),
         "local": datetime.datetime(2026, 1, 3, 10, 0, 0, 1)},
        {"id": 2, "ts": datetime.datetime(9999, 12, 31, 23, 59, 59, 123456, tzinfo=UTC),
         "local": datetime.datetime(1, 1, 1, 0, 0, 0, 100000)},
    ]


@pytest.mark.parametrize(
    "ddl, fmt, words",
    [
        ("id long, seq long", None, "orders.csv:7: column 'seq': 'x' is not a valid bigint"),
        ("id long, amount decimal(10,2)", None,
         "orders.csv:7: column 'amount': '1.005' has more decimal places than decimal(10,2) holds"),
        ("id long, amount decimal(3,2)", None, "orders.csv:2: column 'amount': '10.5' has more digits than"),
        ("id long, ts timestamp", None,
         ("orders.csv:7: column 'ts': '04/01/2026 10:00' is not an ISO 8601 timestamp (give its format with "
          "--timestamp-format)")),
        ("id long, ts timestamp", "%Y-%m-%d %H:%M:%S",
         "orders.csv:3: column 'ts': '2026-01-03' does not match --timestamp-format '%Y-%m-%d %H:%M:%S'"),
        ("id long, note int", None,
         ("orders.csv:2: column 'note': 'n/a' is not a valid int (--schema gives note int); if it means null, add "
          "--null-value 'n/a'")),
    ],
)
def test_a_value_that_does_not_parse_names_the_file_line_and_column(tmp_path, ddl, fmt, words):
    path = tmp_path / "orders.csv"
    path.write_text(
        "id,seq,amount,ts,note\n"                       # line 1
        "1,1,10.5,2026-01-03 10:00:00,n/a\n"            # line 2
        "2,1,3,\"2026-01-03\",\"two\nlines\"\n"         # lines 3-4 (the row starts on line 3)
        "\n"                                            # line 5: empty, skipped
        "3,2,0.1,2026-01-04 00:00:00,\n"                # line 6
        "4,x,1.005,04/01/2026 10:00,\n"                 # line 7
    )
    options = CsvOptions(parse_schema(ddl), (), fmt)
    with pytest.raises(InvalidInputError) as err:
        read_csv(str(path), options, "source")
    assert str(err.value).startswith(f"source: {tmp_path}/")
    assert words in str(err.value), str(err.value)


def test_a_schema_column_missing_from_the_file_is_named(orders):
    with pytest.raises(InvalidInputError, match=r"--schema names column\(s\) \['amout'\] that .* does not have "
                                                r"\(its header: id, seq, amount, ts, note\)"):
        read_csv(str(orders), CsvOptions(parse_schema("id long, amout decimal(10,2)")), "source")


# ---------------------------------------------------------------------------------------- the commands


def test_write_with_a_schema_makes_a_typed_table_on_the_embedded_engine(orders, tmp_path):
    target = str(tmp_path / "t")
    done = run("write", str(orders), "--target", target, "--key", "id", "--sequence-by", "seq",
               "--schema", SCHEMA, "--batch-id", "0")
    assert done.returncode == 0, done.stderr
    assert table_types(target) == {"id": "int64", "seq": "int64", "amount": "decimal128(10, 2)",
                                   "ts": "timestamp[us, tz=UTC]", "note": "string"}
    assert read_rows(target) == EXPECTED


def test_without_null_markers_na_is_text_not_a_column_of_nulls(tmp_path):
    """`n/a` became null, and then the column "has no type (all values null)"."""
    path = tmp_path / "b.csv"
    path.write_text("id,status\n1,n/a\n2,n/a\n")
    target = str(tmp_path / "t")
    done = run("write", str(path), "--target", target, "--key", "id")
    assert done.returncode == 0, done.stderr
    assert [r["status"] for r in read_rows(target)] == ["n/a", "n/a"]
    other = str(tmp_path / "t2")
    typed = run("write", str(path), "--target", other, "--key", "id", "--schema", "status string",
                "--null-value", "n/a")
    assert typed.returncode == 0, typed.stderr
    assert [r["status"] for r in read_rows(other)] == [None, None]
    assert table_types(other)["status"] == "string"


def test_a_bad_value_is_one_error_line_naming_file_line_and_column(tmp_path):
    path = tmp_path / "b.csv"
    path.write_text("id,seq,ts\n1,1,2026-01-03 10:00:00\n2,2,3 Jan 2026\n")
    target = tmp_path / "t"
    done = run("write", str(path), "--target", str(target), "--key", "id", "--schema", "id long, seq long, ts timestamp")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"upsertsink: error: source: {path}:3: column 'ts': '3 Jan 2026' is not an ISO 8601 "
                           "timestamp (give its format with --timestamp-format) (--schema gives ts timestamp)\n")
    assert not target.exists()
    fixed = run("write", str(path), "--target", str(target), "--key", "id", "--schema", "id long, seq long, "
                "ts timestamp", "--timestamp-format", "%Y-%m-%d %H:%M:%S", "--null-value", "3 Jan 2026")
    assert fixed.returncode == 0, fixed.stderr


@pytest.mark.parametrize(
    "args, words",
    [
        (["--schema", "id lng"], "--schema 'id lng' is not a list of Spark DDL column definitions"),
        (["--timestamp-format", "yyyy-MM-dd"], "--timestamp-format 'yyyy-MM-dd' has no strptime directive"),
    ],
)
def test_options_that_cannot_be_used_are_usage_errors(orders, tmp_path, args, words):
    done = run("write", str(orders), "--target", str(tmp_path / "t"), "--key", "id", *args)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"upsertsink: error: {words}"), done.stderr


def test_typed_options_on_inputs_that_are_not_csv_are_refused(orders, tmp_path):
    target = str(tmp_path / "t")
    assert run("write", str(orders), "--target", target, "--key", "id", "--schema", SCHEMA).returncode == 0
    again = run("write", target, "--target", str(tmp_path / "t2"), "--key", "id", "--null-value", "NA")
    assert again.returncode == 2
    assert "--null-value 'NA' says how to read csv files, but the source" in again.stderr
    both = run("diff", target, target, "--key", "id", "--schema", "id long")
    assert both.returncode == 2 and "neither LEFT nor RIGHT is a csv file" in both.stderr


def test_diff_reads_csv_inputs_with_the_same_options(orders, tmp_path):
    target = str(tmp_path / "t")
    assert run("write", str(orders), "--target", target, "--key", "id", "--schema", SCHEMA).returncode == 0
    typed = run("diff", str(orders), target, "--key", "id", "--schema", SCHEMA, "--json")
    assert typed.returncode == 0, typed.stdout + typed.stderr
    assert json.loads(typed.stdout)["equal"] is True
    untyped = run("diff", str(orders), target, "--key", "id")  # amount 10.5 vs 10.50, ts as text: not comparable
    assert untyped.returncode != 0


# ---------------------------------------------------------------------------------------- both engines


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def test_both_engines_write_the_same_typed_table(spark, orders, tmp_path):
    embedded, on_spark = str(tmp_path / "e"), str(tmp_path / "s")
    options = ["--key", "id", "--sequence-by", "seq", "--schema", SCHEMA, "--null-value", "n/a", "--batch-id", "0"]
    first = cli("write", str(orders), "--target", embedded, *options)
    assert first.exit_code == 0, first.output
    second = cli("write", str(orders), "--target", on_spark, "--engine", "spark", *options)
    assert second.exit_code == 0, second.output
    assert table_types(embedded) == table_types(on_spark)
    assert read_rows(embedded) == read_rows(on_spark)
    assert [r["note"] for r in read_rows(on_spark)] == [None, "two\nlines", None]
    compared = cli("diff", str(orders), on_spark, "--key", "id", "--engine", "spark", "--schema", SCHEMA,
                   "--null-value", "n/a", "--json")
    assert compared.exit_code == 0, compared.output
    bad = tmp_path / "bad.csv"
    bad.write_text("id,seq,amount,ts,note\n1,1,1.5,2026-01-03,x\n2,y,1,2026-01-03,x\n")
    refused = cli("write", str(bad), "--target", str(tmp_path / "s2"), "--engine", "spark", *options)
    assert refused.exit_code == 2
    assert f"source: {bad}:3: column 'seq': 'y' is not a valid bigint" in refused.stderr


def test_replay_check_reads_typed_csv_inputs(spark, tmp_path, monkeypatch):
    monkeypatch.chdir(JOBS)  # replay-check puts the current directory on sys.path
    orders = tmp_path / "orders.csv"
    orders.write_text("order_id,customer,amount\n" + "".join(f"{i},c{i % 3},{i}.25\n" for i in range(30)))
    customers = tmp_path / "customers.csv"
    customers.write_text("customer,name\nc0,n/a\nc1,b\nc2,c\n")
    args = ["replay-check", "replay_jobs:totals", "--key", "customer", "--input", f"orders={orders}",
            "--input", f"customers={customers}", "--schema", "order_id long, amount decimal(10,2), name string",
            "--json"]
    done = cli(*args)
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["equal"] is True
    bad = tmp_path / "bad.csv"
    bad.write_text("order_id,customer,amount\n1,c1,one\n")
    refused = cli("replay-check", "replay_jobs:totals", "--key", "customer", "--input", f"orders={bad}",
                  "--input", f"customers={customers}", "--schema", "amount double")
    assert refused.exit_code == 2
    assert f"input 'orders': {bad}:2: column 'amount': 'one' is not a valid double" in refused.stderr


def test_a_schema_column_in_no_input_is_named_with_the_headers(orders, tmp_path):
    other = tmp_path / "other.csv"
    other.write_text("id,extra\n1,x\n")
    done = run("diff", str(orders), str(other), "--key", "id", "--schema", "id long, amout decimal(10,2)")
    assert done.returncode == 2
    assert "--schema names column(s) ['amout'] that no csv input has (headers: " in done.stderr
    assert f"{orders}: id, seq, amount, ts, note; {other}: id, extra)" in done.stderr
