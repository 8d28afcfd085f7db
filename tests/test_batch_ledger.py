"""Issue #48: the batch ledger. Which batch ids each app committed, the gaps among them, the ids a RESTORE
undid, the batches applied late and, per batch, its commit; read with real writes on every engine (embedded,
classic Spark, Connect), after a RESTORE, after log cleanup, and for tables known by name."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from deltalake import DeltaTable

import upsertsink
from upsertsink import InvalidInputError, NotADeltaTableError, UpsertSink
from upsertsink.sidecar import tombstones
from upsertsink.table import batch_ledger, commit_log, files, lineage, records
from upsertsink.table.batch_ledger import parse_dates, parse_ids

SCHEMA = {"id": pa.int64(), "name": pa.string(), "seq": pa.int64()}


def rows(*triples):
    return [{"id": i, "name": n, "seq": s} for i, n, s in triples]


def as_process_would() -> None:
    """Forget what this process keeps between writes (handles, markers, records, tombstones)."""
    files.forget_handles()
    lineage.forget()
    tombstones.forget_indexes()


def sink_for(path, **options):
    return UpsertSink(str(path), ["id"], sequence_by="seq", app_id="feed", late_batches="apply", **options)


def clean_log(path, keep_from: int) -> None:
    """What Delta's log cleanup does: a checkpoint, then the commits before ``keep_from`` removed."""
    DeltaTable(str(path)).create_checkpoint()
    for v in range(keep_from):
        (path / "_delta_log" / f"{v:020d}.json").unlink(missing_ok=True)


def restore(request, tool: str, path, version: int) -> None:
    if tool == "deltalake":
        DeltaTable(str(path)).restore(version)
    else:
        request.getfixturevalue("spark").sql(f"RESTORE TABLE delta.`{path}` TO VERSION AS OF {version}")


def write_feed(engine, sink) -> dict[int, int]:
    """Batches 0, 1, 2, 5, 6; batch 3 late; batch 7 changes no row (a marker-only commit). Batch id -> version."""
    at = {}
    for b in (0, 1, 2, 5, 6):
        at[b] = sink.write(engine.frame(rows((b, f"v{b}", 10 + b)), SCHEMA), batch_id=b).version
    late = sink.write(engine.frame(rows((3, "late", 3), (0, "older", 1)), SCHEMA), batch_id=3)
    assert late.late
    at[3] = late.version
    nothing = sink.write(engine.frame(rows((1, "older", 1)), SCHEMA), batch_id=7)  # older than the stored row
    assert (nothing.inserted, nothing.updated) == (0, 0)
    at[7] = nothing.version
    return at


def comparable(found: batch_ledger.BatchLedger) -> dict:
    """The ledger without what differs by engine and moment (the commit time, the engine's name, the table)."""
    data = found.to_dict()
    data.pop("table")
    for app in data["apps"].values():
        for r in app["records"]:
            for key in ("timestamp", "time", "engine", "operation"):
                r.pop(key)
    return data


def expected_feed(fingerprints: dict[int, str], first: int = 0) -> dict:
    """The ledger of write_feed's table, whose batch 0 committed as version ``first``."""

    def record(b, version, inserted, late=False, marker_only=False, rows_=1):
        version += first
        return {"batch_id": b, "in_log": True, "version": version, "inserted": inserted, "updated": 0, "deleted": 0,
                "late": late, "reapplied": False, "marker_only": marker_only, "fingerprint": fingerprints[b],
                "rows": rows_}

    return {"version": 6 + first, "apps": {"feed": {
        "app_id": "feed", "committed": [[0, 3], [5, 7]], "count": 7, "marker": 7, "gaps": [[4, 4]], "undone": [],
        "late": [[3, 3]], "unknown_below": None, "unknown": None,
        "records": [record(0, 0, 1), record(1, 1, 1), record(2, 2, 1), record(3, 5, 1, late=True, rows_=2),
                    record(5, 3, 1), record(6, 4, 1), record(7, 6, 0, marker_only=True)],
    }}}


