"""upsertsink's determinism linter: finds nondeterministic keys and values in Spark job code.

It never imports pyspark or the code it checks; see docs/linter.md.
"""

from __future__ import annotations

__version__ = "1.0.0"

__all__ = ["__version__"]
