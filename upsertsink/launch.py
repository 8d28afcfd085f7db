"""The ``upsertsink`` command's entry point.

``upsertsink lint ...`` is first offered to the run records (:mod:`upsertsink.lint.runrecord`): when the same
command ran before from the same folder and nothing it read has changed, its output is written again and the
command exits, before click or the linter load. Everything else is the click command line
(:mod:`upsertsink.cli`).
"""

import sys


def main() -> None:
    if sys.argv[1:2] == ["lint"]:
        from upsertsink.lint.runrecord import replay

        code = replay(sys.argv[2:])
        if code is not None:
            raise SystemExit(code)
    from upsertsink.cli import main as cli

    cli()
