"""Spark job: what upsertsink's LogStore does when a commit file is already taken (prints one JSON line).

    spark-submit ... logstore_probe.py s3a://bucket/prefix
"""

from __future__ import annotations

import json
import sys


def write_twice(spark, store_class: str, path: str) -> dict:
    jvm = spark._jvm
    conf = spark._jsparkSession.sessionState().newHadoopConf()
    cls = jvm
    for part in store_class.split("."):
        cls = getattr(cls, part)
    store = cls(conf)
    target = jvm.org.apache.hadoop.fs.Path(path)
    outcome = {}
    for attempt, body in (("first", '{"writer":"first"}'), ("second", '{"writer":"second"}')):
        lines = jvm.java.util.ArrayList()
        lines.add(body)
        try:
            store.write(target, lines.iterator(), False, conf)
            outcome[attempt] = "written"
        except Exception as err:  # noqa: BLE001  (py4j wraps the Java exception; its class is what we report)
            outcome[attempt] = err.java_exception.getClass().getName()
    stored = [line for line in store.read(target, conf)]
    outcome["stored"] = stored
    return outcome


def main() -> int:
    import upsertsink

    prefix = sys.argv[1].rstrip("/")
    spark = upsertsink.spark_session("logstore-probe")
    report = {
        "upsertsink": write_twice(spark, "io.upsertsink.delta.S3ConditionalPutLogStore",
                                  f"{prefix}/a/_delta_log/00000000000000000000.json"),
    }
    print("PROBE " + json.dumps(report))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