def fingerprints_of(path) -> dict[int, str]:
    out = {}
    for commit in DeltaTable(str(path)).history():
        meta = commit_log.decode_metadata(commit)
        if meta:
            out.setdefault(meta["batch_id"], meta["fingerprint"])
    return out


# -- the ledger of every engine's table --------------------------------------------------------------------


def test_gaps_late_batches_and_marker_only_commits_are_the_same_ledger_on_every_engine(engine, tmp_path):
    path = tmp_path / "t"
    sink = sink_for(path)
    at = write_feed(engine, sink)
    assert at == {0: 0, 1: 1, 2: 2, 5: 3, 6: 4, 3: 5, 7: 6}
    for fresh in (False, True):  # this process, and a new one
        if fresh:
            as_process_would()
        found = sink.batches(detail="all")
        assert comparable(found) == expected_feed(fingerprints_of(path))
        assert found.committed == ((0, 3), (5, 7)) and found.gaps == ((4, 4),) and found.late == ((3, 3),)
        assert found.missing(range(10)) == [4, 8, 9] and found.missing([0, 3, 7]) == []
        assert found.verdict(4) == "never" and found.marker == 7
        assert found["feed"].summary() == "committed 0..7, 1 missing, 0 undone, 1 late"
    # every app of the table, read by path: the same ledger
    by_path = upsertsink.batches(str(path), detail="all")
    assert comparable(by_path) == expected_feed(fingerprints_of(path)) and by_path.table == str(path)
    # the newest two batches only, and no detail at all
    assert [r.batch_id for r in sink.batches(detail=2).records] == [6, 7]
    assert [r.batch_id for r in sink.batches().records] == [0, 1, 2, 3, 5, 6, 7]  # fewer than 50: all of them
    assert sink.batches(detail=0).records == ()
    # the table as it was at version 3 (before batches 6, 3 and 7)
    old = upsertsink.batches(str(path), version=3, detail="all")
    assert old.version == 3 and old.committed == ((0, 2), (5, 5)) and old.late == ()
    assert [(r.batch_id, r.version) for r in old.records] == [(0, 0), (1, 1), (2, 2), (5, 3)]


def test_a_restore_undoes_batches_in_the_ledger_and_a_resend_applies_them_again(engine, tool, request, tmp_path):
    path = tmp_path / "t"
    sink = sink_for(path)
    at = write_feed(engine, sink)
    restore(request, tool, path, at[2])  # undoes 5, 6, 3 and 7
    restored_at = DeltaTable(str(path)).version()
    for fresh in (False, True):
        if fresh:
            as_process_would()
        found = sink.batches(detail="all")
        assert found.committed == ((0, 2),) and found.gaps == () and found.late == ()
        assert found.undone == ((3, 3, restored_at), (5, 7, restored_at))
        assert [(r.batch_id, r.version) for r in found.records] == [(0, 0), (1, 1), (2, 2)]
        assert found.missing(range(8)) == [3, 4, 5, 6, 7]
        why = found["feed"].explain_missing(range(8))
        assert why["undone"] == ((3, 3), (5, 7)) and why["never"] == ((4, 4),) and why["unknown"] == ()
        assert found["feed"].summary() == "committed 0..2, 0 missing, 4 undone"
    resent = sink.write(engine.frame(rows((5, "v5", 15)), SCHEMA), batch_id=5)
    assert resent.reapplied
    found = sink.batches(detail="all")
    assert found.committed == ((0, 2), (5, 5)) and found.undone == ((3, 3, restored_at), (6, 7, restored_at))
    assert found.gaps == ((3, 4),)
    (five,) = [r for r in found.records if r.batch_id == 5]
    assert five.reapplied and five.version == resent.version and not five.late


@pytest.fixture(params=["deltalake", "spark"])
def tool(request):
    return request.param


