"""File discovery, the content-hash cache, the parallel workers and the flow between files.

Costs, cheapest first: a file whose size and modification time are those the cache recorded for it costs one
``stat`` (ruff's cache keys on the same; a file modified less than two seconds before it was hashed is never
served that way, so an edit within the file system's timestamp resolution is still seen); a file whose
content hash is in the cache costs one read and one hash; a file with
``# upsertsink: noqa`` or none of the catalogue's trigger words costs one byte scan and is never analyzed;
only the rest is parsed (stdlib ``ast``) and analyzed, spread over all cores.

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
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from upsertsink.lint.checker import CheckOptions, FileResult, Finding, check_bytes, main_guard
from upsertsink.lint.config import Settings

try:  # hashlib's OpenSSL half costs a few milliseconds to load and BLAKE2 does not need it
    from _blake2 import blake2b
except ImportError:  # another interpreter
    from hashlib import blake2b

if TYPE_CHECKING:
    import pathspec

# Loaded when needed (start-up counts for small runs): pathspec when there is a .gitignore or an exclude glob
# to match, the process pool when there is enough work for it, the analysis when a file is not in the cache.

DEFAULT_EXCLUDES = [
    ".git/",
    ".hg/",
    ".svn/",
    ".venv/",
    "venv/",
    "__pycache__/",
    "node_modules/",
    ".tox/",
    ".nox/",
    ".mypy_cache/",
    ".ruff_cache/",
    ".pytest_cache/",
    ".upsertsink_cache/",
    "build/",
    "dist/",
    "site-packages/",
    ".eggs/",
    "*.egg-info/",
]
CACHE_DIR = ".upsertsink_cache"
_CACHE_FORMAT = "lint-cache-2"  # the shape of an entry; the linter's own source is hashed in as well
_PARALLEL_MIN_FILES = 8
_PARALLEL_MIN_BYTES = 256 * 1024
# DEFAULT_EXCLUDES are folder patterns: a folder matches by its name (the walk never enters a matched folder,
# so the folders above a file have passed already)
_DEFAULT_DIR_NAMES = frozenset(p.rstrip("/") for p in DEFAULT_EXCLUDES if "*" not in p)
_DEFAULT_DIR_SUFFIXES = tuple(p.rstrip("/").lstrip("*") for p in DEFAULT_EXCLUDES if p.startswith("*"))
_STAT_MARGIN_NS = 2_000_000_000  # a file modified this recently is hashed, never served by its stat


class PathError(Exception):
    """A path given on the command line does not exist (exit code 2)."""


@dataclass
class Stats:
    """What a run cost: how many files were checked, parsed, served from cache, skipped unparsed."""

    files_checked: int = 0
    parsed: int = 0
    cache_hits: int = 0
    prefiltered: int = 0
    workers: int = 1
    modules_read: int = 0  # project modules outside the linted files, read for the values they export
    unread: int = 0  # cache hits known by their stat (modification time and size): not even read


@dataclass
class RunResult:
    """Findings of a run (sorted by path, line, column) and its statistics."""

    findings: list[Finding] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)


def _default_excluded(rel: str, is_dir: bool) -> bool:
    """Does a built-in exclude (``DEFAULT_EXCLUDES``, all folder patterns) match ``rel`` (a path relative to
    the walked folder), as pathspec's gitignore matching would? Only folders match, by name, at any depth."""
    parts = rel.split("/")
    if not is_dir:
        parts = parts[:-1]
    return any(p in _DEFAULT_DIR_NAMES or p.endswith(_DEFAULT_DIR_SUFFIXES) for p in parts)


def _gitignore_spec(folder: Path) -> pathspec.GitIgnoreSpec | None:
    gi = folder / ".gitignore"
    if not gi.is_file():
        return None
    import pathspec

    try:
        return pathspec.GitIgnoreSpec.from_lines(
            gi.read_text(encoding="utf-8", errors="replace").splitlines()
        )
    except (OSError, ValueError):
        return None


