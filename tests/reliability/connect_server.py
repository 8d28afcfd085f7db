"""A Spark Connect server with Delta in a process of its own, for tests that kill the server.

    python connect_server.py READY_FILE

Starts ``spark_session(connect=True)`` (a local Spark with its Connect server), writes the server's sc:// URL
to READY_FILE once it listens, and serves until killed.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from upsertsink import spark_session
from upsertsink.session import connect_url


def main() -> int:
    session = spark_session("upsertsink-connect-server", "local[1]", connect=True)
    ready = Path(sys.argv[1])
    tmp = ready.with_suffix(".tmp")
    tmp.write_text(str(connect_url(session)))
    tmp.rename(ready)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    sys.exit(main())
