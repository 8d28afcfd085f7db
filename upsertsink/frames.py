"""What kind of Spark object a value is, without importing Spark: a leaf every other module may import."""

from __future__ import annotations

from typing import Any


def is_connect(spark_or_frame: Any) -> bool:
    """True for a Spark Connect session or DataFrame (no JVM in this process behind it)."""
    return type(spark_or_frame).__module__.startswith("pyspark.sql.connect")


__all__ = ["is_connect"]
