"""The options of ``upsertsink lint``, declared once, and the quick reading of a plain command line.

:mod:`upsertsink.lint.command.cli` builds the click command from :data:`OPTIONS` (help, ``--help``, errors,
``python -m upsertsink.lint``). :func:`quick_parse` reads the common command lines without click, for the
``upsertsink`` entry point (:mod:`upsertsink.launch`): importing click costs a process 50-75 ms on a slow
2-core machine, more than half of the 0.1 s a one-file run may take (issue #24). It gives the same values
click would give, or ``None`` for anything it does not read exactly as click does (``--help``, an unknown or
misspelled flag, a missing value, a value click would refuse, combined short flags, ``-oFILE``...): such a
command line goes to click, which prints its usual help or error. tests/lint/test_lint_options.py checks the
two against each other. Either reading becomes one :class:`LintArgs`.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..base.structs import struct

FORMAT_ENV = "UPSERTSINK_OUTPUT_FORMAT"
FORMATS = ("text", "full", "concise", "json", "sarif", "github", "gitlab", "junit", "pylint", "markdown")


@struct(frozen=True)
class Option:
    """One option: its flags, the parameter it fills (``dest``), and how its value is read. ``kind`` is
    ``flag`` (True when given), ``value`` (one value; the last one given wins) or ``multiple`` (every value
    given, in order). ``path`` values become :class:`pathlib.Path`; ``choices`` limits the values."""

    flags: tuple[str, ...]
    dest: str
    help: str
    kind: str = "value"
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    path: bool = False
    dir_okay: bool = True
    default: Any = None
    envvar: str | None = None


OPTIONS: tuple[Option, ...] = (
    Option(
        ("--format", "--output-format"),
        "fmt",
        "Output format: text (one line per finding), full (with the source line and a caret), concise "
        "(ruff's, [*] on fixable findings), json, sarif, github (workflow commands), gitlab (Code Quality), "
        "junit (XML), pylint; markdown only with --explain (the rule's Markdown even on a terminal).",
        choices=FORMATS,
        default="text",
        envvar=FORMAT_ENV,
    ),
    Option(("--key",), "keys", "A merge-key column (repeatable).", "multiple", "COL"),
    Option(("--sequence",), "sequence", "A sequence column (repeatable).", "multiple", "COL"),
    Option(("--select",), "select", "Only these rule codes/prefixes (comma-separated).", "multiple", "CODES"),
    Option(
        ("--extend-select",),
        "extend_select",
        "Add these rule codes/prefixes to the selection (comma-separated).",
        "multiple",
        "CODES",
    ),
    Option(("--ignore",), "ignore", "Skip these rule codes/prefixes (comma-separated).", "multiple", "CODES"),
    Option(
        ("--fail-on",),
        "fail_on",
        "Lowest severity that makes the exit code 1 (default: error, or fail-on from the config).",
        choices=("error", "warning"),
    ),
    Option(
        ("--config",),
        "config",
        "Read settings from FILE instead of the nearest pyproject.toml.",
        metavar="FILE",
        path=True,
    ),
    Option(("--fix",), "fix", "Apply the safe fixes to the files, then report what remains.", "flag"),
    Option(
        ("--unsafe-fixes",),
        "unsafe_fixes",
        "With --fix or --diff, apply the unsafe fixes too (they may change more than the finding).",
        "flag",
    ),
    Option(("--diff",), "diff", "Print the fixes as a unified diff instead of writing them.", "flag"),
    Option(("--add-noqa",), "add_noqa", "Add `# noqa: CODE` comments for every finding, then exit.", "flag"),
    Option(("--statistics",), "statistics", "Print the number of findings per rule instead of them.", "flag"),
    Option(
        ("--output-file", "-o"),
        "output_file",
        "Write the report to FILE instead of stdout.",
        metavar="FILE",
        path=True,
        dir_okay=False,
    ),
    Option(("--exit-zero", "-e"), "exit_zero", "Exit 0 even when findings are reported (2 stays 2).", "flag"),
    Option(("--quiet", "-q"), "quiet", "Print the findings only: no summary, hints or progress.", "flag"),
    Option(("--no-cache",), "no_cache", "Do not read or write the content-hash cache.", "flag"),
    Option(("--clean",), "clean", "Delete the lint cache of the project, then exit.", "flag"),
    Option(
        ("--force-exclude",),
        "force_exclude",
        "Apply the configured exclude globs to files named on the command line too (for pre-commit).",
        "flag",
    ),
    Option(
        ("--exclude",),
        "exclude",
        "Exclude globs (comma-separated, repeatable) replacing the configured exclude.",
        "multiple",
        "GLOBS",
    ),
    Option(
        ("--extend-exclude",),
        "extend_exclude",
        "Exclude globs (comma-separated, repeatable) added to the configured ones.",
        "multiple",
        "GLOBS",
    ),
    Option(
        ("--stdin-filename",),
        "stdin_filename",
        "With the path '-': lint standard input as if it were the file NAME.",
        metavar="NAME",
    ),
    Option(("--show-files",), "show_files", "Print the files that would be linted, then exit.", "flag"),
    Option(("--show-settings",), "show_settings", "Print the resolved settings, then exit.", "flag"),
    Option(("--explain",), "explain", "Print the documentation of a rule and exit.", metavar="CODE"),
)

_BY_FLAG = {flag: opt for opt in OPTIONS for flag in opt.flags}


@struct(frozen=True)
class LintArgs:
    """One ``upsertsink lint`` command line as read (by click or by :func:`quick_parse`): the paths, and the
    value of every option of :data:`OPTIONS` by its ``dest`` (a test checks the two lists match)."""

    paths: tuple[Path, ...] = ()
    fmt: str = "text"
    keys: tuple[str, ...] = ()
    sequence: tuple[str, ...] = ()
    select: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    fail_on: str | None = None
    config: Path | None = None
    fix: bool = False
    unsafe_fixes: bool = False
    diff: bool = False
    add_noqa: bool = False
    statistics: bool = False
    output_file: Path | None = None
    exit_zero: bool = False
    quiet: bool = False
    no_cache: bool = False
    clean: bool = False
    force_exclude: bool = False
    exclude: tuple[str, ...] = ()
    extend_exclude: tuple[str, ...] = ()
    stdin_filename: str | None = None
    show_files: bool = False
    show_settings: bool = False
    explain: str | None = None


def quick_parse(args: Sequence[str], environ: Mapping[str, str] = os.environ) -> dict[str, Any] | None:
    """The parameters click would pass to the lint command for ``args`` (``paths`` and every option's
    ``dest``), or None when ``args`` is not a command line this reads exactly as click does."""
    values: dict[str, Any] = {}
    paths: list[Path] = []
    i, n = 0, len(args)
    while i < n:
        arg = args[i]
        i += 1
        if arg == "--":
            for rest in args[i:]:
                path = _path(rest, True)
                if path is None:
                    return None
                paths.append(path)
            break
        if arg == "-" or not arg.startswith("-"):
            path = _path(arg, True)
            if path is None:
                return None
            paths.append(path)
            continue
        flag, eq, attached = arg.partition("=")
        opt = _BY_FLAG.get(flag)
        if opt is None or (eq and not flag.startswith("--")):
            return None  # --help, an unknown flag, ``-o=FILE``: click's own reading and messages
        if opt.kind == "flag":
            if eq:
                return None
            values[opt.dest] = True
            continue
        if eq:
            value = attached
        elif i < n and not args[i].startswith("-"):
            value = args[i]
            i += 1
        else:
            return None  # no value, or one that looks like a flag
        converted = _convert(opt, value)
        if converted is None:
            return None
        if opt.kind == "multiple":
            values.setdefault(opt.dest, []).append(converted)
        else:
            values[opt.dest] = converted
    out: dict[str, Any] = {"paths": tuple(paths)}
    for opt in OPTIONS:
        if opt.dest in values:
            value = values[opt.dest]
            out[opt.dest] = tuple(value) if opt.kind == "multiple" else value
        elif opt.kind == "multiple":
            out[opt.dest] = ()
        elif opt.kind == "flag":
            out[opt.dest] = False
        elif opt.envvar and environ.get(opt.envvar):
            value = _convert(opt, environ[opt.envvar])
            if value is None:
                return None
            out[opt.dest] = value
        elif opt.envvar and opt.envvar in environ:
            return None  # set but empty: left to click
        else:
            out[opt.dest] = opt.default
    return out


def _convert(opt: Option, value: str) -> Any:
    if opt.choices is not None and value not in opt.choices:
        return None
    if opt.path:
        return _path(value, opt.dir_okay)
    return value


def _path(value: str, dir_okay: bool) -> Path | None:
    """``click.Path(path_type=Path)``'s value: a path that does not exist, or one that exists and is
    readable (and not a folder when folders are refused); None when click would refuse it."""
    try:
        mode = os.stat(value).st_mode
    except OSError:
        return Path(value)
    except ValueError:  # a NUL in the name
        return None
    if (not dir_okay and stat.S_ISDIR(mode)) or not os.access(value, os.R_OK):
        return None
    return Path(value)
