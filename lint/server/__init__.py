"""The linter as a language server."""
