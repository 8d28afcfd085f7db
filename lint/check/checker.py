"""Check one file's bytes: pre-filter, decode, parse, analyze, build findings, apply ``# noqa``.

Never raises for bad input: undecodable bytes, syntax errors, null bytes, recursion and memory limits all
become one ND000 finding for the file.
"""

from __future__ import annotations

import io
import re
import sys
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, ClassVar, overload

from ..base.structs import field, replace, struct

if TYPE_CHECKING:
    import ast

    from ..base.types import FixSpec, Reach, Src
    from .notebooks import Converted

# The analysis, the rules, the notebook readers, ast and tokenize load on the first file that is checked
# (check_bytes), not with this module: a run served from the cache, or one that only reports, needs Finding
# and FileResult and nothing else.

FILE_NOQA = b"upsertsink: noqa"

# Column names taken as keys of a table the code writes when no other key is known for them (fnmatch
# globs, case-insensitive): surrogate and hash keys. `*_id` is left out on purpose: run_id, batch_id and
# job_id audit columns are often filled from a uuid or the clock and are not keys (docs/linter.md).
DEFAULT_KEY_PATTERNS = ["id", "pk", "sk", "*_key", "*_pk", "*_sk"]


@struct(frozen=True)
class Finding:
    """One finding, with 1-based positions (end_column exclusive, as in ruff and SARIF).

    In a Jupyter notebook (``.ipynb``) ``line``/``end_line`` count lines within code cell number ``cell``
    (1-based, as Jupyter numbers cells on screen and ruff reports them) and ``file_line`` is the line of the
    notebook's JSON text that holds the reported source line (for SARIF and GitHub annotations).
    """

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
    cell: int | None = None
    file_line: int | None = None
    fix: dict | None = None  # the fix it offers (FixSpec.to_dict()), if any
    table: str | None = None  # the table the write goes to, as the code names it, when the linter knows it

    FIELDS: ClassVar[tuple[str, ...]] = (
        "line",
        "column",
        "end_line",
        "end_column",
        "rule",
        "severity",
        "message",
        "target",
        "column_name",
        "cell",
        "file_line",
        "fix",
        "table",
    )

    def to_dict(self) -> dict:
        """The JSON output's object: the ten documented fields, plus ``cell`` for notebook findings and
        ``fix`` (``{"applicability": "safe"|"unsafe", "message": ...}``) for findings that offer one. The table
        a write goes to is named in the message (the JSON shape is a contract: no other field)."""
        out = {"path": self.path, **self.to_cache()}  # the fields in their order
        del out["file_line"]
        del out["table"]
        if self.cell is None:
            del out["cell"]
        if self.fix is None:
            del out["fix"]
        else:
            out["fix"] = {"applicability": self.fix["applicability"], "message": self.fix["message"]}
        return out

    @property
    def fix_spec(self) -> FixSpec | None:
        """The fix as an object, or None."""
        from ..base.types import FixSpec

        return FixSpec.from_dict(self.fix) if self.fix is not None else None

    def to_cache(self) -> dict:
        """Everything but the path, by field name (the cache's row)."""
        return {name: getattr(self, name) for name in self.FIELDS}

    @classmethod
    def from_cache(cls, path: str, row: dict) -> Finding:
        """The inverse of :meth:`to_cache`; raises KeyError/TypeError on a row of another shape."""
        return cls(path, **{name: row[name] for name in cls.FIELDS})


@struct
class CheckOptions:
    """What a check needs besides the file's bytes: key settings and the project around the file."""

    keys: list[str] = field(default_factory=list)
    sequence: list[str] = field(default_factory=list)
    key_patterns: list[str] = field(default_factory=lambda: list(DEFAULT_KEY_PATTERNS))
    origin: str | None = None  # the file's absolute path (to find .sql files it reads), if on disk
    root: str | None = None  # the project root (.sql files are looked up at most up to here)
    # summaries of the linted tree's modules this file imports or %runs: import spec -> summary
    externals: dict[str, dict] = field(default_factory=dict)
    summarize: bool = False  # also compute what the file gives other files (only asked for files others use)


