"""The `upsertsink` command. Subcommands load lazily, so `upsertsink lint` never imports pyspark."""

from __future__ import annotations

import importlib

import click

from upsertsink.cli_common import ErrorStyleGroup

# name -> "module:attribute" of a click command
_COMMANDS = {
    "write": "upsertsink.cli_write:write",
    "status": "upsertsink.cli_write:status",
    "batches": "upsertsink.cli_batches:batches_command",
    "maintain": "upsertsink.cli_write:maintain",
    "diff": "upsertsink.cli_diff:diff_command",
    "replay-check": "upsertsink.cli_diff:replay_check_command",
    "lint": "upsertsink.lint.command.cli:lint_command",
    "server": "upsertsink.lint.server.lsp:server_command",
}


class LazyGroup(ErrorStyleGroup):
    def list_commands(self, ctx: click.Context) -> list[str]:
        import importlib.util  # only for --help: every command's start-up pays for what it imports

        return sorted(n for n, t in _COMMANDS.items() if importlib.util.find_spec(t.split(":")[0]))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        """click's, with the commands a misspelled name comes close to (``stauts``: did you mean 'status'?);
        click offers them only for the commands it has loaded, and this group loads them lazily."""
        name = args[0] if args else ""
        if args and not name.startswith("-") and name not in _COMMANDS and not ctx.resilient_parsing:
            import difflib

            close = difflib.get_close_matches(name, list(_COMMANDS), n=3, cutoff=0.6)
            hint = ""
            if len(close) == 1:
                hint = f" Did you mean '{close[0]}'?"
            elif close:
                hint = " Did you mean one of " + ", ".join(f"'{c}'" for c in close) + "?"
            raise click.UsageError(f"No such command '{name}'.{hint}", ctx)
        return super().resolve_command(ctx, args)


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    # the version is read from the package metadata only when asked for (importlib.metadata costs ~20 ms)
    if not value or ctx.resilient_parsing:
        return
    import upsertsink

    click.echo(f"upsertsink {upsertsink.__version__}")
    ctx.exit()


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "-V",
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
def main() -> None:
    """Exactly-once-in-effect writes to Delta tables: write, lint, compare."""


if __name__ == "__main__":
    main(prog_name="upsertsink")
