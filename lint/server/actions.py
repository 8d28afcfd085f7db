"""The server's code actions: a finding's safe fix as a quick fix (the edit libcst makes, as ``--fix`` would),
``# noqa: CODE`` for a finding's line (where ``--add-noqa`` would put it, cells included), and
``source.fixAll.upsertsink`` for every safe fix of a file."""

from __future__ import annotations

import json
from typing import Any

from lsprotocol import types as t
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

from ..check.checker import Finding
from .documents import changed_span, uri_path
from .language_server import Published, UpsertsinkServer

FIX_ALL_KIND = "source.fixAll.upsertsink"


def code_actions(ls: UpsertsinkServer, params: t.CodeActionParams) -> list[t.CodeAction]:
    """The actions the request asks for (``only``) on the findings published for the document that overlap
    its range (quick fixes) or on all of them (fix all)."""
    uri = params.text_document.uri
    entries = ls.published.get(uri, [])
    wanted = params.context.only
    out: list[t.CodeAction] = []
    quick = _kind_wanted(t.CodeActionKind.QuickFix.value, wanted)
    if quick:
        for entry in entries:
            if not _overlaps(entry.diagnostic.range, params.range):
                continue
            fix = fix_action(ls, uri, entry)
            if fix is not None:
                out.append(fix)
            noqa = noqa_action(ls, uri, entry)
            if noqa is not None:
                out.append(noqa)
    if _kind_wanted(FIX_ALL_KIND, wanted):
        fix_all = fix_all_action(ls, uri, entries)
        if fix_all is not None:
            out.append(fix_all)
    return out


def _edit(ls: UpsertsinkServer, uri: str, before: str, after: str) -> t.WorkspaceEdit:
    doc = ls.workspace.get_text_document(uri)
    start, end, new = changed_span(before, after)
    server_range = ServerTextRange(
        start=_server_position(before, start), end=_server_position(before, end)
    )
    edit = t.TextEdit(range=doc.range_to_client_units(server_range), new_text=new)
    return t.WorkspaceEdit(changes={uri: [edit]})


def _fixed(
    ls: UpsertsinkServer, uri: str, findings: list[Finding]
) -> tuple[str, str, list[Finding]] | None:
    from ..command.rewrite import fix_file, module_name

    path = uri_path(uri)
    settings = ls.settings(path)
    if settings is None:
        return None
    doc = ls.workspace.get_text_document(uri)
    module = module_name(path, settings.root) if path is not None else "untitled"
    edit = fix_file(uri, doc.source, findings, module, unsafe=False)
    if not edit.changed or not edit.applied:
        return None
    return doc.source, edit.after, edit.applied


def fix_action(ls: UpsertsinkServer, uri: str, entry: Published) -> t.CodeAction | None:
    spec = entry.finding.fix_spec
    if spec is None or spec.applicability != "safe" or entry.notebook_uri is not None:
        return None
    fixed = _fixed(ls, uri, [entry.finding])
    if fixed is None:
        return None
    before, after, _ = fixed
    return t.CodeAction(
        title=f"Fix {entry.finding.rule}: {spec.message}",
        kind=t.CodeActionKind.QuickFix,
        diagnostics=[entry.diagnostic],
        edit=_edit(ls, uri, before, after),
        is_preferred=True,
    )


def fix_all_action(ls: UpsertsinkServer, uri: str, entries: list[Published]) -> t.CodeAction | None:
    safe = [
        e.finding
        for e in entries
        if e.notebook_uri is None
        and (s := e.finding.fix_spec) is not None
        and s.applicability == "safe"
    ]
    if not safe:
        return None
    fixed = _fixed(ls, uri, safe)
    if fixed is None:
        return None
    before, after, applied = fixed
    return t.CodeAction(
        title=f"upsertsink: apply {len(applied)} safe fix{'es' if len(applied) != 1 else ''}",
        kind=FIX_ALL_KIND,
        edit=_edit(ls, uri, before, after),
    )


def noqa_action(ls: UpsertsinkServer, uri: str, entry: Published) -> t.CodeAction | None:
    from ..command.rewrite import add_noqa, add_noqa_notebook

    f = entry.finding
    if f.rule == "ND000":
        return None
    if entry.notebook_uri is None:
        before = ls.workspace.get_text_document(uri).source
        edit, count = add_noqa(uri, before, [f])
        after = edit.after
    else:
        notebook = ls.workspace.get_notebook_document(notebook_uri=entry.notebook_uri)
        if notebook is None:
            return None
        nb = ls.notebook_text(notebook)
        edit, count = add_noqa_notebook("notebook.ipynb", nb.json, [f])
        if not count or f.cell is None or nb.cell_uris[f.cell - 1] != uri:
            return None
        before = ls.workspace.get_text_document(uri).source
        after = json.loads(edit.after)["cells"][f.cell - 1]["source"]
    if not count or after == before:
        return None
    return t.CodeAction(
        title=f"Add `# noqa: {f.rule}` for this line",
        kind=t.CodeActionKind.QuickFix,
        diagnostics=[entry.diagnostic],
        edit=_edit(ls, uri, before, after),
    )


def _server_position(text: str, offset: int) -> Any:
    """(line, column in code points) of an offset of ``text``, as pygls' ServerTextPosition."""
    lines = text[:offset].splitlines(keepends=True)
    if not lines:
        return ServerTextPosition(0, 0)
    if lines[-1].endswith(("\n", "\r")):
        return ServerTextPosition(len(lines), 0)
    return ServerTextPosition(len(lines) - 1, len(lines[-1]))


def _overlaps(a: t.Range, b: t.Range) -> bool:
    def key(p: t.Position) -> tuple[int, int]:
        return (p.line, p.character)

    return key(a.start) <= key(b.end) and key(b.start) <= key(a.end)


def _kind_wanted(kind: str, only: Any) -> bool:
    """Does the request's ``only`` list (None: everything) ask for actions of ``kind``?"""
    if not only:
        return True
    asked = [str(getattr(o, "value", o)) for o in only]
    return any(kind == a or kind.startswith(f"{a}.") for a in asked)
