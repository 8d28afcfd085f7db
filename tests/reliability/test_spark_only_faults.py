"""Spark-only mode under faults: a Connect client writing a table by name (``for_table(file_access=False)``) is
killed at the protocol's steps around the tombstone record and the data commit; a re-send from the test's own
session converges to the model (nothing lost, doubled or resurrected) and the marker is right."""

from __future__ import annotations

import uuid

import pytest
from harness import DELETE_WHEN, KEYS, SEQUENCE, arrow_batch, change_feed, model, run_writer, save_feed

from upsertsink import UpsertSink
from upsertsink.faults import FAULT_EXIT_CODE
from upsertsink.session import connect_url

pytestmark = pytest.mark.spark

# The feed's first batch deletes keys, so each point is reached within the first batches.
POINTS = [("tombstones-recorded", 1), ("before-commit", 2), ("data-committed", 2), ("tombstones-recorded", 2)]


@pytest.fixture(scope="module")
def tiny_feed(tmp_path_factory):
    data = change_feed(seed=11, batches=4)
    return data, save_feed(data, tmp_path_factory.mktemp("tiny") / "feed.json")


@pytest.fixture
def schema(spark, tmp_path):
    name = f"sof_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE SCHEMA {name} LOCATION '{tmp_path / 'warehouse'}'")
    yield name
    spark.sql(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@pytest.mark.parametrize(("point", "nth"), POINTS, ids=[f"{p}@{n}" for p, n in POINTS])
def test_spark_only_client_killed_at_a_step_converges_after_a_resend(connect, tiny_feed, schema, point, nth):
    data, feed_file = tiny_feed
    name = f"{schema}.feed"
    crashed = run_writer(name, feed_file, engine="connect", remote=connect_url(connect), fault=f"{point}@{nth}",
                         spark_only=True)
    assert crashed.returncode == FAULT_EXIT_CODE, f"point {point}@{nth} was not reached: {crashed.stderr[-2000:]}"
    sink = UpsertSink.for_table(name, KEYS, sequence_by=SEQUENCE, delete_when=DELETE_WHEN, app_id="feed",
                                file_access=False)
    for i, rows in enumerate(data):  # the re-send
        sink.write(connect.createDataFrame(arrow_batch(rows)), batch_id=i)
    rows = connect.table(name).select("id", "val", "seq").collect()
    state = {r["id"]: (r["val"], r["seq"]) for r in rows}
    assert len(state) == len(rows)  # no key twice
    assert state == model(data)
    assert sink.last_batch_id() == len(data) - 1
