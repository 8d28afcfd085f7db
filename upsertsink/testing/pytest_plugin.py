"""pytest plugin (entry point ``upsertsink``): a session-scoped, Delta-enabled ``spark`` fixture.

The plugin loads with every install; the fixture needs the ``upsertsink[spark]`` extra and says so when it
is missing.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    """One local Delta-enabled SparkSession for the whole test run, stopped at the end."""
    from upsertsink.session import require_spark, spark_session

    require_spark("the `spark` fixture of upsertsink's pytest plugin")
    session = spark_session(
        "upsertsink-tests",
        "local[2]",
        **{"spark.sql.shuffle.partitions": "2", "spark.databricks.delta.snapshotPartitions": "2"},
    )
    yield session
    session.stop()
