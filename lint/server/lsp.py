"""``upsertsink server``: the linter as a language server (LSP over stdio, built on pygls).

- **Diagnostics** on open, change and save, for Python files (Databricks source exports included) and, with
  LSP 3.17 notebook document sync, for notebooks: the cells the client sends are put together as a Jupyter
  notebook in memory and linted as one module (:mod:`upsertsink.lint.check.notebooks`), and each finding is
  published on the URI of the cell it is in.
- **Code actions**: a finding's safe fix as a quick fix (the edit libcst makes, as ``--fix`` would),
  ``# noqa: CODE`` for a finding's line (where ``--add-noqa`` would put it, cells included), and
  ``source.fixAll.upsertsink`` for every safe fix of a file.
- **Hover**: over a rule code (in a ``noqa`` comment or a finding's range), the rule's documentation.
- **Workspace diagnostics** (``--workspace-diagnostics``): pull diagnostics (LSP 3.17): a document's when
  the editor asks, and the whole workspace folder linted as the CLI lints it on request
  (:mod:`upsertsink.lint.server.workspace`).
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

from typing import TYPE_CHECKING

import click

from ..check.checker import main_guard

if TYPE_CHECKING:
    from pygls.lsp.server import LanguageServer

    from .language_server import UpsertsinkServer

MISSING_PYGLS = 'the language server needs pygls: pip install "upsertsink[server]"'


@click.command("server", context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--workspace-diagnostics",
    is_flag=True,
    help="Serve pull diagnostics (LSP 3.17): a document's when the editor asks, and the whole workspace "
    "linted as `upsertsink lint` lints it on request (`workspace/diagnostic`).",
)
def server_command(workspace_diagnostics: bool) -> None:
    """Run the linter as a language server (LSP over stdio) for editors.

    Diagnostics on open, change and save (notebooks included), quick fixes for the safe fixes and for
    `# noqa`, the rule's documentation on hover over a code, settings from the nearest pyproject.toml.
    Needs the `server` extra (pygls).
    """
    try:
        import pygls.lsp.server  # noqa: F401 - only to tell whether the extra is installed
    except ImportError:
        from upsertsink.cli_common import fail

        fail(MISSING_PYGLS, 2)
    main_guard()
    build_server(workspace_diagnostics).start_io()


def build_server(workspace_diagnostics: bool = False) -> LanguageServer:
    """The language server with its handlers (pygls and lsprotocol load with its modules, here);
    ``workspace_diagnostics``: the editor pulls diagnostics, and may ask for the whole workspace's."""
    from .language_server import UpsertsinkServer

    server = UpsertsinkServer()
    _serve_documents(server)
    _serve_notebooks(server)
    _serve_actions(server)
    _serve_hover(server)
    if workspace_diagnostics:
        _serve_pull_diagnostics(server)
    return server


def _serve_documents(server: UpsertsinkServer) -> None:
    """Text documents: linted on open, change and save (a save lints the other open documents again: the
    saved file may be a module they import); closing one clears its diagnostics."""
    from lsprotocol import types as t

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


def _serve_notebooks(server: UpsertsinkServer) -> None:
    """Notebooks (LSP 3.17 notebook document sync): linted as one module on open, change and save."""
    from lsprotocol import types as t

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


def _serve_actions(server: UpsertsinkServer) -> None:
    """Code actions: quick fixes (a safe fix, a ``# noqa``) and ``source.fixAll.upsertsink``."""
    from lsprotocol import types as t

    from .actions import FIX_ALL_KIND, code_actions

    @server.feature(
        t.TEXT_DOCUMENT_CODE_ACTION,
        t.CodeActionOptions(code_action_kinds=[t.CodeActionKind.QuickFix, FIX_ALL_KIND]),
    )
    def code_action(ls: UpsertsinkServer, params: t.CodeActionParams) -> list[t.CodeAction]:
        return code_actions(ls, params)


def _serve_hover(server: UpsertsinkServer) -> None:
    """Hover over a rule code (a ``noqa`` comment's, a diagnostic's): the rule's documentation."""
    from lsprotocol import types as t

    from .hover import rule_hover

    @server.feature(t.TEXT_DOCUMENT_HOVER)
    def hover(ls: UpsertsinkServer, params: t.HoverParams) -> t.Hover | None:
        return rule_hover(ls, params)


def _serve_pull_diagnostics(server: UpsertsinkServer) -> None:
    """Pull diagnostics: a document's on the editor's request (instead of publishing them), the whole
    workspace's on request."""
    from lsprotocol import types as t

    from .workspace import document_report, workspace_report

    server.pull = True

    @server.feature(
        t.TEXT_DOCUMENT_DIAGNOSTIC,
        t.DiagnosticOptions(identifier="upsertsink", inter_file_dependencies=True, workspace_diagnostics=True),
    )
    def document_diagnostic(
        ls: UpsertsinkServer, params: t.DocumentDiagnosticParams
    ) -> t.RelatedFullDocumentDiagnosticReport:
        return document_report(ls, params)

    @server.feature(t.WORKSPACE_DIAGNOSTIC)
    def workspace_diagnostic(ls: UpsertsinkServer, params: t.WorkspaceDiagnosticParams) -> t.WorkspaceDiagnosticReport:
        return workspace_report(ls, params)
