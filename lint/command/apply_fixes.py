"""Applying fixes and ``# noqa`` comments to the files of a lint run (``--fix``, ``--diff``,
``--add-noqa``): reading and writing files with their own encoding, BOM and line endings. The rewriting
itself is :mod:`upsertsink.lint.command.rewrite`."""

from __future__ import annotations

from pathlib import Path

from ..base.structs import field, struct
from ..check.checker import Finding, fixable
from ..run.config import Settings
from ..run.runner import RunResult
from .rewrite import FileEdit, add_noqa, add_noqa_notebook, fix_file, module_name, read_source, write_source


@struct
class FixOutcome:
    """What a fix run did (or, with ``--diff``, would do)."""

    edits: list[FileEdit] = field(default_factory=list)
    skipped: list[tuple[Finding, str]] = field(default_factory=list)
    unsafe_left: int = 0  # fixes that --unsafe-fixes would also apply

    @property
    def fixed(self) -> int:
        return sum(len(e.applied) for e in self.edits if e.changed)

    @property
    def files(self) -> int:
        return sum(1 for e in self.edits if e.changed)

    def summary(self, dry_run: bool) -> str:
        """One line for stderr: how many findings were (or would be) fixed, in how many files."""
        n, files = self.fixed, self.files
        verb = "Would fix" if dry_run else "Fixed"
        text = f"{verb} {n} finding{'s' if n != 1 else ''} in {files} file{'s' if files != 1 else ''}."
        if self.unsafe_left:
            text += f" {self.unsafe_left} more fixable with --unsafe-fixes."
        for f, why in self.skipped:
            text += f"\n{f.path}:{f.line}:{f.column}: {f.rule} not fixed ({why})"
        return text


def _by_path(findings: list[Finding]) -> dict[str, list[Finding]]:
    out: dict[str, list[Finding]] = {}
    for f in findings:
        out.setdefault(f.path, []).append(f)
    return out


def apply_fixes(result: RunResult, settings: Settings, unsafe: bool, write: bool) -> FixOutcome:
    """Fix the findings of a run: safe fixes, and unsafe ones with ``unsafe``; write the files unless
    ``write`` is false (``--diff``)."""
    outcome = FixOutcome()
    outcome.unsafe_left = (
        0 if unsafe else len(fixable(result.findings, True)) - len(fixable(result.findings, False))
    )
    for shown, findings in _by_path(result.findings).items():
        if not fixable(findings, unsafe):
            continue
        path = Path(shown)
        try:
            text, encoding, bom = read_source(path)
        except (OSError, UnicodeDecodeError, LookupError, SyntaxError) as exc:
            outcome.skipped += [(f, f"cannot read the file: {exc}") for f in fixable(findings, unsafe)]
            continue
        edit = fix_file(shown, text, findings, module_name(path, settings.root), unsafe)
        outcome.skipped += edit.skipped
        outcome.edits.append(edit)
        if write and edit.changed:
            write_source(path, edit.after, encoding, bom)
    return outcome


def _where(f: Finding) -> str:
    return f"{f.path}:cell {f.cell}:{f.line}" if f.cell is not None else f"{f.path}:{f.line}"


def add_noqa_to_files(result: RunResult) -> tuple[int, int, list[tuple[str, str]]]:
    """Insert ``# noqa: CODE`` comments for every finding of a run: (directives added, files changed,
    findings left alone with the reason)."""
    added = files = 0
    skipped: list[tuple[str, str]] = []
    for shown, findings in _by_path(result.findings).items():
        path = Path(shown)
        try:
            if shown.endswith(".ipynb"):
                encoding, bom = "utf-8", False
                raw = path.read_bytes()
                bom = raw.startswith(b"\xef\xbb\xbf")
                edit, count = add_noqa_notebook(shown, raw.decode("utf-8-sig"), findings)
            else:
                text, encoding, bom = read_source(path)
                edit, count = add_noqa(shown, text, findings)
        except (OSError, UnicodeDecodeError, LookupError, SyntaxError) as exc:
            skipped += [(_where(f), f"cannot read the file: {exc}") for f in findings]
            continue
        skipped += [(_where(f), why) for f, why in edit.skipped]
        if edit.changed:
            write_source(path, edit.after, encoding, bom)
            added += count
            files += 1
    return added, files, skipped
