"""Named crash points of the write protocol, for fault-injection tests.

Each step of ``UpsertSink.write`` calls :func:`point` with the step's name. Normally that is one dictionary
lookup and nothing happens. With ``UPSERTSINK_FAULT=<name>`` (optionally ``<name>@<n>`` for the n-th time the
point is reached in this process), the process dies there with ``os._exit(FAULT_EXIT_CODE)``, as a killed
writer would; with ``UPSERTSINK_FAULT_MODE=raise`` it raises :class:`InjectedFault` instead, as an engine or
storage error would. The reliability tests use both at every point (docs/reliability.md lists them). With
``UPSERTSINK_FAULT_MODE=pause`` the process writes the point's name to the file ``UPSERTSINK_FAULT_READY``
names and sleeps there (``UPSERTSINK_FAULT_PAUSE`` seconds, 120 by default) before it goes on: the interrupt
tests send a signal to a writer waiting at a known step.

The points are also where a write on Spark stops after the command line's first Ctrl-C
(:func:`interrupt_at_next_point`): between two steps no Spark call is in flight, so what the write committed
is settled when it stops.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

FAULT_EXIT_CODE = 86

# The crash points in protocol order (docs/reliability.md describes each).
POINTS = (
    "prepared",  # batch validated, duplicates resolved, fingerprint taken; nothing written yet
    "tombstones-recorded",  # this batch's deletes remembered in the tombstone table; target untouched
    "before-commit",  # tombstones read and applied; the data commit is next
    "table-created",  # the first batch created the table (data + marker in one commit)
    "data-committed",  # the MERGE with the marker committed
    "marker-only-before",  # the MERGE changed no row; the marker's own commit is next
    "marker-only-committed",  # the marker-only commit is done
    "repair-before",  # a concurrent delete was found after our commit; its repair is next
    "repair-committed",  # the repair commit is done
    "tombstones-compacted",  # compaction wrote the merged tombstone file; the files it replaces still exist
    "maintain-checkpointed",  # maintain compacted tombstones and checkpointed the target; log cleanup is next
)

_counts: dict[str, int] = {}
_hooks: dict[str, Callable[[], None]] = {}
_interrupt = False


class InjectedFault(RuntimeError):
    """The error raised at a crash point under ``UPSERTSINK_FAULT_MODE=raise``."""


def interrupt_at_next_point(on: bool = True) -> None:
    """Make the next point this process reaches raise KeyboardInterrupt (``on=False`` takes that back)."""
    global _interrupt
    _interrupt = on


def _interrupt_here() -> None:
    global _interrupt
    if _interrupt:
        _interrupt = False
        raise KeyboardInterrupt


def point(name: str) -> None:
    """Crash here if ``UPSERTSINK_FAULT`` names this point (see the module docstring)."""
    _interrupt_here()
    if name in _hooks:
        _hooks.pop(name)()
    wanted = os.environ.get("UPSERTSINK_FAULT")
    if not wanted:
        return
    target, _, nth = wanted.partition("@")
    if target != name:
        return
    _counts[name] = _counts.get(name, 0) + 1
    if nth and _counts[name] != int(nth):
        return
    mode = os.environ.get("UPSERTSINK_FAULT_MODE")
    if mode == "raise":
        raise InjectedFault(f"injected fault at {name}")
    if mode == "pause":
        ready = os.environ.get("UPSERTSINK_FAULT_READY")
        if ready:
            with open(ready, "w") as f:
                f.write(name)
        time.sleep(float(os.environ.get("UPSERTSINK_FAULT_PAUSE", "120")))
        _interrupt_here()
        return
    os._exit(FAULT_EXIT_CODE)


@contextmanager
def hook(name: str, callback: Callable[[], None]) -> Iterator[None]:
    """Run ``callback`` once, the next time this process reaches point ``name`` (to stage a race in tests)."""
    if name not in POINTS:
        raise ValueError(f"unknown fault point {name!r}; known: {', '.join(POINTS)}")
    _hooks[name] = callback
    try:
        yield
    finally:
        _hooks.pop(name, None)
