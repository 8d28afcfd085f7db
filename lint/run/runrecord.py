"""Run records: a warm ``upsertsink lint`` answered without loading the linter (issue #24, item 5: speed).

A report run (no ``--fix``, ``--diff``, ``--add-noqa``, ``--output-file``, ``--no-cache`` or standard input)
leaves a record in the project's cache folder (``.upsertsink_cache/run-<key>``): what it wrote to stdout and
stderr, in order, its exit code, and the stat (modification time, size, inode) or the absence of every path
the run looked at:

- the configuration files it probed (each ``pyproject.toml`` from the first path up to the one it used,
  an explicit ``--config``);
- the paths given, every folder it walked or listed, every ``.gitignore`` it probed;
- every linted file, every project module it read for the values it exports and the candidates it probed
  for one, every ``.sql`` file a result depends on;
- the linter's own source files and folders.

The key of a record is the command line, the current folder, the ``UPSERTSINK_*`` environment (and
``NO_COLOR`` and ``TERM``, which colour a terminal's output), which streams are terminals and their
encodings, and the interpreter. A later run with the same key whose every
recorded path stats the same writes the recorded output and exits with the recorded code, before click,
pathlib or the configuration are loaded (:mod:`upsertsink.launch`). Anything else takes the full path, where
the content-hash cache (:mod:`.cache`) still serves the unchanged files.

A folder's modification time changes when an entry is added, removed or renamed in it, so a new file under
a walked folder, a new ``.gitignore`` or a module created where an import was looked up is seen. As in the
content-hash cache, a record is not written when a path it depends on was modified during the run or
just before it: within one tick of the file system's clock an edit could keep the stat. Just before is 50 ms
for a path whose modification time has a fraction of a second (Linux's file clock ticks every 1–10 ms), and
two seconds for one in whole seconds (FAT keeps two-second times, HFS+ and ext3 whole seconds). So a second
run 50 ms after the first records itself even when the first made the cache folder in a folder it walks.
The ``.sql`` files a result depends on are noted too, with the places one was looked for and not found
(``checker.ABSENT``): a file created there later is seen, by the record as by the content-hash cache.

Only the standard library's builtin modules are imported here: the replay's cost is the interpreter's own
start-up and one ``stat`` per recorded path. ``UPSERTSINK_NO_RUN_RECORD=1`` turns records off.
"""

from __future__ import annotations

import marshal
import os
import sys
import time

CACHE_DIR = ".upsertsink_cache"  # the content-hash cache's folder (cache.CACHE_DIR; checked by a test)
PREFIX = "run-"
FORMAT = 1  # the shape of a record
OFF_ENV = "UPSERTSINK_NO_RUN_RECORD"
_COLOR_ENV = ("NO_COLOR", "TERM")
_FINE_MARGIN_NS = 50_000_000  # a modification time with a fraction of a second: several clock ticks
_COARSE_MARGIN_NS = 2_000_000_000  # one in whole seconds (and the content-hash cache's stat margin)
_KEEP = 8  # records per cache folder (the oldest go first)
UNRECORDED_FORMATS = frozenset({"sarif", "gitlab"})  # they read more than the run's files (.git, CI env)

_active: Recording | None = None


def note(path: object) -> None:
    """Record that the current run depends on ``path`` (its stat, or its absence); no-op outside a run."""
    rec = _active
    if rec is not None:
        rec.paths.add(os.fspath(path))  # type: ignore[arg-type]


def note_all(paths: object) -> None:
    rec = _active
    if rec is not None:
        rec.paths.update(os.fspath(p) for p in paths)  # type: ignore[attr-defined]


