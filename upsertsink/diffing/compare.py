"""``diff()``: compare two tables, table versions, files or frames row by row by key."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from upsertsink.diffing.inputs import Request, as_list, check_tolerance, choose_engine, resolve
from upsertsink.diffing.result import DiffResult
from upsertsink.errors import InvalidInputError, require_embedded
from upsertsink.session import require_spark

log = logging.getLogger(__name__)

#: How many differing rows (in key order) are collected with the counts; ``samples(n)`` beyond it recomputes.
DEFAULT_SAMPLE_SIZE = 100


def diff(
    left: Any,
    right: Any,
    keys: str | Sequence[str],
    *,
    columns: Sequence[str] | None = None,
    ignore_columns: Sequence[str] | None = None,
    tolerance: float | None = None,
    engine: str = "auto",
    sample_size: int = DEFAULT_SAMPLE_SIZE,
    progress: Callable[[str], None] | None = None,
) -> DiffResult:
    """Compare two inputs row by row by ``keys``; row order never matters and nulls equal nulls.

    Inputs: a Delta table path (``PATH@N`` for version N), a parquet/csv/json file or folder, a
    Spark/pandas DataFrame or a pyarrow Table. ``tolerance`` is an absolute tolerance for float/decimal
    columns (exact by default). ``engine``: ``"auto"``, ``"spark"`` or ``"embedded"`` (Arrow, no JVM).
    """
    if engine == "spark":  # the spark extra brings the embedded one
        require_spark("diff on Spark", delta=False)
    require_embedded("upsertsink.diff")
    req = Request(
        keys=as_list(keys, "keys") or [],
        columns=as_list(columns, "columns"),
        ignore=as_list(ignore_columns, "ignore_columns"),
        tolerance=check_tolerance(tolerance),
        sample_size=sample_size,
    )
    if not isinstance(sample_size, int) or sample_size < 0:
        raise InvalidInputError(f"sample_size must be an int >= 0, got {sample_size!r}")
    lside, rside = resolve(left, "left"), resolve(right, "right")
    chosen = choose_engine(engine, (lside, rside))
    log.debug("diff %s vs %s on the %s engine", lside.label, rside.label, chosen)
    say = progress or (lambda _msg: None)
    if chosen == "spark":
        from upsertsink.diffing import spark as engine_module
    else:
        from upsertsink.diffing import arrow as engine_module  # type: ignore[no-redef]
    result = engine_module.compare(lside, rside, req, say)
    result.left_label, result.right_label = lside.label, rside.label
    return result
