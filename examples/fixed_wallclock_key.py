"""The fixed twin of `broken_wallclock_key.py`: the merge key is derived from the data, not from the clock.

An event is one version of one order, so its id is a hash of what identifies that version in the source: the
order id and the time the source recorded the change (`updated_at`). Every run, retry or backfill computes
the same ids for the same order changes, and the upsert overwrites instead of duplicating:

    upsertsink lint examples/fixed_wallclock_key.py            # exit 0
    upsertsink replay-check examples.fixed_wallclock_key:build --key event_id --input orders=PATH   # exit 0
    python examples/fixed_wallclock_key.py [TABLE_PATH]        # exit 0: the retry is skipped, the re-sent
                                                               # batch changes nothing
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from rich.console import Console

import upsertsink
from upsertsink import ReplayDivergenceError, UpsertSink

SCHEMA = "order_id long, customer string, status string, amount double, updated_at string"

SAMPLE_ORDERS = [
    (1, "c1", "created", 10.0, "2026-11-02 09:00:00"),
    (2, "c2", "paid", 20.0, "2026-11-02 09:05:00"),
    (3, "c0", "shipped", 30.0, "2026-11-02 09:07:30"),
    (4, "c1", "created", 40.0, "2026-11-02 09:12:00"),
]


def build(spark: SparkSession, orders: DataFrame) -> DataFrame:
    """One event per order change, keyed by a hash of the order id and the source's change time."""
    change = F.concat_ws("|", F.col("order_id").cast("string"), F.col("updated_at"))
    return orders.select(
        F.sha2(change, 256).alias("event_id"),
        "order_id",
        "customer",
        "status",
        "amount",
        "updated_at",
    )


def main(target: str) -> int:
    """Write the job's output, retry the batch, re-send it; exit 0 only if the table did not change."""
    console = Console(highlight=False, soft_wrap=True)
    shutil.rmtree(target, ignore_errors=True)
    spark = upsertsink.spark_session("fixed-wallclock-key")
    sink = UpsertSink(target, keys=["event_id"], app_id="order-events")
    orders = spark.createDataFrame(SAMPLE_ORDERS, SCHEMA)

    sink.write(build(spark, orders), batch_id=1)
    console.print(f"batch 1 written: {len(SAMPLE_ORDERS)} order changes")

    # The driver died after the commit and the job is retried: it computes batch 1 again.
    retry_ok = True
    try:
        sink.write(build(spark, orders), batch_id=1)
        console.print("retry of batch 1: skipped, same content")
    except ReplayDivergenceError:
        retry_ok = False
        console.print("retry of batch 1: [red]refused, the job computed different rows this time[/red]")

    # A backfill re-sends the same order changes under a new batch id: an upsert should change nothing.
    resent = sink.write(build(spark, orders), batch_id=2)
    rows = spark.read.format("delta").load(target).count()
    unchanged = resent.inserted == 0 and resent.updated == 0 and rows == len(SAMPLE_ORDERS)
    style = "green" if unchanged else "red"
    console.print(
        f"re-sent as batch 2: {resent.inserted} inserted, {resent.updated} updated; "
        f"[{style}]{rows} events in the table for {len(SAMPLE_ORDERS)} order changes[/{style}]"
    )
    spark.stop()
    if retry_ok and unchanged:
        return 0
    console.print("[bold red]event_id is not deterministic:[/bold red] run `upsertsink lint` on this job")
    return 1


if __name__ == "__main__":
    default = Path(__file__).resolve().parent.parent / "data" / "fixed_wallclock_key"
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else str(default)))
