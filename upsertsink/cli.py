"""The `upsertsink` command. Subcommands load lazily, so `upsertsink lint` never imports pyspark."""

from __future__ import annotations

import importlib
import importlib.util

import click

from upsertsink import __version__
from upsertsink.cli_common import ErrorStyleGroup

# name -> "module:attribute" of a click command
_COMMANDS = {
    "write": "upsertsink.cli_write:write",
    "status": "upsertsink.cli_write:status",
    "maintain": "upsertsink.cli_write:maintain",
    "diff": "upsertsink.cli_diff:diff_command",
    "replay-check": "upsertsink.cli_diff:replay_check_command",
    "lint": "upsertsink.lint.cli:lint_command",
    "server": "upsertsink.lint.server:server_command",
}


class LazyGroup(ErrorStyleGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(n for n, t in _COMMANDS.items() if importlib.util.find_spec(t.split(":")[0]))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "-V", "--version", prog_name="upsertsink", message="%(prog)s %(version)s")
def main() -> None:
    """Exactly-once-in-effect writes to Delta tables: write, lint, compare."""


if __name__ == "__main__":
    main(prog_name="upsertsink")
