"""A change feed of orders written in batches with UpsertSink, then replayed as a retried job would.

Run: `make demo` (or `.venv/bin/python examples/orders_change_feed.py [TABLE_PATH]`).

The feed has everything a real one has: updates, deletes, exact duplicates, two versions of one order in
one batch, and late rows that arrive after a newer version (or a delete) was already written. The table
ends up right, and replaying the batches - as a retried or restarted job does - changes nothing.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

import upsertsink
from upsertsink import UpsertSink

SCHEMA = "order_id long, customer string, status string, amount double, seq long, op string"


def change_feed() -> list[list[tuple]]:
    """Four batches of (order_id, customer, status, amount, seq, op); seq orders versions of one order."""
    created = [(i, f"c{i % 3}", "created", 10.0 * i, 1, "I") for i in range(1, 9)]
    return [
        created,
        [
            (1, "c1", "paid", 10.0, 2, "U"),
            (2, "c2", "paid", 20.0, 2, "U"),
            (2, "c2", "paid", 20.0, 2, "U"),  # exact duplicate: collapses
            (8, "c2", "created", 80.0, 2, "D"),  # order 8 cancelled: a delete
            (9, "c0", "created", 90.0, 1, "I"),
        ],
        [
            (3, "c0", "created", 30.0, 1, "I"),  # late and older than what is stored: ignored
            (5, "c2", "shipped", 50.0, 3, "U"),
            (6, "c0", "paid", 60.0, 2, "U"),  # two versions of order 6 in one batch:
            (6, "c0", "shipped", 60.0, 3, "U"),  # the greater seq wins
            (8, "c2", "created", 80.0, 1, "I"),  # late insert of the deleted order: stays deleted
        ],
        [
            (1, "c1", "shipped", 10.0, 3, "U"),
            (9, "c0", "paid", 95.0, 2, "U"),
            (10, "c1", "created", 100.0, 1, "I"),
        ],
    ]


def main(target: str) -> int:
    console = Console()
    shutil.rmtree(target, ignore_errors=True)
    spark = upsertsink.spark_session("orders-change-feed")
    sink = UpsertSink(target, keys=["order_id"], sequence_by="seq", delete_when="op = 'D'", app_id="orders-cdc")
    batches = [spark.createDataFrame(rows, SCHEMA) for rows in change_feed()]

    report = Table("run", "batch", "result", "inserted", "updated", "deleted", "table version", box=None)

    def record(run: str, batch_id: int, result: upsertsink.WriteResult) -> upsertsink.WriteResult:
        outcome = "skipped" if result.skipped else "committed"
        report.add_row(run, str(batch_id), outcome, str(result.inserted), str(result.updated),
                       str(result.deleted), str(result.version))
        return result

    with console.status("writing the change feed...") if console.is_terminal else _nothing():
        for batch_id, df in enumerate(batches):
            version_after_first = record("first run", batch_id, sink.write(df, batch_id=batch_id)).version

        # The job is retried from batch 1: every batch it sends again is recognised and skipped.
        for batch_id in (1, 2, 3):
            record("retried job", batch_id, sink.write(batches[batch_id], batch_id=batch_id))
        # An operator re-sends batch 2's rows under a new batch id: nothing in them is new, no row changes.
        version_after_replays = record("re-sent rows", 4, sink.write(batches[2], batch_id=4)).version

    final = spark.read.format("delta").load(target)
    # Prove it: a keyed diff of the table as the first run left it (time travel) and as it is now.
    d = upsertsink.diff(f"{target}@{version_after_first}", target, keys=["order_id"])
    orders = Table("order_id", "customer", "status", "amount", "seq", box=None)
    for row in final.orderBy("order_id").collect():
        orders.add_row(str(row.order_id), row.customer, row.status, f"{row.amount:.2f}", str(row.seq))

    console.print(report)
    console.print()
    console.print(orders)
    console.print()
    same = d.equal
    console.print(
        f"table after the first run (version {version_after_first}) and after the replays "
        f"(version {version_after_replays}): "
        + ("[green]identical[/green]" if same else f"[red]different: {d.changed} changed, "
           f"{d.only_in_left} only before, {d.only_in_right} only after[/red]")
    )
    console.print(f"last committed batch id for app 'orders-cdc': {sink.last_batch_id()}")
    spark.stop()
    return 0 if same else 1


class _nothing:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


if __name__ == "__main__":
    default = Path(__file__).resolve().parent.parent / "data" / "orders"
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else str(default)))
