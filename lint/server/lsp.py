"""``upsertsink server``: the linter as a language server (LSP over stdio, built on pygls).

- **Diagnostics** on open, change and save, for Python files (Databricks source exports included) and, with
  LSP 3.17 notebook document sync, for notebooks: the cells the client sends are put together as a Jupyter
  notebook in memory and linted as one module (:mod:`upsertsink.lint.check.notebooks`), and each finding is
  published on the URI of the cell it is in.
- **Code actions**: a finding's safe fix as a quick fix (the edit libcst makes, as ``--fix`` would),
  ``# noqa: CODE`` for a finding's line (where ``--add-noqa`` would put it, cells included), and
  ``source.fixAll.upsertsink`` for every safe fix of a file.
- **Settings**: those of the nearest ``pyproject.toml`` with ``[tool.upsertsink.lint]`` above the document's
  file (as the CLI finds them); documents matching its ``exclude`` get no diagnostics (as with
  ``--force-exclude``).
- **Other files**: a document with a file path is linted by the runner as if the file held the buffer's
  text (its ``stdin`` mode), so the project modules it imports are read from disk (as saved) and values are
  followed into them, on every change; only the document's own findings are shown. Saving any document
  lints the other open documents again (the saved file may be a module they import). ``per-file-ignores``
  apply as in the CLI. An untitled buffer is checked on its own.

pygls is the optional extra ``upsertsink[server]``; this module imports it only when the server starts.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..base.structs import struct
from ..check.checker import Finding, main_guard
from ..run.config import ConfigError, Settings
from .documents import (
    NOTEBOOK_LANGUAGES,
    NotebookText,
    changed_span,
    excluded,
    lint_text,
    notebook_json,
    rule_href,
    settings_for,
    uri_path,
)

if TYPE_CHECKING:
    from lsprotocol import types
    from pygls.lsp.server import LanguageServer

log = logging.getLogger(__name__)

SOURCE = "upsertsink"
MISSING_PYGLS = 'the language server needs pygls: pip install "upsertsink[server]"'
FIX_ALL_KIND = "source.fixAll.upsertsink"


@click.command("server", context_settings={"help_option_names": ["-h", "--help"]})
def server_command() -> None:
    """Run the linter as a language server (LSP over stdio) for editors.

    Diagnostics on open, change and save (notebooks included), quick fixes for the safe fixes and for
    `# noqa`, settings from the nearest pyproject.toml. Needs the `server` extra (pygls).
    """
    try:
        import pygls.lsp.server  # noqa: F401 - only to tell whether the extra is installed
    except ImportError:
        from upsertsink.cli_common import fail

        fail(MISSING_PYGLS, 2)
    main_guard()
    build_server().start_io()


@struct
class Published:
    """A finding as published: the diagnostic and, for a notebook cell, the notebook it was linted in."""

    finding: Finding
    diagnostic: types.Diagnostic
    notebook_uri: str | None = None


def build_server() -> LanguageServer:
    """The language server with its handlers (pygls and lsprotocol are imported here)."""
    from lsprotocol import types as t
    from pygls.lsp.server import LanguageServer
    from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

    from .. import package_version

    class UpsertsinkServer(LanguageServer):
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

        # ---- helpers
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

        # ---- text documents
        def lint_document(self, uri: str) -> None:
            doc = self.workspace.get_text_document(uri)
            if self.workspace.get_notebook_document(cell_uri=uri) is not None:
                return  # a cell: linted with its notebook
            path = uri_path(uri)
            settings = self.settings(path)
            if settings is None or excluded(path, settings):
                self.publish(uri, doc.version, [])
                return
            shown = str(path) if path is not None else "untitled.py"
            findings = lint_text(shown, doc.source, path, settings)
            self.publish(uri, doc.version, [Published(f, self.diagnostic(doc, f)) for f in findings])

        def lint_others(self, saved_uri: str) -> None:
            """A saved file may be a module other open documents import (they read it from disk): lint
            them again."""
            for uri in list(self.published):
                if uri != saved_uri and self.workspace.get_notebook_document(cell_uri=uri) is None:
                    self.lint_document(uri)
            for notebook_uri in list(self.notebook_cells):
                if notebook_uri != saved_uri:
                    self.lint_notebook(notebook_uri)

        # ---- notebooks
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

        # ---- code actions
        def actions(self, params: t.CodeActionParams) -> list[t.CodeAction]:
            uri = params.text_document.uri
            entries = self.published.get(uri, [])
            wanted = params.context.only
            out: list[t.CodeAction] = []
            quick = _kind_wanted(t.CodeActionKind.QuickFix.value, wanted)
            if quick:
                for entry in entries:
                    if not _overlaps(entry.diagnostic.range, params.range):
                        continue
                    fix = self.fix_action(uri, entry)
                    if fix is not None:
                        out.append(fix)
                    noqa = self.noqa_action(uri, entry)
                    if noqa is not None:
                        out.append(noqa)
            if _kind_wanted(FIX_ALL_KIND, wanted):
                fix_all = self.fix_all_action(uri, entries)
                if fix_all is not None:
                    out.append(fix_all)
            return out

        def _edit(self, uri: str, before: str, after: str) -> t.WorkspaceEdit:
            doc = self.workspace.get_text_document(uri)
            start, end, new = changed_span(before, after)
            server_range = ServerTextRange(
                start=_server_position(before, start), end=_server_position(before, end)
            )
            edit = t.TextEdit(range=doc.range_to_client_units(server_range), new_text=new)
            return t.WorkspaceEdit(changes={uri: [edit]})

        def _fixed(self, uri: str, findings: list[Finding]) -> tuple[str, str, list[Finding]] | None:
            from ..command.rewrite import fix_file, module_name

            path = uri_path(uri)
            settings = self.settings(path)
            if settings is None:
                return None
            doc = self.workspace.get_text_document(uri)
            module = module_name(path, settings.root) if path is not None else "untitled"
            edit = fix_file(uri, doc.source, findings, module, unsafe=False)
            if not edit.changed or not edit.applied:
                return None
            return doc.source, edit.after, edit.applied

        def fix_action(self, uri: str, entry: Published) -> t.CodeAction | None:
            spec = entry.finding.fix_spec
            if spec is None or spec.applicability != "safe" or entry.notebook_uri is not None:
                return None
            fixed = self._fixed(uri, [entry.finding])
            if fixed is None:
                return None
            before, after, _ = fixed
            return t.CodeAction(
                title=f"Fix {entry.finding.rule}: {spec.message}",
                kind=t.CodeActionKind.QuickFix,
                diagnostics=[entry.diagnostic],
                edit=self._edit(uri, before, after),
                is_preferred=True,
            )

        def fix_all_action(self, uri: str, entries: list[Published]) -> t.CodeAction | None:
            safe = [
                e.finding
                for e in entries
                if e.notebook_uri is None
                and (s := e.finding.fix_spec) is not None
                and s.applicability == "safe"
            ]
            if not safe:
                return None
            fixed = self._fixed(uri, safe)
            if fixed is None:
                return None
            before, after, applied = fixed
            return t.CodeAction(
                title=f"upsertsink: apply {len(applied)} safe fix{'es' if len(applied) != 1 else ''}",
                kind=FIX_ALL_KIND,
                edit=self._edit(uri, before, after),
            )

        def noqa_action(self, uri: str, entry: Published) -> t.CodeAction | None:
            from ..command.rewrite import add_noqa, add_noqa_notebook

            f = entry.finding
            if f.rule == "ND000":
                return None
            if entry.notebook_uri is None:
                before = self.workspace.get_text_document(uri).source
                edit, count = add_noqa(uri, before, [f])
                after = edit.after
            else:
                notebook = self.workspace.get_notebook_document(notebook_uri=entry.notebook_uri)
                if notebook is None:
                    return None
                nb = self.notebook_text(notebook)
                edit, count = add_noqa_notebook("notebook.ipynb", nb.json, [f])
                if not count or f.cell is None or nb.cell_uris[f.cell - 1] != uri:
                    return None
                before = self.workspace.get_text_document(uri).source
                after = json.loads(edit.after)["cells"][f.cell - 1]["source"]
            if not count or after == before:
                return None
            return t.CodeAction(
                title=f"Add `# noqa: {f.rule}` for this line",
                kind=t.CodeActionKind.QuickFix,
                diagnostics=[entry.diagnostic],
                edit=self._edit(uri, before, after),
            )

    server = UpsertsinkServer()

    @server.feature(t.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: UpsertsinkServer, params: t.DidOpenTextDocumentParams) -> None:
        ls.lint_document(params.text_document.uri)

    @server.feature(t.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: UpsertsinkServer, params: t.DidChangeTextDocumentParams) -> None:
        ls.lint_document(params.text_document.uri)

    @server.feature(t.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: UpsertsinkServer, params: t.DidSaveTextDocumentParams) -> None:
        ls.lint_document(params.text_document.uri)
        ls.lint_others(params.text_document.uri)

    @server.feature(t.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: UpsertsinkServer, params: t.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        if ls.published.pop(uri, None) is not None:
            ls.text_document_publish_diagnostics(t.PublishDiagnosticsParams(uri=uri, diagnostics=[]))

    @server.feature(t.NOTEBOOK_DOCUMENT_DID_OPEN)
    def notebook_open(ls: UpsertsinkServer, params: t.DidOpenNotebookDocumentParams) -> None:
        ls.lint_notebook(params.notebook_document.uri)

    @server.feature(t.NOTEBOOK_DOCUMENT_DID_CHANGE)
    def notebook_change(ls: UpsertsinkServer, params: t.DidChangeNotebookDocumentParams) -> None:
        ls.lint_notebook(params.notebook_document.uri)

    @server.feature(t.NOTEBOOK_DOCUMENT_DID_SAVE)
    def notebook_save(ls: UpsertsinkServer, params: t.DidSaveNotebookDocumentParams) -> None:
        ls.lint_notebook(params.notebook_document.uri)
        ls.lint_others(params.notebook_document.uri)

    @server.feature(t.NOTEBOOK_DOCUMENT_DID_CLOSE)
    def notebook_close(ls: UpsertsinkServer, params: t.DidCloseNotebookDocumentParams) -> None:
        ls.close_notebook(params.notebook_document.uri)

    @server.feature(
        t.TEXT_DOCUMENT_CODE_ACTION,
        t.CodeActionOptions(code_action_kinds=[t.CodeActionKind.QuickFix, FIX_ALL_KIND]),
    )
    def code_action(ls: UpsertsinkServer, params: t.CodeActionParams) -> list[t.CodeAction]:
        return ls.actions(params)

    return server


def _server_position(text: str, offset: int) -> Any:
    """(line, column in code points) of an offset of ``text``, as pygls' ServerTextPosition."""
    from pygls.workspace.position_codec import ServerTextPosition

    lines = text[:offset].splitlines(keepends=True)
    if not lines:
        return ServerTextPosition(0, 0)
    if lines[-1].endswith(("\n", "\r")):
        return ServerTextPosition(len(lines), 0)
    return ServerTextPosition(len(lines) - 1, len(lines[-1]))


def _overlaps(a: types.Range, b: types.Range) -> bool:
    def key(p: types.Position) -> tuple[int, int]:
        return (p.line, p.character)

    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)


def _kind_wanted(kind: str, only: Any) -> bool:
    """Does the request's ``only`` list (None: everything) ask for actions of ``kind``?"""
    if not only:
        return True
    asked = [str(getattr(o, "value", o)) for o in only]
    return any(kind == a or kind.startswith(f"{a}.") for a in asked)
