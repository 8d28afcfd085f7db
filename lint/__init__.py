"""upsertsink's determinism linter (``upsertsink.lint``): finds nondeterministic keys and values in Spark job
code, notebooks included.

It never imports pyspark or the code it checks; see docs/linter.md. The stable API for other tools is
:mod:`upsertsink.lint.catalogue` (``nondeterministic_sql_functions()``, ``nondeterministic_sql_calls()``).
"""

from __future__ import annotations

__all__ = ["__version__", "package_version"]


def package_version() -> str:
    """The installed ``upsertsink`` distribution's version (the linter ships with it and has no other), read
    once by the package (importlib.metadata loads only when it is asked for)."""
    import upsertsink

    return str(upsertsink.__version__)


def __getattr__(name: str) -> str:
    if name == "__version__":  # looked up lazily: reading package metadata costs a few milliseconds
        return package_version()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
