"""The reference models of issue #47's merge engines (tests/merge_engine_models.py) on hand-computed cases.

These run without the sink: the models are what tests/test_merge_engines.py compares the sink with, so they
are checked here first, case by case against the issue's words.
"""

from __future__ import annotations

import pytest
from merge_engine_models import (
    AGGREGATE_SCHEMA,
    AGGREGATES,
    PARTIAL_GROUPS,
    PARTIAL_SCHEMA,
    PARTIAL_STREAMS,
    ModelDuplicateKeyError,
    ModelOverflowError,
    aggregate,
    aggregate_feed,
    first_row,
    first_row_feed,
    interleave,
    partial_update,
    partial_update_feeds,
    rows,
)

# ---------------------------------------------------------------- first_row


def r(id_, val, seq=None, **more):
    row = {"id": id_, "val": val, **more}
    if seq is not None:
        row["seq"] = seq
    return row


def test_first_row_without_a_sequence_keeps_the_first_committed_row():
    batches = [[r(1, "a"), r(2, "b")], [r(1, "z"), r(3, "c")], [r(2, "y")]]
    assert rows(first_row(batches, ["id"]), ["id", "val"]) == [(1, "a"), (2, "b"), (3, "c")]


def test_first_row_identical_rows_are_one_row_and_different_ones_are_refused():
    assert rows(first_row([[r(1, "a"), r(1, "a")]], ["id"]), ["id", "val"]) == [(1, "a")]
    with pytest.raises(ModelDuplicateKeyError) as caught:
        first_row([[r(2, "x")], [r(1, "a"), r(1, "b")]], ["id"])
    assert caught.value.batch == 1 and caught.value.key == (1,)


def test_first_row_with_a_sequence_a_late_earlier_event_replaces_the_stored_row():
    batches = [[r(1, "third", 30, n=3)], [r(1, "first", 10, n=None)], [r(1, "second", 20, n=2)]]
    table = first_row(batches, ["id"], sequence="seq")
    # every column of the row with the lowest sequence, its null included
    assert table == {(1,): {"id": 1, "val": "first", "seq": 10, "n": None}}


def test_first_row_with_a_sequence_equal_is_a_no_op_and_the_lowest_in_a_batch_wins():
    assert rows(first_row([[r(1, "a", 5)], [r(1, "b", 5)]], ["id"], "seq"), ["id", "val"]) == [(1, "a")]
    assert rows(first_row([[r(1, "b", 7), r(1, "a", 3), r(1, "c", 9)]], ["id"], "seq"), ["id", "val"]) == [(1, "a")]
    # different rows at a higher sequence do not matter; at the lowest they cannot be ordered
    assert rows(first_row([[r(1, "a", 3), r(1, "b", 7), r(1, "c", 7)]], ["id"], "seq"), ["id", "val"]) == [(1, "a")]
    with pytest.raises(ModelDuplicateKeyError):
        first_row([[r(1, "a", 3), r(1, "b", 3)]], ["id"], "seq")


def test_first_row_with_a_sequence_is_order_independent_on_its_feed():
    feed = first_row_feed(seed=4, batches=6)
    expected = first_row(feed, ["id"], "seq")
    assert first_row(list(reversed(feed)), ["id"], "seq") == expected
    assert first_row(feed + feed, ["id"], "seq") == expected  # re-sent: nothing changes
    # and is the lowest sequence of each key over all the rows
    best = {}
    for row in (row for b in feed for row in b):
        if row["id"] not in best or row["seq"] < best[row["id"]]["seq"]:
            best[row["id"]] = row
    assert rows(expected, ["id", "val", "n", "seq"]) == sorted(
        (b["id"], b["val"], b["n"], b["seq"]) for b in best.values())


# ---------------------------------------------------------------- partial_update

COLS = list(PARTIAL_SCHEMA)


def pay(id_, s, paid_at=None, amount=None, **more):
    return {"id": id_, "pay_seq": s, "paid_at": paid_at, "amount": amount, **more}


