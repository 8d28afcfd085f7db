"""What ``upsertsink lint`` does once its command line is read: the lint run, the fixes, the report, and
the commands that print and exit (``--explain``, ``--show-settings``, ``--show-files``, ``--clean``).

It imports no click: the command line is read either by click (:mod:`upsertsink.lint.command.cli`:
``--help``, usage errors, ``python -m upsertsink.lint``) or, for the ``upsertsink`` entry point, by
:func:`upsertsink.lint.command.options.quick_parse` (:func:`quick_main`), and both call :func:`run_lint`
with the command line read (:class:`~upsertsink.lint.command.options.LintArgs`).
Errors are one line, ``upsertsink: error: <message>``, on stderr with exit code 2.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

# Start-up counts for small runs: the rules, the analysis, the report formats and the process pool load when
# a run needs them (tests/lint/test_lint_startup.py), not here.
from ..run import runrecord
from ..run.cache import CACHE_DIR
from ..run.config import ConfigError, Settings, resolve_settings, settings_toml, split_codes
from ..run.discovery import PathError, discover, display_path, is_excluded
from ..run.runner import RunResult, lint_paths
from .options import LintArgs
from .terminal import colors, is_terminal, markdown_text

EXIT_USAGE = 2


class LintUsageError(Exception):
    """Usage or configuration error: ``upsertsink: error: ...`` on stderr, exit code 2."""

    exit_code = EXIT_USAGE

    def format_message(self) -> str:
        return str(self)


def error_line(message: str) -> None:
    """Print the one error style, ``upsertsink: error: MESSAGE`` on one line, on stderr."""
    _echo(f"upsertsink: error: {' '.join(str(message).split())}", err=True)


def _echo(text: str, err: bool = False, nl: bool = True) -> None:
    """Write a line to stdout or stderr and flush it (what ``click.echo`` does with text)."""
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n" if nl else text)
    stream.flush()


def quick_main(args: Sequence[str]) -> int | None:
    """``upsertsink lint ARGS`` without click, when :func:`~upsertsink.lint.command.options.quick_parse` reads
    the command line; the exit code, or None to hand the command line to click."""
    from .options import quick_parse

    params = quick_parse(args)
    if params is None:
        return None
    try:
        run_lint(list(args), LintArgs(**params))
    except LintUsageError as exc:
        error_line(exc.format_message())
        return exc.exit_code
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except (EOFError, KeyboardInterrupt):
        _echo("\nAborted!", err=True)  # as click ends an interrupted command
        return 1
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        # the reader of the output went away (``| head``): click's answer, exit 1 without a traceback
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - nothing more may reach the closed pipe
        return 1
    finally:
        runrecord.stop()
    return 0


def run_lint(raw_args: Sequence[str], args: LintArgs) -> None:
    """Run ``upsertsink lint`` with the command line ``args`` (read by click or by
    :func:`~upsertsink.lint.command.options.quick_parse`); ``raw_args`` (the command line after ``lint``) keys
    the run's record. Usage and configuration errors raise :class:`LintUsageError`; the exit code of findings
    is ``sys.exit``'s."""
    if args.explain is not None:
        _explain(args.explain, args.fmt)
        return
    if args.fmt == "markdown":
        raise LintUsageError("--format markdown is for --explain (a rule's documentation), not for a report")
    stdin_name = _check_combinations(args)
    targets = [] if stdin_name is not None else (list(args.paths) or [Path(".")])
    record = None
    if not (args.fix or args.diff or args.add_noqa or args.no_cache) and _recordable(stdin_name, args):
        # (--clean, --show-settings and --show-files return before the end, where a record is saved)
        record = runrecord.start(list(raw_args))
    try:
        settings = _settings(args, targets or [stdin_name])
        if _printed_and_done(args, settings, targets, stdin_name):
            return
        stdin = (stdin_name, _read_stdin()) if stdin_name is not None else None
        with _progress_bar(enabled=not args.quiet) as progress:
            use_cache = not args.no_cache
            result = lint_paths(targets, settings, use_cache=use_cache, progress=progress, stdin=stdin)
    except (ConfigError, PathError) as exc:
        raise LintUsageError(str(exc)) from exc
    if stdin is not None and (args.fix or args.diff):
        _fix_stdin(stdin, result, settings, args)
        return
    if args.add_noqa:
        _add_noqa(result, args.quiet)
        return
    out = _Output(args.output_file)
    if args.fix or args.diff:
        result = _apply_fixes(result, settings, targets, args, out)
    code = _report(result, settings, args, out)
    if record is not None:
        record.save(code, str(settings.root))
    if code:
        sys.exit(code)


