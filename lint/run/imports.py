"""The files of a run and the files they import: the linted files by real path (resolving imports,
``%run`` and star imports between them), and the project's modules outside them, found on disk as Python
would find them.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from ..base.structs import struct
from ..check.checker import FileResult
from . import runrecord
from .config import Settings
from .discovery import default_excluded, rel_path


@struct
class RunFile:
    """A file of the run (a linted file, or a project module read for what it exports): its path as given, as
    shown and resolved, its content (read when first needed), its content digest and its result."""

    path: Path
    shown: str
    real: Path
    raw: bytes | None  # None: not read (the cache knew the file by its stat); read on first use of data
    digest: str
    result: FileResult | None = None
    ext: str = ""
    summarize: bool = False  # other files use it: compute its summary whenever it is analyzed
    reported: bool = True  # False: a project module read only for what it exports to the files linted
    size: int = 0  # its size in bytes (a file not read yet is read by the worker that analyzes it)

    @property
    def data(self) -> bytes:
        if self.raw is None:
            try:
                self.raw = self.path.read_bytes()
            except OSError:  # gone since it was listed: nothing to read for what it exports
                self.raw = b""
        return self.raw


class Tree:
    """The linted files by real path, for resolving imports, ``%run`` and star imports between them."""

    def __init__(self, files: list[RunFile]) -> None:
        self.by_real = {f.real: f for f in files}
        self._by_str = {
            str(real): f for real, f in self.by_real.items()
        }  # module lookups use strings: cheaper
        self._resolved: dict[tuple[Path, str], RunFile | None] = {}
        self.names: set[str] = set()
        for f in files:
            self.names.update(f.real.parts)
            self.names.add(f.real.stem)

    def resolve(self, importer: RunFile, spec: str) -> RunFile | None:
        """The linted file an import spec (``helpers``, ``..util``, ``%run:./setup``) names, if any."""
        key = (importer.real, spec)
        if key not in self._resolved:
            self._resolved[key] = self._resolve(importer, spec)
        return self._resolved[key]

    def _resolve(self, importer: RunFile, spec: str) -> RunFile | None:
        if spec.startswith("%run:"):
            target = spec[5:].strip()
            candidates = []
            if not target.startswith("/"):
                candidates.append(importer.real.parent / target)
            for c in candidates:
                for suffix in ("", ".py", ".ipynb"):
                    found = self.by_real.get(Path(os.path.normpath(str(c) + suffix)))
                    if found is not None:
                        return found
            # a workspace path (/Repos/team/project/setup): match the linted file with the same last parts
            tail = tuple(p for p in Path(target).parts if p not in ("/", ".", ".."))[-2:]
            for real, f in self.by_real.items():
                stemmed = (*real.parent.parts, real.stem)
                if tail and stemmed[-len(tail) :] == tail:
                    return f
            return None
        level = len(spec) - len(spec.lstrip("."))
        mod = spec[level:]
        parts = mod.split(".") if mod else []
        if parts and parts[0] not in self.names:
            return None
        parts = [p for p in parts if p]  # as Path.joinpath does
        folder = str(importer.real.parent)
        if level:
            for _ in range(level - 1):
                folder = os.path.dirname(folder)
            folders = [folder]
        else:
            folders = [folder]
            while os.path.dirname(folder) != folder:
                folder = os.path.dirname(folder)
                folders.append(folder)
        for folder in folders:
            p = os.path.join(folder, *parts)
            for cand in (p + ".py", os.path.join(p, "__init__.py"), p + ".ipynb"):
                found = self._by_str.get(cand)
                if found is not None and found is not importer:
                    return found
        return None

    def targets(self, f: RunFile) -> list[RunFile]:
        """The linted files ``f`` looked up names in."""
        specs = {want.rpartition(".")[0] for want in (f.result.imports if f.result is not None else ())}
        return [t for t in (self.resolve(f, spec) for spec in specs if spec) if t is not None]

    def externals(self, f: RunFile) -> dict[str, dict]:
        """Summaries of the linted files that define names ``f`` looked up: import spec -> summary."""
        out: dict[str, dict] = {}
        if f.result is None:
            return out
        for want in f.result.imports:
            spec, _, name = want.rpartition(".")
            if not spec or spec in out:
                continue
            target = self.resolve(f, spec)
            if target is None or target.result is None or not target.result.summary:
                continue
            summary = target.result.summary
            if any(name in summary.get(kind, {}) for kind in ("funcs", "values", "widgets", "imports")):
                # (widgets: those a %run notebook defines; imports: the names it imports, which it brings)
                out[spec] = {**summary, "path": target.shown}
        return out


_IMPORT_LINE = re.compile(
    rb"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import\b|import[ \t]+([\w.]+))", re.MULTILINE
)


def module_root(settings: Settings, files: list[Path]) -> Path:
    """The folder project modules are looked up in: the config's folder; without a config the current
    folder when it holds every linted file, else the files' common parent."""
    if settings.config_path is not None or not files:
        return settings.root.resolve()
    cwd = Path.cwd().resolve()
    if all(rel_path(f, cwd) is not None for f in files):
        return cwd
    return Path(os.path.commonpath([str(f.parent) for f in files]))


