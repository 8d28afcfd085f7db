"""``upsertsink server``: the language server, driven over stdio by pygls' own LSP client (a subprocess
running the installed ``upsertsink server`` command, as an editor starts it)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

try:
    from lsprotocol import types as t
    from pygls.lsp.client import LanguageClient
    from pygls.uris import from_fs_path
except ImportError:  # the "server" extra is missing: only the test of that message runs
    HAVE_PYGLS = False
else:
    HAVE_PYGLS = True

# every test but the last talks to the server
needs_pygls = pytest.mark.skipif(not HAVE_PYGLS, reason='needs the "server" extra (pygls)')
UPSERTSINK = Path(sys.executable).with_name("upsertsink")
TIMEOUT = 30.0

UUID_JOB = """\
import uuid

from pyspark.sql import functions as F
from upsertsink import UpsertSink

orders = spark.table("raw.orders").withColumn("order_id", F.lit(str(uuid.uuid4())))
orders = orders.withColumn("ingested_at", F.current_timestamp())
UpsertSink("/lake/orders", keys=["order_id"]).write(orders)
"""
FIXED_JOB = UUID_JOB.replace("str(uuid.uuid4())", 'F.col("source_id")').replace(
    "F.current_timestamp()", 'F.col("event_time")'
)
STREAM_JOB = """\
def write_batch(batch_df, epoch_id):
    batch_df.write.format("delta").mode("append").saveAsTable("dw.events")


