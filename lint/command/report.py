"""Output formats: text (one line per finding), full (text with the source line and a caret under the
span), json, sarif (2.1.0, as GitHub code scanning accepts it), github (workflow commands), and ruff's
concise, pylint, gitlab (Code Quality) and junit (XML); and the ``--statistics`` table."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from .. import package_version
from .terminal import BOLD, SEVERITY, paint

if TYPE_CHECKING:
    from ..check.checker import Finding

# The rules (for names and SARIF's rule table), hashlib and the XML escapes load with the formats that use
# them: the text and JSON reports of a small run need none of them.

INFORMATION_URI = "https://github.com/upsertsink/upsertsink/blob/main/docs/linter.md"
RULES_URI = "https://github.com/upsertsink/upsertsink/blob/main/docs/rules.md"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def render_text(
    findings: list[Finding], files_checked: int, quiet: bool = False, terminal: bool = False, color: bool = False
) -> str:
    """``path:line:col: CODE message`` per finding (``path:cell N:line:col:`` in a notebook, as ruff prints
    it), then a summary line (not with ``quiet``). On a ``terminal`` the severity too
    (``path:line:col: error CODE message``), in colour with ``color``."""
    lines = [_headline(f, terminal, color) for f in findings]
    if quiet:
        return "".join(line + "\n" for line in lines)
    return "\n".join([*lines, summary_line(findings, files_checked, color)]) + "\n"


def _headline(f: Finding, severity: bool, color: bool, marker: str = "") -> str:
    """A finding's line: ``path:line:col: CODE message``, with ``severity`` the severity before the code; in
    ``color`` the path bold, the severity and the code in the severity's colour."""
    shown = SEVERITY.get(f.severity, BOLD)
    level = f"{paint(f.severity, shown, color)} " if severity else ""
    return f"{paint(_where(f), BOLD, color)}: {level}{paint(f.rule, shown, color)} {marker}{f.message}"


def summary_line(findings: list[Finding], files_checked: int, color: bool = False) -> str:
    """``Found 3 findings (1 error, 2 warnings) in 12 files checked.`` or ``All checks passed (...).``
    (bold on a terminal)."""
    lines: list[str] = []
    errors = sum(1 for f in findings if f.severity == "error")
    warnings = len(findings) - errors
    noun = "file" if files_checked == 1 else "files"
    if findings:
        lines.append(
            f"Found {len(findings)} finding{'s' if len(findings) != 1 else ''} "
            f"({errors} error{'s' if errors != 1 else ''}, {warnings} warning{'s' if warnings != 1 else ''}) "
            f"in {files_checked} {noun} checked."
        )
    else:
        lines.append(f"All checks passed ({files_checked} {noun} checked).")
    return paint(lines[0], BOLD, color)


class SourceLines:
    """The source lines findings point at, read once per file (a notebook's cell lines for ``.ipynb``)."""

    def __init__(self) -> None:
        self._files: dict[str, list[str] | dict[int, list[str]] | None] = {}

    def line(self, f: Finding) -> str | None:
        """The text of the finding's (first) line, or None when the file cannot be read any more."""
        if f.path not in self._files:
            self._files[f.path] = self._read(f.path)
        data = self._files[f.path]
        if data is None:
            return None
        lines = data.get(f.cell or 0) if isinstance(data, dict) else data
        if lines is None or not 0 < f.line <= len(lines):
            return None
        return lines[f.line - 1]

    @staticmethod
    def _read(path: str) -> list[str] | dict[int, list[str]] | None:
        try:
            raw = Path(path).read_bytes()
            if path.endswith(".ipynb"):
                nb = json.loads(raw.decode("utf-8-sig"))
                cells: dict[int, list[str]] = {}
                for number, cell in enumerate(nb.get("cells", []), 1):
                    source = cell.get("source", "")
                    text = "".join(source) if isinstance(source, list) else str(source)
                    cells[number] = text.splitlines()
                return cells
            from ..check.checker import decode

            return decode(raw).splitlines()
        except (OSError, ValueError, LookupError, AttributeError):
            return None


