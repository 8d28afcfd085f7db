"""Pull diagnostics (LSP 3.17), served when the server runs with ``--workspace-diagnostics``: a document's
diagnostics when the editor asks for them (``textDocument/diagnostic``), and the whole workspace linted on
request (``workspace/diagnostic``) as ``upsertsink lint`` lints it: the files as saved, with the summaries of
the files they import (the cross-file facts of the CLI) and the project's settings."""

from __future__ import annotations

from pathlib import Path

from lsprotocol import types as t
from pygls.uris import from_fs_path

from ..base.structs import replace
from ..check.checker import Finding
from ..run.runner import lint_paths
from .language_server import UpsertsinkServer


def document_report(ls: UpsertsinkServer, params: t.DocumentDiagnosticParams) -> t.RelatedFullDocumentDiagnosticReport:
    """One document's diagnostics, linted from its buffer (kept for the code actions)."""
    uri = params.text_document.uri
    entries = ls.document_entries(uri)
    ls.published[uri] = entries
    return t.RelatedFullDocumentDiagnosticReport(items=[e.diagnostic for e in entries])


def workspace_report(ls: UpsertsinkServer, params: t.WorkspaceDiagnosticParams) -> t.WorkspaceDiagnosticReport:
    """Every file of the workspace folder linted as the CLI lints it (files open in the editor are left to
    their document reports, which read the buffer)."""
    root = ls.workspace_folder()
    if root is None:
        return t.WorkspaceDiagnosticReport(items=[])
    settings = ls.settings(root / "pyproject.toml")  # a configuration error is shown once, and gives nothing
    if settings is None:
        return t.WorkspaceDiagnosticReport(items=[])
    result = lint_paths([root], settings, jobs=1)
    by_file: dict[Path, list] = {}
    for f in result.findings:
        by_file.setdefault((Path.cwd() / f.path).resolve(), []).append(f)
    items: list[t.WorkspaceDocumentDiagnosticReport] = []
    for path, findings in sorted(by_file.items()):
        uri = from_fs_path(str(path))
        if uri is None or uri in ls.published:
            continue
        doc = ls.workspace.get_text_document(uri)
        diagnostics = [ls.diagnostic(doc, _file_position(f)) for f in findings]
        items.append(t.WorkspaceFullDocumentDiagnosticReport(uri=uri, items=diagnostics, version=None))
    return t.WorkspaceDiagnosticReport(items=items)


def _file_position(f: Finding) -> Finding:
    """A notebook's finding at the line of the ``.ipynb`` file that holds it (its cells are not documents
    here); any other finding as it is."""
    if f.cell is None or f.file_line is None:
        return f
    return replace(f, line=f.file_line, end_line=f.file_line, column=1, end_column=1)