def _rel(path: Path, base: Path) -> str | None:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return None


def discover(paths: list[Path], settings: Settings) -> list[Path]:
    """Python files and notebooks (``.py``, ``.pyi``, ``.ipynb``) under ``paths``. Walked folders honour .gitignore files, the configured ``exclude``
    globs and the default excludes; a file or folder named explicitly is always linted, even if excluded."""
    return [p for p, _ in _discover(paths, settings)]


def _discover(paths: list[Path], settings: Settings) -> list[tuple[Path, Path]]:
    """:func:`discover`'s files, each with its real path (resolved once: a folder's real path once per folder,
    a file's own only when it is a symbolic link)."""
    root = settings.root
    if settings.excludes():
        import pathspec

        exclude = pathspec.GitIgnoreSpec.from_lines(settings.excludes())
    else:
        exclude = None
    out: list[tuple[Path, Path]] = []
    seen: set[Path] = set()
    for given in paths:
        if not given.exists():
            raise PathError(f"path does not exist: {given}")
        if given.is_file():
            if settings.force_exclude and is_excluded(given, settings):
                continue
            rp = given.resolve()
            if rp not in seen:
                seen.add(rp)
                out.append((given, rp))
            continue
        base = given.resolve()
        # ignore files above the walked folder (up to the project root) apply to what is below it,
        # unless they exclude the folder itself (then the explicit argument wins)
        inherited: list[tuple[Path, pathspec.GitIgnoreSpec]] = []
        for folder in [root, *[p for p in base.parents if _rel(p, root) not in (None, ".")]]:
            spec = _gitignore_spec(folder)
            if spec is not None and _rel(base, folder) is not None:
                rel = _rel(base, folder)
                if rel == "." or not (spec.match_file(rel) or spec.match_file(rel + "/")):
                    inherited.append((folder, spec))
        root_rel = _rel(base, root)
        use_exclude = exclude is not None and not (
            root_rel not in (None, ".")
            and (exclude.match_file(root_rel) or exclude.match_file(root_rel + "/"))
        )
        for dirpath, dirnames, filenames in os.walk(base):
            d = Path(dirpath)
            real_dir = os.path.realpath(dirpath)
            specs = list(inherited)
            local = _gitignore_spec(d)
            if local is not None and d != root:
                inherited.append((d, local))
                specs.append((d, local))

            def ignored(p: Path, is_dir: bool, specs=specs, base=base, use_exclude=use_exclude) -> bool:
                suffix = "/" if is_dir else ""
                rel_walk = _rel(p, base)
                if rel_walk is not None and _default_excluded(rel_walk, is_dir):
                    return True
                for folder, spec in specs:
                    rel = _rel(p, folder)
                    if rel is not None and spec.match_file(rel + suffix):
                        return True
                if use_exclude:
                    rel = _rel(p, root)
                    if rel is not None and exclude.match_file(rel + suffix):
                        return True
                return False

            if specs or use_exclude:
                dirnames[:] = sorted(n for n in dirnames if not ignored(d / n, True))
            else:  # only the built-in folder excludes apply: by name, and never to a file (see _default_excluded)
                dirnames[:] = sorted(n for n in dirnames if not _default_excluded(n, True))
            for name in sorted(filenames):
                if not (name.endswith((".py", ".pyi", ".ipynb"))):
                    continue
                p = d / name
                if (specs or use_exclude) and ignored(p, False):
                    continue
                full = os.path.join(dirpath, name)
                rp = Path(os.path.realpath(full) if os.path.islink(full) else os.path.join(real_dir, name))
                if rp not in seen:
                    seen.add(rp)
                    out.append((p, rp))
    return out


