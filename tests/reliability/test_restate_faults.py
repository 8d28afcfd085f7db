"""A restatement (``write(..., restate=True)``, issue #45) under faults: the writer killed at each step of
the protocol and the restatement sent again, and a restatement racing the stream that keeps writing; the table
must equal the model (the feed with the batch's corrected content in place of its first one), and the
corrected content must be the batch's afterwards (a replay of it skipped, of the first content refused)."""

from __future__ import annotations

import threading

import pytest
from harness import (
    DELETE_WHEN,
    KEYS,
    SEQUENCE,
    arrow_batch,
    change_feed,
    run_writer,
    save_feed,
    table_state,
)

from upsertsink import ReplayDivergenceError, UpsertSink
from upsertsink.faults import FAULT_EXIT_CODE

RESTATED = 5  # the batch whose content is corrected
POINTS = [("prepared", 1), ("tombstones-recorded", 1), ("before-commit", 1), ("data-committed", 1)]


def _corrected(rows: list[dict]) -> list[dict]:
    """Batch ``RESTATED`` as its producer corrects it: some values fixed, some deletes that were upserts and
    upserts that were deletes (each at its first sequence), one key it had missed."""
    out = []
    for i, r in enumerate(rows):
        if i % 3 == 0:
            out.append({**r, "val": f"fixed{r['id']}-{r['seq']}"})
        elif i % 3 == 1:
            out.append({**r, "op": "U" if r["op"] == "D" else "D", "val": f"flip{r['id']}"})
        else:
            out.append(r)
    return [*out, {"id": 1000, "val": "missed", "seq": 10**6, "op": "U"}]


def _model(feed: list[list[dict]], corrected: list[dict]) -> dict[int, tuple[str, int]]:
    """Per key its event of highest sequence (the corrected batch's event in place of the first one at the
    same key and sequence), unless that event is a delete."""
    events = {(r["id"], r["seq"]): r for rows in feed for r in rows}
    events.update({(r["id"], r["seq"]): r for r in corrected})
    best: dict[int, dict] = {}
    for (key, seq), r in events.items():
        if key not in best or seq > best[key]["seq"]:
            best[key] = r
    return {k: (r["val"], r["seq"]) for k, r in sorted(best.items()) if r["op"] != "D"}


@pytest.fixture(scope="module")
def feeds(tmp_path_factory):
    feed = change_feed(seed=23, batches=12)
    corrected = _corrected(feed[RESTATED])
    folder = tmp_path_factory.mktemp("restate")
    restated = [*feed[:RESTATED], corrected, *feed[RESTATED + 1:]]
    return feed, corrected, save_feed(feed, folder / "feed.json"), save_feed(restated, folder / "restated.json")


def _sink(path: str) -> UpsertSink:
    return UpsertSink(path, KEYS, sequence_by=SEQUENCE, delete_when=DELETE_WHEN, app_id="feed")


def _check_content(path: str, feed: list[list[dict]], corrected: list[dict]) -> None:
    again = _sink(path).write(arrow_batch(corrected), batch_id=RESTATED)
    assert again.skipped and again.replay_check == "matched"
    with pytest.raises(ReplayDivergenceError):
        _sink(path).write(arrow_batch(feed[RESTATED]), batch_id=RESTATED)


@pytest.mark.parametrize(("point", "nth"), POINTS, ids=[f"{p}@{n}" for p, n in POINTS])
def test_a_restatement_killed_at_each_step_converges_when_sent_again(feeds, tmp_path, point, nth):
    feed, corrected, feed_file, restated_file = feeds
    path = str(tmp_path / "t")
    assert run_writer(path, feed_file).returncode == 0
    crashed = run_writer(path, restated_file, start=RESTATED, stop=RESTATED + 1, fault=f"{point}@{nth}",
                         restate=True)
    assert crashed.returncode == FAULT_EXIT_CODE, f"point {point}@{nth} was not reached: {crashed.stderr[-2000:]}"
    resent = run_writer(path, restated_file, start=RESTATED, stop=RESTATED + 1, restate=True)
    assert resent.returncode == 0, resent.stderr[-3000:]
    assert '"restated": true' in resent.stdout
    assert table_state(path) == _model(feed, corrected)
    # sent once more as a restatement: the same content again changes nothing
    assert run_writer(path, restated_file, start=RESTATED, stop=RESTATED + 1, restate=True).returncode == 0
    assert table_state(path) == _model(feed, corrected)
    _check_content(path, feed, corrected)
    assert _sink(path).last_batch_id() == len(feed) - 1


def test_a_restatement_racing_the_stream_converges_to_the_model(feeds, tmp_path):
    feed, corrected, feed_file, restated_file = feeds
    path = str(tmp_path / "t")
    assert run_writer(path, feed_file, stop=RESTATED + 1).returncode == 0
    results: dict[str, object] = {}

    def stream() -> None:
        results["stream"] = run_writer(path, feed_file, start=RESTATED + 1, result_file=tmp_path / "stream.jsonl")

    def restate() -> None:
        results["restate"] = run_writer(path, restated_file, start=RESTATED, stop=RESTATED + 1, restate=True,
                                        result_file=tmp_path / "restate.jsonl")

    threads = [threading.Thread(target=stream), threading.Thread(target=restate)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for name in ("stream", "restate"):
        out = results[name]
        assert out.returncode == 0, out.stderr[-3000:]
        assert '"outcome": "error"' not in out.stdout and '"outcome": "raw"' not in out.stdout, out.stdout
    # a write that gave up on conflicts is sent again, as its producer would
    for name, file in (("stream", feed_file), ("restate", restated_file)):
        if '"outcome": "conflict"' in results[name].stdout:
            start, stop = (RESTATED + 1, None) if name == "stream" else (RESTATED, RESTATED + 1)
            assert run_writer(path, file, start=start, stop=stop, restate=name == "restate").returncode == 0
    assert table_state(path) == _model(feed, corrected)
    _check_content(path, feed, corrected)
    assert _sink(path).last_batch_id() == len(feed) - 1
