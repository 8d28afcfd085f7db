"""A writer process for the merge-engine reliability tests (issue #47): sends a feed's batches through an
UpsertSink with a merge engine.

    python merge_engine_writer.py --path T --feed feed.json --options '{"merge_engine": "aggregate", ...}'
                                  [--app-id A] [--order 3,0,2] [--engine embedded|spark] [--start-at UNIXTIME]
                                  [--result out.jsonl]

feed.json holds ``{"schema": {column: type name}, "columns": [...] or null, "batches": [[row, ...], ...]}``
(``columns``: the columns each batch carries, a narrow stream's; type names as in merge_engine_models). Batch i
is sent with batch id i, in feed order or in the order --order gives. Each call's outcome (written / skipped
/ conflict / error / raw) is printed and appended to --result as one JSON line, as tests/reliability/writer.py
does. Faults come from the environment (UPSERTSINK_FAULT, see upsertsink/faults.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from pathlib import Path

import pyarrow as pa

ARROW = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string(), "bool": pa.bool_()}


def arrow_batch(rows: list[dict], schema: dict[str, str], columns: list[str] | None) -> pa.Table:
    fields = [(c, ARROW[t]) for c, t in schema.items() if columns is None or c in columns]
    return pa.Table.from_pylist(rows, schema=pa.schema(fields))


def main() -> int:
    from upsertsink import ConcurrentWriteError, UpsertSink, UpsertSinkError

    p = argparse.ArgumentParser()
    p.add_argument("--path", required=True)
    p.add_argument("--feed", required=True)
    p.add_argument("--options", required=True, help="the sink's keyword arguments, as JSON")
    p.add_argument("--app-id", default="feed")
    p.add_argument("--order", help="comma-separated batch indexes: the order of the sends")
    p.add_argument("--engine", default="embedded", choices=["embedded", "spark"])
    p.add_argument("--start-at", type=float, help="wait until this Unix time before the first write")
    p.add_argument("--result")
    args = p.parse_args()
    feed = json.loads(Path(args.feed).read_text())
    sink = UpsertSink(args.path, ["id"], app_id=args.app_id, **json.loads(args.options))
    spark = None
    if args.engine == "spark":
        from upsertsink import spark_session

        spark = spark_session("upsertsink-merge-engines", master="local[1]")
    if args.start_at:
        time.sleep(max(0.0, args.start_at - time.time()))
    order = [int(i) for i in args.order.split(",")] if args.order else list(range(len(feed["batches"])))
    out = open(args.result, "a") if args.result else None  # noqa: SIM115 - closed at the end
    for i in order:
        batch = arrow_batch(feed["batches"][i], feed["schema"], feed.get("columns"))
        data = spark.createDataFrame(batch) if spark is not None else batch
        try:
            r = sink.write(data, batch_id=i)
            outcome = {"batch": i, "outcome": "skipped" if r.skipped else "written", "attempts": r.attempts,
                       "late": r.late, "replay_check": r.replay_check}
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
    os._exit(code)  # as writer.py: skip pyarrow's thread-pool teardown (apache/arrow#34314)
