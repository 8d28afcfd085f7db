"""spark_session(): a local, Delta-enabled SparkSession for jobs, examples and tests."""

from __future__ import annotations

import os
import sys
from typing import Any

_DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
}


def _local_defaults(master: str) -> dict[str, str]:
    """Settings that make a small local session fast; a user's own conf always wins."""
    if not master.startswith("local"):
        return {}
    cores = max(2, os.cpu_count() or 2)
    return {
        "spark.sql.shuffle.partitions": str(cores),
        "spark.default.parallelism": str(cores),
        "spark.databricks.delta.snapshotPartitions": str(cores),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "true" if sys.stderr.isatty() else "false",
        "spark.driver.memory": "4g",
        "spark.log.level": "ERROR",
        "spark.sql.session.timeZone": "UTC",
    }


def _submitted() -> bool:
    """True when this Python process was started by ``spark-submit`` (which chose the master and JARs)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def spark_session(app_name: str = "upsertsink", master: str | None = None, **conf: Any):
    """Return a SparkSession with Delta Lake enabled (JARs from ~/.m2, fetched by Maven if missing).

    ``master`` defaults to ``local[*]``; under ``spark-submit`` the submitted master and ``--jars`` are kept.
    Keyword arguments are Spark settings, e.g. ``spark_session(**{"spark.sql.shuffle.partitions": "8"})``.
    """
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    from upsertsink import jars

    submitted = _submitted()
    explicit_master = master is not None
    if master is None:
        master = SparkConf().get("spark.master", "local[*]") if submitted else "local[*]"
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers run upsertsink's own code (the Spark engine's one-pass batch statistics): they use this
    # interpreter unless the user chose another.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings: dict[str, str] = {**_local_defaults(master), **_DELTA_CONF}
    if not submitted:
        paths = jars.delta_jars() or jars.ensure()
        settings["spark.jars"] = ",".join(str(p) for p in paths)
    settings.update({k: str(v) for k, v in conf.items()})
    builder = SparkSession.builder.appName(app_name)
    if explicit_master or not submitted:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
