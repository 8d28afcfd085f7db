"""One writer of a cluster/object-store scenario: sends a feed's batches through UpsertSink, records each call.

    spark-submit ... writer.py --engine spark ARGS      (a Spark job on the cluster)
    python writer.py --engine embedded ARGS              (a pandas/Arrow process)

Each ``write()`` call's outcome goes to ``--result`` as a JSON line: committed, skipped, or the error
(class and message). ``--ready``/``--go`` let a test start several writers at the same moment.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

import feed as F


def send(sink, frame, batch_id: int, args, out) -> bool:
    """Write one batch; a ConcurrentWriteError is retried ``--attempts`` times in all. False when it gave up."""
    from upsertsink.errors import ConcurrentWriteError

    for attempt in range(1, args.attempts + 1):
        started = time.monotonic()
        record = {"engine": args.engine, "app_id": args.app_id, "writer": args.writer, "batch_id": batch_id,
                  "attempt": attempt}
        try:
            result = sink.write(frame, batch_id=batch_id)
            record.update(outcome="skipped" if result.skipped else "committed", version=result.version,
                          inserted=result.inserted, updated=result.updated, deleted=result.deleted,
                          stale=result.stale)
        except Exception as err:  # noqa: BLE001  (recorded for the test to judge: only ConcurrentWriteError may occur)
            last = attempt == args.attempts or not isinstance(err, ConcurrentWriteError)
            record.update(outcome="gave up" if last else "retrying", error=type(err).__name__,
                          message=str(err)[:2000], traceback=traceback.format_exc()[-4000:])
        record["seconds"] = round(time.monotonic() - started, 3)
        out.write(json.dumps(record) + "\n")
        out.flush()
        if record["outcome"] in ("committed", "skipped"):
            return True
        if record["outcome"] == "gave up":
            return False
    return False


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", choices=["spark", "embedded"], required=True)
    parser.add_argument("--target", required=True)
    parser.add_argument("--app-id", required=True)
    parser.add_argument("--writer", type=int, required=True, help="which feed (0..9)")
    parser.add_argument("--batches", type=int, default=F.BATCHES)
    parser.add_argument("--send", default="", help="batch ids to send, e.g. 0,1,2,1 (default: all once)")
    parser.add_argument("--options", default="", help="deltalake storage options as JSON (embedded engine)")
    parser.add_argument("--attempts", type=int, default=3, help="tries per batch on ConcurrentWriteError")
    parser.add_argument("--result", required=True)
    parser.add_argument("--ready", default="")
    parser.add_argument("--go", default="")
    args = parser.parse_args()

    from upsertsink import UpsertSink

    batches = F.feed(args.writer, args.batches)
    order = [int(x) for x in args.send.split(",")] if args.send else list(range(len(batches)))
    options = json.loads(args.options) if args.options else None
    spark = None
    if args.engine == "spark":
        import upsertsink

        spark = upsertsink.spark_session(f"writer-{args.app_id}-{args.writer}")
        frames = {i: spark.createDataFrame(F.arrow_batch(batches[i])) for i in set(order)}
    else:
        frames = {i: F.arrow_batch(batches[i]) for i in set(order)}
    sink = UpsertSink(
        args.target, F.KEYS, sequence_by=F.SEQUENCE, delete_when=F.DELETE_WHEN, app_id=args.app_id,
        storage_options=options,
    )
    if args.ready:
        Path(args.ready).write_text("ready")
    if args.go:
        deadline = time.monotonic() + 300
        while not Path(args.go).exists():
            if time.monotonic() > deadline:
                raise SystemExit("never told to go")
            time.sleep(0.05)
    with open(args.result, "a") as out:
        for batch_id in order:
            if not send(sink, frames[batch_id], batch_id, args, out):
                break  # gave up: a failed job stops here, and is re-sent from this batch on
    if spark is not None:
        spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
