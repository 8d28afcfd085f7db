"""Rewriting linted files: fixes (``--fix``, ``--unsafe-fixes``, ``--diff``) and ``# noqa`` insertion
(``--add-noqa``).

The analysis runs on Python's ``ast`` and only says *where* a fix goes and *what* it is (a
:class:`~upsertsink.lint.rules.rule.FixSpec` on the finding: a kind, the span of the node to rewrite,
parameters). The rewriting is done here with libcst, on the concrete syntax tree, so everything but the
rewritten node keeps its formatting, comments and line endings (as Fixit applies its autofixes). Each kind
touches only the node at the finding's span:

- ``add-keyword``: the call at the span gains a keyword argument (``seed=N``, ``batch_id=epoch_id``);
- ``txn-options``: the ``x.write`` attribute at the span becomes ``x.write.option("txnAppId", "<module>.
  <function>").option("txnVersion", <epoch id>)``.

A file that does not parse is never changed; a rewrite whose result does not parse is dropped. ``# noqa``
comments are inserted on the text itself (a comment is not part of an expression's syntax): at the end of
the reported line, or, when that line ends inside a multi-line string or with a backslash continuation, at
the end of the line where the string or the continuation ends, which is where the checker looks for it too
(:func:`noqa_line_map`).
"""

from __future__ import annotations

import ast
import difflib
import io
import json
import logging
import re
import tokenize
from pathlib import Path
from typing import TYPE_CHECKING

from ..base.structs import field, struct
from ..check.checker import Finding, noqa_line_map

if TYPE_CHECKING:
    from ..base.types import FixSpec

log = logging.getLogger(__name__)
_DIRECTIVE = "# " + "noqa: "  # (split so that linters reading this file do not take it for a directive)

_NOQA_RE = re.compile(
    "#" + r"\s*noqa(?::\s*(?P<codes>[A-Za-z0-9_]+(?:[\s,]+[A-Za-z0-9_]+)*))?", re.IGNORECASE
)


