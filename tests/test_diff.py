"""upsertsink.diff and `upsertsink diff`: keyed comparison on both engines, on real Delta tables."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest
from click.testing import CliRunner
from deltalake import write_deltalake

import upsertsink
from upsertsink import InvalidInputError, NotADeltaTableError, SchemaMismatchError
from upsertsink.cli import main

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64())])


def table(rows: list[tuple], schema: pa.Schema = SCHEMA) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(schema.names, r)) for r in rows], schema=schema)


def delta(path: Path, *versions: pa.Table) -> str:
    """A Delta table whose version i holds versions[i] (each version overwrites the last)."""
    for i, t in enumerate(versions):
        write_deltalake(str(path), t, mode="overwrite" if i else "error")
    return str(path)


BASE = [(1, "a", 1.0), (2, "b", 2.0), (3, "c", None), (4, None, 4.0), (5, "e", 5.5)]


@pytest.fixture(params=["embedded", "spark"])
def engine(request) -> str:
    if request.param == "spark":
        request.getfixturevalue("spark")  # the one session of the run, made active
    return request.param


def test_equal_tables_in_another_row_order_are_equal(tmp_path, engine):
    d = upsertsink.diff(table(BASE), table(list(reversed(BASE))), "id", engine=engine)
    assert d.equal and d.fingerprint_match
    assert (d.only_in_left, d.only_in_right, d.changed, d.changed_columns) == (0, 0, 0, {})
    assert (d.rows_left, d.rows_right, d.engine) == (5, 5, engine)
    assert d.samples().empty


def test_counts_and_samples_of_a_real_difference(tmp_path, engine):
    right_rows = [(2, "b", 2.5), (3, "c", None), (4, "d", 4.0), (5, "e", 5.5), (6, "f", 6.0), (7, "g", 7.0)]
    path = delta(tmp_path / "t", table(BASE), table(right_rows))
    d = upsertsink.diff(f"{path}@0", f"{path}@1", ["id"], engine=engine)
    assert d.engine == engine and not d.equal and not d.fingerprint_match
    assert upsertsink.diff(f"{path}@1", table(list(reversed(right_rows))), "id", engine=engine).equal
    assert (d.only_in_left, d.only_in_right, d.changed) == (1, 2, 2)
    assert d.changed_columns == {"name": 1, "amount": 1}
    s = d.samples(10)
    assert list(s["id"]) == [1, 2, 4, 6, 7]  # key order
    assert list(s["status"]) == ["only_in_left", "changed", "changed", "only_in_right", "only_in_right"]
    changed_2 = s[s["id"] == 2].iloc[0]
    assert changed_2["differs"] == ["amount"]
    assert (changed_2["left_amount"], changed_2["right_amount"]) == (2.0, 2.5)
    changed_4 = s[s["id"] == 4].iloc[0]
    assert changed_4["differs"] == ["name"] and changed_4["left_name"] is None
    assert changed_4["right_name"] == "d"
    only_left = s.iloc[0]
    assert (only_left["left_name"], only_left["right_name"], only_left["count_right"]) == ("a", None, 0)
    assert len(d.samples(2)) == 2
    text = str(d)  # the one report: same as format_text() and the CLI's text
    assert text == d.format_text()
    assert text.splitlines()[:4] == [
        f"left:  {path}@0 (5 rows)",
        f"right: {path}@1 (6 rows)",
        d.summary(),
        "first 5 of 5 differing keys, in key order:",
    ]
    assert "  changed        id=2\n                 amount: 2.0 -> 2.5\n" in text
    assert "  only in left   id=1: name='a', amount=1.0\n" in text
    assert "                 name: null -> 'd'\n" in text
    assert d.format_text(limit=2).endswith("(3 more differing keys not shown)")


def test_samples_beyond_the_collected_ones_are_recomputed(tmp_path, engine):
    left = table([(i, "x", float(i)) for i in range(30)])
    right = table([(i, "y", float(i)) for i in range(30)])
    d = upsertsink.diff(left, right, "id", engine=engine, sample_size=3)
    assert d.changed == 30 and d.changed_columns == {"name": 30}
    assert list(d.samples(3)["id"]) == [0, 1, 2]
    assert list(d.samples(12)["id"]) == list(range(12))


def test_duplicate_keys_are_reported_not_merged(tmp_path, engine):
    dup = table([(1, "a", 1.0), (1, "a", 1.0), (2, "b", 2.0)])
    same = upsertsink.diff(dup, dup, "id", engine=engine)
    assert not same.equal
    assert (same.duplicate_keys_left, same.duplicate_keys_right, same.duplicate_keys) == (1, 1, 1)
    one_side = upsertsink.diff(dup, table([(1, "a", 1.0), (2, "b", 2.0)]), "id", engine=engine)
    assert not one_side.equal
    assert (one_side.duplicate_keys_left, one_side.duplicate_keys_right) == (1, 0)
    assert (one_side.only_in_left, one_side.only_in_right, one_side.changed) == (0, 0, 0)
    row = one_side.samples().iloc[0]
    assert (row["id"], row["status"], row["count_left"], row["count_right"]) == (1, "duplicate_key", 2, 1)


def test_duplicate_keys_in_delta_tables_are_found_in_the_one_scan_path(tmp_path, engine):
    # Delta inputs carry row counts in their log, so Spark fingerprints the left side and collects its key
    # hashes in one scan; a duplicate must still be found when both sides hold the same rows.
    rows = [(1, "a", 1.0), (2, "b", 2.0), (2, "b", 2.0), (3, None, None)]
    left, right = delta(tmp_path / "l", table(rows)), delta(tmp_path / "r", table(list(reversed(rows))))
    d = upsertsink.diff(left, right, "id", engine=engine)
    assert d.fingerprint_match and not d.equal
    assert (d.duplicate_keys_left, d.duplicate_keys_right, d.changed) == (1, 1, 0)
    assert upsertsink.diff(left, delta(tmp_path / "s", table(rows[:2] + rows[3:])), "id", engine=engine).duplicate_keys_left == 1
    unique = delta(tmp_path / "u", table(rows[:2] + rows[3:]))
    assert upsertsink.diff(unique, table(list(reversed(rows[:2] + rows[3:]))), "id", engine=engine).equal


def test_nulls_equal_nulls_in_values_and_keys(tmp_path, engine):
    schema = pa.schema([("k", pa.string()), ("a", pa.int64()), ("b", pa.int64())])
    rows = [(None, None, 1), ("x", 1, None), ("y", None, None)]
    left, right = table(rows, schema), table(list(reversed(rows)), schema)
    assert upsertsink.diff(left, right, "k", engine=engine).equal
    # the null flag in the row hash keeps (null, 1) apart from (1, null)
    swapped = table([(None, 1, None), ("x", None, 1), ("y", None, None)], schema)
    d = upsertsink.diff(left, swapped, "k", engine=engine)
    assert (d.changed, d.changed_columns) == (2, {"a": 2, "b": 2})
    assert d.samples().iloc[0]["k"] is None  # nulls sort first


def test_values_swapped_between_rows_are_found(tmp_path, engine):
    left = table([(1, "a", 1.0), (2, "b", 2.0)])
    right = table([(1, "b", 1.0), (2, "a", 2.0)])
    d = upsertsink.diff(left, right, "id", engine=engine)
    assert not d.fingerprint_match and d.changed == 2


def test_floats_are_exact_unless_a_tolerance_is_given(tmp_path, engine):
    left = table([(1, "a", 0.1 + 0.2), (2, "b", math.nan), (3, "c", math.inf)])
    right = table([(1, "a", 0.3), (2, "b", math.nan), (3, "c", math.inf)])
    exact = upsertsink.diff(left, right, "id", engine=engine)
    assert (exact.changed, exact.changed_columns) == (1, {"amount": 1})  # NaN equals NaN, inf equals inf
    assert upsertsink.diff(left, right, "id", engine=engine, tolerance=1e-9).equal
    far = table([(1, "a", 0.5), (2, "b", math.nan), (3, "c", math.inf)])
    assert upsertsink.diff(left, far, "id", engine=engine, tolerance=1e-9).changed == 1


def test_columns_and_ignore_columns_choose_what_is_compared(tmp_path):
    engine = "embedded"  # column planning is shared by both engines
    left = table([(1, "a", 1.0), (2, "b", 2.0)])
    right = table([(1, "a", 9.0), (2, "b", 9.0)])
    assert upsertsink.diff(left, right, "id", ignore_columns=["amount"], engine=engine).equal
    assert upsertsink.diff(left, right, "id", columns=["id", "name"], engine=engine).equal
    d = upsertsink.diff(left, right, "id", columns=["amount"], engine=engine)
    assert d.columns == ["amount"] and d.changed_columns == {"amount": 2}
    extra = pa.schema([*SCHEMA, ("loaded_at", pa.string())])
    right_extra = table([(1, "a", 1.0, "now"), (2, "b", 2.0, "now")], extra)
    assert upsertsink.diff(left, right_extra, "id", ignore_columns=["loaded_at"], engine=engine).equal


def test_compound_keys_and_widened_integer_types(tmp_path, engine):
    narrow = pa.schema([("a", pa.int32()), ("b", pa.string()), ("v", pa.int16())])
    wide = pa.schema([("a", pa.int64()), ("b", pa.string()), ("v", pa.int64())])
    left = table([(1, "x", 1), (1, "y", 2), (2, "x", 3)], narrow)
    right = table([(2, "x", 3), (1, "y", 2), (1, "x", 1)], wide)
    assert upsertsink.diff(left, right, ["a", "b"], engine=engine).equal
    d = upsertsink.diff(left, table([(1, "x", 1), (1, "y", 5)], wide), ["a", "b"], engine=engine)
    assert (d.only_in_left, d.changed, d.changed_columns) == (1, 1, {"v": 1})
    assert list(d.samples()[["a", "b"]].itertuples(index=False, name=None)) == [(1, "y"), (2, "x")]


def test_mixed_input_kinds(tmp_path, spark):
    path = delta(tmp_path / "t", table(BASE))
    frames = {
        "spark": spark.createDataFrame(table(list(reversed(BASE)))),
        "arrow": table(BASE[::2] + BASE[1::2]),
        "pandas": table(BASE).to_pandas(),
    }
    for name, other in frames.items():
        d = upsertsink.diff(path, other, "id")
        assert d.equal, name
        assert d.engine == ("spark" if name == "spark" else "embedded")
    d = upsertsink.diff(frames["spark"], frames["pandas"].head(3), "id")
    assert d.engine == "spark" and d.only_in_left == 2


def test_bad_input_is_a_clear_invalid_input_error(tmp_path):
    path = delta(tmp_path / "t", table(BASE))
    other = table(BASE)
    cases = [
        (lambda: upsertsink.diff(path, other, "nope"), "key column 'nope'"),
        (lambda: upsertsink.diff(path, other, "id", columns=["nope"]), "unknown column 'nope'"),
        (lambda: upsertsink.diff(path, other, "id", ignore_columns=["nope"]), "unknown column 'nope'"),
        (lambda: upsertsink.diff(str(tmp_path / "missing"), other, "id"), "left: .*missing' does not exist"),
        (lambda: upsertsink.diff(f"{path}@7", other, "id"), "no version 7"),
        (lambda: upsertsink.diff(path, 42, "id"), "cannot compare a int"),
        (lambda: upsertsink.diff(path, other, "id", tolerance=-1), "tolerance"),
    ]
    for call, words in cases:
        with pytest.raises(InvalidInputError, match=words):
            call()
    (tmp_path / "plain").mkdir()
    with pytest.raises(NotADeltaTableError, match="left: .*plain' is not a Delta table"):
        upsertsink.diff(str(tmp_path / "plain"), other, "id")
    as_text = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.string())])
    with pytest.raises(SchemaMismatchError, match="'amount' has type double on the left and string"):
        upsertsink.diff(other, table([(1, "a", "1.0")], as_text), "id")
    extra = pa.schema([*SCHEMA, ("loaded_at", pa.string())])
    with pytest.raises(SchemaMismatchError, match="only in right: loaded_at"):
        upsertsink.diff(other, table([(1, "a", 1.0, "now")], extra), "id")
    assert issubclass(InvalidInputError, ValueError)


def test_schema_mismatch_on_spark_names_the_column(spark):
    left = spark.createDataFrame([(1, "x")], "id long, v string")
    right = spark.createDataFrame([(1, 1)], "id long, v long")
    with pytest.raises(SchemaMismatchError, match="'v' has type string on the left and bigint"):
        upsertsink.diff(left, right, "id")


# the CLI ---------------------------------------------------------------------------------------


def run_cli(*args: str):
    return CliRunner().invoke(main, ["diff", *args], catch_exceptions=False)


def test_cli_exit_codes_text_and_json(tmp_path):
    path = delta(tmp_path / "t", table(BASE), table([*BASE[1:], (9, "z", 9.0)]))
    same = run_cli(f"{path}@0", f"{path}@0", "--key", "id")
    assert same.exit_code == 0 and "equal: 5 rows" in same.stdout
    assert same.stderr == ""  # no progress display when stderr is not a terminal
    differ = run_cli(f"{path}@0", f"{path}@1", "--key", "id")
    assert differ.exit_code == 1
    assert "1 only in left, 1 only in right, 0 changed" in differ.stdout
    assert "only in left" in differ.stdout and "only in right" in differ.stdout  # the sample table
    js = run_cli(f"{path}@0", f"{path}@1", "-k", "id", "--format", "json", "--limit", "1")
    assert js.exit_code == 1
    data = json.loads(js.stdout)
    assert {"equal", "only_in_left", "only_in_right", "changed", "changed_columns", "samples"} <= set(data)
    assert (data["equal"], data["only_in_left"], data["only_in_right"]) == (False, 1, 1)
    assert len(data["samples"]) == 1 and data["samples"][0]["id"] == 1


def test_cli_ignore_column_and_changed_cells(tmp_path):
    path = delta(tmp_path / "t", table(BASE), table([(1, "A", 1.0), *BASE[1:]]))
    changed = run_cli(f"{path}@0", f"{path}@1", "--key", "id")
    assert changed.exit_code == 1 and "'a' -> 'A'" in changed.stdout
    ignored = run_cli(f"{path}@0", f"{path}@1", "--key", "id", "--ignore-column", "name")
    assert ignored.exit_code == 0


def test_cli_errors_are_one_line_with_exit_code_2(tmp_path):
    path = delta(tmp_path / "t", table(BASE))
    for args, words in [
        ((path, path, "--key", "nope"), "key column 'nope'"),
        ((path, str(tmp_path / "missing"), "--key", "id"), "does not exist"),
        ((path, path), "Missing option '--key'"),  # a usage error, in the same style
        ((path, path, "-k", "id", "--ignore-column", "id"), "cannot be ignored (--ignore-column)"),
        ((path, path, "-k", "id", "--ignore-column", "nope"), "--ignore-column: unknown column 'nope'"),
        ((path, path, "-k", "id", "--tolerance", "-1"), "--tolerance must be a finite number >= 0"),
        ((path, f"{path}@x", "-k", "id"), "the version after '@' must be a number"),
    ]:
        res = run_cli(*args)
        assert res.exit_code == 2, res.output
        assert res.stdout == ""
        assert res.stderr.startswith("upsertsink: error: ") and words in res.stderr, res.stderr
        assert res.stderr.count("\n") == 1


def test_messages_name_python_parameters_outside_the_cli(tmp_path):
    left = table(BASE)
    with pytest.raises(InvalidInputError, match="ignore_columns: unknown column 'nope'"):
        upsertsink.diff(left, left, "id", ignore_columns=["nope"])
    extra = pa.schema([*SCHEMA, ("loaded_at", pa.string())])
    with pytest.raises(SchemaMismatchError, match=r"ignore_columns=\[\.\.\.\]"):
        upsertsink.diff(left, table([(1, "a", 1.0, "now")], extra), "id")
    res = run_cli(delta(tmp_path / "a", left), delta(tmp_path / "b", table([(1, "a", 1.0, "now")], extra)), "-k", "id")
    assert res.exit_code == 2 and "leave them out with --ignore-column" in res.stderr, res.stderr
    assert "ignore_columns" not in res.stderr


def test_cli_output_piped_is_plain_text_without_box_drawing(tmp_path):
    path = delta(tmp_path / "t", table(BASE), table([(1, "A", 1.0), *BASE[1:]]))
    res = run_cli(f"{path}@0", f"{path}@1", "--key", "id")
    assert res.exit_code == 1
    assert res.stdout == upsertsink.diff(f"{path}@0", f"{path}@1", "id").format_text() + "\n"
    assert not set(res.stdout) & set("┏━┃│└─╇┡┩\x1b")  # no box characters, no colour codes


def test_files_are_inputs_too(tmp_path):
    import pyarrow.parquet as pq

    pq.write_table(table(BASE), tmp_path / "a.parquet")
    (tmp_path / "b.csv").write_text("id,name,amount\n5,e,5.5\n4,,4.0\n3,c,\n2,b,2.0\n1,a,1.5\n")
    d = upsertsink.diff(str(tmp_path / "a.parquet"), str(tmp_path / "b.csv"), "id")
    assert (d.changed, d.changed_columns) == (1, {"amount": 1})
    assert d.left_label == str(tmp_path / "a.parquet")
    res = run_cli(str(tmp_path / "a.parquet"), str(tmp_path / "a.parquet"), "-k", "id")
    assert res.exit_code == 0 and "equal: 5 rows" in res.stdout


@pytest.mark.parametrize("engine", ["embedded", "spark"])
def test_cli_as_a_real_process(tmp_path, engine):
    """The installed script; on Spark the JVM starts in the subprocess and must print nothing to stderr."""
    path = delta(tmp_path / "t", table(BASE), table(BASE[:3]))
    exe = Path(sys.executable).with_name("upsertsink")
    proc = subprocess.run(
        [str(exe), "diff", f"{path}@0", f"{path}@1", "--key", "id", "--format", "json", "--engine", engine],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 1, proc.stderr
    assert json.loads(proc.stdout)["only_in_left"] == 2
    assert json.loads(proc.stdout)["engine"] == engine
    assert proc.stderr == ""  # no JVM start-up noise, no progress display (stderr is not a terminal)


def test_pandas_none_in_int_column_is_not_a_false_difference(tmp_path):
    # pandas turns None in an int column into NaN (float); compared with an int64 table it stays equal
    frame = pd.DataFrame({"id": [1, 2], "n": [None, 3]})
    ints = pa.table({"id": pa.array([1, 2], pa.int64()), "n": pa.array([None, 3], pa.int64())})
    assert upsertsink.diff(frame, ints, "id").equal
