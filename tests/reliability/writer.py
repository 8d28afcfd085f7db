"""A writer process for the reliability tests: sends batches of a change feed through UpsertSink.

    python writer.py --path T --feed feed.json [--engine embedded|spark|connect --remote sc://...] [--start N] [--stop M]
                     [--app-id A] [--no-batch-ids] [--result out.json] [--start-at UNIXTIME]
                     [--order 3,0,2,1] [--late-batches refuse|apply] [--scd2] [--spark-only] [--restate]

Batch i of the feed is sent with batch id i, in feed order from --start to --stop, or in the order --order
gives (its positions from --start to --stop). Each call's outcome (written / skipped / ConcurrentWriteError /
other error) is appended to --result as one JSON line, so a parent can check every call ended one of the
allowed ways. Faults come from the environment (UPSERTSINK_FAULT, see upsertsink/faults.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import DELETE_WHEN, KEYS, SEQUENCE, arrow_batch

from upsertsink import ConcurrentWriteError, UpsertSink, UpsertSinkError


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--path", required=True)
    p.add_argument("--feed", required=True)
    p.add_argument("--engine", default="embedded", choices=["embedded", "spark", "connect"])
    p.add_argument("--remote", help="with --engine connect: the sc:// URL of the Spark Connect server")
    p.add_argument("--start", type=int, default=0)
    p.add_argument("--stop", type=int)
    p.add_argument("--app-id", default="feed")
    p.add_argument("--no-batch-ids", action="store_true")
    p.add_argument("--result")
    p.add_argument("--start-at", type=float, help="wait until this Unix time before the first write")
    p.add_argument("--order", help="comma-separated batch indexes: the order of the sends")
    p.add_argument("--late-batches", default="refuse", choices=["refuse", "apply"])
    p.add_argument("--scd2", action="store_true", help="a history sink (scd_type=2, op not tracked)")
    p.add_argument("--connect-large", action="store_true",
                   help="with --engine connect: every batch takes the large-batch path (kept on the server)")
    p.add_argument("--spark-only", action="store_true",
                   help="--path is a table NAME in the session's catalog, written in Spark-only mode (file_access=False)")
    p.add_argument("--restate", action="store_true",
                   help="send each batch as the restatement of its id (write(..., restate=True))")
    args = p.parse_args()
    feed = json.loads(Path(args.feed).read_text())
    history = {"scd_type": 2, "track_history_except": ["op"]} if args.scd2 else {}
    options = dict(sequence_by=SEQUENCE, delete_when=DELETE_WHEN, app_id=args.app_id, late_batches=args.late_batches,
                   **history)
    if args.spark_only:
        sink = UpsertSink.for_table(args.path, KEYS, file_access=False, **options)
    else:
        sink = UpsertSink(args.path, KEYS, **options)
    spark = None
    if args.engine == "spark":
        from upsertsink import spark_session

        spark = spark_session("upsertsink-reliability", master="local[1]")
    elif args.engine == "connect":
        from upsertsink import spark_session

        spark = spark_session("upsertsink-reliability", remote=args.remote)
        if args.connect_large:  # the threshold is a module constant: small test batches take the large path
            from upsertsink.engines import spark as spark_engine

            spark_engine.CONNECT_LOCAL_ROWS = 0
    if args.start_at:
        time.sleep(max(0.0, args.start_at - time.time()))
    out = open(args.result, "a") if args.result else None  # noqa: SIM115 - closed at the end
    order = [int(i) for i in args.order.split(",")] if args.order else list(range(len(feed)))
    stop = len(order) if args.stop is None else args.stop
    for i in order[args.start:stop]:
        batch = arrow_batch(feed[i])
        data = spark.createDataFrame(batch) if spark is not None else batch
        if args.connect_large:  # not the bare local relation whose rows the client prepares itself
            data = data.repartition(2)
        try:
            r = sink.write(data, batch_id=None if args.no_batch_ids else i, restate=args.restate)
            outcome = {"batch": i, "outcome": "skipped" if r.skipped else "written", "stale": r.stale,
                       "restated": r.restated,
                       "deleted": r.deleted, "replay_check": r.replay_check, "attempts": r.attempts, "late": r.late}
        except ConcurrentWriteError as err:
            outcome = {"batch": i, "outcome": "conflict", "error": str(err)}
        except UpsertSinkError as err:
            outcome = {"batch": i, "outcome": "error", "type": type(err).__name__, "error": str(err),
                       "trace": traceback.format_exc()[-3000:]}
        except Exception as err:  # noqa: BLE001 - a raw engine error is exactly what the tests look for
            outcome = {"batch": i, "outcome": "raw", "type": type(err).__name__, "error": str(err),
                       "trace": traceback.format_exc()[-3000:]}
        if out is not None:
            out.write(json.dumps(outcome) + "\n")
            out.flush()
        print(json.dumps(outcome), flush=True)
    if out is not None:
        out.close()
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # Every outcome is written and flushed by now. Skip the interpreter's teardown: pyarrow's C++ thread pools
    # can abort it ("terminate called without an active exception", apache/arrow#34314), which once failed a
    # CI run whose writers had all finished correctly (the exit code is part of what the stress tests check).
    os._exit(code)