def render_full(
    findings: list[Finding], files_checked: int, quiet: bool = False, terminal: bool = False, color: bool = False
) -> str:
    """Like text, plus the source line with a caret under the reported span (and the fix, if any)."""
    sources = SourceLines()
    out: list[str] = []
    for f in findings:
        out.append(_headline(f, terminal, color))
        text = sources.line(f)
        if text is not None:
            number = str(f.line)
            pad = " " * len(number)
            start = max(f.column - 1, 0)
            end = f.end_column - 1 if f.end_line == f.line else len(text.rstrip())
            end = max(min(end, len(text)), start + 1)
            shown = text.expandtabs(4)
            prefix = text[:start].expandtabs(4)
            width = max(len(text[:end].expandtabs(4)) - len(prefix), 1)
            out += [
                f"{pad} |",
                f"{number} | {shown}",
                f"{pad} | {' ' * len(prefix)}{'^' * width} {f.rule}",
                f"{pad} |",
            ]
        if f.fix is not None:
            out.append(f"{' ' * len(str(f.line))} = fix ({f.fix['applicability']}): {f.fix['message']}")
        out.append("")
    if not quiet:
        out.append(summary_line(findings, files_checked, color))
    return "\n".join(out) + ("\n" if out else "")


def render_statistics(fmt: str, findings: list[Finding], fixable: set[int]) -> str:
    """Counts per rule, most frequent first (``--statistics``); ``fixable`` holds ids of the findings whose
    fix the run would apply. JSON for ``--format json``, else a table."""
    from ..rules import RULES

    counts: dict[str, list[Finding]] = {}
    for f in findings:
        counts.setdefault(f.rule, []).append(f)
    rows = sorted(counts.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    if fmt == "json":
        doc = [
            {
                "code": code,
                "name": RULES[code].name,
                "count": len(fs),
                "fixable": sum(1 for f in fs if id(f) in fixable),
            }
            for code, fs in rows
        ]
        return json.dumps(doc, indent=2) + "\n"
    width = max((len(str(len(fs))) for _, fs in rows), default=1)
    lines = []
    for code, fs in rows:
        mark = "[*] " if any(id(f) in fixable for f in fs) else ""
        lines.append(f"{len(fs):>{width}}\t{code}\t{mark}{RULES[code].name}")
    return "".join(line + "\n" for line in lines)


def _where(f: Finding) -> str:
    if f.cell is not None:
        return f"{f.path}:cell {f.cell}:{f.line}:{f.column}"
    return f"{f.path}:{f.line}:{f.column}"


def _in_cell(f: Finding) -> str:
    """The message of a notebook finding starts with where it is in the notebook."""
    if f.cell is None:
        return f.message
    return f"cell {f.cell}, line {f.line}, column {f.column}: {f.message}"


def render_json(findings: list[Finding], files_checked: int) -> str:
    """Exactly one JSON object: version, files_checked, findings."""
    doc = {"version": 1, "files_checked": files_checked, "findings": [f.to_dict() for f in findings]}
    return json.dumps(doc, indent=2) + "\n"


def _repo_root(start: Path) -> Path:
    here = start.resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return here


def _uri(path: str, base: Path) -> str:
    p = Path(path)
    absolute = p if p.is_absolute() else (Path.cwd() / p)
    try:
        return absolute.resolve().relative_to(base).as_posix()
    except ValueError:
        return absolute.resolve().as_posix()


def render_sarif(findings: list[Finding], files_checked: int, root: Path | None = None) -> str:
    """SARIF 2.1.0: one run, the full rule table, results with repo-relative uris and regions."""
    base = _repo_root(root or Path.cwd())
    import hashlib

    from ..rules import ALL_RULES

    index = {r.code: i for i, r in enumerate(ALL_RULES)}
    rules = []
    for r in ALL_RULES:
        doc = r.explain()
        rules.append(
            {
                "id": r.code,
                "name": "".join(part.capitalize() for part in r.name.split("-")),
                "shortDescription": {"text": r.summary.split(": ")[0].rstrip(".")[:200]},
                "fullDescription": {"text": " ".join(r.summary.split())},
                "helpUri": f"{RULES_URI}#{r.code.lower()}-{r.name}",
                "help": {"text": doc, "markdown": doc},
                "defaultConfiguration": {"level": "error"},
                "properties": {"tags": ["determinism", "idempotency"], "precision": "medium"},
            }
        )
    results = []
    occurrence: dict[str, int] = {}
    for f in findings:
        uri = _uri(f.path, base)
        # stable across edits that only move code: file, rule, column and the source expression, plus
        # an occurrence counter; upload-sarif adds its own primaryLocationLineHash from the file contents
        basis = "\0".join([uri, f.rule, str(f.column_name), f.message.split(";")[0]])
        occurrence[basis] = occurrence.get(basis, 0) + 1
        fingerprint = hashlib.sha256(basis.encode()).hexdigest()[:32]
        if f.cell is not None:
            # a notebook: the region is the line of the .ipynb JSON text that holds the source line
            region = {"startLine": f.file_line or 1}
        else:
            region = {
                "startLine": f.line,
                "startColumn": f.column,
                "endLine": f.end_line,
                "endColumn": f.end_column,
            }
        props = {"target": f.target, "column_name": f.column_name}
        if f.table is not None:
            props["table"] = f.table
        if f.cell is not None:
            props.update({"cell": f.cell, "cell_line": f.line, "cell_column": f.column})
        results.append(
            {
                "ruleId": f.rule,
                "ruleIndex": index[f.rule],
                "level": f.severity,
                "message": {"text": _in_cell(f)},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": uri, "uriBaseId": "%SRCROOT%"},
                            "region": region,
                        }
                    }
                ],
                "partialFingerprints": {"upsertsinkFinding/v1": f"{fingerprint}:{occurrence[basis]}"},
                "properties": props,
            }
        )
    doc = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "upsertsink-lint",
                        "informationUri": INFORMATION_URI,
                        "version": package_version(),
                        "semanticVersion": package_version(),
                        "rules": rules,
                    }
                },
                "originalUriBaseIds": {"%SRCROOT%": {"uri": base.as_uri() + "/"}},
                "columnKind": "unicodeCodePoints",
                "results": results,
                "properties": {"files_checked": files_checked},
            }
        ],
    }
    return json.dumps(doc, indent=2) + "\n"


