"""Keyed comparison of two tables, table versions, files or frames: ``diff()`` and its ``DiffResult``.

Equal inputs are proven cheaply first: each side is reduced in one pass to an order-independent
fingerprint (row count and the sum of a 64-bit hash per row over the compared columns). Only when the
fingerprints differ is the full keyed comparison run. Modules: ``inputs`` (what the sides are, which engine,
which columns), ``hashing`` (row hashes, both engines), ``spark`` and ``arrow`` (the two comparisons),
``result`` (``DiffResult``) and ``render`` (its one text form). The package is not named ``diff``: a
submodule of that name would replace the function ``upsertsink.diff`` on import.
"""

from __future__ import annotations

from upsertsink.diffing.compare import DEFAULT_SAMPLE_SIZE, diff
from upsertsink.diffing.inputs import SPARK_THRESHOLD_BYTES
from upsertsink.diffing.render import render
from upsertsink.diffing.result import DiffResult

__all__ = ["DEFAULT_SAMPLE_SIZE", "SPARK_THRESHOLD_BYTES", "DiffResult", "diff", "render"]