def _explain(code: str, fmt: str) -> None:
    """``--explain CODE``: the rule's documentation, as readable text on a terminal (in colour, unless
    ``NO_COLOR``), as Markdown when piped or with ``--format markdown``."""
    from ..rules import RULES

    rule = RULES.get(code.strip().upper())
    if rule is None:
        raise LintUsageError(f"unknown rule code {code!r} (known: {', '.join(RULES)})")
    if fmt != "markdown" and is_terminal():
        _echo(markdown_text(rule.explain(), colors()), nl=False)
    else:
        _echo(rule.explain(), nl=False)


def _check_combinations(args: LintArgs) -> Path | None:
    """Refuse the flags that cannot go together; the name standard input is linted under, if it is read."""
    if args.add_noqa and (args.fix or args.diff):
        raise LintUsageError("--add-noqa cannot be combined with --fix or --diff")
    stdin_name = _stdin_name(args.paths, args.stdin_filename)
    if stdin_name is not None and args.add_noqa:
        raise LintUsageError("--add-noqa cannot be used with standard input ('-'): it edits files")
    return stdin_name


def _settings(args: LintArgs, targets: list[Path]) -> Settings:
    """The run's settings: the config found for ``targets`` (or given) with the command line's flags."""
    split_codes(args.select, "--select")
    split_codes(args.extend_select, "--extend-select")
    split_codes(args.ignore, "--ignore")
    settings = resolve_settings(
        targets,
        args.config,
        args.keys,
        args.sequence,
        args.select,
        args.ignore,
        args.fail_on,
        extend_select=args.extend_select,
        exclude=args.exclude or None,
        extend_exclude=args.extend_exclude,
    )
    settings.force_exclude = args.force_exclude
    return settings


def _printed_and_done(
    args: LintArgs, settings: Settings, targets: list[Path], stdin_name: Path | None
) -> bool:
    """``--clean``, ``--show-settings`` and ``--show-files``: do it, and say the command is done."""
    if args.clean:
        _clean(settings, args.quiet)
    elif args.show_settings:
        _echo(_show_settings(settings, targets or [stdin_name], args.fmt), nl=False)
    elif args.show_files:
        _show_files(targets, settings, stdin_name)
    else:
        return False
    return True


def _apply_fixes(
    result: RunResult, settings: Settings, targets: list[Path], args: LintArgs, out: _Output
) -> RunResult:
    """``--fix`` (the files rewritten; what remains is linted again) or ``--diff`` (printed; the command
    exits)."""
    from .apply_fixes import apply_fixes

    outcome = apply_fixes(result, settings, unsafe=args.unsafe_fixes, write=not args.diff)
    if args.diff:
        out.write("".join(edit.diff() for edit in outcome.edits if edit.changed))
        out.close()
        if not args.quiet:
            _note(outcome.summary(dry_run=True))
        sys.exit(1 if outcome.fixed and not args.exit_zero else 0)
    if not args.quiet:
        _note(outcome.summary(dry_run=False))
    # what is left: the fixed files linted again (unchanged files come from the cache)
    with _progress_bar(enabled=False) as progress:
        return lint_paths(targets, settings, use_cache=not args.no_cache, progress=progress)


