"""The language server's documents without the protocol: the settings of a document, linting a buffer (a
file's text as the runner would read it, or a notebook's cells put together as a Jupyter notebook) and the
edit that turns one text into another. :mod:`upsertsink.lint.server.lsp` serves them over LSP.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..base.structs import struct
from ..check.checker import CheckOptions, Finding, check_bytes
from ..rules import RULES
from ..run.config import Settings, resolve_settings

NOTEBOOK_LANGUAGES = ("python", "sql")  # cell languages linted; other cells count as Markdown
_DATABRICKS_CELL = "application/vnd.databricks.v1+cell"


# ------------------------------------------------------------------------------------- linting text
def rule_href(code: str) -> str | None:
    """The rule's section of docs/rules.md (the anchor GitHub makes of ``## ND003 random-uuid``)."""
    from ..command.report import RULES_URI

    rule = RULES.get(code)
    return f"{RULES_URI}#{code.lower()}-{rule.name}" if rule is not None else None


def uri_path(uri: str) -> Path | None:
    """The file a ``file:`` URI names (None for ``untitled:`` and other schemes)."""
    from pygls.uris import to_fs_path

    if not uri.startswith("file:"):
        return None
    fs = to_fs_path(uri)
    return Path(fs) if fs else None


def settings_for(path: Path | None, fallback: Path | None = None) -> Settings:
    """The CLI's settings for a document: the nearest pyproject.toml with the lint table above its file
    (above ``fallback``, the workspace folder, for documents that are not files). Raises ConfigError."""
    start = path if path is not None else (fallback or Path.cwd())
    return resolve_settings([start])


def _encoded(text: str) -> bytes:
    """The buffer as the bytes a file would hold: in the encoding its coding cookie declares, if any."""
    import io
    import tokenize

    data = text.encode("utf-8", "surrogatepass")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return text.encode(encoding) if encoding not in ("utf-8", "utf-8-sig") else data
    except (SyntaxError, LookupError, UnicodeError):
        return data  # the checker reports what it cannot decode (ND000)


def lint_text(shown: str, text: str, path: Path | None, settings: Settings) -> list[Finding]:
    """Findings of one buffer. With a file path, the runner lints it as if the file held it (``stdin``
    mode): the project modules it imports are read from disk to follow values into them, and
    ``per-file-ignores`` apply; without one (an untitled buffer), it is checked on its own. ``shown``
    ending in ``.ipynb`` reads the text as notebook JSON."""
    data = text.encode("utf-8") if shown.endswith(".ipynb") else _encoded(text)
    if path is not None:
        from ..run.runner import lint_paths

        # no cache: it would be rewritten at every keystroke; jobs=1: no process pool inside the server
        return lint_paths([], settings, use_cache=False, jobs=1, stdin=(Path(shown), data)).findings
    options = CheckOptions(
        keys=list(settings.keys),
        sequence=list(settings.sequence),
        key_patterns=list(settings.key_patterns),
        root=str(settings.root),
    )
    result = check_bytes(shown, data, [], [], options=options)
    return [f for f in result.findings if settings.enabled(f.rule)]


def excluded(path: Path | None, settings: Settings) -> bool:
    """Do the config's ``exclude``/``extend-exclude`` globs match the document (as ``--force-exclude``
    applies them)?"""
    from ..run.discovery import is_excluded

    return path is not None and is_excluded(path, settings)


# ------------------------------------------------------------------------------------------ notebooks
@struct
class NotebookText:
    """The cells of a notebook document as Jupyter JSON, and which cell URI each cell number is."""

    json: str
    cell_uris: list[str]  # index = cell number - 1 (every cell, Markdown included, as Finding.cell counts)


def notebook_json(cells: list[tuple[bool, str, str, str]]) -> NotebookText:
    """(is a code cell, language id, text, uri) per cell -> the notebook as ``.ipynb`` JSON. SQL cells are
    marked with the cell metadata Databricks' exports use, which the checker reads; cells in other
    languages become Markdown cells (skipped, but counted)."""
    out = []
    for is_code, language, text, _uri in cells:
        lang = language.lower()
        if is_code and lang in NOTEBOOK_LANGUAGES:
            meta = {_DATABRICKS_CELL: {"language": lang}} if lang == "sql" else {}
            out.append(
                {
                    "cell_type": "code",
                    "execution_count": None,
                    "metadata": meta,
                    "outputs": [],
                    "source": text,
                }
            )
        else:
            out.append({"cell_type": "markdown", "metadata": {}, "source": text})
    nb = {
        "cells": out,
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return NotebookText(json.dumps(nb, indent=1) + "\n", [uri for *_, uri in cells])


# ------------------------------------------------------------------------------------------ edits
def changed_span(before: str, after: str) -> tuple[int, int, str]:
    """(start offset, end offset, new text): the smallest run of whole lines of ``before`` that turns it
    into ``after`` (offsets in code points)."""
    a = before.splitlines(keepends=True)
    b = after.splitlines(keepends=True)
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    start = sum(len(x) for x in a[:head])
    end = len(before) - sum(len(x) for x in a[len(a) - tail :])
    return start, end, "".join(b[head : len(b) - tail])
