"""Every rule's VALID and INVALID examples, run through the real analyzer (Fixit style)."""

from __future__ import annotations

import pytest
from lint_helpers import lint_code
from upsertsink.lint.check.checker import check_bytes
from upsertsink.lint.command.rewrite import fix_file
from upsertsink.lint.rules import ALL_RULES, RULES

INVALID = [(r.code, i, ex) for r in ALL_RULES for i, ex in enumerate(r.invalid)]
VALID = [(r.code, i, ex) for r in ALL_RULES for i, ex in enumerate(r.valid)]


@pytest.mark.parametrize(
    ("code", "index", "example"), INVALID, ids=[f"{c}-invalid-{i}" for c, i, _ in INVALID]
)
def test_invalid_example_is_reported(code, index, example) -> None:
    result = check_bytes(example.path, example.code.encode(), list(example.keys), list(example.sequence))
    got = [(f.rule, f.line, f.column, f.target, f.column_name) for f in result.findings]
    assert (code, example.line, example.column, example.target, example.column_name) in got
    finding = next(f for f in result.findings if f.rule == code and f.line == example.line)
    assert finding.severity == example.expected_severity
    assert finding.message


@pytest.mark.parametrize(("code", "index", "example"), VALID, ids=[f"{c}-valid-{i}" for c, i, _ in VALID])
def test_valid_example_is_clean(code, index, example) -> None:
    result = check_bytes("example.py", example.code.encode(), list(example.keys), list(example.sequence))
    assert [f for f in result.findings if f.rule == code] == []


def test_every_rule_has_examples_and_docs() -> None:
    assert list(RULES) == [f"ND{i:03d}" for i in range(len(RULES))]
    for rule in ALL_RULES:
        assert rule.invalid, rule.code
        assert rule.valid, rule.code
        doc = rule.explain()
        assert rule.code in doc and "```python" in doc
        assert rule.verb and rule.why and rule.fix


def test_codes_and_names_are_unique() -> None:
    assert len({r.name for r in ALL_RULES}) == len(ALL_RULES)


FIXED = [(r.code, i, ex) for r in ALL_RULES for i, ex in enumerate(r.invalid) if ex.fixed is not None]


@pytest.mark.parametrize(("code", "index", "example"), FIXED, ids=[f"{c}-fix-{i}" for c, i, _ in FIXED])
def test_fix_example(code, index, example) -> None:
    """Fixit style: the fix gives exactly the expected code, touches only the reported expression, needs
    --unsafe-fixes exactly when marked unsafe, and the re-linted result no longer has the finding."""
    keys, seq = list(example.keys), list(example.sequence)
    findings = check_bytes(example.path, example.code.encode(), keys, seq).findings
    finding = next(f for f in findings if (f.rule, f.line, f.column) == (code, example.line, example.column))
    spec = finding.fix_spec
    assert spec is not None and spec.applicability == ("unsafe" if example.unsafe else "safe")
    assert spec.message
    if example.unsafe:  # not applied without --unsafe-fixes
        assert not fix_file(example.path, example.code, [finding], "example", unsafe=False).changed
    edit = fix_file(example.path, example.code, [finding], "example", unsafe=example.unsafe)
    assert edit.after == example.fixed
    assert edit.applied == [finding]
    before, after = example.code.splitlines(), edit.after.splitlines()
    first, last = spec.span[0], spec.span[2]
    assert before[: first - 1] == after[: first - 1]
    tail = len(before) - last
    assert before[len(before) - tail :] == after[len(after) - tail :]
    again = check_bytes(example.path, edit.after.encode(), keys, seq).findings
    assert not [f for f in again if f.rule == code and f.line == example.line]


def test_fixes_never_touch_a_file_that_does_not_parse() -> None:
    code = "from pyspark.sql import functions as F\nx = df.withColumn('r', F.rand())\ndef broken(:\n"
    findings = check_bytes("example.py", code.encode(), [], []).findings
    assert [f.rule for f in findings] == ["ND000"]
    fake = [*findings, *check_bytes("ok.py", code.rsplit("def", 1)[0].encode(), [], []).findings]
    assert any(f.fix for f in fake)
    assert not fix_file("example.py", code, fake, "example", unsafe=True).changed