def is_excluded(path: Path, settings: Settings) -> bool:
    """Do the exclude globs (``exclude`` and ``extend-exclude``, relative to the project root) match
    ``path`` or one of its folders? (What ``--force-exclude`` applies to files named explicitly.)"""
    globs = settings.excludes()
    rel = _rel(path.resolve(), settings.root.resolve())
    if not globs or rel is None:
        return False
    import pathspec

    spec = pathspec.GitIgnoreSpec.from_lines(globs)
    parts = rel.split("/")
    return spec.match_file(rel) or any(
        spec.match_file("/".join(parts[:i]) + "/") for i in range(1, len(parts))
    )


def display_path(path: Path, real: Path | None = None, cwd: Path | None = None) -> str:
    """Path as shown in findings: relative to the current folder when below it, forward slashes. ``real``
    (the path resolved) and ``cwd`` (the current folder resolved) save resolving them again."""
    real = real or path.resolve()
    cwd = cwd or Path.cwd().resolve()
    if os.sep == "/":  # the same as relative_to below, without building Path objects
        here, there = str(cwd), str(real)
        if there.startswith(here.rstrip("/") + "/"):
            return there[len(here.rstrip("/")) + 1 :]
        return path.as_posix() if there != here else "."
    try:
        return real.relative_to(cwd).as_posix()
    except ValueError:
        return path.as_posix()


