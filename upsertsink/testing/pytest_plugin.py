"""pytest plugin (entry point ``upsertsink``): a session-scoped, Delta-enabled ``spark`` fixture."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    """One local Delta-enabled SparkSession for the whole test run, stopped at the end."""
    from upsertsink.session import spark_session

    session = spark_session(
        "upsertsink-tests",
        "local[2]",
        **{"spark.sql.shuffle.partitions": "2", "spark.databricks.delta.snapshotPartitions": "2"},
    )
    yield session
    session.stop()
