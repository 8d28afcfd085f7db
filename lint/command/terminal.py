"""What a terminal shows: colour, when the output is one (as ruff does: never when it is piped or written to a
file, nor with ``NO_COLOR`` set, nor on a ``TERM=dumb`` terminal), and a rule's Markdown as readable text
(``--explain`` on a terminal; piped, or with ``--format markdown``, the Markdown itself)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import TextIO

RESET = "\x1b[0m"
BOLD = "\x1b[1m"
RED = "\x1b[31m"
YELLOW = "\x1b[33m"
CYAN = "\x1b[36m"
DIM = "\x1b[2m"
SEVERITY = {"error": BOLD + RED, "warning": BOLD + YELLOW}


def is_terminal(stream: TextIO | None = None) -> bool:
    """Is ``stream`` (stdout) a terminal?"""
    stream = stream if stream is not None else sys.stdout
    try:
        return os.isatty(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return False


def colors(stream: TextIO | None = None) -> bool:
    """Does ``stream`` (stdout) show colour: a terminal, ``NO_COLOR`` not set (https://no-color.org: any
    value but empty), ``TERM`` not ``dumb``?"""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return is_terminal(stream)


def paint(text: str, style: str, color: bool) -> str:
    """``text`` in ``style`` (ANSI codes) when ``color``, else as it is."""
    return f"{style}{text}{RESET}" if color and text else text


def markdown_text(markdown: str, color: bool) -> str:
    """A rule's documentation (``Rule.explain``'s Markdown) as text for a terminal: the title and the
    strong words bold, inline code in colour without its backquotes, code blocks indented, links as
    ``text (address)``, HTML comments (the examples' expected positions, for the tests) left out."""
    import re  # only --explain needs it

    comment = re.compile(r"<!--.*?-->\n?", re.DOTALL)
    link = re.compile(r"\[([^\]]+)\]\(([^)]+)\)")
    strong = re.compile(r"\*\*(.+?)\*\*")
    emphasis = re.compile(r"(?<![\w*])\*([^*\n]+)\*(?![\w*])")
    code = re.compile(r"`([^`\n]+)`")
    out: list[str] = []
    in_code = False
    for line in comment.sub("", markdown).splitlines():
        if line.startswith("```"):
            in_code = not in_code
            continue
        if in_code:
            out.append("    " + paint(line, DIM, color) if line else "")
            continue
        if line.startswith("#"):
            out.append(paint(line.lstrip("#").strip(), BOLD, color))
            continue
        line = link.sub(r"\1 (\2)", line)
        line = strong.sub(lambda m: paint(m.group(1), BOLD, color), line)
        line = emphasis.sub(lambda m: m.group(1), line)
        line = code.sub(lambda m: paint(m.group(1), CYAN, color), line)
        out.append(line)
    text = "\n".join(out)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n") + "\n"