@struct
class FileEdit:
    """The new text of one file and what produced it."""

    path: str  # as shown in findings
    before: str
    after: str
    applied: list[Finding] = field(default_factory=list)
    skipped: list[tuple[Finding, str]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.after != self.before

    def diff(self) -> str:
        """A unified diff of the change (``--- path`` / ``+++ path``, as ruff prints it)."""
        lines = difflib.unified_diff(
            self.before.splitlines(keepends=True),
            self.after.splitlines(keepends=True),
            fromfile=self.path,
            tofile=self.path,
        )
        # a last line without a newline is marked as diff(1) marks it, so diffs of several files concatenate
        return "".join(
            line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines
        )


def module_name(path: Path, root: Path) -> str:
    """The dotted module name of a linted file relative to the project root (``jobs/orders.py`` ->
    ``jobs.orders``; a package's ``__init__.py`` is the package)."""
    resolved = path.resolve()
    for base in (root.resolve(), Path.cwd().resolve()):
        try:
            rel = resolved.relative_to(base)
            break
        except ValueError:
            continue
    else:
        rel = Path(resolved.name)
    parts = list(rel.with_suffix("").parts)
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(p for p in parts if p.isidentifier() or p.replace("-", "_").isidentifier()) or rel.stem


def _selected(f: Finding, unsafe: bool) -> FixSpec | None:
    spec = f.fix_spec
    if spec is None or (spec.applicability == "unsafe" and not unsafe):
        return None
    return spec


def read_source(path: Path) -> tuple[str, str, bool]:
    """(text, encoding, had a BOM) of a Python file, decoded as the interpreter would."""
    data = path.read_bytes()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    bom = data.startswith(b"\xef\xbb\xbf")
    text = data.decode(encoding)
    return text.removeprefix("\ufeff"), encoding, bom


def write_source(path: Path, text: str, encoding: str, bom: bool) -> None:
    """Write text back with the file's own encoding and BOM."""
    data = text.encode("utf-8-sig" if bom and encoding.startswith("utf-8") else encoding)
    path.write_bytes(data)


def fix_file(shown: str, text: str, findings: list[Finding], module: str, unsafe: bool) -> FileEdit:
    """Apply the selected fixes of one file's findings to its text (nothing when the file has a parse
    error or libcst cannot read it)."""
    edit = FileEdit(shown, text, text)
    chosen = [(f, spec) for f in findings if (spec := _selected(f, unsafe)) is not None]
    if not chosen:
        return edit
    if any(f.rule == "ND000" for f in findings):
        edit.skipped = [(f, "the file does not parse") for f, _ in chosen]
        return edit
    import libcst as cst

    try:
        tree = cst.parse_module(text)
    except Exception as exc:  # noqa: BLE001 - a file libcst cannot read is left alone
        edit.skipped = [(f, f"libcst cannot parse the file ({exc.__class__.__name__})") for f, _ in chosen]
        return edit
    transformer = _fixer([spec for _, spec in chosen], module)
    new = cst.MetadataWrapper(tree).visit(transformer).code
    try:
        ast.parse(new)
    except SyntaxError as exc:  # a rewrite must never break the file
        log.warning("fix of %s dropped: the result does not parse (%s)", shown, exc)
        edit.skipped = [(f, "the rewritten file would not parse") for f, _ in chosen]
        return edit
    edit.after = new
    for i, (f, _spec) in enumerate(chosen):
        if i in transformer.applied:
            edit.applied.append(f)
        else:
            edit.skipped.append((f, transformer.reasons.get(i, "the code at the finding was not found")))
    return edit


def _fixer(specs: list[FixSpec], module: str):
    """The libcst transformer that applies ``specs`` in one pass (libcst is imported only here)."""
    import libcst as cst
    from libcst.metadata import PositionProvider

    from ..rules.nd011_append import app_id

    class Fixer(cst.CSTTransformer):
        METADATA_DEPENDENCIES = (PositionProvider,)

        def __init__(self) -> None:
            super().__init__()
            self.by_node: dict[tuple[str, tuple[int, int, int, int]], list[int]] = {}
            for i, spec in enumerate(specs):
                self.by_node.setdefault((spec.kind, spec.span), []).append(i)
            self.applied: set[int] = set()
            self.reasons: dict[int, str] = {}

        def _span(self, node: cst.CSTNode) -> tuple[int, int, int, int]:
            r = self.get_metadata(PositionProvider, node)
            return (r.start.line, r.start.column + 1, r.end.line, r.end.column + 1)

        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            for i in self.by_node.get(("add-keyword", self._span(original)), ()):
                spec = specs[i]
                name = spec.param("name")
                if any(a.keyword is not None and a.keyword.value == name for a in updated.args):
                    self.reasons[i] = f"the call already has `{name}=`"
                    continue
                updated = _add_keyword(updated, name, spec.param("value"))
                self.applied.add(i)
            return updated

        def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
            for i in self.by_node.get(("txn-options", self._span(original)), ()):
                if updated.attr.value != "write":
                    self.reasons[i] = "the node at the finding is not `.write`"
                    continue
                spec = specs[i]
                appid = app_id(module, spec.param("function"), spec.param("index"))
                self.applied.add(i)
                return _with_options(
                    updated, [("txnAppId", json.dumps(appid)), ("txnVersion", spec.param("epoch"))]
                )
            return updated

    return Fixer()


def _add_keyword(call, name: str, value: str):
    """``f(a)`` -> ``f(a, name=value)``; a multi-line call with a trailing comma keeps its layout."""
    import libcst as cst

    arg = cst.Arg(
        value=cst.parse_expression(value),
        keyword=cst.Name(name),
        equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")
        ),
    )
    args = list(call.args)
    if not args:
        return call.with_changes(args=[arg])
    last = args[-1]
    if isinstance(last.comma, cst.Comma):
        # trailing comma: the new argument goes after it, on the same layout, and keeps a trailing comma
        if len(args) > 1 and isinstance(args[-2].comma, cst.Comma):
            between = args[-2].comma.whitespace_after
        elif isinstance(call.whitespace_before_args, cst.ParenthesizedWhitespace):
            between = call.whitespace_before_args  # one argument on its own line: the new one goes below
        else:
            between = None
        sep = cst.Comma(whitespace_after=between if between is not None else cst.SimpleWhitespace(" "))
        args[-1] = last.with_changes(comma=sep)
        args.append(arg.with_changes(comma=last.comma))
    else:
        args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        args.append(arg)
    return call.with_changes(args=args)


def _with_options(node, options: list[tuple[str, str]]):
    """``x.write`` -> ``x.write.option("k", v)...`` for each (name, value source) in order."""
    import libcst as cst

    out = node
    for key, value in options:
        out = cst.Call(
            func=cst.Attribute(value=out, attr=cst.Name("option")),
            args=[
                cst.Arg(
                    value=cst.SimpleString(json.dumps(key)),
                    comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")),
                ),
                cst.Arg(value=cst.parse_expression(value)),
            ],
        )
    return out


# ------------------------------------------------------------------------------------------------ noqa
def _with_directive(body: str, codes: set[str]) -> str | None:
    """A line (without its newline) with ``# noqa: CODES`` added or merged into its directive; None when
    nothing changes (a bare ``# noqa`` covers every code already)."""
    m = _NOQA_RE.search(body)
    if m is not None and not m.group("codes"):
        return None
    if m is not None:
        have = [c.upper() for c in re.split(r"[\s,]+", m.group("codes")) if c]
        merged = have + sorted(c for c in codes if c not in have)
        if merged == have:
            return None
        return body[: m.start()] + _DIRECTIVE + ", ".join(merged) + body[m.end() :]
    return body.rstrip() + "  " + _DIRECTIVE + ", ".join(sorted(codes))


