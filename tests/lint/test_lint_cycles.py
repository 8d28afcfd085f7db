"""Helpers that call each other with subscripted values (``a["k"]``, a pandas-style column) form cycles
through parameters and columns. A result computed inside such a cycle is partial; it used to be recomputed
at every visit, which grew exponentially with the number of helpers (pydantic's
``_internal/_discriminated_union.py`` ran for hours; six helpers here never finished)."""

from __future__ import annotations

import subprocess
import sys


def _helpers_calling_each_other(n: int) -> str:
    lines = []
    for i in range(n):
        lines += [f"def f{i}(a, b, c):", "    a['k'] = b['k']"]
        lines += [f"    x{j} = f{j}(a['k'], c, b['k'])" for j in range(n) if j != i]
        lines += ["    return a", ""]
    lines += ["import time", "pdf = f0(src, src, src)", "pdf['k'] = time.time()", "pdf.to_parquet('out.parquet')"]
    return "\n".join(lines) + "\n"


def test_helpers_calling_each_other_through_columns_are_analyzed_in_bounded_time() -> None:
    # run in a child process, so the suite ends even where the analysis does not; the limit is a hang
    # check (the fixed code takes well under a second, the old one did not finish six helpers in hours)
    code = (
        "import sys\n"
        "from upsertsink.lint.check.checker import check_bytes\n"
        "r = check_bytes('job.py', sys.stdin.buffer.read(), [], [])\n"
        "print(*sorted((f.rule, f.line, f.column_name) for f in r.findings))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        input=_helpers_calling_each_other(6).encode(),
        capture_output=True,
        timeout=300,
        check=True,
    )
    # the clock still reaches the column through the cycle
    assert proc.stdout.decode().strip() == "('ND001', 57, 'k')"
