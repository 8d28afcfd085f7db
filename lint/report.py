"""Output formats: text, json, sarif (2.1.0, as GitHub code scanning accepts it) and github (workflow
commands)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from upsertsink.lint import __version__
from upsertsink.lint.checker import Finding
from upsertsink.lint.rules import ALL_RULES

INFORMATION_URI = "https://github.com/upsertsink/upsertsink/blob/main/docs/linter.md"
RULES_URI = "https://github.com/upsertsink/upsertsink/blob/main/docs/rules.md"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def render_text(findings: list[Finding], files_checked: int) -> str:
    """``path:line:col: CODE message`` per finding (``path:cell N:line:col:`` in a notebook, as ruff prints
    it), then a summary line."""
    lines = [f"{_where(f)}: {f.rule} {f.message}" for f in findings]
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
    return "\n".join(lines) + "\n"


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
                        "version": __version__,
                        "semanticVersion": __version__,
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
    from upsertsink.lint.rules import RULES

    return RULES[f.rule].name


def render(fmt: str, findings: list[Finding], files_checked: int, root: Path | None = None) -> str:
    """Dispatch on the --format value."""
    if fmt == "json":
        return render_json(findings, files_checked)
    if fmt == "sarif":
        return render_sarif(findings, files_checked, root)
    if fmt == "github":
        return render_github(findings, files_checked)
    return render_text(findings, files_checked)
