"""The README's tour runs as written (issue #19): every Python block, in order, in a fresh folder."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from sink_helpers import read_rows

README = Path(__file__).resolve().parents[1] / "README.md"
WAREHOUSE = "spark-warehouse/tour.db"  # where a local session's default warehouse puts the schema tour


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


@pytest.mark.spark
def test_the_readme_tour_runs_as_written(spark, tmp_path, monkeypatch):
    blocks = python_blocks()
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "readme"}
    for block in blocks:
        # Spark resolves relative paths against the JVM's working folder (where pytest started), not Python's:
        # the stream's input and checkpoint go to this test's folder as a reader's would go to theirs
        for rel in ("incoming/orders", "checkpoints/orders"):
            block = block.replace(f'"{rel}"', repr(str(tmp_path / rel)))
        # the same for the catalog's managed tables: the tour's schema lives in this test's folder
        block = block.replace('"CREATE SCHEMA IF NOT EXISTS tour"',
                              repr(f"CREATE SCHEMA IF NOT EXISTS tour LOCATION '{tmp_path / WAREHOUSE}'"))
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - the README is this repo's own text
    # what the tour promises: order 1 deleted, order 2 paid; the stream's older rows changed nothing
    assert [(r["order_id"], r["status"]) for r in read_rows(str(tmp_path / "tables/orders"), "order_id")] == [
        (2, "paid"), (3, "new")]
    assert namespace["sink"].last_batch_id() == 44  # the last batch came over Spark Connect
    assert namespace["named"].last_batch_id() == 0
    assert sorted(r["order_id"] for r in spark.table("tour.orders").collect()) == [1, 2]
    # the shell command the README gives for the named table works in a new process (whose catalog is empty)
    command = " ".join(re.search(r"from a shell in the same folder `(upsertsink status\s+[^`]+)`",
                                 README.read_text()).group(1).split())
    shown = subprocess.run([str(Path(sys.executable).with_name("upsertsink")), *command.split()[1:]], cwd=tmp_path,
                           capture_output=True, text=True, check=False, timeout=120)
    assert shown.returncode == 0, shown.stderr
    assert "app upsertsink:tour.orders: last batch id 0" in shown.stdout
    spark.sql("DROP SCHEMA tour CASCADE")
    assert namespace["stream_sink"].last_batch_id() == 0
    history = read_rows(str(tmp_path / "tables/order_history"), "__START_AT")
    assert [(r["__START_AT"], r["__END_AT"], r["status"]) for r in history] == [
        (1, 2, "new"), (2, 3, "paid"), (3, None, "shipped")]
    tests = [v for k, v in namespace.items() if k.startswith("test_") and callable(v)]
    assert tests, "the README's pytest example defines a test"
    for test in tests:
        test(spark)
