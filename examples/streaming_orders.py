"""A Structured Streaming job writing with UpsertSink, stopped, crashed and restarted: the table ends up right.

Run: `.venv/bin/python examples/streaming_orders.py [BASE_FOLDER]` (default `data/streaming`).

A change feed of orders arrives as JSON files in a folder; each file is one micro-batch
(`maxFilesPerTrigger=1`), and `foreachBatch(sink.foreach_batch)` upserts it with the epoch id as batch id.
The same feed is streamed twice, into two tables:

- run A reads all files in one uninterrupted run;
- run B starts with only the first files, stops, then "crashes" after the sink committed its last batch
  but before Spark recorded that in the checkpoint, and restarts from the checkpoint once the remaining
  files have arrived. Spark runs the last epoch again; the sink finds that batch id already committed in
  the table (in the same Delta commit as its data) and skips it.

At the end a keyed diff proves that table B equals table A. Exit code 0 when they are equal and the
replayed epoch was skipped, 1 otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from rich.console import Console
from rich.table import Table

import upsertsink
from upsertsink import UpsertSink

SCHEMA = "order_id long, customer string, status string, amount double, seq long, op string"
FIELDS = ("order_id", "customer", "status", "amount", "seq", "op")
FILES_BEFORE_STOP = 3  # run B sees this many files before it is stopped


def change_feed() -> list[list[tuple]]:
    """Six files of (order_id, customer, status, amount, seq, op); seq orders the versions of one order."""
    return [
        [(i, f"c{i % 3}", "created", 10.0 * i, 1, "I") for i in range(1, 5)],
        [
            (1, "c1", "paid", 10.0, 2, "U"),
            (2, "c2", "paid", 20.0, 2, "U"),
            (5, "c2", "created", 50.0, 1, "I"),
            (6, "c0", "created", 60.0, 1, "I"),
        ],
        [
            (3, "c0", "created", 30.0, 2, "D"),  # order 3 cancelled: a delete
            (4, "c1", "paid", 45.0, 2, "U"),
            (7, "c1", "created", 70.0, 1, "I"),
        ],
        [
            (1, "c1", "shipped", 10.0, 3, "U"),
            (3, "c0", "created", 30.0, 1, "I"),  # late insert of the cancelled order: it stays deleted
            (8, "c2", "created", 80.0, 1, "I"),
        ],
        [
            (2, "c2", "shipped", 20.0, 3, "U"),
            (5, "c2", "paid", 50.0, 2, "U"),  # two versions of order 5 in one file:
            (5, "c2", "shipped", 50.0, 3, "U"),  # the greater seq wins
        ],
        [
            (1, "c1", "paid", 10.0, 2, "U"),  # late and older than what is stored: ignored
            (6, "c0", "created", 60.0, 2, "D"),
            (7, "c1", "paid", 70.0, 2, "U"),
        ],
    ]


def deliver(folder: Path, files: list[list[tuple]], first: int) -> None:
    """Write files as JSON lines, numbered from `first`, with increasing modification times.

    The file source picks files up in modification-time order; explicit times keep the order stable even
    when several files are written within the same second.
    """
    folder.mkdir(parents=True, exist_ok=True)
    for n, rows in enumerate(files, start=first):
        path = folder / f"orders-{n:03d}.json"
        path.write_text("".join(json.dumps(dict(zip(FIELDS, row))) + "\n" for row in rows))
        os.utime(path, (1_700_000_000 + n, 1_700_000_000 + n))


def run_stream(spark: SparkSession, source: Path, checkpoint: Path, sink: UpsertSink) -> list[int]:
    """Process every file available in `source`, one per micro-batch, then stop. Returns the epoch ids run."""
    query = (
        spark.readStream.schema(SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .writeStream.foreachBatch(sink.foreach_batch)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return [p.batchId for p in query.recentProgress if p.numInputRows > 0]


def crash_before_checkpoint_commit(checkpoint: Path) -> int:
    """Forget the checkpoint's record of the last finished epoch, as a crash just before writing it would.

    Spark writes `offsets/N` before running epoch N and `commits/N` after it; with `commits/N` missing, a
    restarted query runs epoch N again, on the same files.
    """
    commits = checkpoint / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    (commits / f".{last}.crc").unlink(missing_ok=True)
    return last


def commits(spark: SparkSession, table: Path) -> list[tuple[int, int | None]]:
    """(table version, batch id) of every commit; UpsertSink records the batch id in the commit's userMetadata."""
    if not DeltaTable.isDeltaTable(spark, str(table)):
        return []
    batch = F.get_json_object("userMetadata", "$.batch_id").cast("long").alias("batch_id")
    history = DeltaTable.forPath(spark, str(table)).history().select("version", batch)
    return sorted((r.version, r.batch_id) for r in history.collect())