stream.writeStream.foreachBatch(write_batch).start()
"""


class Session:
    """A started server and what it published: URI -> list of PublishDiagnosticsParams, in order."""

    def __init__(self, client: LanguageClient) -> None:
        self.client = client
        self.published: dict[str, list[t.PublishDiagnosticsParams]] = {}
        self.messages: list[str] = []
        self.changed = asyncio.Condition()
        self.capabilities: t.ServerCapabilities | None = None

    async def diagnostics(self, uri: str, count: int = 1) -> list[t.Diagnostic]:
        """The diagnostics of the ``count``-th publication for ``uri`` (waits for it)."""

        async def wait() -> None:
            async with self.changed:
                await self.changed.wait_for(lambda: len(self.published.get(uri, [])) >= count)

        await asyncio.wait_for(wait(), TIMEOUT)
        return list(self.published[uri][count - 1].diagnostics)

    def open(self, uri: str, text: str, version: int = 1) -> None:
        self.client.text_document_did_open(
            t.DidOpenTextDocumentParams(
                text_document=t.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)
            )
        )

    async def actions(self, uri: str, diagnostic: t.Diagnostic) -> list[t.CodeAction]:
        result = await asyncio.wait_for(
            self.client.text_document_code_action_async(
                t.CodeActionParams(
                    text_document=t.TextDocumentIdentifier(uri=uri),
                    range=diagnostic.range,
                    context=t.CodeActionContext(diagnostics=[diagnostic]),
                )
            ),
            TIMEOUT,
        )
        return [a for a in result or [] if isinstance(a, t.CodeAction)]


def run_session(
    root: Path, scenario: Callable[[Session], Awaitable[None]], server_args: tuple[str, ...] = ()
) -> None:
    """Start ``upsertsink server`` (with ``server_args``) in ``root``, initialize it as an editor would, run
    the scenario, shut the server down and check that it exited cleanly."""

    async def main() -> None:
        client = LanguageClient("upsertsink-tests", "1")
        session = Session(client)

        @client.feature(t.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)
        async def on_diagnostics(params: t.PublishDiagnosticsParams) -> None:
            async with session.changed:
                session.published.setdefault(params.uri, []).append(params)
                session.changed.notify_all()

        @client.feature(t.WINDOW_SHOW_MESSAGE)
        def on_message(params: t.ShowMessageParams) -> None:
            session.messages.append(params.message)

        await client.start_io(str(UPSERTSINK), "server", *server_args, cwd=str(root))
        try:
            result = await asyncio.wait_for(
                client.initialize_async(
                    t.InitializeParams(
                        process_id=os.getpid(),
                        root_uri=from_fs_path(str(root)),
                        capabilities=t.ClientCapabilities(
                            notebook_document=t.NotebookDocumentClientCapabilities(
                                synchronization=t.NotebookDocumentSyncClientCapabilities()
                            ),
                            text_document=t.TextDocumentClientCapabilities(
                                synchronization=t.TextDocumentSyncClientCapabilities(did_save=True),
                            ),
                        ),
                    )
                ),
                TIMEOUT,
            )
            assert result.server_info is not None and result.server_info.name == "upsertsink"
            caps = result.capabilities
            assert caps.code_action_provider is not None
            assert caps.notebook_document_sync is not None
            assert caps.hover_provider
            session.capabilities = caps
            client.initialized(t.InitializedParams())
            await scenario(session)
            await asyncio.wait_for(client.shutdown_async(None), TIMEOUT)
            client.exit(None)
            server = client._server
            assert server is not None
            assert await asyncio.wait_for(server.wait(), TIMEOUT) == 0
        finally:
            server = client._server
            if server is not None and server.returncode is None:  # a failed scenario: do not wait for it
                server.kill()
            await client.stop()

    asyncio.run(main())


def project(tmp_path: Path, table: str = "") -> Path:
    root = tmp_path / "project"
    (root / "jobs").mkdir(parents=True)
    (root / "pyproject.toml").write_text(f"[tool.upsertsink.lint]\n{table}")
    return root


def uri_of(path: Path) -> str:
    uri = from_fs_path(str(path))
    assert uri is not None
    return uri


def summary(diags: list[t.Diagnostic]) -> list[tuple]:
    return [(d.range.start.line, d.range.start.character, d.code, d.severity, d.source) for d in diags]


def apply_edit(text: str, edit: t.TextEdit) -> str:
    """Apply one LSP text edit (positions in UTF-16 units; the texts here are ASCII) to ``text``."""
    lines = text.splitlines(keepends=True)

    def offset(p: t.Position) -> int:
        return sum(len(x) for x in lines[: p.line]) + p.character

    return text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]


def only_edit(action: t.CodeAction, uri: str) -> t.TextEdit:
    assert action.edit is not None and action.edit.changes is not None
    assert list(action.edit.changes) == [uri]
    (edit,) = action.edit.changes[uri]
    return edit



async def hover(s: Session, uri: str, line: int, character: int) -> str | None:
    """The Markdown the server shows on hover at a position, if any."""
    params = t.HoverParams(text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line, character))
    found = await asyncio.wait_for(s.client.text_document_hover_async(params), TIMEOUT)
    if found is None:
        return None
    assert isinstance(found.contents, t.MarkupContent) and found.contents.kind == t.MarkupKind.Markdown
    return found.contents.value

@needs_pygls
def test_diagnostics_on_open_then_cleared_by_a_change(tmp_path: Path) -> None:
    root = project(tmp_path)
    job = root / "jobs" / "orders.py"
    job.write_text(UUID_JOB)
    uri = uri_of(job)

    async def scenario(s: Session) -> None:
        s.open(uri, UUID_JOB)
        first = await s.diagnostics(uri)
        assert summary(first) == [
            (5, 68, "ND003", t.DiagnosticSeverity.Error, "upsertsink"),
            (6, 42, "ND001", t.DiagnosticSeverity.Warning, "upsertsink"),
        ]
        uuid = first[0]
        assert (uuid.range.end.line, uuid.range.end.character) == (5, 80)  # `uuid.uuid4()`
        assert "random UUID" in uuid.message and "merge key `order_id`" in uuid.message
        assert uuid.code_description is not None
        assert uuid.code_description.href.endswith("docs/rules.md#nd003-random-uuid")
        # the fix, sent as an incremental change of lines 6 and 7
        s.client.text_document_did_change(
            t.DidChangeTextDocumentParams(
                text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[
                    t.TextDocumentContentChangePartial(
                        range=t.Range(
                            start=t.Position(line=5, character=0), end=t.Position(line=7, character=0)
                        ),
                        text="".join(FIXED_JOB.splitlines(keepends=True)[5:7]),
                    )
                ],
            )
        )
        assert await s.diagnostics(uri, 2) == []
        assert s.published[uri][1].version == 2
        # breaking it again (a full-text change) brings the error back
        s.client.text_document_did_change(
            t.DidChangeTextDocumentParams(
                text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=3),
                content_changes=[t.TextDocumentContentChangeWholeDocument(text=UUID_JOB)],
            )
        )
        assert [d.code for d in await s.diagnostics(uri, 3)] == ["ND003", "ND001"]

    run_session(root, scenario)


@needs_pygls
def test_positions_are_utf16_code_units(tmp_path: Path) -> None:
    """The linter counts code points; LSP's default position encoding is UTF-16 (an emoji is two units)."""
    root = project(tmp_path)
    job = root / "jobs" / "orders.py"
    text = UUID_JOB.replace(
        'orders = spark.table("raw.orders")', 'label = "\U0001f600"; orders = spark.table("raw.orders")'
    )
    job.write_text(text, encoding="utf-8")
    uri = uri_of(job)

    async def scenario(s: Session) -> None:
        s.open(uri, text)
        uuid = (await s.diagnostics(uri))[0]
        line = text.splitlines()[5]
        start = line.index("uuid.uuid4()")  # in code points
        assert uuid.code == "ND003"
        assert (uuid.range.start.character, uuid.range.end.character) == (
            start + 1,
            start + 1 + len("uuid.uuid4()"),
        )

    run_session(root, scenario)


