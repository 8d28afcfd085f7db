"""Hover: a rule code under the cursor, in a ``# noqa: CODE`` comment or in a diagnostic's range, shows the
rule's documentation (what ``upsertsink lint --explain CODE`` prints), as ruff's server does."""

from __future__ import annotations

import re

from lsprotocol import types as t

from ..rules import RULES
from .language_server import UpsertsinkServer

_CODE = re.compile(r"\bND\d{3}\b", re.IGNORECASE)
_HTML_COMMENT = re.compile(r"<!--.*?-->\n?", re.DOTALL)


def rule_hover(ls: UpsertsinkServer, params: t.HoverParams) -> t.Hover | None:
    """The documentation of the rule whose code the cursor is on (in a ``noqa`` comment), else of the rules
    of the diagnostics at the cursor; None when there is none."""
    uri, pos = params.text_document.uri, params.position
    doc = ls.workspace.get_text_document(uri)
    lines = doc.lines
    line = lines[pos.line] if pos.line < len(lines) else ""
    codes = []
    for m in _CODE.finditer(line):
        start = doc.position_codec.client_num_units(line[: m.start()])
        end = doc.position_codec.client_num_units(line[: m.end()])
        if start <= pos.character <= end and "noqa" in line[: m.start()].lower():
            codes = [m.group(0).upper()]
            break
    if not codes:
        for entry in ls.published.get(uri, ()):
            r = entry.diagnostic.range
            at = (r.start.line, r.start.character) <= (pos.line, pos.character) <= (r.end.line, r.end.character)
            if at and entry.finding.rule not in codes:
                codes.append(entry.finding.rule)
    docs = [rule_markdown(code) for code in codes if code in RULES]
    if not docs:
        return None
    return t.Hover(contents=t.MarkupContent(kind=t.MarkupKind.Markdown, value="\n---\n\n".join(docs)))


def rule_markdown(code: str) -> str:
    """A rule's documentation as Markdown for an editor: ``--explain``'s text without its HTML comments (the
    examples' expected positions, for the tests)."""
    return _HTML_COMMENT.sub("", RULES[code].explain())
