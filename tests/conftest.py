"""Fixtures for the sink tests. The `spark` fixture (one SparkSession per run) comes from upsertsink's plugin;
`connect` is a Spark Connect session served from that same JVM (``spark_session(connect=True)``).

The `engine` fixture runs a test on the embedded engine and on classic Spark, and in the modules named in
CONNECT_MODULES on Spark Connect as well (every write feature is tested there on Connect too)."""

from __future__ import annotations

import uuid

import pytest
from sink_helpers import Engine

CONNECT_MODULES = {"test_history", "test_sink", "test_late_batches", "test_tombstones", "test_crash_safety", "test_first_steps"}


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