@needs_pygls
def test_noqa_code_action_edits_the_findings_line(tmp_path: Path) -> None:
    root = project(tmp_path)
    job = root / "jobs" / "orders.py"
    job.write_text(UUID_JOB)
    uri = uri_of(job)

    async def scenario(s: Session) -> None:
        s.open(uri, UUID_JOB)
        uuid = (await s.diagnostics(uri))[0]
        actions = await s.actions(uri, uuid)
        noqa = [a for a in actions if "noqa" in a.title]
        assert [a.title for a in noqa] == ["Add `# noqa: ND003` for this line"]
        assert noqa[0].kind == t.CodeActionKind.QuickFix
        edit = only_edit(noqa[0], uri)
        assert (edit.range.start.line, edit.range.end.line) == (5, 6)  # just the finding's line
        fixed = apply_edit(UUID_JOB, edit)
        expected = UUID_JOB.replace("(str(uuid.uuid4())))\n", "(str(uuid.uuid4())))  # noqa: ND003\n")
        assert fixed == expected
        # the client applies it: the finding goes, the other one stays
        s.client.text_document_did_change(
            t.DidChangeTextDocumentParams(
                text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[t.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text)],
            )
        )
        assert [d.code for d in await s.diagnostics(uri, 2)] == ["ND001"]

    run_session(root, scenario)


@needs_pygls
def test_safe_fix_code_action_and_fix_all(tmp_path: Path) -> None:
    root = project(tmp_path)
    job = root / "jobs" / "stream.py"
    job.write_text(STREAM_JOB)
    uri = uri_of(job)
    expected = STREAM_JOB.replace(
        "batch_df.write.format",
        'batch_df.write.option("txnAppId", "jobs.stream.write_batch").option("txnVersion", epoch_id).format',
    )

    async def scenario(s: Session) -> None:
        s.open(uri, STREAM_JOB)
        (diag,) = await s.diagnostics(uri)
        assert diag.code == "ND011" and diag.severity == t.DiagnosticSeverity.Error
        actions = await s.actions(uri, diag)
        fixes = [a for a in actions if a.title.startswith("Fix ND011")]
        assert len(fixes) == 1 and fixes[0].is_preferred and fixes[0].kind == t.CodeActionKind.QuickFix
        edit = only_edit(fixes[0], uri)
        assert (edit.range.start.line, edit.range.end.line) == (1, 2)
        assert apply_edit(STREAM_JOB, edit) == expected
        fix_all = [a for a in actions if a.kind == "source.fixAll.upsertsink"]
        assert [a.title for a in fix_all] == ["upsertsink: apply 1 safe fix"]
        assert apply_edit(STREAM_JOB, only_edit(fix_all[0], uri)) == expected
        # asked for source.fixAll only, over the whole file: no quick fixes
        only = await asyncio.wait_for(
            s.client.text_document_code_action_async(
                t.CodeActionParams(
                    text_document=t.TextDocumentIdentifier(uri=uri),
                    range=t.Range(start=t.Position(line=0, character=0), end=t.Position(line=5, character=0)),
                    context=t.CodeActionContext(diagnostics=[diag], only=["source.fixAll"]),
                )
            ),
            TIMEOUT,
        )
        assert [a.kind for a in only or []] == ["source.fixAll.upsertsink"]
        # applied by the client: the finding is gone
        s.client.text_document_did_change(
            t.DidChangeTextDocumentParams(
                text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[t.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text)],
            )
        )
        assert await s.diagnostics(uri, 2) == []

    run_session(root, scenario)