@struct
class FileResult:
    """Findings of one file plus what it cost (parsed, or skipped by the pre-filter), what it exports to
    other files (``summary``; None when not asked for), what it imports (``imports``: specs such as ``helpers``, ``.util`` or
    ``%run:./setup``) and the other files its findings depend on (``deps``: .sql path -> content digest)."""

    findings: list[Finding]
    parsed: bool
    summary: dict | None = None
    imports: list[str] = field(default_factory=list)
    # .sql files read -> content digest (or :data:`~upsertsink.lint.values.paths.ABSENT`)
    deps: dict[str, str] = field(default_factory=dict)


def decode(data: bytes) -> str:
    """Decode Python source bytes the way the interpreter does (coding cookie, BOM, default UTF-8)."""
    import tokenize

    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(encoding)
    text = text.removeprefix("\ufeff")
    return text


class SourceLines(Sequence[str]):
    """A file's lines with their ends, split on first use: nine files in ten never need them (a string
    literal's exact source, a finding's code or its noqa comment asks for them), and splitting pyspark's
    10 MB costs 20 ms."""

    __slots__ = ("_lines", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._lines: list[str] | None = None

    def _split(self) -> list[str]:
        if self._lines is None:
            self._lines = self._text.splitlines(keepends=True) or [""]
        return self._lines

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> list[str]: ...
    def __getitem__(self, i: int | slice) -> str | list[str]:
        return self._split()[i]

    def __len__(self) -> int:
        return len(self._split())

    def __iter__(self) -> Iterator[str]:
        return iter(self._split())


def check_bytes(
    path: str,
    data: bytes,
    keys: list[str],
    sequence: list[str],
    prefilter: bool = True,
    options: CheckOptions | None = None,
) -> FileResult:
    """Check the contents of one file (a module, a Jupyter notebook or a Databricks source export).
    ``path`` labels the findings and tells a notebook (``.ipynb``) from Python source."""
    from ..rules.hooks import has_trigger

    opts = options or CheckOptions()
    keys = list(keys) or list(opts.keys)
    sequence = list(sequence) or list(opts.sequence)
    if FILE_NOQA in data:
        return FileResult([], False)
    parsed = _parse(path, data, analyze=not prefilter or has_trigger(data) or bool(opts.externals))
    if isinstance(parsed, FileResult):
        return parsed
    tree, text, lines, conv = parsed
    from .analysis import ModuleAnalysis

    try:
        analysis = ModuleAnalysis(
            tree,
            lines,
            keys,
            sequence,
            key_patterns=opts.key_patterns,
            externals=opts.externals,
            origin=opts.origin,
            root=opts.root,
            runs=conv.runs if conv is not None else (),
            notebook=conv is not None,
        )
        try:
            raw = analysis.run()
            summary = analysis.summary() if opts.summarize else None
        finally:
            analysis.release()  # no reference cycles left behind: nothing for a garbage collection to do
    except RecursionError:
        return FileResult([_parse_error(path, 1, 1, "the code is nested too deeply to analyze")], True)
    findings = _findings(path, raw, text, lines, conv)
    return FileResult(findings, True, summary, sorted(analysis.wants), dict(analysis.deps))


def _parse(
    path: str, data: bytes, analyze: bool
) -> tuple[ast.Module, str, SourceLines, Converted | None] | FileResult:
    """The file's syntax tree, text, lines and notebook conversion; or its result when there is nothing to
    analyze (``analyze`` False: no trigger word, the syntax only is checked) or it cannot be read (ND000)."""
    import ast
    import warnings

    from .notebooks import NotebookError, convert_databricks, convert_ipynb, is_databricks_source

    conv: Converted | None = None
    text = ""
    try:
        if path.endswith(".ipynb"):
            conv = convert_ipynb(data.decode("utf-8-sig"))
            text = conv.text
        else:
            text = decode(data)
            if is_databricks_source(text):
                conv = convert_databricks(text)
                text = conv.text
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences etc. are the checked code's business
            tree = ast.parse(text, filename=path)
        if not analyze:
            # no trigger word: no finding is possible; the C parser only confirms the syntax (ND000)
            return FileResult([], False)
        return tree, text, SourceLines(text), conv
    except SyntaxError as exc:
        newer = sys.version_info < (3, 12) and _newer_syntax(text, exc)
        return FileResult([_parse_error(path, exc.lineno or 1, exc.offset or 1, exc.msg, conv, newer)], True)
    except NotebookError as exc:
        return FileResult([_parse_error(path, 1, 1, str(exc)[:160])], True)
    except (UnicodeDecodeError, LookupError) as exc:
        line = col = 1
        if isinstance(exc, UnicodeDecodeError) and isinstance(exc.object, bytes):  # where the byte is
            before = exc.object[: exc.start]
            line, col = before.count(b"\n") + 1, len(before) - before.rfind(b"\n")
        why = f"cannot decode the file ({exc.__class__.__name__}: {str(exc)[:120]})"
        return FileResult([_parse_error(path, line, col, why)], True)
    except (ValueError, RecursionError, MemoryError) as exc:
        return FileResult([_parse_error(path, 1, 1, f"{exc.__class__.__name__}: {str(exc)[:120]}")], True)


def _findings(
    path: str, raw: list[Reach], text: str, lines: SourceLines, conv: Converted | None
) -> list[Finding]:
    """The findings of what the analysis found (``raw``): one per source position and rule, its message
    written, those a ``# noqa`` silences left out, moved to where a notebook's user sees them."""
    from ..rules import RULES

    findings: list[Finding] = []
    seen: set[tuple[int, int, str]] = set()
    noqa_text = text if raw and "noqa" in text.lower() else None
    noqa_state: dict = {}
    for reach in raw:
        src = reach.source
        key = (src.line, src.col, src.rule)
        if key in seen:
            continue
        seen.add(key)
        if _suppressed(lines, src, noqa_text, noqa_state):
            continue
        finding = Finding(
            path,
            src.line,
            src.col,
            src.end_line,
            src.end_col,
            src.rule,
            reach.severity,
            RULES[src.rule].message(reach),
            reach.target,
            reach.column,
            fix=src.fix.to_dict() if src.fix is not None and _rewritable(conv) else None,
            table=reach.table,
        )
        findings.append(_located(finding, conv))
    return findings


def fixable(findings: list[Finding], unsafe: bool) -> list[Finding]:
    """The findings whose fix would be applied (safe ones; unsafe ones too with ``unsafe``). Reads the
    findings' fix data (``FixSpec.to_dict()``) directly: every run asks, and the rules need not load for it."""
    return [f for f in findings if f.fix is not None and (unsafe or f.fix.get("applicability") != "unsafe")]


def _rewritable(conv: Converted | None) -> bool:
    """Can fixes rewrite the file's own text at the analysis' positions? Python files and Databricks source
    exports (their Python cells keep their lines) can; Jupyter notebooks (JSON) are not rewritten."""
    return conv is None or all(cell is None for cell in conv.cells)


def _located(f: Finding, conv: Converted | None) -> Finding:
    """A finding of a notebook's Python text moved to where a user sees it (cell and line, file line)."""
    if conv is None:
        return f
    cell, line, col, file_line = conv.locate(f.line, f.column)
    end_cell, end_line, end_col, _ = conv.locate(f.end_line, f.end_column)
    if end_cell != cell:
        end_line, end_col = line, col + 1
    return replace(
        f,
        line=line,
        column=max(col, 1),
        end_line=end_line,
        end_column=max(end_col, 1),
        cell=cell,
        file_line=file_line if cell is not None else None,
    )


def _suppressed(lines: Sequence[str], src: Src, text: str | None = None, state: dict | None = None) -> bool:
    """Is the finding silenced by a ``# noqa`` on its line, on the end line of the SQL string it is in, or
    on the line its own line continues to (the end of a multi-line string or of a backslash continuation,
    see :func:`noqa_line_map`; computed only when a later line holds a directive that could apply)?"""
    for line_no in {src.line, src.alt_line}:
        if 0 < line_no <= len(lines) and _covers(lines[line_no - 1], src.rule):
            return True
    if text is None or state is None:
        return False
    if not any(_covers(lines[i], src.rule) for i in range(src.line, min(len(lines), src.line + 1000))):
        return False
    if "moved" not in state:
        state["moved"] = noqa_line_map(text)
    target = state["moved"].get(src.line, 0)
    return 0 < target <= len(lines) and _covers(lines[target - 1], src.rule)


def _covers(line: str, rule: str) -> bool:
    from .analysis import noqa_codes

    codes = noqa_codes(line)
    return codes is not None and (not codes or rule in codes)


def noqa_line_map(text: str) -> dict[int, int]:
    """Lines where a comment cannot go (they end inside a multi-line string, or with a backslash
    continuation), mapped to the line where one can: the end of that string or continuation."""
    import tokenize

    out: dict[int, int] = {}
    lines = text.splitlines()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return out
    fstring_start: list[int] = []
    inside: set[int] = set()
    for tok in tokens:
        kind = tokenize.tok_name.get(tok.type, "")
        if kind == "FSTRING_START":
            fstring_start.append(tok.start[0])
            continue
        if kind == "FSTRING_END" and fstring_start:
            start = fstring_start.pop()
            for line in range(start, tok.end[0]):
                out[line] = tok.end[0]
                inside.add(line)
            continue
        if tok.type == tokenize.STRING and tok.end[0] > tok.start[0]:
            for line in range(tok.start[0], tok.end[0]):
                out[line] = tok.end[0]
                inside.add(line)
    for number, line in enumerate(lines, 1):
        if number not in inside and line.rstrip("\r\n").endswith("\\"):
            out[number] = number + 1
    changed = True
    while changed:  # a string that ends on a continued line, and so on
        changed = False
        for line, target in list(out.items()):
            nxt = out.get(target)
            if nxt is not None and nxt != target:
                out[line] = nxt
                changed = True
    return out


def _newer_syntax(text: str, exc: SyntaxError) -> bool:
    """Is the text that the running Python's parser refused valid in a later Python: an f-string error or a
    ``type X = ...`` / ``def f[T]`` / ``class C[T]`` line (PEP 701, PEP 695), that libcst's parser, which
    reads those, accepts? libcst's native parser is only asked about texts of moderate size and nesting
    (it overflows its stack on deeply nested code)."""
    line = exc.text or ""
    if not ((exc.msg or "").startswith("f-string") or _NEWER_LINE.match(line)):
        return False
    if len(text) > 2_000_000 or _nesting(text) > 60:
        return False
    try:
        import libcst

        libcst.parse_module(text)
    except Exception:  # noqa: BLE001 - any failure: not valid in a later Python either
        return False
    return True


_NEWER_LINE = re.compile(r"\s*(type\s+\w|(async\s+)?def\s+\w+\s*\[|class\s+\w+\s*\[)")


def _nesting(text: str) -> int:
    """The deepest bracket nesting of the text (strings included: an upper bound)."""
    depth = deepest = 0
    for ch in text:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    return deepest


def _parse_error(
    path: str, line: int, col: int, msg: str, conv: Converted | None = None, newer: bool = False
) -> Finding:
    line = max(int(line), 1)
    col = max(int(col), 1)
    text = (
        f"the file could not be parsed ({msg}); nothing in it was checked. Fix the syntax error "
        "(or the file's encoding) so the determinism checks can run."
    )
    if newer:  # valid code of a later Python than the linter's own
        running = f"{sys.version_info[0]}.{sys.version_info[1]}"
        text = (
            f"the file uses syntax of a Python later than {running}, the linter's own, which cannot parse "
            f"it ({msg}); nothing in it was checked. Run `upsertsink lint` on the Python the job runs on "
            "(3.12 or later) so the determinism checks can run."
        )
    finding = Finding(
        path,
        line,
        col,
        line,
        col + 1,
        "ND000",
        "error",
        text,
        None,
        None,
    )
    return _located(finding, conv)


def main_guard() -> None:
    """Raise the recursion limit moderately: deeply nested but valid code is analyzed, not rejected."""
    if sys.getrecursionlimit() < 4000:
        sys.setrecursionlimit(4000)