def _linter_fingerprint() -> str:
    h = blake2b(_CACHE_FORMAT.encode(), digest_size=16)
    pkg = Path(__file__).resolve().parent
    for p in sorted(pkg.rglob("*.py")):
        h.update(p.relative_to(pkg).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()


class Cache:
    """Content-hash cache: content digest -> a file's result (findings by field name, summary, wants, .sql
    dependencies, externals hash) for one linter build and settings; and real path -> (modification time,
    size, content digest) of the files it has hashed, so that an unchanged file is not read again."""

    MAX_ENTRIES = 100_000
    MAX_FILES = 4  # one file per linter build and settings: alternating --key runs keep their caches

    def __init__(self, folder: Path, settings: Settings) -> None:
        salt = blake2b(digest_size=16)
        salt.update(_linter_fingerprint().encode())
        salt.update(
            json.dumps(
                [
                    sorted(settings.keys),
                    sorted(settings.sequence),
                    sorted(settings.key_patterns),
                    sys.version_info[:2],
                ]
            ).encode()
        )
        self.salt = salt.hexdigest()
        self.path = folder / CACHE_DIR / f"lint-{self.salt[:20]}.json"
        self.entries: dict[str, list] = {}
        self.stats: dict[str, list] = {}  # real path -> [st_mtime_ns, st_size, content digest]
        self.dirty = False
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("salt") == self.salt and isinstance(data.get("entries"), dict):
                self.entries = data["entries"]
                stats = data.get("stats")
                self.stats = stats if isinstance(stats, dict) else {}
        except (OSError, ValueError):
            pass

    def digest_by_stat(self, real: str, st: os.stat_result) -> str | None:
        """The content digest recorded for a file whose modification time and size are still ``st``'s."""
        row = self.stats.get(real)
        if isinstance(row, list) and len(row) == 3 and row[0] == st.st_mtime_ns and row[1] == st.st_size:
            return str(row[2])
        return None

    def note_stat(self, real: str, st: os.stat_result, digest: str) -> None:
        """Record the digest of a file read with stat ``st`` (not for a file modified in the last two seconds:
        a later edit could keep its size and, within the timestamp resolution, its modification time)."""
        if time.time_ns() - st.st_mtime_ns < _STAT_MARGIN_NS:
            if self.stats.pop(real, None) is not None:
                self.dirty = True
            return
        row = [st.st_mtime_ns, st.st_size, digest]
        if self.stats.get(real) != row:
            self.stats[real] = row
            self.dirty = True

    def put(self, digest: str, result: FileResult, ext: str) -> None:
        """Store a file's result under its content digest: findings by field name, its summary, the names
        it wants from other files, the .sql files it read (with their digests) and the externals' hash."""
        self.entries[digest] = {
            "findings": [f.to_cache() for f in result.findings],
            "parsed": result.parsed,
            "summary": result.summary,
            "wants": result.imports,
            "deps": result.deps,
            "ext": ext,
        }
        self.dirty = True

    def result(self, digest: str, path: str) -> tuple[FileResult, str] | None:
        """The cached result of a file's content and the externals hash it was computed with, or None
        (also for an entry of another shape, or when a .sql file it read has changed)."""
        entry = self.entries.get(digest)
        if not isinstance(entry, dict):
            return None
        try:
            findings = [Finding.from_cache(path, row) for row in entry["findings"]]
            deps = dict(entry["deps"])
            for dep, dep_digest in deps.items():
                try:
                    data = Path(dep).read_bytes()
                except OSError:
                    return None
                if blake2b(data, digest_size=16).hexdigest() != dep_digest:
                    return None
            res = FileResult(findings, bool(entry["parsed"]), entry["summary"], list(entry["wants"]), deps)
            return res, str(entry["ext"])
        except (KeyError, TypeError, ValueError):
            return None

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            gitignore = self.path.parent / ".gitignore"
            if not gitignore.exists():
                gitignore.write_text("*\n", encoding="utf-8")
            if len(self.entries) > self.MAX_ENTRIES:  # oldest first: dicts keep insertion order
                for digest in list(self.entries)[: len(self.entries) - self.MAX_ENTRIES]:
                    del self.entries[digest]
            self.stats = {
                k: v for k, v in self.stats.items() if isinstance(v, list) and v[-1] in self.entries
            }
            others = sorted(self.path.parent.glob("lint-*.json"), key=lambda p: p.stat().st_mtime)
            for old in [p for p in others if p != self.path][: max(0, len(others) - self.MAX_FILES + 1)]:
                old.unlink(missing_ok=True)
            import tempfile

            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix="lint.", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(
                    {"salt": self.salt, "entries": self.entries, "stats": self.stats},
                    fh,
                    separators=(",", ":"),
                )
            os.replace(tmp, self.path)
        except OSError:
            pass  # a read-only checkout still lints, just without a cache


def _work(item: tuple[str, bytes, CheckOptions, bool]) -> FileResult:
    path, data, options, prefilter = item
    main_guard()
    try:
        return check_bytes(path, data, [], [], prefilter=prefilter, options=options)
    except Exception as exc:  # noqa: BLE001 - one file must never take the run down
        from upsertsink.lint.checker import _parse_error

        return FileResult([_parse_error(path, 1, 1, f"internal error {exc.__class__.__name__}: {exc}")], True)
    finally:
        # The collector is paused during runs, but an analysis leaves reference cycles behind (scopes and
        # their parents, the analysis' own tables): sweep the youngest generation, which holds this file's
        # objects and little else, after every file. (A full collection every few hundred files cost more
        # than a third of a cold run: it walks every object still alive, in memory long out of the caches.)
        gc.collect(0)


_FORKED_ITEMS: list = []  # in a forked worker: the pool's work, inherited from the parent instead of pickled


def _inherit(items: list) -> None:
    # a pool's initializer: with the fork start method its arguments reach the worker through the fork itself
    # (never pickled), and each pool gets its own list even when several runs share the parent process
    _FORKED_ITEMS[:] = items


def _work_forked(index: int) -> FileResult:
    return _work(_FORKED_ITEMS[index])


def _serial(items: list, progress: Callable[[int, int], None]) -> list[FileResult | None]:
    out: list[FileResult | None] = []
    for item in items:
        out.append(_work(item))
        progress(len(out), len(items))
    return out


def _run_items(
    items: list, jobs: int | None, progress: Callable[[int, int], None], stats: Stats
) -> list[FileResult | None]:
    """Analyze items in a process pool when there is enough work, else in this process."""
    total = sum(len(item[1]) for item in items)
    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    if not (workers > 1 and len(items) >= _PARALLEL_MIN_FILES and total >= _PARALLEL_MIN_BYTES):
        return _serial(items, progress)
    order = sorted(range(len(items)), key=lambda i: -len(items[i][1]))
    outputs: list[FileResult | None] = [None] * len(items)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    # Workers import the analysis (and the SQL parser, when a file holds SQL) themselves, side by side: this
    # process importing them before the fork would add their import time to the run's instead.
    forked = sys.platform.startswith("linux")
    ctx = multiprocessing.get_context("fork") if forked else None
    if forked:  # forked workers find the items in their copy of this process' memory: only indices are sent
        fn, args, init = _work_forked, order, {"initializer": _inherit, "initargs": (items,)}
    else:
        fn, args, init = _work, [items[i] for i in order], {}
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, **init) as pool:
            for done, (i, res) in enumerate(zip(order, pool.map(fn, args, chunksize=2), strict=True), 1):
                outputs[i] = res
                progress(done, len(items))
        stats.workers = workers
    except (OSError, BrokenProcessPool):  # no process support here (sandbox, no /dev/shm): one process
        outputs = _serial(items, progress)
    return outputs


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
    gc.disable()  # ASTs are large acyclic object graphs: collection passes would only cost time
    try:
        return _lint_paths(paths, settings, use_cache, jobs, progress or _no_progress, stdin)
    finally:
        if enabled:
            gc.enable()


