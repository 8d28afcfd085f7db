"""Positions of characters inside string literals (the basis of in-SQL finding positions)."""

from __future__ import annotations

import ast

import pytest
from upsertsink.lint.values.strings import literal_text


def positioned(source: str):
    tree = ast.parse(source)
    node = tree.body[0].value  # type: ignore[attr-defined]
    text = literal_text(node, source.splitlines(keepends=True))
    assert text is not None
    return text


def where(source: str, needle: str) -> tuple[int, int]:
    text = positioned(source)
    i = text.text.index(needle)
    line, col, _, _ = text.span(i, i + len(needle))
    return line, col


@pytest.mark.parametrize(
    ("source", "needle", "expected"),
    [
        ('x = "abc rand()"\n', "rand", (1, 10)),
        ("x = r'a\\nb rand()'\n", "rand", (1, 12)),
        ('x = "a\\nb rand()"\n', "rand", (1, 11)),
        ('x = "\\x41\\101\\u0041\\N{LATIN SMALL LETTER A} rand()"\n', "rand", (1, 45)),
        ('x = ("ab"\n     "cd rand()")\n', "rand", (2, 10)),
        ('x = """\nline\n  rand()\n"""\n', "rand", (3, 3)),
        ('x = f"{a} {{b}} rand()"\n', "rand", (1, 17)),
        ('x = "é rand()"\n', "rand", (1, 8)),
        ('x = "a\\\nrand()"\n', "rand", (2, 1)),
    ],
)
def test_character_positions(source: str, needle: str, expected: tuple[int, int]) -> None:
    assert where(source, needle) == expected
    line_text = source.splitlines()[expected[0] - 1]
    if "\\" not in line_text[: expected[1]]:
        assert line_text[expected[1] - 1 :].startswith(needle)


def test_fstring_fields_become_placeholders_bound_to_their_expressions() -> None:
    text = positioned("x = f\"SELECT {col} FROM {tbl:>{w}} WHERE d = '{day!r}'\"\n")
    assert text.text == "SELECT __ph0__ FROM __ph1__ WHERE d = '__ph2__'"
    assert [ast.unparse(n) for n in text.holes.values()] == ["col", "tbl", "day"]


def test_dedent_and_strip_keep_positions() -> None:
    text = positioned('x = """\n    SELECT\n        rand()\n    """\n').dedent().strip()
    assert text.text == "SELECT\n    rand()"
    i = text.text.index("rand")
    assert text.span(i, i + 4) == (3, 9, 3, 13)


def test_bytes_literals_are_not_text() -> None:
    source = 'x = b"rand()"\n'
    node = ast.parse(source).body[0].value  # type: ignore[attr-defined]
    assert literal_text(node, source.splitlines(keepends=True)) is None
