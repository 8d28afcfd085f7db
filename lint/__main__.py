"""``python -m lint``: the same command as ``upsertsink lint``."""

from lint.cli import main

if __name__ == "__main__":
    main()