def main(base: Path) -> int:
    console = Console(highlight=False, soft_wrap=True)
    feed = change_feed()
    run_a, run_b = base / "run_a", base / "run_b"
    for folder in (run_a, run_b):
        shutil.rmtree(folder, ignore_errors=True)

    spark = upsertsink.spark_session("streaming-orders")

    def sink_for(run: Path) -> UpsertSink:
        return UpsertSink(
            str(run / "orders"),
            keys=["order_id"],
            sequence_by="seq",
            delete_when="op = 'D'",
            app_id="orders-stream",
        )

    steps = Table("step", "epochs Spark ran", "batches the sink committed", box=None)

    def stream(step: str, run: Path, sink: UpsertSink) -> tuple[list[int], list[int]]:
        """Run the query of `run` to the end of its files; add a row to the summary."""
        table = run / "orders"
        last_version = max((v for v, _ in commits(spark, table)), default=-1)
        epochs = run_stream(spark, run / "incoming", run / "checkpoint", sink)
        committed = [b for v, b in commits(spark, table) if v > last_version and b is not None]
        steps.add_row(step, _ids(epochs), _ids(committed))
        return epochs, committed

    # Run A: every file is there from the start; one uninterrupted run.
    deliver(run_a / "incoming", feed, first=0)
    stream("A: all files in one run", run_a, sink_for(run_a))

    # Run B, part 1: only the first files have arrived; the query processes them and stops.
    sink_b = sink_for(run_b)
    deliver(run_b / "incoming", feed[:FILES_BEFORE_STOP], first=0)
    stream(f"B: first {FILES_BEFORE_STOP} files, stop", run_b, sink_b)

    # The crash: the sink had committed the last epoch's batch, the checkpoint never heard of it.
    replayed = crash_before_checkpoint_commit(run_b / "checkpoint")

    # Run B, part 2: the remaining files arrive and the query restarts from its checkpoint.
    deliver(run_b / "incoming", feed[FILES_BEFORE_STOP:], first=FILES_BEFORE_STOP)
    epochs, committed = stream("B: crash, more files, restart", run_b, sink_b)
    skipped = replayed in epochs and replayed not in committed

    d = upsertsink.diff(str(run_a / "orders"), str(run_b / "orders"), keys=["order_id"])
    rows = spark.read.format("delta").load(str(run_b / "orders")).count()
    console.print(steps)
    console.print()
    if skipped:
        console.print(
            f"epoch {replayed} ran again after the crash; the sink found batch {replayed} committed and skipped it"
        )
    else:
        console.print(f"[red]expected Spark to run epoch {replayed} again and the sink to skip it[/red]")
    if d.equal:
        console.print(
            f"table B (stopped, crashed, restarted) and table A: [green]identical[/green], {rows} orders"
        )
    else:
        console.print("table B and table A: [red]different[/red]")
        console.print(d.format_text(), markup=False)
    spark.stop()
    return 0 if d.equal and skipped else 1


def _ids(ids: list[int]) -> str:
    return ", ".join(map(str, ids)) or "-"


if __name__ == "__main__":
    default = Path(__file__).resolve().parent.parent / "data" / "streaming"
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else default))
