"""A lint run over files: which files are analyzed, the rounds between files, the findings and statistics.

Costs, cheapest first: a file the cache knows costs one ``stat`` or one read and hash (:mod:`.cache`); a
file with ``# upsertsink: noqa`` or none of the catalogue's trigger words costs one byte scan and is never
analyzed; only the rest is parsed (stdlib ``ast``) and analyzed, spread over all cores (:mod:`.workers`).

Between files: every analyzed file leaves a *summary* (what its functions return and write, its constants)
and the list of names it looked up in other files (*wants*). A file whose wants resolve to files of the
linted tree that define them is analyzed again with those summaries (at most a few rounds, until no summary
changes); its cache entry records a hash of the summaries it used, so a changed helper re-checks its
importers and nothing else.
"""

from __future__ import annotations

import gc
import json
import os
from collections.abc import Callable
from pathlib import Path

from ..base.structs import field, struct
from ..check.checker import CheckOptions, Finding
from . import runrecord
from .cache import Cache, blake2b
from .config import Settings
from .discovery import discover_real, display_path, is_excluded
from .imports import ProjectModules, RunFile, Tree, module_root
from .workers import Stats, Workers, enough_work

# Loaded when needed (start-up counts for small runs): pathspec when an ignore file or glob has a form beyond
# lint/run/globs.py's, the process pool when there is enough work for it, the analysis when a file is not cached.


@struct
class RunResult:
    """Findings of a run (sorted by path, line, column) and its statistics."""

    findings: list[Finding] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)


def lint_paths(
    paths: list[Path],
    settings: Settings,
    use_cache: bool = True,
    jobs: int | None = None,
    progress: Callable[[int, int], None] | None = None,
    stdin: tuple[Path, bytes] | None = None,
) -> RunResult:
    """Lint files and folders; findings are filtered by select/ignore and per-file-ignores but not by
    severity. Only the files given (or found under the folders given) are reported; the project modules
    they import are read too, for the values they export, but not reported.

    ``stdin`` is ``(name, content)`` of a file read from standard input: linted as if ``name`` held
    ``content`` (reported under ``name``; with ``force_exclude``, not at all when ``name`` is excluded).
    ``progress(done, total)`` is called as files needing analysis are finished (for a progress bar).
    """
    enabled = gc.isenabled()
    # ASTs are large object graphs and an analysis breaks its own cycles (ModuleAnalysis.release), so
    # collection passes during a run would only cost time
    gc.disable()
    try:
        pool = Workers(jobs)
        try:
            return _lint_paths(paths, settings, use_cache, pool, progress or _no_progress, stdin)
        finally:
            pool.close()
    finally:
        if enabled:
            gc.enable()


def _no_progress(done: int, total: int) -> None:
    return None


_MAX_ROUNDS = 4
_NO_EXTERNALS = blake2b(b"{}", digest_size=16).hexdigest()


def _options(settings: Settings, f: RunFile, externals: dict[str, dict] | None = None) -> CheckOptions:
    f.summarize = f.summarize or (f.result is not None and f.result.summary is not None)
    return CheckOptions(
        summarize=f.summarize,
        keys=list(settings.keys),
        sequence=list(settings.sequence),
        key_patterns=list(settings.key_patterns),
        origin=str(f.real),
        root=str(settings.root),
        externals=externals or {},
    )


def _ext_hash(externals: dict[str, dict]) -> str:
    if not externals:
        return _NO_EXTERNALS
    return blake2b(json.dumps(externals, sort_keys=True, default=str).encode(), digest_size=16).hexdigest()


def _lint_paths(
    paths: list[Path],
    settings: Settings,
    use_cache: bool,
    pool: Workers,
    progress: Callable[[int, int], None],
    stdin: tuple[Path, bytes] | None = None,
) -> RunResult:
    files = discover_real(paths, settings)
    if stdin is not None:
        stdin_real = stdin[0].resolve()
        files = [(f, real) for f, real in files if real != stdin_real]
        if not (settings.force_exclude and is_excluded(stdin[0], settings)):
            files.append((stdin[0], stdin_real))
    run = _Run(settings, Cache(settings.root, settings) if use_cache else None, pool)
    run.result.stats.files_checked = len(files)
    runrecord.note_all(real for _, real in files)
    todo = run.read(files, stdin)
    # round 0: every file on its own
    run.analyzed |= _analyze(todo, settings, {}, pool, progress, run.stats, prefilter=True)
    modules = ProjectModules(module_root(settings, [f.real for f in run.files]), {f.real for f in run.files})
    run.importers_again(modules)
    # the project modules the files import that are not among them: read for their exports, not reported
    loaded, tree = _load_imported(run.files, modules, settings, run.cache, pool, run.stats, run.analyzed)
    run.files += loaded
    run.rounds(tree)
    return run.finish()


