"""Simple SQL expressions answered without sqlglot (lint/values/sqlsimple.py), checked against sqlglot's answers.

Every question the analysis asks of an expression (its output name, the columns it reads, its sites, its
placeholders, its unknown functions, the columns a merge condition compares with ``=``, the newer-wins
columns) must get the answer sqlglot's path gives, for every text the fast path takes: generated texts of
the grammar, and every word of sqlglot's Spark tokenizer and function table in several places. A text it
does not take goes to sqlglot as before.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot.dialects.spark import Spark
from upsertsink.lint.values import sql, sqlsimple


def by_sqlglot(text: str) -> tuple | None:
    ok, alias, part = sql.analyze_expression_sqlglot(text)
    if not ok:
        return None
    tree = sql.parse_expression(text)
    return (
        alias,
        part.refs,
        part.null_refs,
        part.holes,
        [s.name for s in part.sites],
        part.calls,
        sql._eq_columns(tree),
        sql._newer_columns(tree),
        sorted(sql._guard_pairs(tree)),
    )


def by_fast_path(text: str) -> tuple | None:
    node = sqlsimple.parse(text)
    if node is None:
        return None
    return (
        sqlsimple.alias(node),
        sqlsimple.columns(node),
        sqlsimple.null_columns(node),
        set(),
        [],
        set(),
        sqlsimple.eq_columns(node),
        sqlsimple.newer_columns(node),
        sorted(sqlsimple.guard_pairs(node)),
    )


def agree(text: str) -> bool:
    """The fast path's answer equals sqlglot's (True also when the fast path leaves the text to sqlglot)."""
    fast = by_fast_path(text)
    if fast is None:
        return True
    assert fast == by_sqlglot(text), text
    return True


def sqlglot_words() -> list[str]:
    words = {w.lower() for k in Spark.Tokenizer.KEYWORDS for w in k.split() if w.isidentifier()}
    words |= {str(getattr(t, "name", t)).lower() for t in Spark.Parser.NO_PAREN_FUNCTIONS}
    words |= {name.lower() for name in Spark.Parser.FUNCTIONS if name.isidentifier()}
    return sorted(words)


TEMPLATES = (
    "{w} = 1",
    "t.{w} = s.{w}",
    "{w}",
    "s.{w}",
    "a = {w}",
    "{w} > t.x AND a = b",
    "{w}.x = 1",
    "x IS NOT NULL AND {w} = x",
    "t.k = s.k OR {w} <=> 'x'",
)


def test_every_word_of_sqlglot_gets_sqlglot_answer() -> None:
    words = sqlglot_words()
    assert len(words) > 500  # the tokenizer's keywords and the function table were found
    taken = 0
    for word in words:
        for template in TEMPLATES:
            text = template.format(w=word)
            agree(text)
            taken += sqlsimple.parse(text) is not None
    assert taken > len(words) * 4  # most words are plain column names to sqlglot too


@pytest.mark.parametrize(
    ("text", "keys", "newer", "alias"),
    [
        ("t.id = s.id", ["id"], [], None),
        ("t.sku = s.sku AND t.warehouse = s.warehouse", ["sku", "warehouse"], [], None),
        ("s.version > t.version", [], ["version"], None),
        ("target.v < source.v AND target.k = source.k", ["k"], ["v"], None),
        ("s.email", [], [], "email"),
        ("op = 'D'", [], [], None),
        ("is_current = true", [], [], None),
        ("u.email <> c.email OR u.segment <> c.segment OR u.tier IS NULL", [], [], None),
        ("rn == 1", [], [], None),
    ],
)
def test_merge_conditions_as_jobs_write_them_take_the_fast_path(
    text: str, keys: list[str], newer: list[str], alias: str | None
) -> None:
    node = sqlsimple.parse(text)
    assert node is not None
    assert sqlsimple.eq_columns(node) == keys and sqlsimple.newer_columns(node) == newer
    assert sqlsimple.alias(node) == alias
    assert agree(text)


@pytest.mark.parametrize(
    "text",
    [
        "uuid()",
        "current_timestamp()",
        "current_timestamp",
        "t.qty + s.qty",
        "(t.id = s.id)",
        "t.id = s.id AND s.ts > current_date",
        "a IN (1, 2)",
        "`t`.`id` = s.id",
        'a = "x"',
        "db.t.id = s.id",
        "a = -1",
        "a = 1e3",
        "a = 10L",
        "a = __ph0__",
        "a LIKE 'x%'",
        "t.id = s.id -- comment",
        "",
    ],
)
def test_everything_else_goes_to_sqlglot(text: str) -> None:
    assert sqlsimple.parse(text) is None


NAMES = [
    "id",
    "t.id",
    "s.id",
    "a",
    "s.version",
    "t.version",
    "op",
    "x_1",
    "T.Id",
    "first",
    "updated_at",
    "s.key",
]
LITERALS = ["1", "0.5", "'D'", "''", "true", "FALSE", "null"]
OPS = ["=", "==", "!=", "<>", "<=>", "<", "<=", ">", ">="]
operand = st.sampled_from(NAMES + LITERALS)
comparison = st.one_of(
    operand,
    st.builds(lambda a, op, b: f"{a} {op} {b}", operand, st.sampled_from(OPS), operand),
    st.builds(lambda a, neg: f"{a} IS {'NOT ' if neg else ''}NULL", operand, st.booleans()),
)
condition = st.builds(
    lambda first, rest: first + "".join(f" {joiner} {c}" for joiner, c in rest),
    comparison,
    st.lists(st.tuples(st.sampled_from(["AND", "OR", "and", "or"]), comparison), max_size=4),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(condition)
def test_generated_conditions_get_sqlglot_answer(text: str) -> None:
    assert sqlsimple.parse(text) is not None, text  # every text of this vocabulary is of the grammar
    assert agree(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=" tsabid._'=<>!()1ANDORISNUL", max_size=30))
def test_arbitrary_text_is_answered_as_sqlglot_answers_or_left_to_it(text: str) -> None:
    assert agree(text)


def test_a_merge_job_lints_without_sqlglot_and_finds_what_it_found(tmp_path: Path) -> None:
    """A typical upsert job (a merge condition, a newer-wins update condition, columns as values) no longer
    loads sqlglot; a value with a function still does, and the findings are the ones sqlglot's path gives."""
    from test_lint_startup import loaded, run_cli

    job = (
        "from delta.tables import DeltaTable\n"
        "from pyspark.sql import functions as F\n"
        "updates = spark.read.table('staging').withColumn('loaded_at', F.current_timestamp())\n"
        "(DeltaTable.forName(spark, 'orders').alias('t')\n"
        "    .merge(updates.alias('s'), 't.order_id = s.order_id')\n"
        "    .whenMatchedUpdate(condition='s.version > t.version', set={'status': 's.status'})\n"
        "    .whenNotMatchedInsertAll()\n"
        "    .execute())\n"
    )
    (tmp_path / "pyproject.toml").write_text("[tool.upsertsink.lint]\n", encoding="utf-8")
    (tmp_path / "job.py").write_text(job, encoding="utf-8")
    result, out = run_cli(tmp_path, "lint", "job.py", "--no-cache", "--format", "json")
    fast = json.loads(out)["findings"]
    assert not loaded(result["modules"], "sqlglot")
    with_function = job.replace("'status': 's.status'", "'status': 's.status', 'seen': 'current_timestamp()'")
    (tmp_path / "job.py").write_text(with_function, encoding="utf-8")
    result, _out = run_cli(tmp_path, "lint", "job.py", "--no-cache", "--format", "json")
    assert loaded(result["modules"], "sqlglot")
    assert [f["rule"] for f in fast] == ["ND001"]  # the wall clock column, as sqlglot's path reported it
