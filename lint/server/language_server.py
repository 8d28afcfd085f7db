"""The language server itself: its documents and notebooks linted and their diagnostics published
(pygls' :class:`LanguageServer`, imported with this module only when the server starts).

A document with a file path is linted by the runner as if the file held the buffer's text (its ``stdin``
mode), so the project modules it imports are read from disk (as saved); a notebook's cells are put together
as one Jupyter notebook and each finding is published on the URI of the cell it is in.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from lsprotocol import types as t
from pygls.lsp.server import LanguageServer
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

from .. import package_version
from ..base.structs import struct
from ..check.checker import Finding
from ..run.config import ConfigError, Settings
from .documents import (
    NOTEBOOK_LANGUAGES,
    NotebookText,
    excluded,
    lint_text,
    notebook_json,
    rule_href,
    settings_for,
    uri_path,
)

log = logging.getLogger(__name__)

SOURCE = "upsertsink"


@struct
class Published:
    """A finding as published: the diagnostic and, for a notebook cell, the notebook it was linted in."""

    finding: Finding
    diagnostic: t.Diagnostic
    notebook_uri: str | None = None


class UpsertsinkServer(LanguageServer):
    """The server's state: what was published for each document and cell, and the notebooks' cells."""

    def __init__(self) -> None:
        super().__init__(
            SOURCE,
            package_version(),
            text_document_sync_kind=t.TextDocumentSyncKind.Incremental,
            notebook_document_sync=t.NotebookDocumentSyncOptions(
                notebook_selector=[
                    t.NotebookDocumentFilterWithCells(
                        cells=[t.NotebookCellLanguage(language=x) for x in NOTEBOOK_LANGUAGES],
                        notebook="*",  # LSP 3.17: "'*' matches every notebook" (any notebook type)
                    )
                ],
                save=True,
            ),
        )
        self.published: dict[str, list[Published]] = {}  # document or cell URI -> findings
        self.notebook_cells: dict[str, list[str]] = {}  # notebook URI -> cell URIs last published
        self.reported: set[str] = set()  # configuration errors already shown
        self.pull = False  # --workspace-diagnostics: the editor pulls documents' diagnostics (workspace.py)

    def workspace_folder(self) -> Path | None:
        root = self.workspace.root_path
        return Path(root) if root else None

    def settings(self, path: Path | None) -> Settings | None:
        try:
            return settings_for(path, self.workspace_folder())
        except ConfigError as exc:
            message = f"upsertsink: {exc}"
            if message not in self.reported:
                self.reported.add(message)
                self.window_show_message(t.ShowMessageParams(type=t.MessageType.Error, message=message))
            log.warning("%s", message)
            return None

    def diagnostic(self, doc: Any, f: Finding) -> t.Diagnostic:
        server_range = ServerTextRange(
            start=ServerTextPosition(max(f.line - 1, 0), max(f.column - 1, 0)),
            end=ServerTextPosition(max(f.end_line - 1, 0), max(f.end_column - 1, 0)),
        )
        href = rule_href(f.rule)
        return t.Diagnostic(
            range=doc.range_to_client_units(server_range),
            message=f.message,
            severity=t.DiagnosticSeverity.Error
            if f.severity == "error"
            else t.DiagnosticSeverity.Warning,
            code=f.rule,
            code_description=t.CodeDescription(href=href) if href else None,
            source=SOURCE,
        )

    def publish(self, uri: str, version: int | None, entries: list[Published]) -> None:
        self.published[uri] = entries
        self.text_document_publish_diagnostics(
            t.PublishDiagnosticsParams(
                uri=uri, version=version, diagnostics=[e.diagnostic for e in entries]
            )
        )

    def lint_document(self, uri: str) -> None:
        """Lint a text document and publish its diagnostics (with ``--workspace-diagnostics`` the editor
        pulls them instead: :mod:`.workspace`)."""
        if self.pull or self.workspace.get_notebook_document(cell_uri=uri) is not None:
            return  # pulled by the editor; a cell: linted with its notebook
        self.publish(uri, self.workspace.get_text_document(uri).version, self.document_entries(uri))

    def document_entries(self, uri: str) -> list[Published]:
        """A text document's findings and diagnostics, from its buffer."""
        doc = self.workspace.get_text_document(uri)
        path = uri_path(uri)
        settings = self.settings(path)
        if settings is None or excluded(path, settings):
            return []
        shown = str(path) if path is not None else "untitled.py"
        findings = lint_text(shown, doc.source, path, settings)
        return [Published(f, self.diagnostic(doc, f)) for f in findings]

    def lint_others(self, saved_uri: str) -> None:
        """A saved file may be a module other open documents import (they read it from disk): lint
        them again."""
        for uri in list(self.published):
            if uri != saved_uri and self.workspace.get_notebook_document(cell_uri=uri) is None:
                self.lint_document(uri)
        for notebook_uri in list(self.notebook_cells):
            if notebook_uri != saved_uri:
                self.lint_notebook(notebook_uri)

    def notebook_text(self, notebook: t.NotebookDocument) -> NotebookText:
        cells = []
        for cell in notebook.cells:
            doc = self.workspace.get_text_document(cell.document)
            cells.append(
                (cell.kind == t.NotebookCellKind.Code, doc.language_id or "", doc.source, cell.document)
            )
        return notebook_json(cells)

    def lint_notebook(self, notebook_uri: str) -> None:
        notebook = self.workspace.get_notebook_document(notebook_uri=notebook_uri)
        if notebook is None:
            return
        nb = self.notebook_text(notebook)
        path = uri_path(notebook_uri)
        settings = self.settings(path)
        if settings is None or excluded(path, settings):
            findings = []
        else:
            if path is None or path.suffix != ".ipynb":
                path = None  # not a file the runner could read as a notebook: the cells on their own
            shown = str(path) if path is not None else "notebook.ipynb"
            findings = lint_text(shown, nb.json, path, settings)
        per_cell: dict[str, list[Published]] = {uri: [] for uri in nb.cell_uris}
        for f in findings:
            index = (f.cell or 1) - 1
            if not 0 <= index < len(nb.cell_uris):
                continue
            cell_uri = nb.cell_uris[index]
            doc = self.workspace.get_text_document(cell_uri)
            per_cell[cell_uri].append(Published(f, self.diagnostic(doc, f), notebook_uri))
        for gone in set(self.notebook_cells.get(notebook_uri, ())) - set(per_cell):
            self.publish(gone, None, [])
        self.notebook_cells[notebook_uri] = list(per_cell)
        for cell_uri, entries in per_cell.items():
            self.publish(cell_uri, self.workspace.get_text_document(cell_uri).version, entries)

    def close_notebook(self, notebook_uri: str) -> None:
        for cell_uri in self.notebook_cells.pop(notebook_uri, []):
            self.publish(cell_uri, None, [])
