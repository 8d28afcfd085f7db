"""``python -m upsertsink``: the same command line as the ``upsertsink`` script."""

from upsertsink.cli import main

if __name__ == "__main__":
    main(prog_name="upsertsink")
