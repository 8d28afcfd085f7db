"""A cold run of a large tree (issue #24, item 5: cold at most 10x ruff on pyspark's sources), observed as
behaviour, never as timings:

- a file's lines are split only when something asks for them.
"""

from __future__ import annotations

from upsertsink.lint.checker import SourceLines

# ------------------------------------------------------------------------------- a file's lines


def test_a_files_lines_are_split_when_first_asked_for_and_read_like_a_list() -> None:
    text = "a = 1\nb = 'x'\r\nc = 3"
    lines = SourceLines(text)
    assert lines._lines is None
    assert lines[1] == "b = 'x'\r\n" and lines._lines is not None
    expected = text.splitlines(keepends=True)
    assert (len(lines), lines[-1], lines[0:2], list(lines), "".join(lines)) == (
        3,
        "c = 3",
        expected[0:2],
        expected,
        text,
    )
    assert list(SourceLines("")) == [""]
