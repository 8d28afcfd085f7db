"""upsertsink's determinism linter (``upsertsink.lint``): finds nondeterministic keys and values in Spark job
code, notebooks included.

It never imports pyspark or the code it checks; see docs/linter.md. The stable API for other tools is
:mod:`upsertsink.lint.catalogue` (``nondeterministic_sql_functions()``, ``nondeterministic_sql_calls()``).
"""

from __future__ import annotations

__version__ = "1.1.0"

__all__ = ["__version__"]
