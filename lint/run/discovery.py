"""Finding the files to lint: Python files and notebooks under the paths given, honouring .gitignore files,
the configured ``exclude`` globs and the built-in folder excludes; and the paths findings are shown with.

Patterns are matched by :func:`upsertsink.lint.run.globs.compile_globs`: the simple forms real ignore files hold
without pathspec, whose import costs more than the rest of a one-file run's start-up; the exclude globs are
compiled only when a folder is walked (or ``--force-exclude`` asks about a file named explicitly).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from . import runrecord
from .config import Settings
from .globs import compile_globs

if TYPE_CHECKING:
    from .globs import Matcher

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
# DEFAULT_EXCLUDES are folder patterns: a folder matches by its name (the walk never enters a matched folder,
# so the folders above a file have passed already)
_DEFAULT_DIR_NAMES = frozenset(p.rstrip("/") for p in DEFAULT_EXCLUDES if "*" not in p)
_DEFAULT_DIR_SUFFIXES = tuple(p.rstrip("/").lstrip("*") for p in DEFAULT_EXCLUDES if p.startswith("*"))


class PathError(Exception):
    """A path given on the command line does not exist (exit code 2)."""


def default_excluded(rel: str, is_dir: bool) -> bool:
    """Does a built-in exclude (``DEFAULT_EXCLUDES``, all folder patterns) match ``rel`` (a path relative to
    the walked folder), as pathspec's gitignore matching would? Only folders match, by name, at any depth."""
    parts = rel.split("/")
    if not is_dir:
        parts = parts[:-1]
    return any(p in _DEFAULT_DIR_NAMES or p.endswith(_DEFAULT_DIR_SUFFIXES) for p in parts)


def _gitignore_spec(folder: Path) -> Matcher | None:
    gi = folder / ".gitignore"
    runrecord.note(gi)
    if not gi.is_file():
        return None
    try:
        # a line pathspec cannot read is left out, as git leaves out what it cannot read
        return compile_globs(gi.read_text(encoding="utf-8", errors="replace").splitlines(), skip_invalid=True)
    except (OSError, ValueError):
        return None


def _below(full: str, folder: str) -> str | None:
    """``full`` relative to ``folder`` (both absolute path strings), forward slashes; None when not below it.
    What :func:`rel_path` gives for a path below the folder, without building Path objects (the walk asks
    it for every file and folder, against every ignore file in force)."""
    prefix = folder if folder.endswith(os.sep) else folder + os.sep
    if not full.startswith(prefix):
        return None
    rel = full[len(prefix) :]
    return rel if os.sep == "/" else rel.replace(os.sep, "/")


def rel_path(path: Path, base: Path) -> str | None:
    try:
        return path.relative_to(base).as_posix()
    except ValueError:
        return None


def discover(paths: list[Path], settings: Settings) -> list[Path]:
    """Python files and notebooks (``.py``, ``.pyi``, ``.ipynb``) under ``paths``. Walked folders honour .gitignore files, the configured ``exclude``
    globs and the default excludes; a file or folder named explicitly is always linted, even if excluded."""
    return [p for p, _ in discover_real(paths, settings)]


def discover_real(paths: list[Path], settings: Settings) -> list[tuple[Path, Path]]:
    """:func:`discover`'s files, each with its real path (resolved once: a folder's real path once per folder,
    a file's own only when it is a symbolic link)."""
    root = settings.root
    exclude: Matcher | None = None
    out: list[tuple[Path, Path]] = []
    seen: set[Path] = set()
    for given in paths:
        runrecord.note(given)
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
        inherited: list[tuple[Path, Matcher]] = []
        for folder in [root, *[p for p in base.parents if rel_path(p, root) not in (None, ".")]]:
            spec = _gitignore_spec(folder)
            if spec is not None and rel_path(base, folder) is not None:
                rel = rel_path(base, folder)
                if rel == "." or not (spec.match_file(rel) or spec.match_file(rel + "/")):
                    inherited.append((folder, spec))
        if exclude is None and settings.excludes():
            exclude = settings.exclude_matcher()
        root_rel = rel_path(base, root)
        use_exclude = exclude is not None and not (
            root_rel not in (None, ".")
            and (exclude.match_file(root_rel) or exclude.match_file(root_rel + "/"))
        )
        base_s, root_s = str(base), str(root)
        for dirpath, dirnames, filenames in os.walk(base):
            runrecord.note(dirpath)  # an entry added, removed or renamed changes its modification time
            d = Path(dirpath)
            # the walk starts at a resolved folder and never enters a linked one (followlinks=False), so every
            # folder it visits is its own real path (realpath here cost an lstat per path component)
            real_dir = dirpath
            local = _gitignore_spec(d)
            if local is not None and d != root:
                inherited.append((d, local))
            specs = [(str(folder), spec) for folder, spec in inherited]

            def ignored(
                full: str,
                is_dir: bool,
                specs=specs,
                use_exclude=use_exclude,
                base_s=base_s,
                root_s=root_s,
                exclude=exclude,
            ) -> bool:
                suffix = "/" if is_dir else ""
                rel_walk = _below(full, base_s)
                if rel_walk is not None and default_excluded(rel_walk, is_dir):
                    return True
                for folder, spec in specs:
                    rel = _below(full, folder)
                    if rel is not None and spec.match_file(rel + suffix):
                        return True
                if use_exclude:
                    rel = _below(full, root_s)
                    if rel is not None and exclude.match_file(rel + suffix):
                        return True
                return False

            join = os.path.join
            if specs or use_exclude:
                dirnames[:] = sorted(n for n in dirnames if not ignored(join(dirpath, n), True))
            else:  # only the built-in folder excludes apply: by name, and never to a file (see default_excluded)
                dirnames[:] = sorted(n for n in dirnames if not default_excluded(n, True))
            for name in sorted(filenames):
                if not (name.endswith((".py", ".pyi", ".ipynb"))):
                    continue
                full = join(dirpath, name)
                if (specs or use_exclude) and ignored(full, False):
                    continue
                p = d / name
                rp = Path(os.path.realpath(full) if os.path.islink(full) else join(real_dir, name))
                if rp not in seen:
                    seen.add(rp)
                    out.append((p, rp))
    return out


def is_excluded(path: Path, settings: Settings) -> bool:
    """Do the exclude globs (``exclude`` and ``extend-exclude``, relative to the project root) match
    ``path`` or one of its folders? (What ``--force-exclude`` applies to files named explicitly.)"""
    globs = settings.excludes()
    rel = rel_path(path.resolve(), settings.root.resolve())
    if not globs or rel is None:
        return False
    spec = settings.exclude_matcher()
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
