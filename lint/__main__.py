"""``python -m upsertsink.lint``: the same command as ``upsertsink lint``."""

from .command.cli import main

if __name__ == "__main__":
    main()
