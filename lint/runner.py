"""File discovery, the content-hash cache and the parallel workers.

Costs, cheapest first: a file whose content hash is in the cache costs one read and one hash; a file with
``# upsertsink: noqa`` or none of the catalogue's trigger words costs one byte scan and is never parsed;
only the rest is parsed (stdlib ``ast``) and analyzed, spread over all cores.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path

import pathspec
from upsertsink.lint import __version__
from upsertsink.lint.checker import FileResult, Finding, check_bytes, main_guard
from upsertsink.lint.config import Settings

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
_PARALLEL_MIN_FILES = 8
_PARALLEL_MIN_BYTES = 256 * 1024


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


@dataclass
class RunResult:
    """Findings of a run (sorted by path, line, column) and its statistics."""

    findings: list[Finding] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)


def _gitignore_spec(folder: Path) -> pathspec.GitIgnoreSpec | None:
    gi = folder / ".gitignore"
    if not gi.is_file():
        return None
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
    """Python files under ``paths``. Walked folders honour .gitignore files, the configured ``exclude``
    globs and the default excludes; a file or folder named explicitly is always linted, even if excluded."""
    root = settings.root
    exclude = pathspec.GitIgnoreSpec.from_lines(settings.exclude) if settings.exclude else None
    defaults = pathspec.GitIgnoreSpec.from_lines(DEFAULT_EXCLUDES)
    out: list[Path] = []
    seen: set[Path] = set()
    for given in paths:
        if not given.exists():
            raise PathError(f"path does not exist: {given}")
        if given.is_file():
            rel_given = _rel(given.resolve(), root)
            if (
                settings.force_exclude
                and exclude is not None
                and rel_given is not None
                and exclude.match_file(rel_given)
            ):
                continue
            rp = given.resolve()
            if rp not in seen:
                seen.add(rp)
                out.append(given)
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
            specs = list(inherited)
            local = _gitignore_spec(d)
            if local is not None and d != root:
                inherited.append((d, local))
                specs.append((d, local))

            def ignored(p: Path, is_dir: bool, specs=specs, base=base, use_exclude=use_exclude) -> bool:
                suffix = "/" if is_dir else ""
                rel_walk = _rel(p, base)
                if rel_walk is not None and defaults.match_file(rel_walk + suffix):
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

            dirnames[:] = sorted(n for n in dirnames if not ignored(d / n, True))
            for name in sorted(filenames):
                if not (name.endswith((".py", ".pyi"))):
                    continue
                p = d / name
                if ignored(p, False):
                    continue
                rp = p.resolve()
                if rp not in seen:
                    seen.add(rp)
                    out.append(p)
    return out


def display_path(path: Path) -> str:
    """Path as shown in findings: relative to the current folder when below it, forward slashes."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _linter_fingerprint() -> str:
    h = hashlib.blake2b(__version__.encode(), digest_size=16)
    pkg = Path(__file__).resolve().parent
    for p in sorted(pkg.rglob("*.py")):
        h.update(p.relative_to(pkg).as_posix().encode())
        h.update(p.read_bytes())
    return h.hexdigest()