@needs_pygls
def test_config_ignore_and_exclude_are_respected(tmp_path: Path) -> None:
    root = project(tmp_path, 'ignore = ["ND003"]\nexclude = ["jobs/generated_*"]\n')
    job = root / "jobs" / "orders.py"
    job.write_text(UUID_JOB)
    excluded = root / "jobs" / "generated_orders.py"
    excluded.write_text(UUID_JOB)
    # a project without the table next to it: defaults (everything reported)
    other = tmp_path / "other"
    other.mkdir()
    (other / "pyproject.toml").write_text('[project]\nname = "other"\n')
    unconfigured = other / "orders.py"
    unconfigured.write_text(UUID_JOB)

    async def scenario(s: Session) -> None:
        s.open(uri_of(job), UUID_JOB)
        assert [d.code for d in await s.diagnostics(uri_of(job))] == ["ND001"]
        s.open(uri_of(excluded), UUID_JOB)
        assert await s.diagnostics(uri_of(excluded)) == []
        s.open(uri_of(unconfigured), UUID_JOB)
        assert [d.code for d in await s.diagnostics(uri_of(unconfigured))] == ["ND003", "ND001"]

    run_session(root, scenario)


@needs_pygls
def test_keys_from_config_and_a_bad_config_is_shown(tmp_path: Path) -> None:
    root = project(tmp_path, 'keys = ["ingested_at"]\n')
    job = root / "jobs" / "orders.py"
    job.write_text(UUID_JOB)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "pyproject.toml").write_text('[tool.upsertsink.lint]\nkeyz = ["x"]\n')
    bad = broken / "job.py"
    bad.write_text(UUID_JOB)

    async def scenario(s: Session) -> None:
        s.open(uri_of(job), UUID_JOB)
        diags = await s.diagnostics(uri_of(job))
        # ingested_at is a key by the config: the wall clock reaching it is an error
        assert [(d.code, d.severity) for d in diags] == [
            ("ND003", t.DiagnosticSeverity.Error),
            ("ND001", t.DiagnosticSeverity.Error),
        ]
        s.open(uri_of(bad), UUID_JOB)
        assert await s.diagnostics(uri_of(bad)) == []
        assert len(s.messages) == 1 and "unknown setting(s) keyz" in s.messages[0]

    run_session(root, scenario)


HELPER = """\
import uuid


def new_id():
    return str(uuid.uuid4())
"""
USES_HELPER = """\
from pyspark.sql import functions as F

from jobs.helpers import new_id
from upsertsink import UpsertSink

orders = spark.table("raw.orders").withColumn("order_id", F.lit(new_id()))
UpsertSink("/lake/orders", keys=["order_id"]).write(orders)
"""


@needs_pygls
def test_values_are_followed_into_imported_project_modules(tmp_path: Path) -> None:
    """ND003 from jobs/helpers.py's uuid4(), in the unsaved buffer too; a helper fixed and saved re-lints
    the open job; per-file-ignores apply to the document."""
    root = project(tmp_path, '[tool.upsertsink.lint.per-file-ignores]\n"jobs/legacy_*" = ["ND003"]\n')
    (root / "jobs" / "__init__.py").write_text("")
    helpers = root / "jobs" / "helpers.py"
    helpers.write_text(HELPER)
    job = root / "jobs" / "uses_helper.py"
    job.write_text(USES_HELPER)
    legacy = root / "jobs" / "legacy_orders.py"
    legacy.write_text(USES_HELPER)
    uri = uri_of(job)
    edited = "# edited\n" + USES_HELPER

    async def scenario(s: Session) -> None:
        s.open(uri, USES_HELPER)
        diags = await s.diagnostics(uri)
        assert [(d.code, d.range.start.line, d.severity) for d in diags] == [
            ("ND003", 5, t.DiagnosticSeverity.Error)
        ]
        assert diags[0].message.startswith("`uuid.uuid4()` inside `new_id` (jobs/helpers.py:5)")
        # an unsaved edit: still followed into the helper, at the moved line
        s.client.text_document_did_change(
            t.DidChangeTextDocumentParams(
                text_document=t.VersionedTextDocumentIdentifier(uri=uri, version=2),
                content_changes=[t.TextDocumentContentChangeWholeDocument(text=edited)],
            )
        )
        assert [(d.code, d.range.start.line) for d in await s.diagnostics(uri, 2)] == [("ND003", 6)]
        # the helper, opened, made deterministic and saved: the open job is linted again
        fixed_helper = HELPER.replace("str(uuid.uuid4())", "str(uuid.uuid5(uuid.NAMESPACE_URL, 'x'))")
        s.open(uri_of(helpers), HELPER)
        assert [d.code for d in await s.diagnostics(uri_of(helpers))] == []  # no key in the helper itself
        s.client.text_document_did_change(
            t.DidChangeTextDocumentParams(
                text_document=t.VersionedTextDocumentIdentifier(uri=uri_of(helpers), version=2),
                content_changes=[t.TextDocumentContentChangeWholeDocument(text=fixed_helper)],
            )
        )
        await s.diagnostics(uri_of(helpers), 2)
        assert len(s.published[uri]) == 2  # an unsaved helper changes nothing for the job
        helpers.write_text(fixed_helper)
        s.client.text_document_did_save(
            t.DidSaveTextDocumentParams(text_document=t.TextDocumentIdentifier(uri=uri_of(helpers)))
        )
        assert await s.diagnostics(uri, 3) == []
        helpers.write_text(HELPER)
        s.open(uri_of(legacy), USES_HELPER)
        assert await s.diagnostics(uri_of(legacy)) == []

    run_session(root, scenario)