def small_window(monkeypatch, commits: int = 8) -> None:
    """The recent window the summary reads, made small: "more commits than the window" costs each engine a few
    writes, not 20-odd; what is read is the same whatever the window's size."""
    monkeypatch.setattr(commit_log, "RECENT_COMMITS", commits)
    monkeypatch.setattr(files, "RECENT_COMMITS", commits)


def test_after_log_cleanup_the_summary_is_whole_and_cleaned_commits_have_no_detail(engine, tmp_path, monkeypatch):
    small_window(monkeypatch)
    path = tmp_path / "t"
    sink = sink_for(path)
    at = write_feed(engine, sink)
    for b in range(8, 18):  # more commits than the recent ones the summary reads
        sink.write(engine.frame(rows((b, "x", 100 + b)), SCHEMA), batch_id=b)
    clean_log(path, at[7] + 1)  # the commits of batches 0..7 (the late one too) are gone
    as_process_would()
    found = sink.batches(detail="all")
    assert found.committed == ((0, 3), (5, 17)) and found.gaps == ((4, 4),) and found.floor == 0
    assert found.late == ((3, 3),)  # the record says so: the late commit itself is gone
    assert [r.batch_id for r in found.records if not r.in_log] == [0, 1, 2, 3, 5, 6, 7]
    assert all(r.in_log for r in found.records if r.batch_id >= 8)
    (three,) = [r for r in found.records if r.batch_id == 3]
    assert three.late and three.version is None
    assert found.missing(range(18)) == [4]


def test_the_summary_reads_the_recent_commits_only(engine, tmp_path, monkeypatch):
    """The cost promise: the summary of a table with many commits reads its newest commits, not the log.
    "Many" is more than the recent window (made small: 8 commits)."""
    small_window(monkeypatch)
    path = tmp_path / "t"
    sink = sink_for(path)
    sink.write(engine.frame(rows((0, "a", 1)), SCHEMA), batch_id=0)
    sink.write(engine.frame(rows((1, "b", 1)), SCHEMA), batch_id=2)
    sink.write(engine.frame(rows((2, "c", 0)), SCHEMA), batch_id=1)  # late
    for b in range(3, 16):
        sink.write(engine.frame(rows((b, "x", b)), SCHEMA), batch_id=b)
    as_process_would()
    listed: list[int | None] = []
    log_files: list[int] = []  # commit files read one by one (commit_info, or history's own reading)
    history, read = commit_log.history, commit_log._log_entry

    def counting_history(table, limit, *a, **k):
        listed.append(limit)
        return history(table, limit, *a, **k)

    def counting_read(uri, version, *a, **k):
        log_files.append(version)
        return read(uri, version, *a, **k)

    # the snapshot holds its own reference to history (files.py); the ledger's windows read commit_log's
    monkeypatch.setattr(files, "history", counting_history)
    monkeypatch.setattr(commit_log, "history", counting_history)
    monkeypatch.setattr(commit_log, "_log_entry", counting_read)
    summary = upsertsink.batches(str(path), detail=0)
    assert summary.committed == ((0, 15),) and summary.late == ((1, 1),)
    assert listed == [8] and len(log_files) <= 1, (listed, log_files)
    newest = upsertsink.batches(str(path), detail=5)
    assert [r.batch_id for r in newest.records] == [11, 12, 13, 14, 15] and all(r.in_log for r in newest.records)
    assert all(limit is not None and limit <= 8 for limit in listed)
    everything = upsertsink.batches(str(path), detail="all")
    assert all(r.in_log for r in everything.records) and len(everything.records) == 16
    assert next(r for r in everything.records if r.batch_id == 1).late


# -- apps ----------------------------------------------------------------------------------------------------