def _stat(path: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _stream_facts(fd: int, stream: object) -> tuple[bool, str, str]:
    try:
        tty = os.isatty(fd)
    except OSError:
        tty = False
    return (tty, str(getattr(stream, "encoding", "")), str(getattr(stream, "errors", "")))


def key(argv: list[str], cwd: str) -> str:
    """The record key of a command: what the run's output may depend on besides the paths it stats."""
    # the output's colour on a terminal depends on NO_COLOR and TERM too (command/terminal.py)
    env = sorted((k, v) for k, v in os.environ.items() if k.startswith("UPSERTSINK_") or k in _COLOR_ENV)
    facts = (
        FORMAT,
        list(argv),
        cwd,
        env,
        _stream_facts(1, sys.stdout),
        _stream_facts(2, sys.stderr),
        sys.version,
        sys.executable,
    )
    try:
        from _blake2 import blake2b
    except ImportError:  # another interpreter
        from hashlib import blake2b
    return blake2b(marshal.dumps(facts), digest_size=16).hexdigest()


def _folders(argv: list[str], cwd: str) -> list[str]:
    """Where a record may be: the project root is the current folder or a folder above a path the command
    names (the first path, or ``--config``'s file); every argument is tried as a path (a wrong guess costs
    one failed open)."""
    starts = [cwd]
    for arg in argv:
        if arg.startswith("-"):
            arg = arg.partition("=")[2]
        if arg:
            starts.append(os.path.join(cwd, arg))
    out: list[str] = []
    seen: set[str] = set()
    for start in starts:
        d = os.path.normpath(start)
        while d not in seen:
            seen.add(d)
            out.append(d)
            d = os.path.dirname(d)
    return out


def replay(argv: list[str]) -> int | None:
    """Serve ``upsertsink lint ARGV`` from its record: write the recorded output and return the exit code; None when
    there is no record for it or something it depends on has changed (then run the linter)."""
    if os.environ.get(OFF_ENV):
        return None
    try:
        cwd = os.getcwd()
    except OSError:
        return None
    name = PREFIX + key(argv, cwd)
    for folder in _folders(argv, cwd):
        try:
            with open(os.path.join(folder, CACHE_DIR, name), "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        try:
            shape, paths, stats, chunks, code = marshal.loads(data)
        except (EOFError, ValueError, TypeError):
            continue
        if shape != FORMAT or not _unchanged(paths, stats):
            continue
        for stream, text in chunks:
            (sys.stdout if stream == 1 else sys.stderr).write(text)
        sys.stdout.flush()
        sys.stderr.flush()
        return int(code)
    return None


def _unchanged(paths: tuple[str, ...], stats: tuple[tuple[int, int, int] | None, ...]) -> bool:
    return all(_stat(path) == want for path, want in zip(paths, stats, strict=True))


class Recording:
    """The record of one run being made: the paths it depends on and its output."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = list(argv)
        self.cwd = os.getcwd()
        self.start_ns = time.time_ns()
        self.paths: set[str] = set()
        self.chunks: list[tuple[int, str]] = []

    def save(self, code: int, root: str) -> bool:
        """Write the record into ``root``'s cache folder (not when a path it depends on changed in the
        margin); False when it was not written."""
        paths = sorted(self.paths | set(_linter_sources()))
        stats = tuple(_stat(p) for p in paths)
        if any(s is not None and s[0] > self.start_ns - _margin(s[0]) for s in stats):
            return False
        folder = os.path.join(root, CACHE_DIR)
        name = PREFIX + key(self.argv, self.cwd)
        data = marshal.dumps((FORMAT, tuple(paths), stats, tuple(self.chunks), int(code)))
        tmp = os.path.join(folder, f"{name}.{os.getpid()}.tmp")
        try:
            if not os.path.isdir(folder):
                return False  # the content-hash cache makes the folder (and its .gitignore)
            with open(tmp, "wb") as fh:
                fh.write(data)
            os.replace(tmp, os.path.join(folder, name))
            _prune(folder)
        except OSError:
            _unlink(tmp)
            return False
        return True


def _margin(mtime_ns: int) -> int:
    """How long before the run a path must have last changed for its stat to be trusted."""
    return _COARSE_MARGIN_NS if mtime_ns % 1_000_000_000 == 0 else _FINE_MARGIN_NS


def _records(folder: str) -> list[str]:
    """The run records in a cache folder (with any temporary file a writer left), oldest first."""
    try:
        found = [
            (os.stat(e.path).st_mtime_ns, e.path) for e in os.scandir(folder) if e.name.startswith(PREFIX)
        ]
    except OSError:  # the folder, or a record another process just replaced
        return []
    return [path for _, path in sorted(found)]


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:  # gone already (another writer pruned it) or not ours to delete: nothing to clean up
        return


def _prune(folder: str) -> None:
    records = [p for p in _records(folder) if not p.endswith(".tmp")]
    for path in records[: max(0, len(records) - _KEEP)]:
        _unlink(path)


def _linter_sources() -> list[str]:
    """The linter's source files and folders (a changed linter never replays an older run's output)."""
    out = []
    package = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # this file is in the package's run/
    for dirpath, dirnames, filenames in os.walk(package):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        out.append(dirpath)
        out += [os.path.join(dirpath, f) for f in filenames if f.endswith(".py")]
    return out


def start(argv: list[str]) -> Recording:
    """Begin recording ``upsertsink lint ARGV`` (the paths noted from now on are its dependencies)."""
    global _active
    _active = Recording(argv)
    return _active


def emit(stream: int, text: str) -> None:
    """Record what the run writes to stdout (1) or stderr (2); no-op outside a run."""
    rec = _active
    if rec is not None and text:
        rec.chunks.append((stream, text))


def stop() -> None:
    global _active
    _active = None


def remove_records(folder: str) -> None:
    """Delete the run records in a cache folder (``--clean``)."""
    for path in _records(folder):
        _unlink(path)
