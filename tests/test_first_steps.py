"""Issue #19's list of what a new user hit first, one test each (the README tour itself: test_readme.py)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from upsertsink import InvalidInputError, UpsertSink
from upsertsink.batch import check_batch_id


@pytest.mark.parametrize("value", [np.int64(5), np.int32(5), np.uint8(5), pd.Series([5]).iloc[0]])
def test_numpy_integer_batch_ids_are_accepted(value):
    assert check_batch_id(value) == 5 and type(check_batch_id(value)) is int


@pytest.mark.parametrize("value", [np.float64(5.0), True, np.bool_(True), "5", -1, 2**63])
def test_batch_ids_that_are_not_integers_are_still_refused(value):
    with pytest.raises(InvalidInputError, match="batch_id must be an integer"):
        check_batch_id(value)


def test_a_numpy_batch_id_is_written_and_replayed(engine, tmp_path):
    sink = UpsertSink(str(tmp_path / "t"), "id")
    batch = engine.frame([{"id": 1, "v": "a"}], {"id": pa.int64(), "v": pa.string()})
    assert sink.write(batch, batch_id=np.int64(3)).batch_id == 3
    sink.foreach_batch(batch, np.int64(3))  # a replay: skipped, no error
    assert sink.last_batch_id() == 3


def test_none_in_a_pandas_key_column_is_named_as_nulls_not_as_a_type_clash(engine, tmp_path):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id", sequence_by="seq")
    sink.write(pd.DataFrame({"id": [1, 2], "seq": [1, 1]}), batch_id=0)
    frame = pd.DataFrame({"id": [3, None], "seq": [2, 2]})  # pandas makes "id" float64 with a NaN
    data = frame if engine.name == "embedded" else engine.spark.createDataFrame(frame)
    with pytest.raises(InvalidInputError, match="key column 'id' has 1 null value.*pandas turns None"):
        sink.write(data, batch_id=1)
    seq_frame = pd.DataFrame({"id": [3, 4], "seq": [2, None]})
    with pytest.raises(InvalidInputError, match="sequence_by column 'seq' has 1 null value"):
        sink.write(seq_frame if engine.name == "embedded" else engine.spark.createDataFrame(seq_frame), 1)


def test_cli_sessions_draw_no_spark_progress_bars_even_on_a_terminal(monkeypatch):
    """Spark's [Stage N: ...] bars and the CLI's spinner share stderr; within the CLI only the spinner draws."""
    import sys

    from upsertsink import session

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert session._local_defaults("local[2]")["spark.ui.showConsoleProgress"] == "true"
    with session.no_console_progress():
        assert session._local_defaults("local[2]")["spark.ui.showConsoleProgress"] == "false"
        assert session._local_defaults("spark://host:7077") == {"spark.ui.showConsoleProgress": "false"}


def test_the_cli_runs_its_work_without_spark_progress_bars():
    from upsertsink import session
    from upsertsink.cli_common import run

    assert run(lambda: session._QUIET_PROGRESS.get()) is True
    assert session._QUIET_PROGRESS.get() is False