def ship(id_, s, shipped_at=None, carrier=None, **more):
    return {"id": id_, "ship_seq": s, "shipped_at": shipped_at, "carrier": carrier, **more}


def pu(batches, **kw):
    kw.setdefault("sequence_groups", PARTIAL_GROUPS)
    kw.setdefault("columns", COLS)
    return partial_update(batches, ["id"], **kw)


def test_partial_update_nulls_and_missing_columns_never_overwrite():
    batches = [[{"id": 1, "note": "a", "carrier": "ups", "ship_seq": 1}], [{"id": 1, "note": None}],
               [{"id": 1, "amount": 3.0, "pay_seq": 1}]]
    got = pu(batches)[(1,)]
    assert (got["note"], got["carrier"], got["amount"], got["paid_at"]) == ("a", "ups", 3.0, None)


def test_partial_update_a_group_moves_only_on_a_greater_group_sequence():
    batches = [[pay(1, 5, 100, 1.0)], [pay(1, 3, 300, 3.0)], [pay(1, 5, 555, 5.5)], [pay(1, 7, None, 7.0)]]
    got = pu(batches)[(1,)]
    # 3 < 5 and 5 == 5: ignored; 7 > 5: amount moves, the null paid_at keeps 100
    assert (got["pay_seq"], got["paid_at"], got["amount"]) == (7, 100, 7.0)


def test_partial_update_a_null_group_sequence_updates_nothing_of_its_group_even_on_insert():
    got = pu([[pay(1, None, 100, 1.0) | {"note": "n"}]])[(1,)]
    assert (got["pay_seq"], got["paid_at"], got["amount"], got["note"]) == (None, None, None, "n")
    got = pu([[pay(1, 2, 100, 1.0)], [pay(1, None, 999, 9.0)]])[(1,)]
    assert (got["pay_seq"], got["paid_at"], got["amount"]) == (2, 100, 1.0)


def test_partial_update_two_streams_in_any_order_give_one_table():
    a = [[pay(1, 1, 10, 1.0), pay(2, 1, 20, 2.0)], [pay(1, 2, 11, 1.5)]]
    b = [[ship(1, 1, 50, "dhl")], [ship(2, 4, 60, "ups"), ship(1, 0, 40, "old")]]
    expected = {(1,): (2, 11, 1.5, 1, 50, "dhl"), (2,): (1, 20, 2.0, 4, 60, "ups")}
    for order in ([*a, *b], [*b, *a], [a[0], b[1], b[0], a[1]], [b[1], a[1], a[0], b[0]]):
        got = pu(order)
        assert {k: tuple(v[c] for c in COLS[1:7]) for k, v in got.items()} == expected


def test_partial_update_rows_of_one_key_in_a_batch_apply_in_sequence_order():
    # as if each came alone, lowest group sequence first: 3 sets paid_at, 5 sets amount (its paid_at is null)
    got = pu([[pay(1, 5, None, 5.0), pay(1, 3, 300, 3.0)]])[(1,)]
    assert (got["pay_seq"], got["paid_at"], got["amount"]) == (5, 300, 5.0)
    # the same rows in two batches, the higher one first: the lower one comes too late
    got = pu([[pay(1, 5, None, 5.0)], [pay(1, 3, 300, 3.0)]])[(1,)]
    assert (got["pay_seq"], got["paid_at"], got["amount"]) == (5, None, 5.0)
    with pytest.raises(ModelDuplicateKeyError, match="pay_seq"):
        pu([[pay(1, 3, 300, 3.0), pay(1, 3, 301, 3.0)]])
    assert pu([[pay(1, 3, 300, 3.0), pay(1, 3, 300, 3.0)]])[(1,)]["paid_at"] == 300  # identical: one row


