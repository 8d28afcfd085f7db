"""String literals with positions: the text of a (possibly implicitly concatenated, triple-quoted, raw or
f-) string literal, and for every character of that text the file position (line, column) it came from.

A finding inside SQL text is reported at the function inside the string, so the SQL parser's character
offsets are mapped back through this table. f-string replacement fields become placeholder identifiers
(``__ph0__``...) so the SQL still parses and the interpolated Python value can be followed.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Sequence

from ..base.structs import field, struct

Pos = tuple[int, int]

_PLAIN_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")  # an f-string field that is a name or attribute
_SIMPLE_ESCAPES = {
    "\\": "\\",
    "'": "'",
    '"': '"',
    "a": "\a",
    "b": "\b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
}


@struct
class PosText:
    """Text plus the file position of each character; ``holes`` maps placeholder name -> Python node."""

    text: str
    positions: list[Pos]
    holes: dict[str, ast.AST] = field(default_factory=dict)
    last_line: int = 0  # the line the literal ends on (where a trailing noqa comment sits)
    # per character, where it really comes from when that is not the file itself ("merge.sql:3"); or None
    origins: list[str | None] | None = None

    def origin_of(self, index: int) -> str:
        """Where the character at ``index`` comes from when it is not this file (``""`` otherwise)."""
        if not self.origins or not 0 <= index < len(self.origins):
            return ""
        return self.origins[index] or ""

    @classmethod
    def at(cls, text: str, pos: Pos, origins: list[str | None] | None = None) -> PosText:
        """Text that is not written in this file (read from a .sql file, imported), placed at ``pos``."""
        return cls(text, [pos] * len(text), origins=origins)

    def span(self, start: int, end: int) -> tuple[int, int, int, int]:
        """File span (line, col, end_line, end_col; end exclusive) of text[start:end]."""
        n = len(self.positions)
        if n == 0:
            return (1, 1, 1, 1)
        start = min(max(start, 0), n - 1)
        last = min(max(end - 1, start), n - 1)
        line, col = self.positions[start]
        eline, ecol = self.positions[last]
        return (line, col, eline, ecol + 1)

    def __add__(self, other: PosText) -> PosText:
        origins = None
        if self.origins is not None or other.origins is not None:
            origins = (self.origins or [None] * len(self.text)) + (other.origins or [None] * len(other.text))
        return PosText(
            self.text + other.text,
            self.positions + other.positions,
            {**self.holes, **other.holes},
            max(self.last_line, other.last_line),
            origins,
        )

    def __getitem__(self, sl: slice) -> PosText:
        return PosText(
            self.text[sl],
            self.positions[sl],
            self.holes,
            self.last_line,
            self.origins[sl] if self.origins is not None else None,
        )

    def strip(self) -> PosText:
        """``str.strip()`` keeping positions."""
        text = self.text
        left = len(text) - len(text.lstrip())
        right = len(text.rstrip())
        return PosText(
            text[left:right],
            self.positions[left:right],
            self.holes,
            self.last_line,
            self.origins[left:right] if self.origins is not None else None,
        )

    def dedent(self) -> PosText:
        """``textwrap.dedent()`` keeping positions (common leading whitespace of non-blank lines removed)."""
        lines: list[tuple[str, list[Pos]]] = []
        start = 0
        text = self.text
        for i, ch in enumerate(text):
            if ch == "\n":
                lines.append((text[start : i + 1], self.positions[start : i + 1]))
                start = i + 1
        lines.append((text[start:], self.positions[start:]))
        margin: str | None = None
        for line, _ in lines:
            if not line.strip():
                continue
            indent = line[: len(line) - len(line.lstrip(" \t"))]
            if margin is None:
                margin = indent
            else:
                k = 0
                while k < min(len(margin), len(indent)) and margin[k] == indent[k]:
                    k += 1
                margin = margin[:k]
        cut = len(margin or "")
        out_text: list[str] = []
        out_pos: list[Pos] = []
        for line, pos in lines:
            if line.strip():
                out_text.append(line[cut:])
                out_pos.extend(pos[cut:])
            else:
                stripped = line.lstrip(" \t")
                out_text.append(stripped)
                out_pos.extend(pos[len(line) - len(stripped) :])
        return PosText("".join(out_text), out_pos, self.holes, self.last_line)


def _decode_body(
    body: str, start: Pos, raw: bool, fstring: bool, holes: list[ast.AST], out: PosText, fields: list
) -> None:
    """Append the value of a literal body (between the quotes) to ``out``, tracking positions. ``fields``:
    the number of f-string fields so far, then the placeholder of each plain name field: ``{batch_id}``
    twice in one literal is one placeholder (the same value), so SQL can compare the two."""
    line, col = start
    i = 0
    n = len(body)

    def advance(count: int) -> None:
        nonlocal i, line, col
        for _ in range(count):
            if body[i] == "\n":
                line += 1
                col = 1
            else:
                col += 1
            i += 1

    while i < n:
        ch = body[i]
        here = (line, col)
        if fstring and ch in "{}":
            if i + 1 < n and body[i + 1] == ch:
                out.text += ch
                out.positions.append(here)
                advance(2)
                continue
            if ch == "{":
                depth = 0
                j = i
                quote: str | None = None
                while j < n:
                    c = body[j]
                    if quote:
                        if c == quote:
                            quote = None
                    elif c in "'\"":
                        quote = c
                    elif c in "{[(":
                        depth += 1
                    elif c in "}])":
                        depth -= 1
                        if depth == 0:
                            break
                    j += 1
                idx = fields[0]
                fields[0] += 1
                expr_text = body[i + 1 : j].strip()
                name = fields[1].get(expr_text) or f"__ph{idx}__"
                if idx < len(holes) and name not in out.holes:
                    out.holes[name] = holes[idx]
                if _PLAIN_FIELD.fullmatch(expr_text):
                    fields[1].setdefault(expr_text, name)
                out.text += name
                out.positions.extend([here] * len(name))
                advance(min(j + 1, n) - i)
                continue
        if ch == "\\" and not raw and i + 1 < n:
            nxt = body[i + 1]
            if nxt == "\n":
                advance(2)
                continue
            if nxt in _SIMPLE_ESCAPES:
                out.text += _SIMPLE_ESCAPES[nxt]
                out.positions.append(here)
                advance(2)
                continue
            if nxt in "01234567":
                k = 1
                while k < 3 and i + 1 + k < n and body[i + 1 + k] in "01234567":
                    k += 1
                out.text += chr(int(body[i + 1 : i + 1 + k], 8))
                out.positions.append(here)
                advance(1 + k)
                continue
            width = {"x": 2, "u": 4, "U": 8}.get(nxt)
            if width:
                try:
                    out.text += chr(int(body[i + 2 : i + 2 + width], 16))
                except ValueError:
                    out.text += "?"
                out.positions.append(here)
                advance(min(2 + width, n - i))
                continue
            if nxt == "N" and i + 2 < n and body[i + 2] == "{":
                close = body.find("}", i)
                out.text += "?"
                out.positions.append(here)
                advance((close if close > 0 else n - 1) - i + 1)
                continue
        out.text += ch
        out.positions.append(here)
        advance(1)


def literal_text(node: ast.Constant | ast.JoinedStr, lines: Sequence[str]) -> PosText | None:
    """The positioned text of a string literal node, read from the source ``lines`` (1-based columns)."""
    if node.end_lineno is None or node.end_col_offset is None:
        return None
    first = node.lineno - 1
    last = node.end_lineno - 1
    if last >= len(lines):
        return None
    seg_lines = lines[first : last + 1]
    b_first = seg_lines[0].encode("utf-8")
    start_char = len(b_first[: node.col_offset].decode("utf-8", "replace"))
    if first == last:
        end_char = len(b_first[: node.end_col_offset].decode("utf-8", "replace"))
        segment = seg_lines[0][start_char:end_char]
    else:
        b_last = seg_lines[-1].encode("utf-8")
        end_char = len(b_last[: node.end_col_offset].decode("utf-8", "replace"))
        segment = "".join([seg_lines[0][start_char:]] + seg_lines[1:-1] + [seg_lines[-1][:end_char]])
    holes = (
        [v.value for v in node.values if isinstance(v, ast.FormattedValue)]
        if isinstance(node, ast.JoinedStr)
        else []
    )
    out = PosText("", [], last_line=node.end_lineno)
    fields: list = [0, {}]
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("(" + segment + ")").readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return None
    for tok in tokens:
        if tok.type != tokenize.STRING:
            continue
        text = tok.string
        k = 0
        while k < len(text) and text[k] not in "'\"":
            k += 1
        prefix = text[:k].lower()
        if "b" in prefix:
            return None
        quote = text[k : k + 3] if text[k : k + 3] in ("'''", '"""') else text[k]
        body = text[k + len(quote) : len(text) - len(quote)]
        row, col0 = tok.start
        line_no = first + row
        if row == 1:
            col = start_char + col0  # the "(" we added shifts by one, 0-based -> 1-based cancels it
        else:
            col = col0 + 1
        body_start = (line_no, col + k + len(quote))
        _decode_body(body, body_start, "r" in prefix, "f" in prefix, holes, out, fields)
    return out


def stand_in_literal(text: str, at: ast.AST) -> ast.AST:
    """Another file's constant dict or list, parsed from the text its summary exports (``{'k': [...]}``).
    Its strings are not in this file's text: each is a stand-in, read as its value and placed where the
    constant is used (``at``)."""
    parsed = ast.parse(text, mode="eval").body
    for sub in ast.walk(parsed):
        if type(sub) is ast.Constant:
            sub.stand_in = True  # type: ignore[attr-defined]
            sub.lineno, sub.col_offset = at.lineno, at.col_offset  # type: ignore[attr-defined]
    return parsed