def escape_data(text: str) -> str:
    """GitHub workflow-command escaping for the message part."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """GitHub workflow-command escaping for property values (file=, title=...)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def render_github(findings: list[Finding], files_checked: int) -> str:
    """``::error file=...,line=...,col=...,endLine=...,endColumn=...,title=...::message`` per finding."""
    out = []
    for f in findings:
        level = "error" if f.severity == "error" else "warning"
        if f.cell is not None:  # a notebook: annotate the line of the .ipynb file, name the cell
            where = [f"line={f.file_line or 1}", f"endLine={f.file_line or 1}"]
        else:
            where = [
                f"line={f.line}",
                f"col={f.column}",
                f"endLine={f.end_line}",
                f"endColumn={f.end_column}",
            ]
        props = [
            f"file={escape_property(f.path)}",
            *where,
            f"title={escape_property(f'{f.rule} ' + _title(f))}",
        ]
        out.append(f"::{level} {','.join(props)}::{escape_data(f.rule + ' ' + _in_cell(f))}")
    return "\n".join(out) + ("\n" if out else "")


def _title(f: Finding) -> str:
    from ..rules import RULES

    return RULES[f.rule].name


def render_concise(
    findings: list[Finding],
    files_checked: int,
    fixable: set[int] | None = None,
    quiet: bool = False,
    color: bool = False,
) -> str:
    """ruff's ``concise``: ``path:line:col: CODE [*] message`` (``[*]`` when the run's ``--fix`` would
    fix the finding: ``fixable`` holds the ids of those findings), then the summary (not with ``quiet``);
    on a terminal (``color``) the code in its severity's colour, as ruff colours it."""
    marked = fixable or set()
    lines = [_headline(f, False, color, "[*] " if id(f) in marked else "") for f in findings]
    if not quiet:
        lines.append(summary_line(findings, files_checked, color))
    return "".join(line + "\n" for line in lines)


def render_pylint(findings: list[Finding]) -> str:
    """ruff's (and flake8's) ``pylint`` format: ``path:line: [CODE] message``. In a notebook the line is
    the ``.ipynb`` file's line that holds the source line, and the message starts with the cell."""
    out = []
    for f in findings:
        line = (f.file_line or 1) if f.cell is not None else f.line
        out.append(f"{f.path}:{line}: [{f.rule}] {_in_cell(f)}\n")
    return "".join(out)