def _no_progress(done: int, total: int) -> None:
    return None


@dataclass
class _File:
    path: Path
    shown: str
    real: Path
    raw: bytes | None  # None: not read (the cache knew the file by its stat); read on first use of data
    digest: str
    result: FileResult | None = None
    ext: str = ""
    summarize: bool = False  # other files use it: compute its summary whenever it is analyzed
    reported: bool = True  # False: a project module read only for what it exports to the files linted

    @property
    def data(self) -> bytes:
        if self.raw is None:
            try:
                self.raw = self.path.read_bytes()
            except OSError:  # gone since it was listed: nothing to read for what it exports
                self.raw = b""
        return self.raw


_MAX_ROUNDS = 4
_NO_EXTERNALS = blake2b(b"{}", digest_size=16).hexdigest()


class _Tree:
    """The linted files by real path, for resolving imports, ``%run`` and star imports between them."""

    def __init__(self, files: list[_File]) -> None:
        self.by_real = {f.real: f for f in files}
        self._by_str = {
            str(real): f for real, f in self.by_real.items()
        }  # module lookups use strings: cheaper
        self._resolved: dict[tuple[Path, str], _File | None] = {}
        self.names: set[str] = set()
        for f in files:
            self.names.update(f.real.parts)
            self.names.add(f.real.stem)

    def resolve(self, importer: _File, spec: str) -> _File | None:
        """The linted file an import spec (``helpers``, ``..util``, ``%run:./setup``) names, if any."""
        key = (importer.real, spec)
        if key not in self._resolved:
            self._resolved[key] = self._resolve(importer, spec)
        return self._resolved[key]

    def _resolve(self, importer: _File, spec: str) -> _File | None:
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

    def targets(self, f: _File) -> list[_File]:
        """The linted files ``f`` looked up names in."""
        specs = {want.rpartition(".")[0] for want in (f.result.imports if f.result is not None else ())}
        return [t for t in (self.resolve(f, spec) for spec in specs if spec) if t is not None]

    def externals(self, f: _File) -> dict[str, dict]:
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
            if name in summary.get("funcs", {}) or name in summary.get("values", {}):
                out[spec] = {**summary, "path": target.shown}
        return out