CELLS = [  # (code cell?, language, text)
    (False, "markdown", "# Orders\n"),
    (True, "python", "import uuid\n\nfrom pyspark.sql import functions as F\n"),
    (
        True,
        "python",
        '%pip install x\norders = spark.table("raw.orders").withColumn("order_id", F.lit(str(uuid.uuid4())))',
    ),
    (True, "sql", "INSERT INTO dw.loaded SELECT now() AS loaded_at FROM raw.orders"),
    (True, "python", 'UpsertSink("/lake/orders", keys=["order_id"]).write(orders)\n'),
]


@needs_pygls
def test_notebook_document_gets_diagnostics_per_cell(tmp_path: Path) -> None:
    root = project(tmp_path)
    nb_path = root / "jobs" / "orders.ipynb"
    nb_uri = uri_of(nb_path)
    cell_uris = [f"vscode-notebook-cell:{nb_path}#cell{i}" for i in range(len(CELLS))]

    async def scenario(s: Session) -> None:
        s.client.notebook_document_did_open(
            t.DidOpenNotebookDocumentParams(
                notebook_document=t.NotebookDocument(
                    uri=nb_uri,
                    notebook_type="jupyter-notebook",
                    version=1,
                    cells=[
                        t.NotebookCell(
                            kind=t.NotebookCellKind.Code if code else t.NotebookCellKind.Markup, document=u
                        )
                        for (code, _, _), u in zip(CELLS, cell_uris, strict=True)
                    ],
                ),
                cell_text_documents=[
                    t.TextDocumentItem(uri=u, language_id=lang, version=1, text=text)
                    for (_, lang, text), u in zip(CELLS, cell_uris, strict=True)
                ],
            )
        )
        per_cell = [await s.diagnostics(u) for u in cell_uris]
        assert [[d.code for d in ds] for ds in per_cell] == [[], [], ["ND003"], ["ND001"], []]
        uuid = per_cell[2][0]
        assert (uuid.range.start.line, uuid.range.start.character) == (1, 68)  # line 2 of its cell
        assert uuid.severity == t.DiagnosticSeverity.Error
        sql = per_cell[3][0]
        assert (sql.range.start.line, sql.range.start.character) == (0, 29)  # now() in the SQL cell
        # the uuid's suppression comment: an edit of that cell only
        actions = await s.actions(cell_uris[2], uuid)
        (noqa,) = [a for a in actions if "noqa" in a.title]
        edit = only_edit(noqa, cell_uris[2])
        assert apply_edit(CELLS[2][2], edit) == CELLS[2][2] + "  # noqa: ND003"
        # the user fixes cell 3's text: its diagnostics clear, the SQL cell's stay
        fixed = CELLS[2][2].replace("str(uuid.uuid4())", 'F.col("source_id")')
        s.client.notebook_document_did_change(
            t.DidChangeNotebookDocumentParams(
                notebook_document=t.VersionedNotebookDocumentIdentifier(uri=nb_uri, version=2),
                change=t.NotebookDocumentChangeEvent(
                    cells=t.NotebookDocumentCellChanges(
                        text_content=[
                            t.NotebookDocumentCellContentChanges(
                                document=t.VersionedTextDocumentIdentifier(uri=cell_uris[2], version=2),
                                changes=[t.TextDocumentContentChangeWholeDocument(text=fixed)],
                            )
                        ]
                    )
                ),
            )
        )
        assert await s.diagnostics(cell_uris[2], 2) == []
        assert [d.code for d in await s.diagnostics(cell_uris[3], 2)] == ["ND001"]
        # closing the notebook clears every cell
        s.client.notebook_document_did_close(
            t.DidCloseNotebookDocumentParams(
                notebook_document=t.NotebookDocumentIdentifier(uri=nb_uri),
                cell_text_documents=[t.TextDocumentIdentifier(uri=u) for u in cell_uris],
            )
        )
        assert await s.diagnostics(cell_uris[3], 3) == []

    run_session(root, scenario)