def test_partial_update_ungrouped_columns_follow_the_sequence_or_the_newest_batch():
    batches = [[{"id": 1, "note": "b", "seq": 2}], [{"id": 1, "note": "a", "seq": 1}], [{"id": 1, "note": None, "seq": 3}]]
    got = pu(batches, sequence="seq")[(1,)]
    assert (got["note"], got["seq"]) == ("b", 3)
    got = pu([[{"id": 1, "note": "b"}], [{"id": 1, "note": "a"}], [{"id": 1, "note": None}]])[(1,)]
    assert got["note"] == "a"
    with pytest.raises(ModelDuplicateKeyError, match="note"):
        pu([[{"id": 1, "note": "a"}, {"id": 1, "note": "b"}]])
    assert pu([[{"id": 1, "note": "a"}, {"id": 1, "note": None}]])[(1,)]["note"] == "a"


def test_partial_update_feeds_without_partial_nulls_converge_in_any_order():
    feeds = partial_update_feeds(seed=9, partial_nulls=False, note=False)
    assert set(feeds) == set(PARTIAL_STREAMS)
    results = set()
    for seed in range(6):
        order = [feeds[s][i] for s, i in interleave(feeds, seed)]
        results.add(repr(rows(pu(order), COLS)))
    reverse = [b for f in feeds.values() for b in reversed(f)]
    results.add(repr(rows(pu(reverse), COLS)))
    assert len(results) == 1
    # the streams write their own columns only, and carry no other
    for stream, feed in feeds.items():
        assert {c for b in feed for row in b for c in row} == {"id", *PARTIAL_STREAMS[stream]}


def test_partial_update_feeds_with_partial_nulls_and_wide_rows():
    feeds = partial_update_feeds(seed=3, partial_nulls=True, wide=True, sequence=True)
    assert all(set(row) == set(PARTIAL_SCHEMA) for f in feeds.values() for b in f for row in b)
    order = [feeds[s][i] for s, i in interleave(feeds, 1)]
    pu(order, sequence="seq")  # applies without a duplicate (one content per key and group sequence)


# ---------------------------------------------------------------- aggregate


def ev(id_, seq=None, **values):
    row = {"id": id_, **values}
    if seq is not None:
        row["seq"] = seq
    return row


def test_aggregate_every_function_by_hand():
    aggs = {"c": "sum", "f": "sum", "lo": "min", "hi": "max", "n": "count", "st": "last", "src": "first",
            "a": "bool_and", "o": "bool_or"}
    b0 = [ev(1, c=1, f=0.5, lo=5, hi=5, n=None, st="new", src=None, a=True, o=False),
          ev(1, c=None, f=None, lo=3, hi=None, n=7, st=None, src="web", a=None, o=None),
          ev(2, c=None, f=None, lo=None, hi=None, n=None, st=None, src=None, a=None, o=None)]
    b1 = [ev(1, c=2, f=1.25, lo=4, hi=9, n=1, st="done", src="app", a=False, o=True)]
    cols = ["id", *aggs]
    assert rows(aggregate([b0], ["id"], aggs), cols) == [
        (1, 1, 0.5, 3, 5, 2, "new", "web", True, False), (2, None, None, None, None, 1, None, None, None, None)]
    assert rows(aggregate([b0, b1], ["id"], aggs), cols) == [
        (1, 3, 1.75, 3, 9, 3, "done", "web", False, True), (2, None, None, None, None, 1, None, None, None, None)]


def test_aggregate_identical_rows_count_and_other_columns_default_to_last():
    got = aggregate([[ev(1, c=1, page="a"), ev(1, c=1, page="a")], [ev(1, c=1, page=None)]], ["id"], {"c": "sum"})
    assert got[(1,)] == {"id": 1, "c": 3, "page": "a"}