class _Run:
    """The files of one run and what has been done with them, phase by phase: read (or found in the cache),
    analyzed alone, analyzed again with the summaries of the files they use, reported."""

    def __init__(self, settings: Settings, cache: Cache | None, pool: Workers) -> None:
        self.settings, self.cache, self.pool = settings, cache, pool
        self.result = RunResult()
        self.stats = self.result.stats
        self.files: list[RunFile] = []  # every file of the tree: the linted ones, then the modules they import
        self.analyzed: set[int] = set()  # ids of the files analyzed in this run (not served by the cache)
        self.per_file: dict[str, list[Finding]] = {}  # shown path -> findings (reported files only)

    def read(self, files: list[tuple[Path, Path]], stdin: tuple[Path, bytes] | None) -> list[RunFile]:
        """Every file as a :class:`RunFile`, its result taken from the cache when the cache has it; the files
        left to analyze (the process pool starts as soon as there is enough work for it)."""
        cache, todo, todo_bytes = self.cache, [], 0
        cwd = Path.cwd().resolve()
        for f, real in files:
            shown = display_path(f, real, cwd)
            from_stdin = stdin is not None and f is stdin[0]
            data: bytes | None = None
            digest = ""
            size = 0
            try:
                if from_stdin:
                    data = stdin[1]
                elif cache is not None:
                    st = os.stat(real)
                    size = st.st_size
                    digest = cache.digest_by_stat(str(real), st) or ""
                    if not digest:
                        data = real.read_bytes()
                else:  # no cache: no digest to take, the worker that analyzes the file reads it
                    size = os.stat(real).st_size
            except OSError as exc:
                from ..check.checker import _parse_error

                self.per_file[shown] = [_parse_error(shown, 1, 1, f"cannot read the file: {exc.strerror}")]
                continue
            if cache is not None and not digest:
                assert data is not None
                digest = blake2b(data, digest_size=20).hexdigest()
                if not from_stdin:
                    cache.note_stat(str(real), st, digest)
            item = RunFile(f, shown, real, data, digest, size=size if data is None else len(data))
            self.files.append(item)
            cached = cache.result(digest, shown) if cache is not None else None
            if cached is not None:
                self.stats.cache_hits += 1
                self.stats.unread += item.raw is None
                item.result, item.ext = cached
                continue
            # the entry is gone (or of another shape): the file is analyzed (by a worker that reads it if not read)
            todo_bytes += item.size
            todo.append(item)
            if enough_work(len(todo), todo_bytes):
                self.pool.start()  # the workers import the analysis while the rest is read (no-op once started)
        return todo

    def importers_again(self, modules: ProjectModules) -> None:
        """A file the pre-filter skipped may still use another file's values: analyze it when it imports one
        by name (a file of the linted tree, or a module of the project outside it)."""
        stems = {f.real.stem.encode() for f in self.files if f.real.stem != "__init__"}
        redo = []
        for f in self.files:
            skipped = f.result is not None and not f.result.parsed
            if not skipped or not (b"import" in f.data or b"%run" in f.data):
                continue
            if any(s in f.data for s in stems) or modules.imports_outside(f.real, f.data):
                redo.append(f)
        items = [(f.shown, f.data, _options(self.settings, f), False, 0) for f in redo]
        for f, res in zip(redo, self.pool.run(items, _no_progress, self.stats), strict=True):
            f.result = res
            self.analyzed.add(id(f))

    def rounds(self, tree: Tree) -> None:
        """The later rounds: files that use definitions of other files of the tree, analyzed again with those
        files' summaries, until no summary they use changes (at most a few rounds)."""
        settings, pool = self.settings, self.pool
        for _ in range(_MAX_ROUNDS):
            # modules other files use: compute their summaries (also when the pre-filter skipped them)
            unread = {
                id(t): t
                for f in self.files
                if f.result is not None
                for t in tree.targets(f)
                if t.result is not None and t.result.summary is None
            }
            if unread:
                targets = list(unread.values())
                for t in targets:
                    t.summarize = True
                items = [(t.shown, t.data, _options(settings, t), False, 0) for t in targets]
                for t, res in zip(targets, pool.run(items, _no_progress, self.stats), strict=True):
                    t.result, t.ext = res, _NO_EXTERNALS
                    self.analyzed.add(id(t))
            again: list[tuple[RunFile, dict[str, dict]]] = []
            for f in self.files:
                if f.result is None:
                    continue
                externals = tree.externals(f)
                if _ext_hash(externals) != (f.ext or _NO_EXTERNALS):
                    again.append((f, externals))
            if not again:
                return
            items = [(f.shown, f.data, _options(settings, f, externals), False, 0) for f, externals in again]
            for (f, externals), res in zip(again, pool.run(items, _no_progress, self.stats), strict=True):
                f.result, f.ext = res, _ext_hash(externals)
                self.analyzed.add(id(f))

    def finish(self) -> RunResult:
        """Count, cache and report what was analyzed; the run's findings, selected and sorted."""
        settings, cache, per_file = self.settings, self.cache, self.per_file
        for f in self.files:
            res = f.result
            assert res is not None
            if id(f) in self.analyzed:
                if res.parsed:
                    self.stats.parsed += 1
                else:
                    self.stats.prefiltered += 1
                if cache is not None:
                    cache.put(f.digest, res, f.ext or _NO_EXTERNALS)
            if f.reported:
                per_file[f.shown] = res.findings
                off = settings.ignored_in(f.path)
                if off:
                    per_file[f.shown] = [x for x in res.findings if not any(x.rule.startswith(c) for c in off)]
        for f in self.files:
            runrecord.note(f.real)  # the project modules read for their exports among them
            if f.result is not None:
                runrecord.note_all(f.result.deps)  # the .sql files it read
        if cache is not None:
            cache.save()
        findings = [f for fs in per_file.values() for f in fs if settings.enabled(f.rule)]
        findings.sort(key=lambda f: (f.path, f.line, f.column, f.rule))
        self.result.findings = findings
        return self.result