def _options(settings: Settings, f: _File, externals: dict[str, dict] | None = None) -> CheckOptions:
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
    jobs: int | None,
    progress: Callable[[int, int], None],
    stdin: tuple[Path, bytes] | None = None,
) -> RunResult:
    files = _discover(paths, settings)
    if stdin is not None:
        stdin_real = stdin[0].resolve()
        files = [(f, real) for f, real in files if real != stdin_real]
        if not (settings.force_exclude and is_excluded(stdin[0], settings)):
            files.append((stdin[0], stdin_real))
    result = RunResult()
    result.stats.files_checked = len(files)
    cache = Cache(settings.root, settings) if use_cache else None
    per_file: dict[str, list[Finding]] = {}
    tree_files: list[_File] = []
    todo: list[_File] = []
    cwd = Path.cwd().resolve()
    for f, real in files:
        shown = display_path(f, real, cwd)
        from_stdin = stdin is not None and f is stdin[0]
        data: bytes | None = None
        digest = ""
        try:
            if from_stdin:
                data = stdin[1]
            elif cache is not None:
                st = os.stat(real)
                digest = cache.digest_by_stat(str(real), st) or ""
                if not digest:
                    data = real.read_bytes()
            else:
                data = real.read_bytes()
        except OSError as exc:
            from upsertsink.lint.checker import _parse_error

            per_file[shown] = [_parse_error(shown, 1, 1, f"cannot read the file: {exc.strerror}")]
            continue
        if cache is not None and not digest:
            assert data is not None
            digest = blake2b(data, digest_size=20).hexdigest()
            if not from_stdin:
                cache.note_stat(str(real), st, digest)
        item = _File(f, shown, real, data, digest)
        tree_files.append(item)
        cached = cache.result(digest, shown) if cache is not None else None
        if cached is not None:
            result.stats.cache_hits += 1
            result.stats.unread += item.raw is None
            item.result, item.ext = cached
            continue
        item.data  # noqa: B018 - read now: the entry is gone (or of another shape), the file is analyzed
        todo.append(item)
    # round 0: every file on its own
    analyzed = _analyze(todo, settings, {}, jobs, progress, result.stats, prefilter=True)
    # later rounds: files that use definitions of other linted files, with those files' summaries
    # a file the pre-filter skipped may still use another file's values: read it when it imports one by name
    # (a file of the linted tree, or a module of the project outside it)
    modules = _Modules(_module_root(settings, [f.real for f in tree_files]), {f.real for f in tree_files})
    stems = {f.real.stem.encode() for f in tree_files if f.real.stem != "__init__"}
    for f in tree_files:
        skipped = f.result is not None and not f.result.parsed
        if not skipped or not (b"import" in f.data or b"%run" in f.data):
            continue
        if any(s in f.data for s in stems) or modules.imports_outside(f.real, f.data):
            f.result = _work((f.shown, f.data, _options(settings, f), False))
            analyzed.add(id(f))
    # the project modules the files import that are not among them: read for their exports, not reported
    loaded, tree = _load_imported(tree_files, modules, settings, cache, jobs, result.stats, analyzed)
    tree_files += loaded
    for _ in range(_MAX_ROUNDS):
        # modules other files use: compute their summaries (also when the pre-filter skipped them)
        unread = {
            id(t): t
            for f in tree_files
            if f.result is not None
            for t in tree.targets(f)
            if t.result is not None and t.result.summary is None
        }
        if unread:
            targets = list(unread.values())
            for t in targets:
                t.summarize = True
            items = [(t.shown, t.data, _options(settings, t), False) for t in targets]
            for t, res in zip(targets, _run_items(items, jobs, _no_progress, result.stats), strict=True):
                t.result, t.ext = res, _NO_EXTERNALS
                analyzed.add(id(t))
        again: list[tuple[_File, dict[str, dict]]] = []
        for f in tree_files:
            if f.result is None:
                continue
            externals = tree.externals(f)
            if _ext_hash(externals) != (f.ext or _NO_EXTERNALS):
                again.append((f, externals))
        if not again:
            break
        items = [(f.shown, f.data, _options(settings, f, externals), False) for f, externals in again]
        for (f, externals), res in zip(
            again, _run_items(items, jobs, _no_progress, result.stats), strict=True
        ):
            f.result, f.ext = res, _ext_hash(externals)
            analyzed.add(id(f))
    for f in tree_files:
        res = f.result
        assert res is not None
        if id(f) in analyzed:
            if res.parsed:
                result.stats.parsed += 1
            else:
                result.stats.prefiltered += 1
            if cache is not None:
                cache.put(f.digest, res, f.ext or _NO_EXTERNALS)
        if f.reported:
            per_file[f.shown] = res.findings
            off = settings.ignored_in(f.path)
            if off:
                per_file[f.shown] = [x for x in res.findings if not any(x.rule.startswith(c) for c in off)]
    if cache is not None:
        cache.save()
    findings = [f for fs in per_file.values() for f in fs if settings.enabled(f.rule)]
    findings.sort(key=lambda f: (f.path, f.line, f.column, f.rule))
    result.findings = findings
    return result


