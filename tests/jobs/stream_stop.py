"""A child process for tests/test_interrupts.py: a streaming query whose foreach_batch writes with the sink is
stopped while its first batch is being written, then run again to the end on the same checkpoint.

    python stream_stop.py BASE

The stop comes from another thread when the write reaches the crash point "prepared" (faults.hook), as a
user's ``query.stop()`` would; the writer then takes its next Spark call, which the stop interrupted. Prints
one JSON line on stdout: the table's rows and the app's last batch id after the second run.
"""

from __future__ import annotations

import json
import sys
import threading
import time

import upsertsink
from upsertsink import UpsertSink, faults

base = sys.argv[1]
spark = upsertsink.spark_session("stream-stop", "local[2]")
source = f"{base}/in"
spark.range(0, 2000).selectExpr("id", "id % 97 as v", "1 as seq").coalesce(1).write.json(source)
sink = UpsertSink(f"{base}/t", "id", sequence_by="seq", app_id="stream")


def start():
    return (spark.readStream.schema("id long, v long, seq long").json(source).writeStream
            .foreachBatch(sink.foreach_batch).option("checkpointLocation", f"{base}/checkpoint"))


query = start().start()
stopped = threading.Event()


def stop_mid_batch() -> None:  # runs in the writing thread: stop the query from another one, wait for it
    threading.Thread(target=lambda: (query.stop(), stopped.set()), daemon=True).start()
    time.sleep(2)


with faults.hook("prepared", stop_mid_batch):
    query.awaitTermination(120)
stopped.wait(60)
again = start().trigger(availableNow=True).start()
again.awaitTermination(120)
rows = spark.read.format("delta").load(f"{base}/t").count()
print(json.dumps({"rows": rows, "last_batch_id": sink.last_batch_id()}))
spark.stop()
