"""History tables (SCD type 2): the contract of issue #23, on both engines, against a reference model."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sink_helpers import read_rows

from upsertsink import UpsertSink
from upsertsink.errors import DuplicateKeyError, ReplayDivergenceError, SchemaMismatchError

SCHEMA = {"id": pa.int64(), "seq": pa.int64(), "addr": pa.string(), "tier": pa.string(), "op": pa.string()}
START, END = "__START_AT", "__END_AT"


def history_sink(path, **options) -> UpsertSink:
    options.setdefault("track_history_except", ["op"])
    return UpsertSink(str(path), keys=["id"], sequence_by="seq", delete_when="op = 'D'", scd_type=2, **options)


def ev(id_, seq, addr=None, tier="x", op="U") -> dict:
    return {"id": id_, "seq": seq, "addr": addr, "tier": tier, "op": op}


def versions(path) -> list[tuple]:
    return [(r["id"], r[START], r[END], r["addr"], r["tier"], r["seq"]) for r in read_rows(path, ["id", START])]


def model(events: list[dict], tracked: list[str], ignore_null_updates: bool = False) -> list[tuple]:
    """The reference: every event of a key, in sequence order, folded into versions (written from the issue)."""
    out = []
    for key in sorted({e["id"] for e in events}):
        current = None
        for e in sorted((e for e in events if e["id"] == key), key=lambda e: e["seq"]):
            if e["op"] == "D":
                if current is not None:
                    out.append((key, current["start"], e["seq"], current["addr"], current["tier"], current["seq"]))
                    current = None
                continue
            values = {c: e[c] for c in ("addr", "tier", "seq")}
            if ignore_null_updates and current is not None:
                values = {c: (current[c] if v is None else v) for c, v in values.items()}
            if current is not None and all(current[c] == values[c] for c in tracked):
                current.update(values)
                continue
            if current is not None:
                out.append((key, current["start"], e["seq"], current["addr"], current["tier"], current["seq"]))
            current = {**values, "start": e["seq"]}
        if current is not None:
            out.append((key, current["start"], None, current["addr"], current["tier"], current["seq"]))
    return out


# ---------------------------------------------------------------- the contract's names


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"scd_type": 3, "sequence_by": "seq"}, "scd_type must be 1 or 2"),
        ({"scd_type": 2}, "needs sequence_by"),
        ({"scd_type": 2, "sequence_by": "seq", "track_history": ["a"], "track_history_except": ["b"]}, "not both"),
        ({"scd_type": 1, "sequence_by": "seq", "track_history": ["a"]}, "scd_type=2"),
        ({"scd_type": 2, "sequence_by": "seq", "track_history": ["id"]}, "key or sequence"),
    ],
)
def test_bad_history_options_are_value_errors_at_construction(tmp_path, options, message):
    with pytest.raises(ValueError, match=message):
        UpsertSink(str(tmp_path / "t"), keys=["id"], **options)
    with pytest.raises(ValueError, match=message):
        UpsertSink.for_table("db.t", keys=["id"], **options)


def test_a_late_address_change_splits_the_version_it_falls_in(tmp_path, engine):
    path = tmp_path / "t"
    sink = history_sink(path)
    sink.write(engine.frame([ev(1, 10, "Elm St"), ev(2, 10, "Oak Ave")], SCHEMA), batch_id=0)
    sink.write(engine.frame([ev(1, 30, "Pine Rd")], SCHEMA), batch_id=1)
    assert versions(path) == [(1, 10, 30, "Elm St", "x", 10), (1, 30, None, "Pine Rd", "x", 30), (2, 10, None, "Oak Ave", "x", 10)]
    # the move to Maple Ln happened at 20 but arrives last: it is placed inside the history
    sink.write(engine.frame([ev(1, 20, "Maple Ln")], SCHEMA), batch_id=2)
    assert versions(path) == [
        (1, 10, 20, "Elm St", "x", 10), (1, 20, 30, "Maple Ln", "x", 20), (1, 30, None, "Pine Rd", "x", 30),
        (2, 10, None, "Oak Ave", "x", 10),
    ]
    # the table's own columns: every batch column plus START and END of the sequence's type
    from deltalake import DeltaTable

    schema = DeltaTable(str(path)).schema().to_arrow()
    assert [f.name for f in schema] == ["id", "seq", "addr", "tier", "op", START, END]
    assert str(schema.field(START).type) == str(schema.field("seq").type) == str(schema.field(END).type)


def test_untracked_columns_extend_the_version_with_the_latest_values(tmp_path, engine):
    path = tmp_path / "t"
    sink = history_sink(path, track_history_except=None, track_history=["addr"])
    sink.write(engine.frame([ev(1, 1, "A", "x"), ev(1, 2, "A", "y")], SCHEMA), batch_id=0)
    assert versions(path) == [(1, 1, None, "A", "y", 2)]
    sink.write(engine.frame([ev(1, 3, "B", "y")], SCHEMA), batch_id=1)
    assert versions(path) == [(1, 1, 3, "A", "y", 2), (1, 3, None, "B", "y", 3)]


def test_deletes_close_versions_and_the_edge_cases(tmp_path, engine):
    path = tmp_path / "t"
    sink = history_sink(path)
    # a delete before any upsert of its key changes nothing, but is remembered ...
    sink.write(engine.frame([ev(1, 50, op="D"), ev(2, 1, "A")], SCHEMA), batch_id=0)
    assert versions(path) == [(2, 1, None, "A", "x", 1)]
    # ... so an upsert sent later with a lower sequence opens a version that this delete closes
    sink.write(engine.frame([ev(1, 40, "B")], SCHEMA), batch_id=1)
    assert versions(path) == [(1, 40, 50, "B", "x", 40), (2, 1, None, "A", "x", 1)]
    # a delete closes the open version at its sequence; an upsert after it opens a new version
    sink.write(engine.frame([ev(2, 5, op="D")], SCHEMA), batch_id=2)
    sink.write(engine.frame([ev(2, 9, "A")], SCHEMA), batch_id=3)
    assert versions(path)[1:] == [(2, 1, 5, "A", "x", 1), (2, 9, None, "A", "x", 9)]
    # a delete for a key with no open version changes nothing
    sink.write(engine.frame([ev(1, 60, op="D")], SCHEMA), batch_id=4)
    assert versions(path)[0] == (1, 40, 50, "B", "x", 40)
    # an upsert at exactly a delete's sequence: two different events at one (key, sequence)
    with pytest.raises(DuplicateKeyError, match="seq"):
        sink.write(engine.frame([ev(2, 5, "C")], SCHEMA), batch_id=5)
    assert sink.last_batch_id() == 4


def test_two_different_events_at_one_sequence_are_refused_and_the_same_event_twice_counts_once(tmp_path, engine):
    path = tmp_path / "t"
    sink = history_sink(path)
    sink.write(engine.frame([ev(1, 1, "A"), ev(1, 1, "A"), ev(1, 2, "B")], SCHEMA), batch_id=0)
    assert versions(path) == [(1, 1, 2, "A", "x", 1), (1, 2, None, "B", "x", 2)]
    with pytest.raises(DuplicateKeyError):
        sink.write(engine.frame([ev(3, 1, "A"), ev(3, 1, "Z")], SCHEMA), batch_id=1)
    with pytest.raises(DuplicateKeyError):  # against an event of an earlier batch
        sink.write(engine.frame([ev(1, 2, "C")], SCHEMA), batch_id=1)
    sink.write(engine.frame([ev(1, 2, "B")], SCHEMA), batch_id=1)  # the same event again: nothing changes
    assert versions(path) == [(1, 1, 2, "A", "x", 1), (1, 2, None, "B", "x", 2)]


def test_a_replay_is_skipped_and_a_divergent_one_refused(tmp_path, engine):
    path = tmp_path / "t"
    sink = history_sink(path)
    sink.write(engine.frame([ev(1, 1, "A")], SCHEMA), batch_id=0)
    again = sink.write(engine.frame([ev(1, 1, "A")], SCHEMA), batch_id=0)
    assert again.skipped and again.replay_check == "matched"
    with pytest.raises(ReplayDivergenceError):
        sink.write(engine.frame([ev(1, 1, "B")], SCHEMA), batch_id=0)
    assert versions(path) == [(1, 1, None, "A", "x", 1)]


def test_ignore_null_updates_keeps_the_stored_value_on_both_types(tmp_path, engine):
    path = tmp_path / "t"
    sink = history_sink(path, ignore_null_updates=True)
    sink.write(engine.frame([ev(1, 1, "A", "x")], SCHEMA), batch_id=0)
    sink.write(engine.frame([ev(1, 2, None, "y")], SCHEMA), batch_id=1)
    assert versions(path) == [(1, 1, 2, "A", "x", 1), (1, 2, None, "A", "y", 2)]


def test_a_history_sink_and_a_latest_row_sink_refuse_each_others_tables(tmp_path):
    latest, hist = tmp_path / "latest", tmp_path / "hist"
    UpsertSink(str(latest), keys=["id"]).write(pa.Table.from_pylist([ev(1, 1, "A")]), batch_id=0)
    history_sink(hist).write(pa.Table.from_pylist([ev(1, 1, "A")]), batch_id=0)
    with pytest.raises(SchemaMismatchError, match="not a history table"):
        history_sink(latest).write(pa.Table.from_pylist([ev(1, 2, "B")]), batch_id=1)
    with pytest.raises(SchemaMismatchError, match="is a history table"):
        UpsertSink(str(hist), keys=["id"]).write(pa.Table.from_pylist([ev(1, 2, "B")]), batch_id=1)


# ---------------------------------------------------------------- any order, replays and re-sends


def _events(draw_list: list[tuple]) -> list[dict]:
    seen, out = set(), []
    for id_, seq, addr, tier, delete in draw_list:
        if (id_, seq) in seen:
            continue
        seen.add((id_, seq))
        out.append(ev(id_, seq, None if delete else addr, tier, "D" if delete else "U"))
    return out


EVENTS = st.lists(
    st.tuples(
        st.integers(1, 4), st.integers(1, 25), st.sampled_from(["A", "B", None]), st.sampled_from(["x", "y"]),
        st.booleans(),
    ),
    min_size=1, max_size=30,
).map(_events)


def _send_in_any_order(path, engine, events, seed, tracked_options, ignore):
    rnd = random.Random(seed)
    batches = [[] for _ in range(rnd.randint(1, 5))]
    for e in events:
        rnd.choice(batches).append(e)
    batches = [b for b in batches if b]
    sink = history_sink(path, late_batches="apply", ignore_null_updates=ignore, **tracked_options)
    order = list(range(len(batches)))
    rnd.shuffle(order)
    sent = []
    for i in order:
        sink.write(engine.frame(batches[i], SCHEMA), batch_id=i)
        sent.append(i)
        if rnd.random() < 0.3:  # a replay of a batch already written: skipped
            j = rnd.choice(sent)
            assert sink.write(engine.frame(batches[j], SCHEMA), batch_id=j).skipped
    if rnd.random() < 0.5:  # a re-send of events under a new batch id: the same events count once
        sink.write(engine.frame(rnd.choice(batches), SCHEMA), batch_id=len(batches))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(events=EVENTS, seed=st.integers(0, 10_000), track_addr=st.booleans(), ignore=st.booleans())
def test_any_order_of_batches_replays_and_resends_gives_the_in_order_history_embedded(
    tmp_path_factory, events, seed, track_addr, ignore
):
    from sink_helpers import Engine

    path = tmp_path_factory.mktemp("h") / "t"
    options = {"track_history_except": None, "track_history": ["addr"]} if track_addr else {}
    _send_in_any_order(path, Engine("embedded"), events, seed, options, ignore)
    tracked = ["addr"] if track_addr else ["addr", "tier"]
    assert versions(path) == model(events, tracked, ignore)


@pytest.mark.spark
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(events=EVENTS, seed=st.integers(0, 10_000))
def test_any_order_of_batches_replays_and_resends_gives_the_in_order_history_spark(
    spark, tmp_path_factory, events, seed
):
    from sink_helpers import Engine

    path = tmp_path_factory.mktemp("h") / "t"
    _send_in_any_order(path, Engine("spark", spark), events, seed, {}, False)
    assert versions(path) == model(events, ["addr", "tier"])


def test_ignore_null_updates_on_a_latest_row_sink_keeps_stored_values_for_nulls(tmp_path, engine):
    path = tmp_path / "t"
    sink = UpsertSink(str(path), keys=["id"], sequence_by="seq", ignore_null_updates=True)
    sink.write(engine.frame([ev(1, 1, "A", "x"), ev(2, 1, "B", "x")], SCHEMA), batch_id=0)
    sink.write(engine.frame([ev(1, 2, None, "y"), ev(3, 2, None, "z")], SCHEMA), batch_id=1)
    rows = [(r["id"], r["addr"], r["tier"], r["seq"]) for r in read_rows(path)]
    # key 1 keeps its address, takes the new tier and sequence; a new key is inserted as sent (null included)
    assert rows == [(1, "A", "y", 2), (2, "B", "x", 1), (3, None, "z", 2)]
    again = sink.write(engine.frame([ev(1, 3, None, None)], SCHEMA), batch_id=2)
    assert again.updated == 1 and [r["tier"] for r in read_rows(path)][:1] == ["y"]


# ---------------------------------------------------------------- the CLI and the diff on history tables


def _cli(*args: str):
    import os
    import subprocess
    import sys
    from pathlib import Path

    cli = str(Path(sys.executable).with_name("upsertsink"))
    return subprocess.run([cli, *args], check=False, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})


def test_cli_writes_a_history_table_and_status_says_it_is_one(tmp_path):
    import json

    import pyarrow.parquet as pq

    target = str(tmp_path / "t")
    pq.write_table(pa.Table.from_pylist([ev(1, 10, "Elm"), ev(1, 30, "Pine")]), tmp_path / "b0.parquet")
    pq.write_table(pa.Table.from_pylist([ev(1, 20, "Maple", op="U")]), tmp_path / "b1.parquet")
    base = ["--target", target, "--key", "id", "--sequence-by", "seq", "--delete-when", "op = 'D'",
            "--scd-type", "2", "--track-history", "addr", "--json"]
    for i in (0, 1):
        r = _cli("write", str(tmp_path / f"b{i}.parquet"), *base, "--batch-id", str(i))
        assert r.returncode == 0, r.stderr
    assert versions(target) == [(1, 10, 20, "Elm", "x", 10), (1, 20, 30, "Maple", "x", 20), (1, 30, None, "Pine", "x", 30)]
    status = _cli("status", target, "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["scd_type"] == 2
    assert "history table (SCD type 2)" in _cli("status", target).stdout
    bad = _cli("write", str(tmp_path / "b1.parquet"), "--target", target, "--key", "id", "--scd-type", "2")
    assert bad.returncode == 2 and "--scd-type=2 needs --sequence-by" in bad.stderr


@pytest.mark.parametrize("diff_engine", ["embedded", "spark"])
def test_diff_compares_two_history_tables_version_by_version(tmp_path, diff_engine, request):
    from upsertsink import diff

    if diff_engine == "spark":
        request.getfixturevalue("spark")
    left, right = tmp_path / "left", tmp_path / "right"
    first = [ev(1, 10, "Elm"), ev(1, 30, "Pine"), ev(2, 5, "Oak")]
    history_sink(left).write(pa.Table.from_pylist(first), batch_id=0)
    history_sink(right).write(pa.Table.from_pylist(first), batch_id=0)
    assert diff(str(left), str(right), keys=["id"], engine=diff_engine).equal
    # the late event splits key 1's first version on the right only: one version changed, one added
    history_sink(right).write(pa.Table.from_pylist([ev(1, 20, "Maple")]), batch_id=1)
    result = diff(str(left), str(right), keys=["id"], engine=diff_engine)
    assert result.keys == ["id", START]
    assert (result.changed, result.only_in_left, result.only_in_right, result.duplicate_keys) == (1, 0, 1, 0)


def test_maintain_compacts_the_event_log_and_the_history_stays(tmp_path):
    from upsertsink.sidecar.events import EventLog, forget

    path = tmp_path / "t"
    sink = history_sink(path)
    for i in range(5):
        sink.write(pa.Table.from_pylist([ev(1, 10 * (i + 1), f"a{i}"), ev(2, 10 * (i + 1), "same")]), batch_id=i)
    folder = EventLog(str(path), ("id",), "seq", None).folder
    assert len([n for n in folder.names() if n.endswith(".parquet")]) == 5
    report = sink.maintain()
    assert [(h["keys"], h["files_before"], h["files_after"]) for h in report.history] == [(["id"], 5, 1)]
    forget()  # a new process: the compacted log alone
    sink.write(pa.Table.from_pylist([ev(1, 25, "late")]), batch_id=5)
    got = versions(path)
    assert [v[:4] for v in got if v[0] == 1][1:4] == [(1, 20, 25, "a1"), (1, 25, 30, "late"), (1, 30, 40, "a2")]
    assert [v[:3] for v in got if v[0] == 2] == [(2, 10, None)]


def test_replay_check_compares_history_outputs_version_by_version(spark, tmp_path):
    from upsertsink.replay import replay_check

    path = tmp_path / "t"
    history_sink(path).write(pa.Table.from_pylist([ev(1, 10, "Elm"), ev(1, 30, "Pine"), ev(2, 5, "Oak")]), 0)

    def job(session):  # a job whose output is a history table: two versions of key 1
        return session.read.format("delta").load(str(path)).filter("op <> 'D'")

    result = replay_check(job, spark, "id")
    assert result.equal and result.diffs[0].keys == ["id", START], result


def test_a_history_create_leaves_the_mark_that_tells_a_create_in_progress_from_foreign_data(tmp_path, engine):
    # the latest-row create marks itself (test_crash_safety: a racing writer saw a create's data file before
    # its log and refused the folder as foreign data); a history write creates the table the same way
    path = tmp_path / "t"
    history_sink(path).write(engine.frame([ev(1, 1, "A")], SCHEMA), batch_id=0)
    assert (path / "_upsertsink" / "creating").exists()
