"""Spark's column functions for the kind of session a write runs on: classic or Spark Connect.

``pyspark.sql.functions`` builds Connect columns only when the process runs in Connect mode (the
``SPARK_CONNECT_MODE_ENABLED`` environment variable, set when a session is made with ``remote()``). A process
can hold both kinds of session (a Connect server in the same JVM as a classic session, as
``spark_session(connect=True)`` runs it, or a job that talks to a remote server beside its own local Spark),
so the sink never relies on that: while a write runs, :func:`api_for` names the kind of its DataFrame for the
thread, and ``F``/``Window`` here build columns of that kind.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from upsertsink.frames import is_connect

_state = threading.local()


@contextmanager
def api_for(frame_or_session: Any) -> Iterator[None]:
    """Within this block, ``F`` and ``Window`` (this thread) build columns for ``frame_or_session``'s kind."""
    before = getattr(_state, "connect", None)
    _state.connect = is_connect(frame_or_session)
    try:
        yield
    finally:
        _state.connect = before


def _module(classic: str, connect: str) -> Any:
    import importlib

    mode = getattr(_state, "connect", None)
    if mode is None:  # outside a write: pyspark's own choice (its Connect mode, or classic)
        return importlib.import_module(classic)
    return importlib.import_module(connect if mode else classic)


class _Proxy:
    def __init__(self, classic: str, connect: str, attr: str | None = None):
        self._classic, self._connect, self._attr = classic, connect, attr

    def __getattr__(self, name: str) -> Any:
        target = _module(self._classic, self._connect)
        if self._attr is not None:
            target = getattr(target, self._attr)
        return getattr(target, name)


F: Any = _Proxy("pyspark.sql.functions", "pyspark.sql.connect.functions")
Window: Any = _Proxy("pyspark.sql.window", "pyspark.sql.connect.window", "Window")