def test_every_app_is_listed_and_a_one_app_question_names_them(engine, tmp_path, monkeypatch):
    small_window(monkeypatch)
    path = tmp_path / "t"
    quiet = UpsertSink(str(path), ["id"], sequence_by="seq", app_id="quiet")
    quiet.write(engine.frame(rows((1, "q", 1)), SCHEMA), batch_id=4)
    busy = UpsertSink(str(path), ["id"], sequence_by="seq", app_id="busy")
    for b in range(10):  # pushes the quiet app's commit out of the recent ones
        busy.write(engine.frame(rows((100 + b, "b", 1)), SCHEMA), batch_id=b * 2)
    as_process_would()
    found = upsertsink.batches(str(path), detail=0)
    assert sorted(found.apps) == ["busy", "quiet"]
    assert found["quiet"].committed == ((4, 4),) and found["busy"].gaps == tuple((i, i) for i in range(1, 18, 2))
    with pytest.raises(InvalidInputError, match=r"written by 2 apps \(busy, quiet\).*app_id"):
        found.missing(range(3))
    with pytest.raises(KeyError, match="no app 'other'"):
        found["other"]
    assert upsertsink.batches(str(path), "quiet", detail=0).missing(range(6)) == [0, 1, 2, 3, 5]
    nobody = upsertsink.batches(str(path), app_id="nobody")
    assert nobody.committed == () and nobody.missing(range(2)) == [0, 1] and list(nobody.apps) == ["nobody"]
    assert quiet.batches(app_id="busy").marker == 18


def test_a_table_that_is_not_there_has_no_ledger_and_a_new_sink_an_empty_one(tmp_path):
    with pytest.raises(NotADeltaTableError, match="is not a Delta table"):
        upsertsink.batches(str(tmp_path / "nothing"))
    empty = sink_for(tmp_path / "new").batches()
    assert empty.committed == () and empty.version is None and empty.missing(range(3)) == [0, 1, 2]
    with pytest.raises(InvalidInputError, match="path, or its name"):
        upsertsink.batches()
    with pytest.raises(InvalidInputError, match="detail must be"):
        upsertsink.batches(str(tmp_path / "nothing"), detail="some")
    with pytest.raises(InvalidInputError, match="version must be"):
        upsertsink.batches(str(tmp_path / "nothing"), version=-1)


def test_the_ledger_is_json_and_the_public_api():
    assert "batches" in upsertsink.__all__ and "BatchLedger" in upsertsink.__all__
    assert upsertsink.batches is batch_ledger.batches and upsertsink.BatchLedger is batch_ledger.BatchLedger
    one = batch_ledger.AppLedger.from_record("a", records.Record(((0, 3), (6, 9)), 0, ((4, 5, 12),), None, ((2, 2),)))
    assert json.loads(json.dumps(batch_ledger.BatchLedger("t", 12, {"a": one}).to_dict()))["apps"]["a"] == {
        "app_id": "a", "committed": [[0, 3], [6, 9]], "count": 8, "marker": 9, "gaps": [[4, 5]],
        "undone": [{"from": 4, "to": 5, "restore_version": 12}], "late": [[2, 2]], "unknown_below": None,
        "unknown": None, "records": []}
    assert one.summary() == "committed 0..9, 2 missing, 2 undone, 1 late"
    below = batch_ledger.AppLedger.from_record("a", records.Record(((300, 310),), 300, (), "log cleanup"))
    assert below.summary() == "committed 300..310, 0 missing, 0 undone, unknown below 300"
    assert below.explain_missing(range(298, 312))["unknown"] == ((298, 299),)
    assert below.missing(range(298, 312)) == [298, 299, 311]


# -- the record carries the late ids -------------------------------------------------------------------------