def test_nd012_the_guard_its_own_fix_advises_is_recognized() -> None:
    # the fix text says `condition="s.batch_id > t.last_batch_id"` with `set={..., "last_batch_id":
    # "s.batch_id"}`; before, only a guard with one name on both sides was recognized, so following the
    # advice still gave the error
    base = """
    from delta.tables import DeltaTable
    (DeltaTable.forName(spark, "dw.totals").alias("t")
        .merge(daily.alias("s"), "t.account = s.account")
        .whenMatchedUpdate(condition={cond}, set={{"total": "t.total + s.amount", "last_batch_id": {value}}})
        .execute())
    """
    guarded = (
        ('"s.batch_id > t.last_batch_id"', '"s.batch_id"'),
        ('"t.last_batch_id < s.batch_id"', '"s.batch_id"'),
        ('"s.batch_id > t.last_batch_id AND s.ok"', '"batch_id"'),
    )
    for cond, value in guarded:
        assert lint_code(base.format(cond=cond, value=value)) == [], (cond, value)
    # a guard the update does not move forward (or moves to another column) protects nothing
    unguarded = (
        ('"s.batch_id > t.last_batch_id"', '"s.other_id"'),
        ('"s.batch_id > t.last_batch_id"', '"current_timestamp()"'),
        ('"s.batch_id > t.first_batch_id"', '"s.batch_id"'),
    )
    for cond, value in unguarded:
        assert "ND012" in [f.rule for f in lint_code(base.format(cond=cond, value=value))], (cond, value)


def test_nd012_a_sql_guard_on_the_batch_id_of_an_f_string_is_recognized() -> None:
    # ``WHEN MATCHED AND {batch_id} > t.batch_id THEN UPDATE SET ..., t.batch_id = {batch_id}``: the batch
    # id is a Python value spliced into the text twice; once the update ran, a replay fails the condition.
    # Before, each field was a different placeholder, so the guard was not seen and ND012 was an error.
    base = '''
    def upsert(df, batch_id):
        df.sparkSession.sql(f"""MERGE INTO dw.totals t USING updates s ON t.id = s.id
            WHEN MATCHED AND {cond} THEN UPDATE SET t.total = t.total + s.n, t.batch_id = {value}""")
    '''
    for cond in ("{batch_id} > t.batch_id", "t.batch_id < {batch_id}", "s.batch_id > t.batch_id"):
        value = "s.batch_id" if cond.startswith("s.") else "{batch_id}"
        code = base.replace("{cond}", cond).replace("{value}", value)
        assert "ND012" not in [f.rule for f in lint_code(code)], cond
    for cond, value in (
        ("{batch_id} >= t.batch_id", "{batch_id}"),  # a replay passes >= again
        ("{batch_id} > t.batch_id", "{other_id}"),
        ("{batch_id} > t.batch_id", "{batch_id!r}"),
        ("{batch_id} > t.first_batch_id", "{batch_id}"),
    ):
        code = base.replace("{cond}", cond).replace("{value}", value)
        assert "ND012" in [f.rule for f in lint_code(code)], (cond, value)


def test_nd011_txn_options_given_as_keyword_unpacking_mark_the_append() -> None:
    # .options(**txn) with txn = {"txnAppId": ..., "txnVersion": epoch_id}: before, only .option(...),
    # .options(k=v) and .options({...}) were read, so the marked append was an ND011 error
    code = """
    def sink(df, epoch_id):
        txn = {{"txnAppId": "events", "txnVersion": epoch_id}}
        df.write.format("delta").mode("append"){options}.save("/lake/e")

    stream.writeStream.foreachBatch(sink).start()
    """
    assert lint_code(code.format(options=".options(**txn)")) == []
    assert lint_code(code.format(options='.options(**txn, mergeSchema="true")')) == []
    half = code.replace('"txnVersion": epoch_id', '"other": 1')
    assert [f.rule for f in lint_code(half.format(options=".options(**txn)"))] == ["ND011"]


def test_a_sql_function_is_named_as_the_text_spells_it() -> None:
    # sqlglot reads array_agg as its ArrayAgg class, which the catalogue knows as collect_list, and now() as
    # current_timestamp: the message names what the user wrote
    code = """
    out = spark.sql("SELECT k, array_agg(tag) AS tags, NOW() AS seen FROM s GROUP BY k")
    out.write.saveAsTable("t")
    """
    findings = lint_code(code)
    assert [(f.rule, f.column_name) for f in findings] == [("ND005", "tags"), ("ND001", "seen")]
    assert "`array_agg` in SQL text" in findings[0].message
    assert "`now` in SQL text" in findings[1].message
