"""upsertsink's determinism linter (``upsertsink.lint``): finds nondeterministic keys and values in Spark job
code, notebooks included.

It never imports pyspark or the code it checks; see docs/linter.md. The stable API for other tools is
:mod:`upsertsink.lint.catalogue` (``nondeterministic_sql_functions()``, ``nondeterministic_sql_calls()``).
"""

from __future__ import annotations

import functools

__all__ = ["__version__", "package_version"]


@functools.lru_cache(maxsize=1)
def package_version() -> str:
    """The installed ``upsertsink`` distribution's version (the linter ships with it and has no other)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("upsertsink")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"


def __getattr__(name: str) -> str:
    if name == "__version__":  # looked up lazily: reading package metadata costs a few milliseconds
        return package_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