def render_gitlab(findings: list[Finding]) -> str:
    """GitLab Code Quality JSON, as ruff writes it: a list of issues with ``check_name`` (the code),
    ``description`` (``CODE: message``), ``severity`` (error: ``major``, warning: ``minor``), a
    ``fingerprint`` (a hash of the rule, the path and, for repeated ones, the previous fingerprint: stable
    when code moves) and ``location`` (``path`` relative to ``$CI_PROJECT_DIR`` when set, ``positions``
    begin/end line and column). In a notebook the positions are the ``.ipynb`` file's line, column 1."""
    project = os.environ.get("CI_PROJECT_DIR")
    seen: set[int] = set()
    issues = []
    for f in findings:
        path = f.path
        if project:
            path = os.path.relpath(Path(f.path).resolve(), Path(project).resolve()).replace(os.sep, "/")
        number = _fingerprint(0, f.rule, path)
        while number in seen:
            number = _fingerprint(number, f.rule, path)
        seen.add(number)
        if f.cell is not None:
            begin = end = {"line": f.file_line or 1, "column": 1}
        else:
            begin = {"line": f.line, "column": f.column}
            end = {"line": f.end_line, "column": f.end_column}
        issues.append(
            {
                "check_name": f.rule,
                "description": f"{f.rule}: {_in_cell(f)}",
                "severity": "major" if f.severity == "error" else "minor",
                "fingerprint": format(number, "x"),
                "location": {"path": path, "positions": {"begin": begin, "end": end}},
            }
        )
    return json.dumps(issues, indent=2) + "\n"


def _fingerprint(salt: int, rule: str, path: str) -> int:
    import hashlib

    from ..rules import RULES

    data = f"{salt}\0{RULES[rule].name}\0{path}".encode()
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def render_junit(findings: list[Finding]) -> str:
    """JUnit XML, as ruff writes it: one ``testsuite`` per file (its path), one failed ``testcase`` per
    finding (``org.upsertsink.CODE``, ``classname`` the path without its suffix, ``line``/``column``, a
    ``severity`` property, ``failure`` with the message); no finding: one passing ``No errors found`` case.
    Notebook findings have no line/column attributes and name the cell in the failure text."""
    from xml.sax.saxutils import escape, quoteattr

    by_path: dict[str, list[Finding]] = {}
    for f in findings:
        by_path.setdefault(f.path, []).append(f)
    n = len(findings)
    out = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<testsuites name="upsertsink" tests="{n}" failures="{n}" errors="0">',
    ]
    if not findings:
        out += [
            (
                '    <testsuite name="upsertsink" tests="1" disabled="0" errors="0" failures="0" '
                'package="org.upsertsink">'
            ),
            '        <testcase name="No errors found" classname="upsertsink">',
            "        </testcase>",
            "    </testsuite>",
        ]
    for path, fs in sorted(by_path.items()):
        out.append(
            f'    <testsuite name={quoteattr(path)} tests="{len(fs)}" disabled="0" errors="0" '
            f'failures="{len(fs)}" package="org.upsertsink">'
        )
        classname = path[: -len(Path(path).suffix)] if Path(path).suffix else path
        for f in fs:
            where = "" if f.cell is not None else f' line="{f.line}" column="{f.column}"'
            text = _in_cell(f) if f.cell is not None else f"line {f.line}, col {f.column}, {f.message}"
            out += [
                f'        <testcase name="org.upsertsink.{f.rule}" classname={quoteattr(classname)}{where}>',
                "            <properties>",
                f'                <property name="severity" value="{f.severity}"/>',
                "            </properties>",
                f"            <failure message={quoteattr(f.message)}>{escape(text)}</failure>",
                "        </testcase>",
            ]
        out.append("    </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"


def render(
    fmt: str,
    findings: list[Finding],
    files_checked: int,
    root: Path | None = None,
    quiet: bool = False,
    fixable: set[int] | None = None,
    terminal: bool = False,
    color: bool = False,
) -> str:
    """Dispatch on the --format value (``quiet`` drops the summary line of the text formats; ``fixable``:
    ids of the findings the run's ``--fix`` would fix, marked ``[*]`` by ``concise``; ``terminal``: the
    output is one, and the text formats show severities, in colour with ``color``)."""
    if fmt == "concise":
        return render_concise(findings, files_checked, fixable, quiet, color)
    if fmt == "pylint":
        return render_pylint(findings)
    if fmt == "gitlab":
        return render_gitlab(findings)
    if fmt == "junit":
        return render_junit(findings)
    if fmt == "full":
        return render_full(findings, files_checked, quiet, terminal, color)
    if fmt == "json":
        return render_json(findings, files_checked)
    if fmt == "sarif":
        return render_sarif(findings, files_checked, root)
    if fmt == "github":
        return render_github(findings, files_checked)
    return render_text(findings, files_checked, quiet, terminal, color)
