"""S3-compatible object storage on 127.0.0.1 for trying and testing upsertsink: moto's server mode.

Run with the project's venv: ``python scripts/objectstore_server.py --port 9000``. Serves S3 (and
DynamoDB, STS, ...) in memory until stopped (SIGTERM/SIGINT). Any access key and secret are accepted.

One change to moto's own ``moto_server``: requests that change state (PUT, POST, DELETE) are served one at
a time. moto checks a conditional write (``If-None-Match: *``, ``If-Match``) and then stores the object as
two steps, and its HTTP server is threaded, so two racing conditional PUTs of one key could both succeed.
Real S3 decides them atomically, and Delta commits (delta-rs, and delta-spark with upsertsink's
``S3ConditionalPutLogStore``) rely on exactly that; serializing writes gives moto the same guarantee.
Reads stay concurrent.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from typing import Any

MUTATING = frozenset({"PUT", "POST", "DELETE", "PATCH"})


class SerializedWrites:
    """WSGI middleware: one state-changing request at a time, its response fully produced under the lock."""

    def __init__(self, app: Any):
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ: dict, start_response: Any):
        if environ.get("REQUEST_METHOD", "GET").upper() not in MUTATING:
            return self.app(environ, start_response)
        with self.lock:
            result = self.app(environ, start_response)
            try:
                body = [bytes(chunk) for chunk in result]
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        return body


def _stop(signum: int, frame: Any) -> None:
    sys.exit(0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, required=True, help="port to listen on")
    args = parser.parse_args(argv)
    os.environ.setdefault("MOTO_PORT", str(args.port))

    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import run_simple

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    app = SerializedWrites(DomainDispatcherApplication(create_backend_app))
    print(f"object store (moto) serving http://{args.host}:{args.port}", file=sys.stderr, flush=True)
    run_simple(args.host, args.port, app, threaded=True, request_handler=MotoRequestHandler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
