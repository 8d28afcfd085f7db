"""Analyzing files: one at a time in this process, or spread over a process pool when there is enough work.

The process pool is loaded only when it is used (start-up counts for small runs). A run keeps one pool
(:class:`Workers`) from the moment it knows there is enough work to its end: the workers are forked while
this process is still reading the files, and import the analysis meanwhile; the later rounds between files
(summaries, files analyzed again with other files' summaries) go to the same workers, so this process never
imports the analysis itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..base.structs import struct
from ..check.checker import CheckOptions, FileResult, check_bytes, main_guard

if TYPE_CHECKING:
    from concurrent.futures import Future, ProcessPoolExecutor


@struct
class Stats:
    """What a run cost: how many files were checked, parsed, served from cache, skipped unparsed."""

    files_checked: int = 0
    parsed: int = 0
    cache_hits: int = 0
    prefiltered: int = 0
    workers: int = 1
    sql_group: int = 0  # files analyzed together by one worker because they hold SQL text (lint/run/workers.py)
    modules_read: int = 0  # project modules outside the linted files, read for the values they export
    unread: int = 0  # cache hits known by their stat (modification time and size): not even read


PARALLEL_MIN_FILES = 8
PARALLEL_MIN_BYTES = 256 * 1024


def work(item: tuple[str, bytes | None, CheckOptions, bool, int]) -> FileResult:
    """Analyze one item: (path as shown, content or None to read it from ``options.origin``, options,
    pre-filter, size when not read)."""
    path, data, options, prefilter, _size = item
    main_guard()
    if data is None:
        try:
            with open(options.origin or path, "rb") as fh:
                data = fh.read()
        except OSError as exc:
            from ..check.checker import _parse_error

            return FileResult([_parse_error(path, 1, 1, f"cannot read the file: {exc.strerror}")], True)
    try:
        return check_bytes(path, data, [], [], prefilter=prefilter, options=options)
    except Exception as exc:  # noqa: BLE001 - one file must never take the run down
        from ..check.checker import _parse_error

        return FileResult([_parse_error(path, 1, 1, f"internal error {exc.__class__.__name__}: {exc}")], True)


def _work_many(items: list) -> list[FileResult]:
    return [work(item) for item in items]


# Calls whose string arguments the analysis reads as SQL (spark.sql, F.expr and selectExpr, merge
# conditions): a file without them needs no sqlglot, as a rule. Each word costs a scan of every file (about
# 3 ms for pyspark's 10 MB), so filter and where strings are not looked for: a file with only those loads
# sqlglot in whichever worker analyzes it, as every file did before.
_SQL_HINTS = (b".sql(", b"xpr(", b".merge(")


def _plan(
    items: list, order: list[int], workers: int, submit: Callable[[list[int]], None]
) -> tuple[list[int], int]:
    """Submit the first tasks of a run while its files are read for SQL; return the items left (largest
    first) and how many went in the SQL task.

    Importing sqlglot costs a process about 70 ms, a tenth of a worker's share of pyspark's tree. So the
    files that hold SQL text go to one worker, as one task, when they are at most one worker's share of the
    bytes: the other workers never load it (once they are more, the files left are not read for it). Meanwhile
    the largest file without SQL goes at once to each worker, so that no worker waits for this reading. The
    hint decides only where a file is analyzed, never how."""
    share = sum(_size(items[i]) for i in order) // workers  # sizes from the listing: known before reading
    group: list[int] = []
    plain: list[int] = []
    grouped = started = 0
    for i in order:
        if grouped <= share:  # past one worker's share nothing is grouped: the rest is not read for it
            data = _content(items[i])
            if data is not None and any(h in data for h in _SQL_HINTS):
                group.append(i)
                grouped += len(data)
                continue
        if started < workers:  # the largest file without SQL, alone: its worker starts at once
            submit([i])
            started += 1
        else:
            plain.append(i)
    if group and grouped <= share:
        submit(group)
        return plain, len(group)
    return sorted(group + plain, key=lambda i: -_size(items[i])), 0


def _content(item: tuple) -> bytes | None:
    """The item's text: carried, or read from its file (None when it cannot be read: its worker says so)."""
    path, data, options, _prefilter, _size = item
    if data is not None:
        return data
    try:
        with open(options.origin or path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def _size(item: tuple) -> int:
    return len(item[1]) if item[1] is not None else item[4]


def _warm() -> None:
    # a worker's initializer: import the analysis (and the rules) while the parent still reads files
    from ..check import analysis  # noqa: F401


def _serial(items: list, progress: Callable[[int, int], None]) -> list[FileResult | None]:
    out: list[FileResult | None] = []
    for item in items:
        out.append(work(item))
        progress(len(out), len(items))
    return out


def enough_work(files: int, size: int) -> bool:
    """Is a run of ``files`` files (``size`` bytes in all) worth a process pool?"""
    return files >= PARALLEL_MIN_FILES and size >= PARALLEL_MIN_BYTES


class Workers:
    """The worker processes of one run (``jobs``: how many; None: one per core). Started by :meth:`start`
    (or by the first :meth:`run` with enough work), used by every later :meth:`run`, ended by :meth:`close`."""

    def __init__(self, jobs: int | None) -> None:
        self.count = jobs if jobs is not None else (os.cpu_count() or 1)
        self._pool: ProcessPoolExecutor | None = None
        self._failed = False  # no process support here (sandbox, no /dev/shm): one process from then on

    def start(self) -> None:
        """Fork the workers now (they import the analysis while this process goes on)."""
        if self._pool is not None or self._failed or self.count <= 1:
            return
        import multiprocessing
        import sys
        from concurrent.futures import ProcessPoolExecutor

        # forked workers start at once with this process' modules; elsewhere they are spawned
        ctx = multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None
        try:
            self._pool = ProcessPoolExecutor(max_workers=self.count, mp_context=ctx, initializer=_warm)
            self._pool.submit(_warm)  # the first task makes the pool fork its workers (not its constructor)
        except OSError:
            self._failed = True

    def run(self, items: list, progress: Callable[[int, int], None], stats: Stats) -> list[FileResult | None]:
        """Analyze items in the workers (started now if there is enough work), else in this process."""
        if self._pool is None and not enough_work(len(items), sum(_size(item) for item in items)):
            return _serial(items, progress)
        self.start()
        if self._pool is None:
            return _serial(items, progress)
        from concurrent.futures.process import BrokenProcessPool

        # large files first; chunks as big as keeps every worker busy to the end (a task costs a round trip)
        order = sorted(range(len(items)), key=lambda i: -_size(items[i]))
        chunk = max(1, len(items) // (self.count * 8))
        outputs: list[FileResult | None] = [None] * len(items)
        tasks: list[tuple[list[int], Future]] = []

        def submit(task: list[int]) -> None:
            assert self._pool is not None
            tasks.append((task, self._pool.submit(_work_many, [items[i] for i in task])))

        try:
            rest, grouped = _plan(items, order, self.count, submit)
            for k in range(0, len(rest), chunk):
                submit(rest[k : k + chunk])
            done = 0
            for task, future in tasks:
                for i, res in zip(task, future.result(), strict=True):
                    outputs[i] = res
                done += len(task)
                progress(done, len(items))
            stats.workers = self.count
            stats.sql_group += grouped
        except (OSError, BrokenProcessPool):
            self.close()
            self._failed = True
            outputs = _serial(items, progress)
        return outputs

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