_MAX_IMPORT_DEPTH = 4


def _load_imported(
    tree_files: list[RunFile],
    modules: ProjectModules,
    settings: Settings,
    cache: Cache | None,
    pool: Workers,
    stats: Stats,
    analyzed: set[int],
) -> tuple[list[RunFile], Tree]:
    """Read the project modules the linted files import (and the modules those import, a few levels
    deep) that are not linted themselves, so that values can be followed into them. They are analyzed
    for their summaries and never reported. Returns them and the tree of all files."""
    known = {f.real for f in tree_files}
    loaded: list[RunFile] = []
    frontier = list(tree_files)
    for _ in range(_MAX_IMPORT_DEPTH):
        tree = Tree(tree_files + loaded)
        new: dict[Path, RunFile] = {}
        for f in frontier:
            if f.result is None:
                continue
            for spec in sorted({want.rpartition(".")[0] for want in f.result.imports} - {""}):
                if tree.resolve(f, spec) is not None:
                    continue
                found = modules.find(f.real, spec)
                if found is None or found in known:
                    continue
                try:
                    data = found.read_bytes()
                except OSError:
                    continue
                digest = blake2b(data, digest_size=20).hexdigest() if cache is not None else ""
                known.add(found)
                new[found] = RunFile(found, display_path(found), found, data, digest, reported=False)
        if not new:
            stats.modules_read = len(loaded)
            return loaded, tree
        todo = []
        for item in new.values():
            cached = cache.result(item.digest, item.shown) if cache is not None else None
            if cached is not None and cached[0].summary is not None:
                item.result, item.ext = cached
                continue
            item.summarize = True
            todo.append(item)
        if todo:
            analyzed.update(_analyze(todo, settings, {}, pool, _no_progress, stats, prefilter=False))
        loaded += new.values()
        frontier = list(new.values())
    stats.modules_read = len(loaded)
    return loaded, Tree(tree_files + loaded)


def _analyze(
    todo: list[RunFile],
    settings: Settings,
    externals: dict[str, dict],
    pool: Workers,
    progress: Callable[[int, int], None],
    stats: Stats,
    prefilter: bool,
) -> set[int]:
    # a file not read yet goes as None: its worker reads it (this process never needs its bytes)
    items = [(f.shown, f.raw, _options(settings, f, externals), prefilter, f.size) for f in todo]
    outputs = pool.run(items, progress, stats)
    for f, res in zip(todo, outputs, strict=True):
        assert res is not None
        f.result, f.ext = res, _NO_EXTERNALS
    return {id(f) for f in todo}
