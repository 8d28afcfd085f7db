"""Gitignore-style patterns (``.gitignore`` files, the ``exclude`` and ``per-file-ignores`` globs) matched
against paths relative to the folder they belong to, folders written with a trailing ``/``.

pathspec is the reference and matches every pattern git knows, but importing it costs a process 35-70 ms (it
loads typing, dataclasses and inspect): a one-file run in a project with a ``.gitignore`` paid that before its
first file. So the simple forms that real ignore files hold (GitHub's Python template entirely) are matched
here with one regular expression per kind of path, and any other line sends the whole list to pathspec:

- a pattern of one segment (no ``/`` but a trailing one) matches a file or folder name at any depth;
- a pattern with a leading or inner ``/`` matches segment by segment from the pattern's folder;
- a trailing ``/`` matches folders only; a folder that matches ignores everything below it;
- a trailing ``/**`` (``tests/**``, as exclude globs often end) matches everything below the folder before it;
- in a segment, ``*`` is any run of characters, ``?`` one character, ``[cod]`` or ``[a-z0-9_.]`` a class
  (letters, digits, ``_``, ``.`` and ranges of letters or of digits), none of them crossing ``/``.

Left to pathspec: ``!`` negation, any other ``**``, a backslash, leading or trailing spaces, an empty segment, a
negated class (``[!a]`` crosses ``/`` in pathspec, not in git) and any other class.
tests/lint/test_lint_globs.py checks the two agree on generated patterns and paths.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Protocol

_CLASS = re.compile(r"\[((?:[A-Za-z0-9_.](?:-[A-Za-z0-9])?)+)\]")
_TOKEN = re.compile(r"\*|\?|\[[^\]/]*\]|[^*?\[]+")
_PLAIN_SEGMENT = re.compile(r"[^*?\[\]\\]*")


class Matcher(Protocol):
    def match_file(self, file: str) -> bool: ...


class GlobError(ValueError):
    """A pattern pathspec cannot compile (``!`` alone, a class like ``[?-.]``); ``pattern`` names it."""

    def __init__(self, pattern: str) -> None:
        super().__init__(f"invalid pattern {pattern!r}")
        self.pattern = pattern


def _segment(seg: str) -> str | None:
    """The regular expression of one pattern segment, or None when it is not a simple form."""
    if not seg or "**" in seg or "\\" in seg:
        return None
    tokens = _TOKEN.findall(seg)
    if "".join(tokens) != seg:
        return None
    out = []
    for tok in tokens:
        if tok == "*":
            out.append("[^/]*")
        elif tok == "?":
            out.append("[^/]")
        elif tok.startswith("["):
            m = _CLASS.fullmatch(tok)
            if m is None or not all(_range_ok(a, b) for a, b in re.findall(r"(.)-(.)", m.group(1))):
                return None
            out.append(tok)
        elif _PLAIN_SEGMENT.fullmatch(tok):
            out.append(re.escape(tok))
        else:
            return None  # a lone ']'
    return "".join(out)


def _range_ok(a: str, b: str) -> bool:
    """A range within the digits, the lower-case or the upper-case letters (none of them holds ``/``)."""
    return a <= b and any(a in kind and b in kind for kind in (_DIGITS, _LOWER, _UPPER))


_DIGITS, _LOWER, _UPPER = "0123456789", "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class _Simple:
    """Patterns of the simple forms, as five alternations: names of folders / of files at any depth, paths
    of folders / of files from the pattern's folder, and the folders everything below which matches."""

    def __init__(self, kinds: dict[str, list[str]]):
        def alternation(parts: list[str]) -> re.Pattern[str] | None:
            return re.compile("|".join(f"(?:{p})" for p in parts)) if parts else None

        self._names_dir, self._names_file = alternation(kinds["names_dir"]), alternation(kinds["names_file"])
        self._paths_dir, self._paths_file = alternation(kinds["paths_dir"]), alternation(kinds["paths_file"])
        self._below = alternation([f"{p}/.*" for p in kinds["below"]])

    def match_file(self, file: str) -> bool:
        while file.startswith("./"):
            file = file[2:]
        if self._below is not None and self._below.fullmatch(file):
            return True
        is_dir = file.endswith("/")
        parts = file.rstrip("/").split("/")
        last = len(parts) - 1
        for i, name in enumerate(parts):
            folder = i < last or is_dir
            names = self._names_dir if folder else self._names_file
            if names is not None and names.fullmatch(name):
                return True
            paths = self._paths_dir if folder else self._paths_file
            if paths is not None and paths.fullmatch("/".join(parts[: i + 1])):
                return True
        return False


def compile_globs(lines: Iterable[str], skip_invalid: bool = False) -> Matcher:
    """A matcher for gitignore-style ``lines`` (blank lines and ``#`` comments skipped): the simple forms
    here, anything else by pathspec's ``GitIgnoreSpec``. A pattern pathspec cannot compile raises
    :class:`GlobError` naming it, or with ``skip_invalid`` (an ignore file, as git reads one) is left out."""
    lines = list(lines)
    kinds: dict[str, list[str]] = {
        k: [] for k in ("names_dir", "names_file", "paths_dir", "paths_file", "below")
    }
    for line in lines:
        if not line or line.startswith("#"):
            continue
        if line.startswith("!") or line != line.strip():
            return _pathspec(lines, skip_invalid)
        dir_only = line.endswith("/")
        body = line[:-1] if dir_only else line
        below = not dir_only and body.endswith("/**")
        if below:
            body = body[:-3]
        anchored = "/" in body or below
        segments = body[1:].split("/") if body.startswith("/") else body.split("/")
        regexes = [_segment(s) for s in segments]
        if any(r is None for r in regexes) or "." in segments or ".." in segments:
            return _pathspec(lines, skip_invalid)
        regex = "/".join(r for r in regexes if r is not None)
        if below:
            kinds["below"].append(regex)
            continue
        kinds["paths_dir" if anchored else "names_dir"].append(regex)
        if not dir_only:
            kinds["paths_file" if anchored else "names_file"].append(regex)
    return _Simple(kinds)


def _pathspec(lines: list[str], skip_invalid: bool) -> Matcher:
    import pathspec

    errors = (ValueError, re.error)  # pathspec lets re.error out of a class it cannot translate
    try:
        return pathspec.GitIgnoreSpec.from_lines(lines)
    except errors:
        pass  # find the patterns it cannot read: the first one named, or (an ignore file) all left out
    bad = []
    for line in lines:
        try:
            pathspec.GitIgnoreSpec.from_lines([line])
        except errors as exc:
            if not skip_invalid:
                raise GlobError(line) from exc
            bad.append(line)
    return pathspec.GitIgnoreSpec.from_lines([line for line in lines if line not in bad])
