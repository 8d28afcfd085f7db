"""Issue #45 items 3-5: the rows a write leaves alone are counted (unchanged, ignored at an equal sequence,
older), a committed batch can be restated on purpose (``restate=True``), and a dry run (``dry_run=True``)
says what a write would do without committing anything. Real tables, both engines and Spark Connect."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from sink_helpers import read_rows, version

from upsertsink import UpsertSink
from upsertsink.errors import InvalidInputError

S = {"id": pa.int64(), "bal": pa.int64(), "seq": pa.int64(), "op": pa.string()}
KV = {"id": pa.int64(), "bal": pa.int64()}


def _sink(path: str, **kw) -> UpsertSink:
    return UpsertSink(path, "id", sequence_by="seq", delete_when="op = 'D'", **kw)


def _rows(*rows: tuple) -> list[dict]:
    return [{"id": i, "bal": b, "seq": q, "op": o} for i, b, q, o in rows]


BASE = _rows(*((i, i, 1, "I") for i in range(10)))
# ids 0-2 corrected at the same sequence, 3-4 sent again as they are, 7 older than stored, 20 new
CORRECTION = _rows((0, 100, 1, "I"), (1, 101, 1, "I"), (2, 102, 1, "I"), (3, 3, 1, "I"), (4, 4, 1, "I"),
                   (7, 0, 0, "I"), (20, 20, 1, "I"))


def _table(path: str) -> dict[int, int]:
    return {r["id"]: r["bal"] for r in read_rows(path)}


def _files(path: str) -> list[str]:
    return sorted(os.path.relpath(os.path.join(d, f), path) for d, _, fs in os.walk(path) for f in fs)


# -- 3. what was left alone --------------------------------------------------------------------------------------


def test_rows_left_alone_are_counted_by_why(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = _sink(path)
    sink.write(engine.frame(BASE, S), batch_id=1)
    r = sink.write(engine.frame(CORRECTION, S), batch_id=2)
    assert (r.inserted, r.updated, r.deleted) == (1, 0, 0)
    assert (r.unchanged, r.ignored_equal_sequence, r.older, r.stale) == (2, 3, 1, 0)
    assert _table(path)[0] == 0  # equal sequence: the stored row stays


def test_without_a_sequence_rows_equal_to_the_stored_ones_are_unchanged(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id")
    sink.write(engine.frame([{"id": i, "bal": i} for i in range(5)], KV), batch_id=1)
    r = sink.write(engine.frame([{"id": 0, "bal": 0}, {"id": 1, "bal": 9}, {"id": 9, "bal": 9}], KV), batch_id=2)
    assert (r.inserted, r.updated, r.unchanged, r.ignored_equal_sequence, r.older) == (1, 1, 1, 0, 0)


def test_a_write_that_changes_every_row_counts_nothing_left_alone(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = _sink(path)
    sink.write(engine.frame(BASE, S), batch_id=1)
    r = sink.write(engine.frame(_rows((0, 5, 2, "I"), (1, 0, 2, "D"), (30, 1, 1, "I")), S), batch_id=2)
    assert (r.inserted, r.updated, r.deleted, r.unchanged, r.ignored_equal_sequence, r.older) == (1, 1, 1, 0, 0, 0)


# -- 4. restating a committed batch ------------------------------------------------------------------------------


FIX = _rows((0, 500, 1, "I"), (1, 0, 1, "D"), (20, 21, 1, "I"))


def test_a_restated_batch_replaces_its_rows_applies_its_deletes_and_becomes_the_batchs_content(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = _sink(path)
    sink.write(engine.frame(BASE, S), batch_id=1)
    sink.write(engine.frame(_rows((20, 20, 1, "I")), S), batch_id=2)
    r = sink.write(engine.frame(FIX + _rows((5, 5, 0, "I")), S), batch_id=1, restate=True)
    assert r.restated and not r.skipped
    assert (r.inserted, r.updated, r.deleted, r.older) == (0, 2, 1, 1)
    table = _table(path)
    assert table[0] == 500 and 1 not in table and table[20] == 21 and table[5] == 5
    # the corrected content is the batch's now: sent again it is skipped, the old content is refused
    again = _sink(path).write(engine.frame(FIX + _rows((5, 5, 0, "I")), S), batch_id=1)
    assert again.skipped and again.replay_check == "matched"
    with pytest.raises(Exception, match="different content"):
        _sink(path).write(engine.frame(BASE, S), batch_id=1)
    assert _sink(path).last_batch_id() == 2


def test_without_a_sequence_a_restatement_replaces_the_batchs_keys(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id")
    sink.write(engine.frame([{"id": 1, "bal": 1}, {"id": 2, "bal": 2}], KV), batch_id=7)
    r = sink.write(engine.frame([{"id": 1, "bal": 10}, {"id": 2, "bal": 2}], KV), batch_id=7, restate=True)
    assert r.restated and (r.updated, r.unchanged) == (1, 1)
    assert _table(path) == {1: 10, 2: 2}


def test_a_restated_row_replaces_a_delete_the_batch_had_recorded(tmp_path):
    path = str(tmp_path / "t")
    sink = _sink(path)
    sink.write(pa.Table.from_pylist(_rows((1, 1, 1, "I"), (2, 2, 1, "I")), pa.schema(list(S.items()))), batch_id=1)
    wrong = _rows((1, 0, 2, "D"))
    sink.write(pa.Table.from_pylist(wrong, pa.schema(list(S.items()))), batch_id=2)
    assert 1 not in _table(path)
    right = _rows((1, 7, 2, "I"))
    r = sink.write(pa.Table.from_pylist(right, pa.schema(list(S.items()))), batch_id=2, restate=True)
    assert r.restated and r.inserted == 1 and r.stale == 0
    assert _table(path)[1] == 7
    # a late row older than the restated one is still kept out
    late = _sink(path, late_batches="apply").write(
        pa.Table.from_pylist(_rows((1, 3, 1, "I")), pa.schema(list(S.items()))), batch_id=0)
    assert _table(path)[1] == 7 and late.stale == 1


def test_a_restatement_is_labelled_in_status(engine, tmp_path):
    from upsertsink.table.status import status

    path = str(tmp_path / "t")
    sink = _sink(path)
    sink.write(engine.frame(BASE, S), batch_id=1)
    sink.write(engine.frame(FIX, S), batch_id=1, restate=True)
    commits = status(path)["commits"]
    assert [(c["batch_id"], c["restated"]) for c in commits] == [(1, True), (1, False)]


def test_a_restatement_a_restore_undid_no_longer_holds_the_batchs_content(tmp_path):
    path = str(tmp_path / "t")
    sink = _sink(path)
    schema = pa.schema(list(S.items()))
    sink.write(pa.Table.from_pylist(BASE, schema), batch_id=1)
    sink.write(pa.Table.from_pylist(FIX, schema), batch_id=1, restate=True)
    DeltaTable(path).restore(0)
    again = _sink(path).write(pa.Table.from_pylist(BASE, schema), batch_id=1)
    assert again.skipped and again.replay_check == "matched"
    with pytest.raises(Exception, match="different content"):
        _sink(path).write(pa.Table.from_pylist(FIX, schema), batch_id=1)


def test_restating_a_batch_never_committed_is_an_ordinary_write(tmp_path):
    path = str(tmp_path / "t")
    r = _sink(path).write(pa.Table.from_pylist(BASE, pa.schema(list(S.items()))), batch_id=4, restate=True)
    assert not r.restated and r.inserted == 10
    with pytest.raises(InvalidInputError, match="batch_id"):
        _sink(path).write(pa.Table.from_pylist(BASE, pa.schema(list(S.items()))), restate=True)


# -- 5. dry runs -------------------------------------------------------------------------------------------------


def test_a_dry_run_counts_what_the_write_does_and_commits_nothing(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = _sink(path)
    sink.write(engine.frame(BASE, S), batch_id=1)
    sink.write(engine.frame(_rows((8, 0, 5, "D")), S), batch_id=2)
    batch = CORRECTION + _rows((9, 0, 2, "D"), (8, 1, 4, "I"), (5, 55, 3, "I"))
    before = _files(path)
    dry = sink.write(engine.frame(batch, S), batch_id=3, dry_run=True)
    assert dry.dry_run and dry.refused is None and dry.version == 1
    assert _files(path) == before and version(path) == 1  # nothing committed, nothing recorded
    real = sink.write(engine.frame(batch, S), batch_id=3)
    counts = ("inserted", "updated", "deleted", "stale", "unchanged", "ignored_equal_sequence", "older", "rows")
    assert [getattr(dry, c) for c in counts] == [getattr(real, c) for c in counts]
    assert (real.inserted, real.updated, real.deleted, real.stale) == (1, 1, 1, 1)


def test_a_dry_run_of_a_replay_says_skipped_and_of_a_divergent_one_says_refused(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = _sink(path)
    sink.write(engine.frame(BASE, S), batch_id=1)
    sink.write(engine.frame(FIX, S), batch_id=3)
    replay = sink.write(engine.frame(BASE, S), batch_id=1, dry_run=True)
    assert replay.skipped and replay.dry_run and replay.replay_check == "matched"
    divergent = sink.write(engine.frame(FIX, S), batch_id=1, dry_run=True)
    assert divergent.refused is not None and "different content" in divergent.refused
    behind = sink.write(engine.frame(FIX, S), batch_id=2, dry_run=True)
    assert behind.refused is not None and "never committed" in behind.refused.lower()
    assert version(path) == 1


def test_a_dry_run_on_a_new_table_creates_nothing(engine, tmp_path):
    path = tmp_path / "t"
    r = _sink(str(path)).write(engine.frame(BASE + _rows((99, 0, 1, "D")), S), batch_id=1, dry_run=True)
    assert r.dry_run and r.version is None and (r.inserted, r.deleted) == (10, 0)
    assert not path.exists()


def test_a_dry_run_of_a_restatement_counts_it(tmp_path):
    path = str(tmp_path / "t")
    schema = pa.schema(list(S.items()))
    _sink(path).write(pa.Table.from_pylist(BASE, schema), batch_id=1)
    dry = _sink(path).write(pa.Table.from_pylist(FIX, schema), batch_id=1, restate=True, dry_run=True)
    assert dry.restated and dry.dry_run and (dry.inserted, dry.updated, dry.deleted) == (1, 1, 1)
    assert version(path) == 0 and _table(path)[0] == 0


def test_dry_runs_and_restatements_are_refused_for_history_tables(tmp_path):
    sink = UpsertSink(str(tmp_path / "t"), "id", sequence_by="seq", scd_type=2)
    data = pa.Table.from_pylist(BASE, pa.schema(list(S.items())))
    for option in ({"dry_run": True}, {"restate": True}):
        with pytest.raises(InvalidInputError, match="history table"):
            sink.write(data, batch_id=1, **option)


# -- named tables (Spark-only mode) --------------------------------------------------------------------------------


def test_restate_and_dry_run_on_a_table_known_only_by_name(spark, schema):
    name = f"{schema}.acct"
    sink = UpsertSink.for_table(name, "id", sequence_by="seq", delete_when="op = 'D'", file_access=False)
    frame = lambda rows: spark.createDataFrame(pa.Table.from_pylist(rows, pa.schema(list(S.items()))))
    sink.write(frame(BASE), batch_id=1)
    dry = sink.write(frame(CORRECTION), batch_id=2, dry_run=True)
    assert (dry.inserted, dry.unchanged, dry.ignored_equal_sequence, dry.older) == (1, 2, 3, 1)
    r = sink.write(frame(FIX), batch_id=1, restate=True)
    assert r.restated and (r.inserted, r.updated, r.deleted) == (1, 1, 1)
    rows = {x["id"]: x["bal"] for x in spark.table(name).collect()}
    assert rows[0] == 500 and 1 not in rows
    assert sink.write(frame(FIX), batch_id=1).replay_check == "matched"


# -- the command line ----------------------------------------------------------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess:
    exe = os.path.join(os.path.dirname(sys.executable), "upsertsink")
    return subprocess.run([exe, *args], check=False, capture_output=True, text=True, timeout=300)


def test_the_cli_counts_rows_left_alone_and_takes_restate_and_dry_run(tmp_path):
    import pyarrow.parquet as pq

    schema = pa.schema(list(S.items()))
    base, corr, fix = (str(tmp_path / f"{n}.parquet") for n in ("base", "corr", "fix"))
    pq.write_table(pa.Table.from_pylist(BASE, schema), base)
    pq.write_table(pa.Table.from_pylist(CORRECTION, schema), corr)
    pq.write_table(pa.Table.from_pylist(FIX, schema), fix)
    target = str(tmp_path / "t")
    common = ["--target", target, "--key", "id", "--sequence-by", "seq", "--delete-when", "op = 'D'"]
    assert _cli("write", base, *common, "--batch-id", "1").returncode == 0
    out = _cli("write", corr, *common, "--batch-id", "2")
    assert out.returncode == 0, out.stderr
    assert "2 unchanged, 3 ignored at an equal sequence, 1 older than stored" in out.stdout
    assert "--restate" in out.stdout
    got = json.loads(_cli("write", fix, *common, "--batch-id", "1", "--restate", "--dry-run", "--json").stdout)
    assert got["dry_run"] and got["restated"] and (got["inserted"], got["updated"], got["deleted"]) == (0, 2, 1)
    assert version(target) == 1
    dry = _cli("write", fix, *common, "--batch-id", "1", "--restate", "--dry-run")
    assert dry.returncode == 0 and dry.stdout.startswith("dry run: batch 1 would be restated") and "Nothing was" in dry.stdout
    done = json.loads(_cli("write", fix, *common, "--batch-id", "1", "--restate", "--json").stdout)
    assert done["restated"] and done["version"] == 2 and {"unchanged", "ignored_equal_sequence"} <= set(done)
    refused = _cli("write", corr, *common, "--batch-id", "1", "--dry-run")
    assert refused.returncode == 1 and "would be refused" in refused.stdout
    assert _cli("write", fix, *common, "--restate").returncode == 2
    status = _cli("status", target)
    assert "restated" in status.stdout


# -- Spark Connect ---------------------------------------------------------------------------------------------------


def test_counts_restate_and_dry_run_over_spark_connect(connect, tmp_path):
    path = str(tmp_path / "t")
    sink = _sink(path)
    frame = lambda rows: connect.createDataFrame(pa.Table.from_pylist(rows, pa.schema(list(S.items()))))
    sink.write(frame(BASE), batch_id=1)
    dry = sink.write(frame(CORRECTION), batch_id=2, dry_run=True)
    assert dry.dry_run and version(path) == 0
    r = sink.write(frame(CORRECTION), batch_id=2)
    assert [(x.inserted, x.unchanged, x.ignored_equal_sequence, x.older) for x in (dry, r)] == [(1, 2, 3, 1)] * 2
    fixed = sink.write(frame(FIX), batch_id=1, restate=True)
    assert fixed.restated and (fixed.inserted, fixed.updated, fixed.deleted) == (0, 2, 1)
    assert _table(path)[0] == 500 and 1 not in _table(path)
    assert sink.write(frame(FIX), batch_id=1).replay_check == "matched"