class Cache:
    """Content-hash cache: content digest -> findings (without path) for one linter build and settings."""

    MAX_ENTRIES = 100_000
    MAX_FILES = 4  # one file per linter build and settings: alternating --key runs keep their caches

    def __init__(self, folder: Path, settings: Settings) -> None:
        salt = hashlib.blake2b(digest_size=16)
        salt.update(_linter_fingerprint().encode())
        salt.update(
            json.dumps([sorted(settings.keys), sorted(settings.sequence), sys.version_info[:2]]).encode()
        )
        self.salt = salt.hexdigest()
        self.path = folder / CACHE_DIR / f"lint-{self.salt[:20]}.json"
        self.entries: dict[str, list] = {}
        self.dirty = False
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            if data.get("salt") == self.salt and isinstance(data.get("entries"), dict):
                self.entries = data["entries"]
        except (OSError, ValueError):
            pass

    def get(self, digest: str) -> list | None:
        return self.entries.get(digest)

    def put(self, digest: str, findings: list[Finding]) -> None:
        self.entries[digest] = [f.to_cache() for f in findings]
        self.dirty = True

    def findings(self, digest: str, path: str) -> list[Finding] | None:
        """The cached findings of a file's content, or None (also for an entry of another shape)."""
        rows = self.entries.get(digest)
        if rows is None:
            return None
        try:
            return [Finding.from_cache(path, row) for row in rows]
        except (KeyError, TypeError):
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
            others = sorted(self.path.parent.glob("lint-*.json"), key=lambda p: p.stat().st_mtime)
            for old in [p for p in others if p != self.path][: max(0, len(others) - self.MAX_FILES + 1)]:
                old.unlink(missing_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix="lint.", suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump({"salt": self.salt, "entries": self.entries}, fh, separators=(",", ":"))
            os.replace(tmp, self.path)
        except OSError:
            pass  # a read-only checkout still lints, just without a cache


_WORK_DONE = [0]


def _work(item: tuple[str, bytes, list[str], list[str]]) -> FileResult:
    path, data, keys, sequence = item
    main_guard()
    _WORK_DONE[0] += 1
    if _WORK_DONE[0] % 256 == 0:
        gc.collect()  # the collector is paused during runs; sweep the rare cycles (tracebacks) now and then
    try:
        return check_bytes(path, data, keys, sequence)
    except Exception as exc:  # noqa: BLE001 - one file must never take the run down
        from upsertsink.lint.checker import _parse_error

        return FileResult([_parse_error(path, 1, 1, f"internal error {exc.__class__.__name__}: {exc}")], True)


def _serial(items: list, progress: Callable[[int, int], None]) -> list[FileResult | None]:
    out: list[FileResult | None] = []
    for item in items:
        out.append(_work(item))
        progress(len(out), len(items))
    return out


def lint_paths(
    paths: list[Path],
    settings: Settings,
    use_cache: bool = True,
    jobs: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RunResult:
    """Lint files and folders; findings are filtered by select/ignore but not by severity.

    ``progress(done, total)`` is called as files needing analysis are finished (for a progress bar).
    """
    enabled = gc.isenabled()
    gc.disable()  # ASTs are large acyclic object graphs: collection passes would only cost time
    try:
        return _lint_paths(paths, settings, use_cache, jobs, progress or _no_progress)
    finally:
        if enabled:
            gc.enable()


def _no_progress(done: int, total: int) -> None:
    return None


def _lint_paths(
    paths: list[Path],
    settings: Settings,
    use_cache: bool,
    jobs: int | None,
    progress: Callable[[int, int], None],
) -> RunResult:
    files = discover(paths, settings)
    result = RunResult()
    result.stats.files_checked = len(files)
    cache = Cache(settings.root, settings) if use_cache else None
    todo: list[tuple[str, bytes, str]] = []
    per_file: dict[str, list[Finding]] = {}
    for f in files:
        shown = display_path(f)
        try:
            data = f.read_bytes()
        except OSError as exc:
            from upsertsink.lint.checker import _parse_error

            per_file[shown] = [_parse_error(shown, 1, 1, f"cannot read the file: {exc.strerror}")]
            continue
        digest = hashlib.blake2b(data, digest_size=20).hexdigest() if cache is not None else ""
        cached = cache.findings(digest, shown) if cache is not None else None
        if cached is not None:
            result.stats.cache_hits += 1
            per_file[shown] = cached
            continue
        todo.append((shown, data, digest))
    items = [(shown, data, settings.keys, settings.sequence) for shown, data, _ in todo]
    total = sum(len(d) for _, d, _ in todo)
    workers = jobs if jobs is not None else (os.cpu_count() or 1)
    if workers > 1 and len(items) >= _PARALLEL_MIN_FILES and total >= _PARALLEL_MIN_BYTES:
        order = sorted(range(len(items)), key=lambda i: -len(items[i][1]))
        outputs: list[FileResult | None] = [None] * len(items)
        import multiprocessing

        try:  # import the SQL parser once here, so that forked workers inherit it instead of each importing it
            import sqlglot  # noqa: F401
            from sqlglot.dialects.spark import Spark  # noqa: F401
        except ImportError:
            pass

        ctx = multiprocessing.get_context("fork") if sys.platform.startswith("linux") else None
        try:
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
                for done, (i, res) in enumerate(
                    zip(order, pool.map(_work, [items[i] for i in order], chunksize=2), strict=True), 1
                ):
                    outputs[i] = res
                    progress(done, len(items))
            result.stats.workers = workers
        except (OSError, BrokenProcessPool):  # no process support here (sandbox, no /dev/shm): one process
            outputs = _serial(items, progress)
    else:
        outputs = _serial(items, progress)
    for (shown, _data, digest), res in zip(todo, outputs, strict=True):
        assert res is not None
        if res.parsed:
            result.stats.parsed += 1
        else:
            result.stats.prefiltered += 1
        per_file[shown] = res.findings
        if cache is not None:
            cache.put(digest, res.findings)
    if cache is not None:
        cache.save()
    findings = [f for fs in per_file.values() for f in fs if settings.enabled(f.rule)]
    findings.sort(key=lambda f: (f.path, f.line, f.column, f.rule))
    result.findings = findings
    return result
