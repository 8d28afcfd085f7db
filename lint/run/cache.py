"""The content-hash cache (``lint-*.json`` under the project's ``.upsertsink_cache``).

Costs, cheapest first: a file whose size and modification time are those the cache recorded for it costs one
``stat`` (ruff's cache keys on the same; a file modified less than two seconds before it was hashed is never
served that way, so an edit within the file system's timestamp resolution is still seen); a file whose
content hash is in the cache costs one read and one hash. One cache file per linter build and settings.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from ..check.checker import FileResult, Finding
from ..values.paths import ABSENT
from .config import Settings

try:  # hashlib's OpenSSL half costs a few milliseconds to load and BLAKE2 does not need it
    from _blake2 import blake2b
except ImportError:  # another interpreter
    from hashlib import blake2b


CACHE_DIR = ".upsertsink_cache"
_CACHE_FORMAT = "lint-cache-2"  # the shape of an entry; the linter's own source is hashed in as well
_STAT_MARGIN_NS = 2_000_000_000  # a file modified this recently is hashed, never served by its stat


def _linter_fingerprint() -> str:
    h = blake2b(_CACHE_FORMAT.encode(), digest_size=16)
    pkg = Path(__file__).resolve().parents[1]  # the linter's package folder (this file is in its run/)
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
                if dep_digest == ABSENT:  # a place where no .sql file was: one there now is read
                    if os.path.isfile(dep):
                        return None
                    continue
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
