"""Fixtures for the sink tests. The `spark` fixture (one SparkSession per run) comes from upsertsink's plugin;
`connect` is a Spark Connect session served from that same JVM (``spark_session(connect=True)``).

The `engine` fixture runs a test on the embedded engine and on classic Spark, and in the modules named in
CONNECT_MODULES on Spark Connect as well (every write feature is tested there on Connect too)."""

from __future__ import annotations

import os
import sys
import uuid

import pytest
from sink_helpers import Engine

CONNECT_MODULES = {
    "test_history", "test_sink", "test_late_batches", "test_tombstones", "test_crash_safety", "test_first_steps",
    "test_operators", "test_batch_ledger",
}


@pytest.fixture(scope="session")
def connect(spark):
    """A Spark Connect session on a Connect server started in the test run's own Spark (one JVM)."""
    from upsertsink import spark_session

    pytest.importorskip("grpc", reason='the Spark Connect client (pip install "upsertsink[connect]")')
    session = spark_session("upsertsink-tests", "local[2]", connect=True)
    yield session
    session.stop()


def pytest_generate_tests(metafunc):
    if "engine" in metafunc.fixturenames and not hasattr(metafunc.module, "engine"):  # not a module's own
        names = ["embedded", "spark"]
        if metafunc.module.__name__.rsplit(".", 1)[-1] in CONNECT_MODULES:
            names.append("connect")
        metafunc.parametrize("engine", names, indirect=True)


# The fixtures that stand for the run's one in-process SparkSession (directly or through the engine fixture).
SESSION_FIXTURES = {"spark", "connect", "schema"}


def uses_session(item) -> bool:
    """Does the test use the run's in-process SparkSession: a session fixture, or a parameter "spark" or
    "connect" (the engine fixture's, or any test's or fixture's that calls ``request.getfixturevalue``)?"""
    params = getattr(getattr(item, "callspec", None), "params", {})
    spark_param = any(isinstance(v, str) and v in ("spark", "connect") for v in params.values())
    return bool(SESSION_FIXTURES & set(item.fixturenames)) or spark_param


def pytest_collection_modifyitems(config, items):
    # `make test` runs the tests marked `session` in one process (the run's one SparkSession) and every other
    # test beside it in a second process (scripts/test.sh): the marker is derived here, never written by hand
    for item in items:
        if uses_session(item):
            item.add_marker(pytest.mark.session)


@pytest.fixture(autouse=True)
def _no_session_on_the_side(request):
    """In the process of the tests without the session (UPSERTSINK_TESTS_SIDE=1), a test that starts Spark
    in-process anyway fails: it belongs with the session tests (request the `spark` fixture)."""
    yield
    if os.environ.get("UPSERTSINK_TESTS_SIDE") != "1" or "pyspark" not in sys.modules:
        return
    from pyspark import SparkContext

    started = []
    if SparkContext._active_spark_context is not None:
        started.append(SparkContext._active_spark_context)
    connect = sys.modules.get("pyspark.sql.connect.session")
    if connect is not None and connect.SparkSession.getActiveSession() is not None:
        started.append(connect.SparkSession.getActiveSession())
    for session in started:
        session.stop()  # so the next tests of this process do not fail for it too
    if started:
        pytest.fail(
            f"{request.node.nodeid} started a SparkSession in the process of the tests without one "
            "(UPSERTSINK_TESTS_SIDE=1): request the `spark` fixture so it runs with the session tests"
        )


@pytest.fixture
def engine(request) -> Engine:
    if request.param in ("spark", "connect"):
        return Engine(request.param, request.getfixturevalue(request.param))
    return Engine("embedded")


@pytest.fixture
def schema(spark, tmp_path):
    """A schema of the run's catalog whose managed tables live under tmp_path (the catalog-table tests)."""
    name = f"s_{uuid.uuid4().hex[:8]}"
    spark.sql(f"CREATE SCHEMA {name} LOCATION '{tmp_path / 'warehouse'}'")
    yield name
    spark.sql(f"DROP SCHEMA IF EXISTS {name} CASCADE")
