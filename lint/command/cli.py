"""``upsertsink lint`` / ``python -m upsertsink.lint``: the linter's command line (flags as ruff has them).

The click command is built from the option table (:mod:`upsertsink.lint.command.options`) and runs
:func:`upsertsink.lint.command.main.run_lint`. The ``upsertsink`` entry point reads plain command lines
without click (:func:`upsertsink.lint.command.main.quick_main`) and comes here for the rest: ``--help``,
usage errors.

Errors are one line, ``upsertsink: error: <message>``, on stderr with exit code 2, for usage errors (an
unknown flag, a bad ``--format`` or ``UPSERTSINK_OUTPUT_FORMAT``) as much as for configuration errors,
whether the command runs under the ``upsertsink`` group or as ``python -m upsertsink.lint``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

import click

from ..run import runrecord
from .main import LintUsageError, error_line, run_lint
from .options import OPTIONS, LintArgs, Option

_RAW_ARGS = "upsertsink.lint.args"


def _fail(message: str, code: int) -> NoReturn:
    """Print the one error style and exit."""
    error_line(message)
    sys.exit(code)


class _LintCommand(click.Command):
    """A click command whose usage errors use the ``upsertsink: error:`` style even when it runs as a
    subcommand of a group that formats errors its own way."""

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        raw = list(args)
        try:
            ctx = super().make_context(info_name, args, parent=parent, **extra)
            ctx.meta[_RAW_ARGS] = raw  # the key of the run's record (runrecord)
            return ctx
        except click.UsageError as exc:
            ctx = exc.ctx
            path = ctx.command_path if ctx is not None else (info_name or "upsertsink lint")
            _fail(f"{exc.format_message().rstrip('.')} (see '{path} --help')", exc.exit_code)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except LintUsageError as exc:
            _fail(exc.format_message(), exc.exit_code)
        finally:
            runrecord.stop()


def _click_option(opt: Option) -> Callable[[Any], Any]:
    extra: dict[str, Any] = {"help": opt.help}
    if opt.kind == "flag":
        extra["is_flag"] = True
    else:
        extra["default"] = opt.default
        extra["multiple"] = opt.kind == "multiple"
    if opt.metavar is not None:
        extra["metavar"] = opt.metavar
    if opt.choices is not None:
        extra["type"] = click.Choice(opt.choices)
    elif opt.path:
        extra["type"] = click.Path(path_type=Path, dir_okay=opt.dir_okay)
    if opt.envvar is not None:
        extra.update(envvar=opt.envvar, show_envvar=True)
    if opt.default is not None and opt.kind == "value":
        extra["show_default"] = True
    return click.option(*opt.flags, opt.dest, **extra)


def _lint(**params: Any) -> None:
    """Find nondeterministic keys and values and non-idempotent writes in Spark job code.

    PATHS are files or folders (default: the current folder); '-' reads one file from standard input
    (named by --stdin-filename). Exit code 0: no finding at or above --fail-on; 1: findings (with --diff:
    fixes to apply); 2: usage or configuration error.
    """
    run_lint(click.get_current_context().meta.get(_RAW_ARGS, []), LintArgs(**params))


def _command() -> click.Command:
    fn: Any = _lint
    for opt in reversed(OPTIONS):  # click lists the options in the order of the decorators, top down
        fn = _click_option(opt)(fn)
    fn = click.argument("paths", nargs=-1, type=click.Path(path_type=Path))(fn)
    return click.command("lint", cls=_LintCommand, context_settings={"help_option_names": ["-h", "--help"]})(
        fn
    )


lint_command = _command()


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``python -m upsertsink.lint``."""
    lint_command.main(args=list(argv) if argv is not None else None, prog_name="python -m upsertsink.lint")
