"""session.py: the `upsertsink[spark]` extra is checked in one place; the JVM starts without noise."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pyarrow as pa
import pytest

import upsertsink
from upsertsink import UpsertSinkError
from upsertsink.session import SparkNotInstalledError, require_spark, spark_installed

EXTRA = 'pip install "upsertsink[spark]"'


@pytest.fixture
def without_delta_spark(monkeypatch):
    monkeypatch.setitem(sys.modules, "delta", None)  # `import delta` now raises ImportError


@pytest.fixture
def without_pyspark(monkeypatch, without_delta_spark):
    monkeypatch.setitem(sys.modules, "pyspark", None)


def test_require_spark_names_the_extra(without_delta_spark):
    require_spark("x", delta=False)  # pyspark alone is there
    with pytest.raises(SparkNotInstalledError) as err:
        require_spark("UpsertSink.write with a Spark DataFrame")
    assert str(err.value) == (
        f"UpsertSink.write with a Spark DataFrame needs Spark, but delta-spark is not installed: {EXTRA}"
    )
    assert isinstance(err.value, UpsertSinkError) and isinstance(err.value, ImportError)


def test_every_spark_entry_point_says_which_extra_is_missing(without_pyspark, tmp_path):
    assert not spark_installed()
    with pytest.raises(SparkNotInstalledError, match="pyspark and delta-spark are not installed: pip install"):
        upsertsink.spark_session()
    table = pa.table({"id": [1, 2]})
    with pytest.raises(SparkNotInstalledError, match="diff on Spark needs Spark"):
        upsertsink.diff(table, table, "id", engine="spark")
    assert upsertsink.diff(table, table, "id").equal  # auto: Arrow, no Spark needed
    from upsertsink.testing import assert_replay_equal

    with pytest.raises(SparkNotInstalledError, match="assert_replay_equal needs Spark"):
        assert_replay_equal(lambda spark, df: df, keys="id")


def test_the_pytest_fixture_says_which_extra_is_missing(tmp_path):
    (tmp_path / "test_user.py").write_text("def test_uses_spark(spark):\n    pass\n")
    code = textwrap.dedent("""
        import sys
        sys.modules["pyspark"] = None
        sys.modules["delta"] = None
        import pytest
        sys.exit(pytest.main(["-q", "-p", "no:cacheprovider", "test_user.py"]))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          check=False, timeout=120)  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "1 error" in proc.stdout
    assert f"the `spark` fixture of upsertsink's pytest plugin needs Spark, but pyspark and delta-spark are not installed: {EXTRA}" in proc.stdout


def test_a_failed_start_shows_what_the_jvm_said(tmp_path):
    code = textwrap.dedent("""
        import upsertsink
        try:
            upsertsink.spark_session("t", "local[1]", **{"spark.driver.memory": "lots"})
        except upsertsink.UpsertSinkError as exc:
            print(exc)
    """)
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          check=False, timeout=120)  # fmt: skip
    assert proc.stdout.startswith("Spark did not start: ")
    assert "Invalid maximum heap size: -Xmxlots" in proc.stdout  # the JVM's own words, held back until now
    assert proc.stderr == ""
