"""Property test: any order of sends, replays and re-sends gives the model's table (hypothesis)."""

from __future__ import annotations

import itertools

import pytest
from harness import DELETE_WHEN, KEYS, SEQUENCE, arrow_batch, change_feed, model, table_state
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from upsertsink import BatchIdBehindMarkerError, UpsertSink

FEED = change_feed(seed=5, batches=6, keys=8, size=(2, 6))
_runs = itertools.count()

# one step: (batch index, how it is sent) -- with its batch id, or without any (idempotent by key only)
steps = st.lists(st.tuples(st.integers(0, len(FEED) - 1), st.sampled_from(["id", "id", "no-id"])), min_size=1,
                 max_size=12)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=steps, late=st.sampled_from(["refuse", "apply"]))
def test_any_order_of_sends_replays_and_resends_matches_the_model(tmp_path, steps, late):
    path = str(tmp_path / f"t{next(_runs)}")
    sink = UpsertSink(path, KEYS, sequence_by=SEQUENCE, delete_when=DELETE_WHEN, app_id="prop", late_batches=late)
    applied: list[list[dict]] = []
    committed: set[int] = set()
    last = None
    for index, how in steps:
        batch_id = index if how == "id" else None
        behind = batch_id is not None and last is not None and batch_id <= last
        if behind and batch_id not in committed and late == "refuse":
            # never committed, behind the marker: refused, nothing written (issue #19)
            with pytest.raises(BatchIdBehindMarkerError):
                sink.write(arrow_batch(FEED[index]), batch_id=batch_id)
            continue
        result = sink.write(arrow_batch(FEED[index]), batch_id=batch_id)
        expect_skip = behind and batch_id in committed
        assert result.skipped == expect_skip, (index, how, last)
        assert result.late == (behind and not expect_skip)
        if expect_skip:  # a committed batch's content was compared
            assert result.replay_check == "matched"
        else:
            applied.append(FEED[index])
            if batch_id is not None:
                last = batch_id if last is None else max(last, batch_id)
                committed.add(batch_id)
    assert table_state(path) == model(applied)
    assert sink.last_batch_id() == last