def add_noqa(shown: str, text: str, findings: list[Finding]) -> tuple[FileEdit, int]:
    """Insert ``# noqa: CODE`` for every finding (at the line the checker reads it from); returns the edit
    and the number of directives added or extended."""
    edit = FileEdit(shown, text, text)
    if not findings or any(f.rule == "ND000" for f in findings):
        edit.skipped = [(f, "the file does not parse") for f in findings if f.rule != "ND000"]
        return edit, 0
    lines = text.splitlines(keepends=True)
    mapping = noqa_line_map(text)
    wanted: dict[int, set[str]] = {}
    for f in findings:
        if f.cell is not None:
            edit.skipped.append((f, "a Jupyter notebook"))
            continue
        line = mapping.get(f.line, f.line)
        if not 0 < line <= len(lines) or lines[f.line - 1].startswith("# MAGIC"):
            edit.skipped.append((f, "no Python line to put a comment on (a Databricks SQL cell)"))
            continue
        wanted.setdefault(line, set()).add(f.rule)
        edit.applied.append(f)
    count = 0
    for number, codes in sorted(wanted.items()):
        raw = lines[number - 1]
        body = raw.rstrip("\r\n")
        new = _with_directive(body, codes)
        if new is None:
            continue
        lines[number - 1] = new + (raw[len(body) :] or ("\n" if number < len(lines) else ""))
        count += 1
    edit.after = "".join(lines)
    try:
        ast.parse(edit.after)
    except SyntaxError:  # never leave a broken file behind
        edit.after = text
        edit.skipped.extend((f, "a comment there would not parse") for f in edit.applied)
        edit.applied = []
        return edit, 0
    return edit, count


def _json_layout(raw: str, nb: object) -> dict | None:
    """The ``json.dumps`` arguments that reproduce the notebook's text exactly, or None (then rewriting it
    would reformat the file, and it is left alone)."""
    for indent in (1, 2, 4, None):
        for ascii_only in (False, True):
            dumped = json.dumps(nb, indent=indent, ensure_ascii=ascii_only)
            if raw in (dumped, dumped + "\n"):
                return {"indent": indent, "ensure_ascii": ascii_only, "newline": raw.endswith("\n")}
    return None


def add_noqa_notebook(shown: str, raw: str, findings: list[Finding]) -> tuple[FileEdit, int]:
    """``--add-noqa`` for a Jupyter notebook: the comment goes on the cell's Python line the checker reads
    (a line of a SQL cell, or one a magic stands on, gets none). The notebook is rewritten only when its
    JSON layout can be reproduced exactly."""
    from ..check.notebooks import NotebookError, _cell_source, convert_ipynb

    edit = FileEdit(shown, raw, raw)
    try:
        nb = json.loads(raw)
        conv = convert_ipynb(raw)
    except (ValueError, NotebookError):
        edit.skipped = [(f, "the notebook cannot be read") for f in findings]
        return edit, 0
    layout = _json_layout(raw, nb)
    if layout is None:
        edit.skipped = [(f, "rewriting the notebook would change its JSON layout") for f in findings]
        return edit, 0
    py_lines = conv.text.split("\n")
    where = {(c, n): i + 1 for i, (c, n) in enumerate(zip(conv.cells, conv.lines, strict=True))}
    moved = noqa_line_map(conv.text)
    cells = nb["cells"]
    sources = {}
    wanted: dict[tuple[int, int], set[str]] = {}
    for f in findings:
        at = where.get((f.cell, f.line))
        target = moved.get(at, at) if at is not None else None
        if f.rule == "ND000" or target is None:
            edit.skipped.append((f, "no Python line to put a comment on"))
            continue
        cell, line = conv.cells[target - 1], conv.lines[target - 1]
        if cell not in sources:
            sources[cell] = _cell_source(cells[cell - 1]).split("\n")
        cell_lines = sources[cell]
        if not 0 < line <= len(cell_lines) or cell_lines[line - 1] != py_lines[target - 1]:
            edit.skipped.append((f, "the line is SQL or a magic, not Python"))
            continue
        wanted.setdefault((cell, line), set()).add(f.rule)
        edit.applied.append(f)
    count = 0
    for (cell, line), codes in sorted(wanted.items()):
        new = _with_directive(sources[cell][line - 1], codes)
        if new is not None:
            sources[cell][line - 1] = new
            count += 1
    for cell, lines in sources.items():
        text = "\n".join(lines)
        if isinstance(cells[cell - 1].get("source"), list):
            cells[cell - 1]["source"] = [ln + "\n" for ln in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
        else:
            cells[cell - 1]["source"] = text
    dumped = json.dumps(nb, indent=layout["indent"], ensure_ascii=layout["ensure_ascii"])
    edit.after = dumped + ("\n" if layout["newline"] else "")
    return edit, count
