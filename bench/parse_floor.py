"""The floor of a cold run in CPython: ``ast.parse`` of every ``.py``/``.pyi`` file under a folder, the
largest first, over one forked process per core, each tree freed as the linter frees it; nothing analyzed.

bench_lint.py runs it beside ``upsertsink lint --no-cache`` and ruff on pyspark's sources: the part of the
cold target (<= 10x ruff) that parsing alone takes, interpreter and process start included.
"""

from __future__ import annotations

import ast
import gc
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor


def parse_many(paths: list[str]) -> int:
    parsed = 0
    for path in paths:
        with open(path, "rb") as fh:
            data = fh.read()
        try:
            tree = ast.parse(data, filename=path)
        except (SyntaxError, ValueError):
            continue
        del tree
        parsed += 1
    return parsed


def main(folder: str) -> int:
    gc.disable()  # as the linter runs: trees are freed by reference counts
    files = [
        os.path.join(d, n) for d, _, names in os.walk(folder) for n in names if n.endswith((".py", ".pyi"))
    ]
    files.sort(key=lambda p: -os.path.getsize(p))
    cores = os.cpu_count() or 1
    chunk = max(1, len(files) // (cores * 8))  # the linter's task size
    ctx = multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None
    with ProcessPoolExecutor(cores, mp_context=ctx) as pool:
        parsed = sum(pool.map(parse_many, [files[i : i + chunk] for i in range(0, len(files), chunk)]))
    print(f"{parsed} of {len(files)} files parsed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