def _report(result: RunResult, settings: Settings, args: LintArgs, out: _Output) -> int:
    """Write the report (or the statistics) and the fix hint; the exit code of the findings."""
    from ..check.checker import fixable
    from .report import render, render_statistics

    can_fix = fixable(result.findings, args.unsafe_fixes)
    on_screen = args.output_file is None and is_terminal()
    if args.statistics:
        out.write(render_statistics(args.fmt, result.findings, {id(f) for f in can_fix}))
    else:
        out.write(
            render(
                args.fmt,
                result.findings,
                result.stats.files_checked,
                settings.root,
                quiet=args.quiet,
                fixable={id(f) for f in can_fix},
                terminal=on_screen,
                color=on_screen and colors(),
            )
        )
    out.close()
    if not args.quiet and args.fmt in ("text", "full", "concise"):
        _fix_hint(result, can_fix, args.unsafe_fixes)
    return _exit_code(result, settings, args.exit_zero)


def _exit_code(result: RunResult, settings: Settings, exit_zero: bool) -> int:
    """1 when a finding is at or above ``fail-on`` (and not ``--exit-zero``), else 0."""
    failing = {"error"} if settings.fail_on == "error" else {"error", "warning"}
    return 1 if not exit_zero and any(f.severity in failing for f in result.findings) else 0


def _recordable(stdin_name: Path | None, args: LintArgs) -> bool:
    """Does the run leave a record (runrecord)? Only a report of files on stdout, in a format that depends
    on nothing but the findings."""
    return (
        stdin_name is None
        and args.output_file is None
        and args.fmt not in runrecord.UNRECORDED_FORMATS
        and not os.environ.get(runrecord.OFF_ENV)
    )


def _stdin_name(paths: tuple[Path, ...], stdin_filename: str | None) -> Path | None:
    """The name standard input is linted under, when it is read (the path ``-``, or no path and
    ``--stdin-filename``, as in ruff); None when files are linted."""
    dash = [p for p in paths if str(p) == "-"]
    if dash and len(paths) > 1:
        raise LintUsageError("'-' (standard input) cannot be combined with other paths")
    if not dash and paths and stdin_filename is not None:
        raise LintUsageError("--stdin-filename needs the path '-' (standard input), not files")
    if not dash and stdin_filename is None:
        return None
    return Path(stdin_filename if stdin_filename is not None else "-")


def _read_stdin() -> bytes:
    stream = getattr(sys.stdin, "buffer", None)
    data = stream.read() if stream is not None else sys.stdin.read()
    return data.encode("utf-8") if isinstance(data, str) else data


def _fix_stdin(stdin: tuple[Path, bytes], result: RunResult, settings: Settings, args: LintArgs) -> None:
    """``--fix`` / ``--diff`` on standard input, as ruff does them: ``--fix`` prints the fixed source on
    stdout and reports what remains on stderr; ``--diff`` prints the diff (exit 1 when there is a fix)."""
    from ..check.checker import decode
    from .rewrite import fix_file, module_name

    name, data = stdin
    text = decode(data).removeprefix("\ufeff")
    edit = None
    if not name.name.endswith(".ipynb"):  # notebooks are never rewritten (docs/linter.md, Fixes)
        findings = [f for f in result.findings if f.path == display_path(name)]
        module = module_name(name, settings.root)
        edit = fix_file(display_path(name), text, findings, module, args.unsafe_fixes)
    changed = edit is not None and edit.changed
    if args.diff:
        sys.stdout.write(edit.diff() if changed else "")
        sys.stdout.flush()
        sys.exit(1 if changed and not args.exit_zero else 0)
    fixed = edit.after if changed else text
    sys.stdout.write(fixed)
    sys.stdout.flush()
    if changed:
        result = lint_paths([], settings, use_cache=not args.no_cache, stdin=(name, fixed.encode("utf-8")))
    if result.findings and not args.quiet:
        from .report import render

        report = render(args.fmt, result.findings, result.stats.files_checked, settings.root)
        _echo(report, err=True, nl=False)
    if _exit_code(result, settings, args.exit_zero):
        sys.exit(1)


def _show_files(targets: list[Path], settings: Settings, stdin_name: Path | None) -> None:
    """``--show-files``: the files a run would lint (absolute paths, sorted, as ruff prints them)."""
    files = [p.resolve() for p in discover(targets, settings)]
    if stdin_name is not None and not (settings.force_exclude and is_excluded(stdin_name, settings)):
        files.append(stdin_name.resolve())
    for p in sorted(set(files)):
        _echo(str(p))