_IMPORT_LINE = re.compile(
    rb"^[ \t]*(?:from[ \t]+(\.*[\w.]*)[ \t]+import\b|import[ \t]+([\w.]+))", re.MULTILINE
)
_MAX_IMPORT_DEPTH = 4


def _module_root(settings: Settings, files: list[Path]) -> Path:
    """The folder project modules are looked up in: the config's folder; without a config the current
    folder when it holds every linted file, else the files' common parent."""
    if settings.config_path is not None or not files:
        return settings.root.resolve()
    cwd = Path.cwd().resolve()
    if all(_rel(f, cwd) is not None for f in files):
        return cwd
    return Path(os.path.commonpath([str(f.parent) for f in files]))


class _Modules:
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
                if _rel(folder, self.root) is None:
                    break
                names = self._entries(folder)
                if parts and not {parts[0], parts[0] + ".py", parts[0] + ".ipynb"} & names:
                    continue
                p = folder.joinpath(*parts)
                candidates += [Path(str(p) + ".py"), p / "__init__.py", Path(str(p) + ".ipynb")]
        for cand in candidates:
            rel = _rel(cand, self.root)
            if rel is None or _default_excluded(rel, False) or not cand.is_file():
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


def _load_imported(
    tree_files: list[_File],
    modules: _Modules,
    settings: Settings,
    cache: Cache | None,
    jobs: int | None,
    stats: Stats,
    analyzed: set[int],
) -> tuple[list[_File], _Tree]:
    """Read the project modules the linted files import (and the modules those import, a few levels
    deep) that are not linted themselves, so that values can be followed into them. They are analyzed
    for their summaries and never reported. Returns them and the tree of all files."""
    known = {f.real for f in tree_files}
    loaded: list[_File] = []
    frontier = list(tree_files)
    for _ in range(_MAX_IMPORT_DEPTH):
        tree = _Tree(tree_files + loaded)
        new: dict[Path, _File] = {}
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
                new[found] = _File(found, display_path(found), found, data, digest, reported=False)
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
            analyzed.update(_analyze(todo, settings, {}, jobs, _no_progress, stats, prefilter=False))
        loaded += new.values()
        frontier = list(new.values())
    stats.modules_read = len(loaded)
    return loaded, _Tree(tree_files + loaded)


def _analyze(
    todo: list[_File],
    settings: Settings,
    externals: dict[str, dict],
    jobs: int | None,
    progress: Callable[[int, int], None],
    stats: Stats,
    prefilter: bool,
) -> set[int]:
    items = [(f.shown, f.data, _options(settings, f, externals), prefilter) for f in todo]
    outputs = _run_items(items, jobs, progress, stats)
    for f, res in zip(todo, outputs, strict=True):
        assert res is not None
        f.result, f.ext = res, _NO_EXTERNALS
    return {id(f) for f in todo}