class ProjectModules:
    """Python modules and notebooks of the project (under its root, outside the tool folders) that an
    import spec or ``%run`` names, found on disk like Python would find them from the importing file."""

    def __init__(self, root: Path, linted: set[Path]) -> None:
        self.root = root
        self.linted = linted
        self._found: dict[tuple[Path, str], Path | None] = {}
        self._listed: dict[Path, set[str]] = {}

    def find(self, importer: Path, spec: str) -> Path | None:
        key = (importer.parent, spec)
        if key not in self._found:
            self._found[key] = self._find(importer, spec)
        return self._found[key]

    def _find(self, importer: Path, spec: str) -> Path | None:
        if spec.startswith("%run:"):
            target = spec[5:].strip()
            if target.startswith("/"):
                return None
            base = importer.parent / target
            candidates = [Path(os.path.normpath(str(base) + sfx)) for sfx in ("", ".py", ".ipynb")]
        else:
            level = len(spec) - len(spec.lstrip("."))
            parts = [p for p in spec[level:].split(".") if p]
            if not level and (not parts or parts[0] in sys.stdlib_module_names):
                return None
            if level:
                base = importer.parent
                for _ in range(level - 1):
                    base = base.parent
                folders = [base]
            else:
                folders = [importer.parent, *importer.parent.parents]
            candidates = []
            for folder in folders:
                if rel_path(folder, self.root) is None:
                    break
                names = self._entries(folder)
                if parts:
                    heads = (parts[0], parts[0] + ".py", parts[0] + ".ipynb")
                    runrecord.note_all(folder / h for h in heads)  # the names looked for, not the listing
                    if not set(heads) & names:
                        continue
                p = folder.joinpath(*parts)
                candidates += [Path(str(p) + ".py"), p / "__init__.py", Path(str(p) + ".ipynb")]
        for cand in candidates:
            rel = rel_path(cand, self.root)
            if rel is None or default_excluded(rel, False):
                continue
            runrecord.note(cand)
            if not cand.is_file():
                continue
            if cand.suffix in (".py", ".ipynb") and cand.resolve() != importer:
                return cand.resolve()
        return None

    def _entries(self, folder: Path) -> set[str]:
        """The names in a folder (read once): most import specs name no file of the folder at all."""
        if folder not in self._listed:
            try:
                self._listed[folder] = set(os.listdir(folder))
            except OSError:
                self._listed[folder] = set()
        return self._listed[folder]

    def imports_outside(self, importer: Path, data: bytes) -> bool:
        """Does the source import (or ``%run``) a project module that is not among the linted files?"""
        specs = [(m.group(1) or m.group(2)).decode("ascii", "replace") for m in _IMPORT_LINE.finditer(data)]
        specs += [
            "%run:" + m.group(1).decode("utf-8", "replace") for m in re.finditer(rb"%run[ \t]+(\S+)", data)
        ]
        for spec in specs:
            found = self.find(importer, spec)
            if found is not None and found not in self.linted:
                return True
        return False
