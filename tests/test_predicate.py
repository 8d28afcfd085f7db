"""``delete_when`` means the same on both engines: every construct of the portable subset, evaluated by Spark and
by DataFusion on the same rows (nulls included), gives the same flags; everything else is refused alike."""

from __future__ import annotations

import pyarrow as pa
import pytest
from pyspark.sql import functions as F

from upsertsink import InvalidInputError, UpsertSink
from upsertsink.predicate import evaluate_arrow, parse

ROWS = pa.table({
    "op": ["D", "U", None, "d", " D ", "delete"],
    "n": pa.array([1, 2, None, -3, 10, 0], pa.int64()),
    "x": pa.array([1.5, None, -0.0, 2.0, 3.25, 0.0], pa.float64()),
    "name": ["ab", "cd", "ab", None, "Abc", "x'y"],
    "flag": pa.array([True, False, None, True, False, True]),
})

PORTABLE = [
    "op = 'D'", "op <> 'D'", "n < 2", "n <= 2", "n > 0", "n >= 0", "n <=> 2", "NOT flag", "flag",
    "op = 'D' AND n > 0", "op = 'D' OR n IS NULL", "n + 1 > 2", "n - 1 < 0", "n * 2 = 4", "-n > 0",
    "op IN ('D', 'X')", "n IN (1, 10)", "n BETWEEN 1 AND 5", "name LIKE 'a%'", "op IS NULL", "name IS NOT NULL",
    "lower(op) = 'd'", "upper(name) = 'ABC'", "trim(op) = 'D'", "coalesce(op, 'none') = 'none'",
    "substring(name, 1, 1) = 'a'", "length(name) = 2", "abs(n) = 3", "x = 0", "x > 1.5", "(n > 1) = true",
]


@pytest.mark.parametrize("text", PORTABLE)
def test_spark_and_datafusion_agree_on_every_portable_construct(spark, text):
    predicate = parse(text)
    embedded = evaluate_arrow(predicate, ROWS).to_pylist()
    df = spark.createDataFrame(ROWS)
    on_spark = [r["f"] for r in df.select(F.coalesce(F.expr(text).cast("boolean"), F.lit(False)).alias("f")).collect()]
    assert embedded == on_spark, text


@pytest.mark.parametrize("text", PORTABLE)
def test_the_arrow_fast_path_and_datafusion_agree(text, monkeypatch):
    """Simple shapes are evaluated with Arrow compute (no query engine on a micro-batch); DataFusion is the
    reference for everything, so both must give the same flags."""
    from upsertsink import predicate as P

    predicate = parse(text)
    fast = evaluate_arrow(predicate, ROWS).to_pylist()
    monkeypatch.setattr(P, "_fast", lambda node, table: P._not_fast())
    assert evaluate_arrow(predicate, ROWS).to_pylist() == fast, text


@pytest.mark.parametrize("text", ["op = 'D'", "op IN ('D', 'X') AND NOT flag", "n >= 2 OR op IS NULL"])
def test_common_delete_predicates_need_no_query_engine(text, monkeypatch):
    from upsertsink import predicate as P

    monkeypatch.setattr(P, "_contexts", None)  # any use of DataFusion would fail
    assert len(evaluate_arrow(parse(text), ROWS)) == ROWS.num_rows


@pytest.mark.parametrize(
    ("text", "why"),
    [("rand() > 0.5", "rand"), ("now() > n", "different value"), ("uuid() = op", "uuid"),
     ("n / 2 > 1", "evaluate alike"), ("concat(op, name) = 'Dab'", "evaluate alike"),
     ("cast(op AS INT) = 1", "evaluate alike"), ("n IN (SELECT 1)", "predicate"), ("", "non-empty")],
)
def test_predicates_that_could_differ_or_change_on_replay_are_refused(text, why):
    with pytest.raises(InvalidInputError, match=why):
        UpsertSink("/tmp/never-written", "n", delete_when=text)


def test_a_predicate_naming_a_missing_column_is_refused_before_writing(tmp_path):
    sink = UpsertSink(str(tmp_path / "t"), "n", delete_when="kind = 'D'")
    with pytest.raises(InvalidInputError, match=r"\['kind'\]"):
        sink.write(ROWS, batch_id=0)
    assert not (tmp_path / "t").exists()


def test_a_non_boolean_predicate_is_refused(tmp_path):
    batch = pa.table({"n": [1, 2], "op": ["D", "U"]})
    with pytest.raises(InvalidInputError, match="boolean"):
        UpsertSink(str(tmp_path / "t"), "n", delete_when="n + 1").write(batch, batch_id=0)
    assert not (tmp_path / "t").exists()