def test_the_record_keeps_late_ids_through_restores_and_its_bounds():
    r = records.Record()
    for b, late in ((5, False), (2, True), (3, True), (9, False)):
        r = r.add(b, late)
    assert r.ranges == ((2, 3), (5, 5), (9, 9)) and r.late == ((2, 3),)
    assert r.encode() == {"batches": [[2, 3], [5, 5], [9, 9]], "batches_late": [[2, 3]]}
    assert records.Record.decode(r.encode()) == r
    assert "batches_late" not in records.Record().add(1).encode()  # no late id: no bytes for it
    before_restore = records.Record(((2, 2), (5, 5)), late=((2, 2),))
    after = before_restore.restored(r, at=20, to=4)
    assert after.late == ((2, 2),) and after.undone == ((3, 3, 20), (9, 9, 20))
    sparse = records.Record()
    for b in range(0, 2 * (records.MAX_RANGES + 10), 2):
        sparse = sparse.add(b, late=b < 10)
    assert sparse.floor > 10 and sparse.late == ()  # below the floor nothing is known, late or not


# -- expected ids ---------------------------------------------------------------------------------------------


def test_expected_ids_and_dates_parse_and_bad_ones_say_why():
    assert parse_ids("0..99") == ((0, 99),) and parse_ids("7") == ((7, 7),)
    assert parse_ids("0..9, 12,10..11,20..29") == ((0, 12), (20, 29))
    assert parse_dates("2026-11-01..2026-11-30") == ((20261101, 20261130),)
    assert parse_dates("20261130..20261202") == ((20261130, 20261130), (20261201, 20261202))
    assert parse_dates("2024-02-28..2024-03-01") == ((20240228, 20240229), (20240301, 20240301))
    assert parse_dates("2026-11-05,20261107") == ((20261105, 20261105), (20261107, 20261107))
    for bad, why in (("5..1", "reversed"), ("a..3", "not a batch id"), ("-1..3", "not a batch id"),
                     ("1..", "not a range"), ("", "not a range"), ("1,,2", "not a range"), ("1..2..3", "not a range")):
        with pytest.raises(InvalidInputError, match=why):
            parse_ids(bad)
    for bad, why in (("2026-02-30", "not a date"), ("2026-11-30..2026-11-01", "after the last"),
                     ("2026/11/01", "YYYY-MM-DD or YYYYMMDD"), ("20261301", "not a date")):
        with pytest.raises(InvalidInputError, match=why):
            parse_dates(bad)


# -- tables known by name ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("file_access", [None, False])
def test_a_named_table_gives_the_same_ledger_by_its_files_and_by_its_name(spark, schema, file_access):
    name = f"{schema}.feed"

    class Named:  # the engine that builds Spark frames for write_feed
        @staticmethod
        def frame(r, s):
            return spark.createDataFrame(pa.Table.from_pylist(r, schema=pa.schema(list(s.items()))))

    sink = UpsertSink.for_table(name, ["id"], sequence_by="seq", app_id="feed", late_batches="apply",
                                file_access=file_access)
    at = write_feed(Named, sink)
    assert at[0] == 1  # version 0: the table, created empty
    location = spark.sql(f"DESCRIBE DETAIL {name}").collect()[0]["location"].removeprefix("file:")
    expected = expected_feed(fingerprints_of(location), first=1)
    for fresh in (False, True):
        if fresh:
            as_process_would()
        got = comparable(sink.batches(detail="all"))
        assert got == expected, json.dumps([got, expected])
        assert comparable(upsertsink.batches(table=name, detail="all")) == expected
        assert comparable(upsertsink.batches(table=name, detail="all", spark_only=True)) == expected
    for spark_only in (False, True):  # the table as it was when batch 5 had just committed
        then = upsertsink.batches(table=name, version=at[5], detail="all", spark_only=spark_only)
        assert then.committed == ((0, 2), (5, 5)) and [r.version for r in then.records] == [1, 2, 3, 4]
        assert then.table == f"table {name}" and then.version == at[5]
    spark.sql(f"RESTORE TABLE {name} TO VERSION AS OF {at[2]}")
    for spark_only in (False, True):
        found = upsertsink.batches(table=name, spark_only=spark_only)
        assert found.committed == ((0, 2),) and found.undone == ((3, 3, 8), (5, 7, 8)), spark_only