_HIDE_PYGLS = textwrap.dedent(
    """\
    import sys

    class HidePygls:
        def find_spec(self, name, path=None, target=None):
            if name == "pygls" or name.startswith("pygls."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, HidePygls())
    from upsertsink.cli import main
    main(["server"], prog_name="upsertsink")
    """
)


def test_without_pygls_the_command_names_the_extra() -> None:
    """The real command in an interpreter where ``import pygls`` fails (an import hook hides it)."""
    proc = subprocess.run(
        [sys.executable, "-c", _HIDE_PYGLS],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [
        'upsertsink: error: the language server needs pygls: pip install "upsertsink[server]"'
    ]


@needs_pygls
def test_hover_on_a_rule_code_shows_the_rules_documentation(tmp_path: Path) -> None:
    root = project(tmp_path)
    job = root / "jobs" / "orders.py"
    text = UUID_JOB.replace("F.current_timestamp())", "F.current_timestamp())  # noqa: ND001")
    job.write_text(text)
    uri = uri_of(job)
    noqa_line = next(i for i, line in enumerate(text.splitlines()) if "noqa" in line)
    code_at = text.splitlines()[noqa_line].index("ND001") + 2

    async def scenario(s: Session) -> None:
        s.open(uri, text)
        [uuid] = await s.diagnostics(uri)  # the clock is silenced by its noqa comment
        on_noqa = await hover(s, uri, noqa_line, code_at)
        assert on_noqa is not None and on_noqa.startswith("## ND001 wall-clock")
        assert "<!--" not in on_noqa and "**How to fix it.**" in on_noqa
        at = uuid.range.start
        on_finding = await hover(s, uri, at.line, at.character + 1)
        assert on_finding is not None and on_finding.startswith("## ND003 random-uuid")
        assert await hover(s, uri, 0, 0) is None  # `import uuid`: no code, no finding

    run_session(root, scenario)


@needs_pygls
def test_workspace_diagnostics_lint_the_project_as_the_cli_does(tmp_path: Path) -> None:
    root = project(tmp_path)
    (root / "jobs" / "__init__.py").write_text("")
    (root / "jobs" / "helpers.py").write_text(
        "import uuid\n\nfrom pyspark.sql import functions as F\n\n\n"
        "def new_id():\n    return F.lit(str(uuid.uuid4()))\n"
    )
    (root / "jobs" / "load.py").write_text(
        "from jobs.helpers import new_id\nfrom upsertsink import UpsertSink\n\n"
        'UpsertSink("/lake/t", keys=["id"]).write(df.withColumn("id", new_id()))\n'
    )
    (root / "jobs" / "clean.py").write_text("print('nothing to see')\n")
    (root / "jobs" / "open.py").write_text(STREAM_JOB)

    async def scenario(s: Session) -> None:
        caps = s.capabilities
        assert caps is not None and isinstance(caps.diagnostic_provider, t.DiagnosticOptions)
        assert caps.diagnostic_provider.workspace_diagnostics
        open_uri = uri_of(root / "jobs" / "open.py")
        s.open(open_uri, STREAM_JOB)
        pulled = await asyncio.wait_for(
            s.client.text_document_diagnostic_async(
                t.DocumentDiagnosticParams(text_document=t.TextDocumentIdentifier(uri=open_uri))
            ),
            TIMEOUT,
        )
        assert [d.code for d in pulled.items] == ["ND011"]
        report = await asyncio.wait_for(
            s.client.workspace_diagnostic_async(t.WorkspaceDiagnosticParams(previous_result_ids=[])), TIMEOUT
        )
        by_uri = {item.uri: [(d.range.start.line, d.code) for d in item.items] for item in report.items}
        # the helper's uuid reaches the key through the other file, as `upsertsink lint` reports it
        assert by_uri == {uri_of(root / "jobs" / "load.py"): [(3, "ND003")]}
        assert open_uri not in by_uri  # an open document is reported from its buffer, when pulled
        assert s.published.get(open_uri) is None  # pulled, never pushed

    run_session(root, scenario, ("--workspace-diagnostics",))
