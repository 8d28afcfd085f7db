"""Analyzing files: one at a time in this process, or spread over a process pool when there is enough work.

The process pool is loaded only when it is used (start-up counts for small runs); the analysis is loaded by
:func:`upsertsink.lint.checker.check_bytes` when a file is analyzed, in the worker that analyzes it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

from upsertsink.lint.checker import CheckOptions, FileResult, check_bytes, main_guard

if TYPE_CHECKING:
    from upsertsink.lint.runner import Stats

_PARALLEL_MIN_FILES = 8
_PARALLEL_MIN_BYTES = 256 * 1024


def work(item: tuple[str, bytes, CheckOptions, bool]) -> FileResult:
    path, data, options, prefilter = item
    main_guard()
    try:
        return check_bytes(path, data, [], [], prefilter=prefilter, options=options)
    except Exception as exc:  # noqa: BLE001 - one file must never take the run down
        from upsertsink.lint.checker import _parse_error

        return FileResult([_parse_error(path, 1, 1, f"internal error {exc.__class__.__name__}: {exc}")], True)


_FORKED_ITEMS: list = []  # in a forked worker: the pool's work, inherited from the parent instead of pickled


def _inherit(items: list) -> None:
    # a pool's initializer: with the fork start method its arguments reach the worker through the fork itself
    # (never pickled), and each pool gets its own list even when several runs share the parent process
    _FORKED_ITEMS[:] = items


def _work_forked(index: int) -> FileResult:
    return work(_FORKED_ITEMS[index])


def _serial(items: list, progress: Callable[[int, int], None]) -> list[FileResult | None]:
    out: list[FileResult | None] = []
    for item in items:
        out.append(work(item))
        progress(len(out), len(items))
    return out


def run_items(
    items: list, jobs: int | None, progress: Callable[[int, int], None], stats: Stats
) -> list[FileResult | None]:
    """Analyze items in a process pool when there is enough work, else in this process."""
    total = sum(len(item[1]) for item in items)
    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    if not (workers > 1 and len(items) >= _PARALLEL_MIN_FILES and total >= _PARALLEL_MIN_BYTES):
        return _serial(items, progress)
    order = sorted(range(len(items)), key=lambda i: -len(items[i][1]))
    outputs: list[FileResult | None] = [None] * len(items)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    # Workers import the analysis (and the SQL parser, when a file holds SQL) themselves, side by side: this
    # process importing them before the fork would add their import time to the run's instead.
    forked = sys.platform.startswith("linux")
    ctx = multiprocessing.get_context("fork") if forked else None
    if forked:  # forked workers find the items in their copy of this process' memory: only indices are sent
        fn, args, init = _work_forked, order, {"initializer": _inherit, "initargs": (items,)}
    else:
        fn, args, init = work, [items[i] for i in order], {}
    # large files first; chunks as big as keeps every worker busy to the end (a task costs a round trip)
    chunk = max(2, len(items) // (workers * 8))
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, **init) as pool:
            for done, (i, res) in enumerate(zip(order, pool.map(fn, args, chunksize=chunk), strict=True), 1):
                outputs[i] = res
                progress(done, len(items))
        stats.workers = workers
    except (OSError, BrokenProcessPool):  # no process support here (sandbox, no /dev/shm): one process
        outputs = _serial(items, progress)
    return outputs