def _show_settings(settings: Settings, targets: list[Path], fmt: str) -> str:
    """``--show-settings``: the resolved settings, as TOML (the lint table plus what the run adds)."""
    first = targets[0]
    if first.is_dir():
        found = discover([first], settings)
        first = found[0] if found else first
    return (
        f"# Resolved settings for: {first.resolve()}\n"
        f"# Settings path: {settings.config_path.resolve() if settings.config_path else 'none (defaults)'}\n"
        + settings_toml(settings, fmt)
    )


class _Output:
    """stdout, or the --output-file (written as a whole at the end)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.parts: list[str] = []

    def write(self, text: str) -> None:
        if self.path is None:
            runrecord.emit(1, text)
            sys.stdout.write(text)
        else:
            self.parts.append(text)

    def close(self) -> None:
        if self.path is None:
            sys.stdout.flush()
            return
        try:
            if self.path.parent != Path(""):
                self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text("".join(self.parts), encoding="utf-8")
        except OSError as exc:
            raise LintUsageError(f"--output-file: cannot write {self.path}: {exc.strerror or exc}") from exc


def _note(text: str) -> None:
    if text:
        runrecord.emit(2, text + "\n")
        _echo(text, err=True)


def _fix_hint(result: RunResult, can_fix: list, unsafe: bool) -> None:
    """ruff's hint about available fixes, on stderr so that stdout stays the report."""
    from ..check.checker import fixable

    hidden = len(fixable(result.findings, True)) - len(can_fix)
    parts = []
    if can_fix:
        parts.append(f"[*] {len(can_fix)} fixable with `--fix`{' --unsafe-fixes' if unsafe else ''}.")
    if hidden > 0:
        parts.append(f"{hidden} more fixable with `--fix --unsafe-fixes`.")
    _note(" ".join(parts))


def _add_noqa(result: RunResult, quiet: bool) -> None:
    from .apply_fixes import add_noqa_to_files

    added, files, skipped = add_noqa_to_files(result)
    if not quiet:
        noun = "directive" if added == 1 else "directives"
        _note(f"Added {added} noqa {noun} to {files} file{'s' if files != 1 else ''}.")
        for where, why in skipped:
            _note(f"{where}: no noqa added ({why})")


def _clean(settings: Settings, quiet: bool) -> None:
    """Delete the lint cache files of the project (``.upsertsink_cache/lint-*.json``)."""
    folder = settings.root / CACHE_DIR
    removed = 0
    if folder.is_dir():
        runrecord.remove_records(str(folder))  # the run records go with it (not counted: derived data)
        for p in [*folder.glob("lint-*.json"), *folder.glob("lint.*.tmp")]:
            with contextlib.suppress(OSError):
                p.unlink()
                removed += 1
        rest = [p for p in folder.iterdir() if p.name != ".gitignore"]
        if not rest:
            with contextlib.suppress(OSError):
                (folder / ".gitignore").unlink(missing_ok=True)
                folder.rmdir()
    if not quiet:
        noun = "file" if removed == 1 else "files"
        _note(f"Removed {removed} lint cache {noun} from {folder}.")


@contextlib.contextmanager
def _progress_bar(enabled: bool = True) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar on stderr whenever stderr is a terminal (whatever stdout is), rich is installed
    and there is enough work; otherwise nothing."""
    if not enabled or not _stderr_is_terminal():
        yield None
        return
    try:
        from rich.console import Console
        from rich.progress import Progress
    except ImportError:  # the light install has no rich: no bar (rich comes with upsertsink[embedded])
        yield None
        return

    with Progress(transient=True, console=Console(stderr=True)) as bar:
        task = None

        def update(done: int, total: int) -> None:
            nonlocal task
            if total < 50:
                return
            if task is None:
                task = bar.add_task("linting", total=total)
            bar.update(task, completed=done)

        yield update


def _stderr_is_terminal() -> bool:
    try:
        return os.isatty(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):
        return bool(getattr(sys.stderr, "isatty", lambda: False)())
