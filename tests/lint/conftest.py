"""The linter's tests import it as ``upsertsink.lint`` (installed from the top-level lint/ folder)."""
