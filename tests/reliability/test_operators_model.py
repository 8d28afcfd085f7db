"""Issue #44 against a model: sends, replays and re-sends in any order, with RESTOREs in between, a new process
now and then, and a writer killed at each step of a re-send after a RESTORE.

The model keeps the table's lineage as a list of versions, each the set of batches committed at it. A send of
a committed batch is a replay (skipped, checked); of a batch a RESTORE undid, applied again (``reapplied``);
of a batch above the app's last one, applied; of one never committed below it, refused (``late_batches=
"refuse"``) or applied late. A RESTORE to version v makes the next version's set v's. The table must equal the
feed's model of the batches committed in the current lineage.
"""

from __future__ import annotations

import itertools

import pytest
from deltalake import DeltaTable
from harness import (
    DELETE_WHEN,
    KEYS,
    SEQUENCE,
    arrow_batch,
    change_feed,
    model,
    run_writer,
    save_feed,
    table_state,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from upsertsink import BatchIdBehindMarkerError, UpsertSink
from upsertsink.faults import FAULT_EXIT_CODE
from upsertsink.sidecar import tombstones
from upsertsink.table import files, lineage

FEED = change_feed(seed=13, batches=7, keys=8, size=(2, 6))
_runs = itertools.count()

# one step: ("send", batch index) | ("restore", how far back, as a fraction of the versions) | ("new-process",)
step = st.one_of(
    st.tuples(st.just("send"), st.integers(0, len(FEED) - 1)),
    st.tuples(st.just("restore"), st.floats(0, 1)),
    st.tuples(st.just("new-process"), st.just(0)),
)


def _forget() -> None:
    files.forget_handles()
    lineage.forget()
    tombstones.forget_indexes()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(step, min_size=2, max_size=14), late=st.sampled_from(["refuse", "apply"]))
def test_sends_replays_and_restores_in_any_order_match_the_model(tmp_path, steps, late):
    path = str(tmp_path / f"t{next(_runs)}")
    sink = UpsertSink(path, KEYS, sequence_by=SEQUENCE, delete_when=DELETE_WHEN, app_id="ops", late_batches=late)
    lineage: list[frozenset[int]] = []  # the batches committed at each table version
    ever: set[int] = set()  # batches committed at some point
    for kind, arg in steps:
        now = lineage[-1] if lineage else frozenset()
        if kind == "new-process":
            _forget()
            continue
        if kind == "restore":
            if len(lineage) < 2:
                continue
            to = int(arg * (len(lineage) - 2))  # a version before the latest
            DeltaTable(path).restore(to)
            lineage.append(lineage[to])
            continue
        last = max(now) if now else None
        if arg in now:
            result = sink.write(arrow_batch(FEED[arg]), batch_id=arg)
            assert result.skipped and result.replay_check == "matched" and not result.reapplied
            continue
        undone = arg in ever
        behind = not undone and last is not None and arg <= last
        if behind and late == "refuse":
            with pytest.raises(BatchIdBehindMarkerError):
                sink.write(arrow_batch(FEED[arg]), batch_id=arg)
            continue
        result = sink.write(arrow_batch(FEED[arg]), batch_id=arg)
        assert not result.skipped and result.reapplied == undone and result.late == behind, (arg, now, ever)
        lineage.extend([now | {arg}] * (result.version + 1 - len(lineage)))  # a repair may add a version
        ever.add(arg)
    now = lineage[-1] if lineage else frozenset()
    if lineage:
        assert table_state(path) == model([FEED[i] for i in sorted(now)])
    assert sink.last_batch_id() == (max(now) if now else None)


# A RESTORE, then every batch sent again; the writer of the re-send is killed at each step of the protocol,
# then the same sends again must converge to the model with every batch committed once more.
POINTS = [("prepared", 2), ("tombstones-recorded", 1), ("before-commit", 2), ("data-committed", 1),
          ("marker-only-before", 1), ("marker-only-committed", 1)]


@pytest.mark.parametrize(("point", "nth"), POINTS, ids=[f"{p}@{n}" for p, n in POINTS])
def test_a_writer_killed_while_resending_after_a_restore_converges(tmp_path, point, nth):
    data = change_feed(seed=21, batches=10)
    feed_file = save_feed(data, tmp_path / "feed.json")
    path = str(tmp_path / "t")
    first = run_writer(path, str(feed_file))
    assert first.returncode == 0, first.stderr[-2000:]
    DeltaTable(path).restore(4)  # undoes batches 5-9
    crashed = run_writer(path, str(feed_file), fault=f"{point}@{nth}")
    assert crashed.returncode == FAULT_EXIT_CODE, f"point {point}@{nth} was not reached: {crashed.stderr[-2000:]}"
    resent = run_writer(path, str(feed_file))
    assert resent.returncode == 0 and '"outcome": "error"' not in resent.stdout, resent.stdout[-3000:]
    assert table_state(path) == model(data)
    _forget()
    sink = UpsertSink(path, KEYS, sequence_by=SEQUENCE, delete_when=DELETE_WHEN, app_id="feed")
    assert sink.last_batch_id() == len(data) - 1
    again = run_writer(path, str(feed_file))
    assert again.stdout.count('"outcome": "skipped"') == len(data), again.stdout[-2000:]