def test_aggregate_first_and_last_follow_the_sequence_even_late():
    aggs = {"st": "last", "src": "first"}
    batches = [[ev(1, 20, st="b", src="b")], [ev(1, 30, st=None, src=None)], [ev(1, 10, st="a", src="a")],
               [ev(1, 25, st="late", src=None)]]
    got = aggregate(batches, ["id"], aggs, sequence="seq")[(1,)]
    # last: the non-null value with the greatest sequence (25, although 30 was seen: its status was null)
    assert (got["st"], got["src"], got["seq"]) == ("late", "a", 30)
    # an equal sequence keeps the stored value
    assert aggregate([[ev(1, 5, st="x")], [ev(1, 5, st="y")]], ["id"], aggs, "seq")[(1,)]["st"] == "x"
    with pytest.raises(ModelDuplicateKeyError, match="st"):
        aggregate([[ev(1, 5, st="x"), ev(1, 5, st="y")]], ["id"], aggs, "seq")


def test_aggregate_without_a_sequence_orders_first_and_last_by_commit_and_refuses_unordered_rows():
    aggs = {"st": "last", "src": "first"}
    got = aggregate([[ev(1, st="a", src="a")], [ev(1, st="b", src="b")], [ev(1, st=None, src=None)]], ["id"], aggs)
    assert (got[(1,)]["st"], got[(1,)]["src"]) == ("b", "a")
    with pytest.raises(ModelDuplicateKeyError, match="st"):
        aggregate([[ev(1, st="a"), ev(1, st="b")]], ["id"], aggs)
    assert aggregate([[ev(1, st="a"), ev(1, st=None), ev(1, st="a")]], ["id"], aggs)[(1,)]["st"] == "a"
    # the alternative rule, should the sink take the batch's row order
    got = aggregate([[ev(1, st="a", src="a"), ev(1, st="b", src="b")]], ["id"], aggs, unordered="row_order")
    assert (got[(1,)]["st"], got[(1,)]["src"]) == ("b", "a")


def test_aggregate_overflow_is_an_error_naming_the_column_never_a_wrap():
    big = 2**63 - 1
    with pytest.raises(ModelOverflowError) as caught:
        aggregate([[ev(1, c=big)], [ev(1, c=1)]], ["id"], {"c": "sum"})
    assert caught.value.column == "c" and caught.value.batch == 1
    with pytest.raises(ModelOverflowError):  # inside one batch
        aggregate([[ev(1, c=big), ev(1, c=big)]], ["id"], {"c": "sum"})
    with pytest.raises(ModelOverflowError):  # an int32 column
        aggregate([[ev(1, c=2**31 - 1), ev(1, c=1)]], ["id"], {"c": "sum"}, int_bits={"c": 32})
    assert aggregate([[ev(1, c=big), ev(1, c=-5)]], ["id"], {"c": "sum"})[(1,)]["c"] == big - 5
    assert aggregate([[ev(1, c=-(2**63))]], ["id"], {"c": "min"})[(1,)]["c"] == -(2**63)


def test_aggregate_is_commutative_with_a_sequence_and_counts_a_resend_again():
    feed = aggregate_feed(seed=5, batches=5)
    cols = list(AGGREGATE_SCHEMA)
    forward = aggregate(feed, ["id"], AGGREGATES, "seq")
    assert rows(aggregate(list(reversed(feed)), ["id"], AGGREGATES, "seq"), cols) == rows(forward, cols)
    twice = aggregate(feed + feed[:1], ["id"], AGGREGATES, "seq")  # batch 0 again under a new batch id
    first_keys = {row["id"] for row in feed[0]}
    for k, row in twice.items():
        extra = sum(1 for x in feed[0] if x["id"] == k[0])
        assert row["events"] == forward[k]["events"] + extra
        assert (row["status"], row["source"], row["first_seen"]) == (
            forward[k]["status"], forward[k]["source"], forward[k]["first_seen"])
    assert first_keys


def test_aggregate_feed_without_a_sequence_has_no_unordered_rows():
    for seed in range(20):
        feed = aggregate_feed(seed=seed, sequence=False)
        aggregate(feed, ["id"], AGGREGATES)  # never a ModelDuplicateKeyError
        assert all("seq" not in row for b in feed for row in b)


def test_unknown_aggregate_function_is_refused_by_the_model():
    with pytest.raises(ValueError, match="median"):
        aggregate([[ev(1, c=1)]], ["id"], {"c": "median"})
