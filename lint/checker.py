"""Check one file's bytes: pre-filter, decode, parse, analyze, build findings, apply ``# noqa``.

Never raises for bad input: undecodable bytes, syntax errors, null bytes, recursion and memory limits all
become one ND000 finding for the file.
"""

from __future__ import annotations

import ast
import io
import sys
import tokenize
import warnings
from dataclasses import asdict, dataclass

from upsertsink.lint.analysis import ModuleAnalysis, Src, noqa_codes
from upsertsink.lint.catalogue import has_trigger
from upsertsink.lint.rules import RULES

FILE_NOQA = b"upsertsink: noqa"


@dataclass(frozen=True)
class Finding:
    """One finding, with 1-based positions (end_column exclusive, as in ruff and SARIF)."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    rule: str
    severity: str
    message: str
    target: str | None
    column_name: str | None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class FileResult:
    """Findings of one file plus what it cost: parsed or skipped by the pre-filter."""

    findings: list[Finding]
    parsed: bool


_TARGET_TEXT = {
    "key": "merge key",
    "sequence": "sequence column",
    "column": "column",
}
_CONSEQUENCE = {
    "key": "a replay computes different keys, so the upsert inserts new rows instead of overwriting the ones "
    "the first run wrote (duplicates) and the rows of the first run are never replaced",
    "sequence": "a replay computes a different sequence value, so the newer-wins check compares values that "
    "no longer describe the data: stale rows can win and re-sent rows are not recognized as the same",
    "column": "a replay writes different values into this column, so two runs of the same batch do not leave "
    "the same table (legal, but replays are no longer byte-for-byte repeatable)",
}
_ROWS_CONSEQUENCE = {
    "key": "a replay writes a different set of rows, and so of keys, than the first run",
    "sequence": "a replay can keep a different row of each group, with a different sequence value",
    "column": "a replay writes different rows than the first run",
}


def _message(src: Src, target: str, column: str, others: list[str], rows: bool) -> str:
    rule = RULES[src.rule]
    what = f"`{src.what}`" if not src.what.endswith(" in SQL") else f"`{src.what[:-7]}` in SQL text"
    if src.via:
        what = f"{what} inside {src.via}"
    also = ""
    if others:
        shown = ", ".join(f"`{o}`" for o in others[:3])
        also = f"; it also reaches {shown}{', ...' if len(others) > 3 else ''}"
    if rows:
        if column == "*":
            reach = "it decides which rows are written (all columns)"
        elif target == "sequence":
            reach = f"it decides which duplicate row survives (sequence column `{column}`)"
        else:
            reach = f"it decides which rows are written (merge key `{column}`)"
        consequence = _ROWS_CONSEQUENCE[target]
        fix = rule.advice("rows")
    else:
        reach = f"it reaches {_TARGET_TEXT[target]} `{column}`"
        consequence = _CONSEQUENCE[target]
        fix = rule.advice(target)
    return f"{what} {rule.verb}; {reach}{also}: {consequence}. Fix: {fix}"


def decode(data: bytes) -> str:
    """Decode Python source bytes the way the interpreter does (coding cookie, BOM, default UTF-8)."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    text = text.removeprefix("\ufeff")
    return text


def check_bytes(
    path: str, data: bytes, keys: list[str], sequence: list[str], prefilter: bool = True
) -> FileResult:
    """Check the contents of one file. ``path`` is only used to label findings."""
    if FILE_NOQA in data:
        return FileResult([], False)
    analyze = not prefilter or has_trigger(data)
    try:
        text = decode(data)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences etc. are the checked code's business
            tree = ast.parse(text, filename=path)
        if not analyze:
            # no trigger word: no finding is possible; the C parser only confirms the syntax (ND000)
            return FileResult([], False)
        lines = text.splitlines(keepends=True) or [""]
    except SyntaxError as exc:
        return FileResult([_parse_error(path, exc.lineno or 1, exc.offset or 1, exc.msg)], True)
    except (UnicodeDecodeError, LookupError) as exc:
        return FileResult(
            [
                _parse_error(
                    path, 1, 1, f"cannot decode the file ({exc.__class__.__name__}: {str(exc)[:120]})"
                )
            ],
            True,
        )
    except (ValueError, RecursionError, MemoryError) as exc:
        return FileResult([_parse_error(path, 1, 1, f"{exc.__class__.__name__}: {str(exc)[:120]}")], True)
    try:
        raw = ModuleAnalysis(tree, lines, keys, sequence).run()
    except RecursionError:
        return FileResult([_parse_error(path, 1, 1, "the code is nested too deeply to analyze")], True)
    findings: list[Finding] = []
    seen: set[tuple[int, int, str]] = set()
    for src, target, column, others, rows in raw:
        key = (src.line, src.col, src.rule)
        if key in seen:
            continue
        seen.add(key)
        if _suppressed(lines, src):
            continue
        severity = "error" if target in ("key", "sequence") else "warning"
        findings.append(
            Finding(
                path,
                src.line,
                src.col,
                src.end_line,
                src.end_col,
                src.rule,
                severity,
                _message(src, target, column, others, rows),
                target,
                column,
            )
        )
    return FileResult(findings, True)


def _suppressed(lines: list[str], src: Src) -> bool:
    for line_no in {src.line, src.alt_line}:
        if 0 < line_no <= len(lines):
            codes = noqa_codes(lines[line_no - 1])
            if codes is not None and (not codes or src.rule in codes):
                return True
    return False


def _parse_error(path: str, line: int, col: int, msg: str) -> Finding:
    line = max(int(line), 1)
    col = max(int(col), 1)
    return Finding(
        path,
        line,
        col,
        line,
        col + 1,
        "ND000",
        "error",
        f"the file could not be parsed ({msg}); nothing in it was checked. Fix the syntax error "
        "(or the file's encoding) so the determinism checks can run.",
        None,
        None,
    )


def main_guard() -> None:
    """Raise the recursion limit moderately: deeply nested but valid code is analyzed, not rejected."""
    if sys.getrecursionlimit() < 4000:
        sys.setrecursionlimit(4000)
