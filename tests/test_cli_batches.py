"""`upsertsink batches` (issue #48): the ledger of a table as text, rich tables on a terminal and JSON; the
orchestrator's check (--expect, --expect-dates) with its exit codes; `status`'s summary line per app."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable

from upsertsink import UpsertSink
from upsertsink.cli import main

CLI = str(Path(sys.executable).with_name("upsertsink"))
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("seq", pa.int64())])


def frame(*ids):
    return pa.Table.from_pylist([{"id": i, "name": f"n{i}", "seq": i} for i in ids], schema=SCHEMA)


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], check=False, capture_output=True, text=True,
                          env={**os.environ, "NO_COLOR": "1"})


def one_line_error(proc: subprocess.CompletedProcess, needle: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stdout == "" and proc.stderr.startswith("upsertsink: error: ") and proc.stderr.count("\n") == 1
    assert needle in proc.stderr, proc.stderr


@pytest.fixture
def table(tmp_path):
    """App `feed`: batches 0..2 and 5..6, batch 3 late, then a RESTORE that undid batch 6."""
    path = str(tmp_path / "t")
    sink = UpsertSink(path, ["id"], sequence_by="seq", app_id="feed", late_batches="apply")
    for b in (0, 1, 2, 5):
        sink.write(frame(b), batch_id=b)
    kept = sink.write(frame(3), batch_id=3).version  # late
    sink.write(frame(6), batch_id=6)
    DeltaTable(path).restore(kept)
    return path


def test_text_output_names_gaps_undone_and_late_batches(table):
    out = run("batches", table)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == f"{table}  version 6"
    assert lines[1:] == [
        "app feed",
        "  committed  0..3, 5  (5 ids)",
        "  gaps       4  (1 id)",
        "  undone     6 (by the RESTORE at version 6)",
        "  late       3",
    ]
    assert not set(out.stdout) & set("┏━┃│└─\x1b")  # piped: no box drawing, no colour codes


def test_detail_lists_each_batch_with_its_commit(table):
    out = run("batches", table, "--detail")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.strip().startswith("batch"))
    assert lines[header].split() == ["batch", "version", "time", "(UTC)", "operation", "inserted", "updated",
                                     "deleted", "late", "marker", "only", "fingerprint"]
    rows = [line.split() for line in lines[header + 1:] if line.strip()]
    assert [r[:2] for r in rows] == [["0", "0"], ["1", "1"], ["2", "2"], ["3", "4"], ["5", "3"]]
    late = rows[3]
    assert late[4:8] == ["MERGE", "1", "0", "0"] and late[8] == "yes" and len(late[9]) == 32  # the fingerprint
    data = json.loads(run("batches", table, "--detail", "--json").stdout)
    records = data["apps"]["feed"]["records"]
    assert [r["batch_id"] for r in records] == [0, 1, 2, 3, 5] and records[3]["late"] is True
    assert records[0]["time"] and records[0]["inserted"] == 1 and records[0]["in_log"] is True
    newest = json.loads(run("batches", table, "--detail", "--limit", "2", "--json").stdout)
    assert [r["batch_id"] for r in newest["apps"]["feed"]["records"]] == [3, 5]
    every = json.loads(run("batches", table, "--detail", "--all", "--json").stdout)
    assert [r["batch_id"] for r in every["apps"]["feed"]["records"]] == [0, 1, 2, 3, 5]


def test_json_and_a_version(table):
    data = json.loads(run("batches", table, "--json").stdout)
    assert data["table"] == table and data["version"] == 6
    feed = data["apps"]["feed"]
    assert (feed["committed"], feed["gaps"], feed["late"], feed["marker"], feed["records"]) == (
        [[0, 3], [5, 5]], [[4, 4]], [[3, 3]], 5, [])
    assert feed["undone"] == [{"from": 6, "to": 6, "restore_version": 6}]
    then = json.loads(run("batches", f"{table}@3", "--json").stdout)  # before the late batch
    assert then["version"] == 3 and then["apps"]["feed"]["committed"] == [[0, 2], [5, 5]]
    assert then["apps"]["feed"]["late"] == [] and then["apps"]["feed"]["undone"] == []


def test_expect_exits_1_naming_the_missing_ids_and_0_when_all_are_committed(table):
    ok = run("batches", table, "--expect", "0..3,5")
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.splitlines()[-1] == "all 5 expected ids committed for app feed"
    short = run("batches", table, "--expect", "0..7")
    assert short.returncode == 1, short.stderr
    assert "  expected   0..7: 3 of 8 missing: 4, 6..7 (undone by a RESTORE: 6)" in short.stdout
    assert short.stdout.splitlines()[-1] == "missing for app feed: 4, 6..7"
    data = json.loads(run("batches", table, "--expect", "0..7", "--json").stdout)
    assert data["all_committed"] is False and data["expected"] == [[0, 7]]
    feed = data["apps"]["feed"]
    assert (feed["missing"], feed["missing_undone"], feed["missing_unknown"]) == ([[4, 4], [6, 7]], [[6, 6]], [])
    assert run("batches", table, "--expect", "0..7", "--json").returncode == 1
    other = run("batches", table, "--app-id", "nobody", "--expect", "0..1")
    assert other.returncode == 1 and other.stdout.splitlines()[-1] == "missing for app nobody: 0..1"
    detail = json.loads(run("batches", table, "--expect", "2..4", "--detail", "--json").stdout)
    assert [r["batch_id"] for r in detail["apps"]["feed"]["records"]] == [2, 3]  # the expected ones committed


def test_expect_dates_checks_a_backfill_of_days(tmp_path):
    path = str(tmp_path / "daily")
    sink = UpsertSink(path, ["id"], sequence_by="seq", app_id="daily", late_batches="apply")
    for day in (20261105, 20261101, 20261102, 20261103, 20261201):  # the first four of November; one late
        sink.write(frame(day % 100), batch_id=day)
    check = run("batches", path, "--expect-dates", "2026-11-01..2026-11-05")
    assert check.returncode == 1, check.stderr
    assert check.stdout.splitlines()[-1] == "missing for app daily: 20261104"
    assert run("batches", path, "--expect-dates", "20261101..20261103").returncode == 0
    across = run("batches", path, "--expect-dates", "2026-11-30..2026-12-01", "--json")
    assert json.loads(across.stdout)["apps"]["daily"]["missing"] == [[20261130, 20261130]]
    text = run("batches", path).stdout
    assert "  late       20261101..20261103" in text  # sent after the 5th: applied late
    assert "  gaps       20261104, 20261106..20261200  (96 ids)" in text  # dates as integers: the ids between


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--expect", "5..1"], "Invalid value for '--expect': '5..1': the range is reversed"),
        (["--expect", "a..3"], "'a' is not a batch id"),
        (["--expect", ""], "is not a range"),
        (["--expect-dates", "2026-02-30"], "Invalid value for '--expect-dates': '2026-02-30': '2026-02-30' is not a date"),
        (["--expect-dates", "2026-11-30..2026-11-01"], "the first date is after the last"),
        (["--expect", "0..3", "--expect-dates", "2026-11-01"], "give --expect or --expect-dates, not both"),
        (["--all"], "--all goes with --detail"),
        (["--limit", "3"], "--limit goes with --detail"),
        (["--detail", "--all", "--limit", "3"], "give --all or --limit N, not both"),
        (["--detail", "--all", "--expect", "0..3"], "with --expect, --detail shows the expected batches"),
        (["--spark-only"], "--spark-only goes with --table NAME"),
        (["--table", "x.y"], "give PATH or --table NAME, not both"),
        (["--limit", "0", "--detail"], "Invalid value for '--limit'"),
    ],
)
def test_usage_errors_are_one_line_and_exit_2(table, args, needle):
    one_line_error(run("batches", table, *args), needle)


def test_errors_naming_the_table_exit_2(tmp_path, table):
    one_line_error(run("batches", str(tmp_path / "nothing")), "is not a Delta table")
    one_line_error(run("batches", f"{table}@99"), "has no version 99 (latest is 6)")
    one_line_error(run("batches"), "missing the table: give PATH or --table NAME")
    other = UpsertSink(table, ["id"], sequence_by="seq", app_id="other")
    other.write(frame(50), batch_id=0)
    one_line_error(run("batches", table, "--expect", "0..3"),
                   "was written by 2 apps (feed, other): name the one whose batches --expect checks with --app-id")
    assert run("batches", table, "--expect", "0..3", "--app-id", "feed").returncode == 0


def test_a_table_no_app_wrote(tmp_path):
    path = str(tmp_path / "plain")
    from deltalake import write_deltalake

    write_deltalake(path, frame(1))
    out = run("batches", path)
    assert out.returncode == 0 and out.stdout.splitlines()[1] == "  no batches committed by upsertsink"
    check = run("batches", path, "--expect", "0..2")
    assert check.returncode == 1
    assert check.stdout.splitlines()[-1] == "no app has committed batches: all 3 expected ids are missing (0..2)"
    assert json.loads(run("batches", path, "--expect", "0..2", "--json").stdout)["missing"] == [[0, 2]]


def test_on_a_terminal_the_ledger_is_rich_tables(table):
    """stdout a pseudo-terminal: rich tables (box drawing); the same facts as the plain text."""
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    proc = subprocess.Popen([CLI, "batches", table, "--detail", "--expect", "0..5"], stdout=slave,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env={**env, "COLUMNS": "160"})
    os.close(slave)
    shown = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        shown += chunk
    assert proc.wait(timeout=120) == 1, proc.stderr.read() if proc.stderr else ""
    os.close(master)
    text = shown.decode()
    assert "┏" in text or "━" in text, text  # a rich table
    assert "app feed" in text and "0..3, 5" in text and "missing for app feed: 4" in text
    assert "\x1b[" in text  # colour


def test_rich_output_through_click(table, monkeypatch):
    from upsertsink import cli_batches

    monkeypatch.setattr(cli_batches, "_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", "160")
    out = CliRunner().invoke(main, ["batches", table, "--detail"], catch_exceptions=False)
    assert out.exit_code == 0, out.output
    assert "batch" in out.output and "fingerprint" in out.output and "│" in out.output
    assert "undone" in out.output and "6 (by the RESTORE at version 6)" in out.output


def test_status_shows_a_ledger_line_per_app(table):
    text = run("status", table)
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    at = lines.index("  app feed: last batch id 5 (undone by a RESTORE: 6)")
    assert lines[at + 1] == "    committed 0..5, 1 missing, 1 undone, 1 late"
    info = json.loads(run("status", table, "--json").stdout)
    assert info["ledger"] == {"feed": {"committed": [[0, 3], [5, 5]], "missing": 1, "undone": 1, "late": 1,
                                       "unknown_below": None}}


# -- tables by name (the run's Spark session, through click's runner) -------------------------------------------


def cli(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


@pytest.fixture(params=["spark", "connect"])
def session(request):
    return request.getfixturevalue(request.param)


def test_a_named_table_by_its_files_and_by_its_name_only(session, schema):
    name = f"{schema}.feed"
    frame_of = lambda *ids: session.createDataFrame(frame(*ids))
    sink = UpsertSink.for_table(name, ["id"], sequence_by="seq", app_id="feed", late_batches="apply")
    for b in (0, 1, 2, 5):
        sink.write(frame_of(b), batch_id=b)
    kept = sink.write(frame_of(3), batch_id=3).version
    sink.write(frame_of(6), batch_id=6)
    session.sql(f"RESTORE TABLE {name} TO VERSION AS OF {kept}")
    by_files = cli("batches", "--table", name, "--json", "--detail")
    assert by_files.exit_code == 0, by_files.output
    by_name = cli("batches", "--table", name, "--json", "--detail", "--spark-only")
    assert by_name.exit_code == 0, by_name.output
    a, b = json.loads(by_files.stdout), json.loads(by_name.stdout)
    assert b.pop("spark_only") is True and a["location"] == b["location"]
    for data in (a, b):
        for r in data["apps"]["feed"]["records"]:
            r.pop("timestamp"), r.pop("time")  # DESCRIBE HISTORY's time is the log file's
    assert a == b
    feed = a["apps"]["feed"]
    assert (feed["committed"], feed["gaps"], feed["late"]) == ([[0, 3], [5, 5]], [[4, 4]], [[3, 3]])
    assert feed["undone"] == [{"from": 6, "to": 6, "restore_version": 7}] and a["table"] == f"table {name}"
    check = cli("batches", "--table", name, "--expect", "0..6", "--spark-only")
    assert check.exit_code == 1 and check.stdout.splitlines()[-1] == "missing for app feed: 4, 6"
    at = json.loads(cli("batches", "--table", f"{name}@{kept - 1}", "--json", "--spark-only").stdout)
    assert at["version"] == kept - 1 and at["apps"]["feed"]["committed"] == [[0, 2], [5, 5]]
    unknown = cli("batches", "--table", f"{schema}.nothing")
    assert unknown.exit_code == 2 and f"table {schema}.nothing does not exist in Spark's catalog" in unknown.stderr


def test_named_status_at_a_version_after_a_restore_reads_the_record(spark, schema):
    """`status --table NAME@N` in Spark-only mode gave the app's newest commit in the history up to N as its
    last batch id, although a RESTORE at or below N had undone it; now the record along the lineage, as for a
    path."""
    name = f"{schema}.st"
    sink = UpsertSink.for_table(name, ["id"], sequence_by="seq", app_id="feed", file_access=False)
    kept = sink.write(spark.createDataFrame(frame(0)), batch_id=0).version
    sink.write(spark.createDataFrame(frame(1)), batch_id=1)
    spark.sql(f"RESTORE TABLE {name} TO VERSION AS OF {kept}")
    restored = kept + 2
    sink.write(spark.createDataFrame(frame(7)), batch_id=7)  # after the RESTORE
    at = json.loads(cli("status", "--table", f"{name}@{restored}", "--spark-only", "--json").stdout)
    assert at["version"] == restored and at["batches"] == {"feed": 0}
    assert at["undone"] == {"feed": [[1, 1]]}
    assert at["ledger"]["feed"] == {"committed": [[0, 0]], "missing": 0, "undone": 1, "late": 0,
                                    "unknown_below": None}
    now = json.loads(cli("status", "--table", name, "--spark-only", "--json").stdout)
    assert now["batches"] == {"feed": 7} and now["ledger"]["feed"]["committed"] == [[0, 0], [7, 7]]
