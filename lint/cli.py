"""``upsertsink lint`` / ``python -m upsertsink.lint``: the determinism linter's command line."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import click
from upsertsink.lint.config import ConfigError, resolve_settings, split_codes
from upsertsink.lint.report import render
from upsertsink.lint.rules import RULES
from upsertsink.lint.runner import PathError, lint_paths


class LintUsageError(click.ClickException):
    """Usage or configuration error: printed to stderr, exit code 2."""

    exit_code = 2

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


@click.command("lint", context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "sarif", "github"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.option("--key", "keys", multiple=True, metavar="COL", help="A merge-key column (repeatable).")
@click.option("--sequence", "sequence", multiple=True, metavar="COL", help="A sequence column (repeatable).")
@click.option(
    "--select", multiple=True, metavar="CODES", help="Only these rule codes/prefixes (comma-separated)."
)
@click.option(
    "--ignore", multiple=True, metavar="CODES", help="Skip these rule codes/prefixes (comma-separated)."
)
@click.option(
    "--fail-on",
    type=click.Choice(["error", "warning"]),
    default=None,
    help="Lowest severity that makes the exit code 1 (default: error, or fail-on from the config).",
)
@click.option(
    "--config",
    "config",
    type=click.Path(path_type=Path),
    default=None,
    metavar="FILE",
    help="Read settings from FILE instead of the nearest pyproject.toml.",
)
@click.option("--no-cache", is_flag=True, help="Do not read or write the content-hash cache.")
@click.option(
    "--force-exclude",
    is_flag=True,
    help="Apply the configured exclude globs to files named on the command line too (for pre-commit).",
)
@click.option("--explain", metavar="CODE", default=None, help="Print the documentation of a rule and exit.")
def lint_command(
    paths: tuple[Path, ...],
    fmt: str,
    keys: tuple[str, ...],
    sequence: tuple[str, ...],
    select: tuple[str, ...],
    ignore: tuple[str, ...],
    fail_on: str | None,
    config: Path | None,
    no_cache: bool,
    force_exclude: bool,
    explain: str | None,
) -> None:
    """Find nondeterministic keys, sequences and values in Spark job code.

    PATHS are files or folders (default: the current folder). Exit code 0: no finding at or above
    --fail-on; 1: findings; 2: usage or configuration error.
    """
    if explain is not None:
        code = explain.strip().upper()
        if code not in RULES:
            raise LintUsageError(f"unknown rule code {explain!r} (known: {', '.join(RULES)})")
        click.echo(RULES[code].explain(), nl=False)
        return
    targets = list(paths) or [Path(".")]
    try:
        split_codes(select, "--select")
        split_codes(ignore, "--ignore")
        settings = resolve_settings(targets, config, keys, sequence, select, ignore, fail_on)
        settings.force_exclude = force_exclude
        with _progress_bar() as progress:
            result = lint_paths(targets, settings, use_cache=not no_cache, progress=progress)
    except (ConfigError, PathError) as exc:
        raise LintUsageError(str(exc)) from exc
    sys.stdout.write(render(fmt, result.findings, result.stats.files_checked, settings.root))
    sys.stdout.flush()
    failing = {"error"} if settings.fail_on == "error" else {"error", "warning"}
    if any(f.severity in failing for f in result.findings):
        sys.exit(1)


@contextlib.contextmanager
def _progress_bar() -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar on stderr when it is a terminal and there is enough work; otherwise nothing."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import Progress

    with Progress(transient=True, console=None) as bar:
        task = None

        def update(done: int, total: int) -> None:
            nonlocal task
            if total < 50:
                return
            if task is None:
                task = bar.add_task("linting", total=total)
            bar.update(task, completed=done)

        yield update


def main() -> None:
    """Entry point of ``python -m upsertsink.lint``."""
    lint_command(prog_name="python -m upsertsink.lint")
