"""SCD type 2 sinks (``UpsertSink(..., scd_type=2)``, ``UpsertSink.for_table(..., scd_type=2)``): their sequence
column is every version's ``__START_AT``/``__END_AT``, so a nondeterministic value reaching it is an error that
says the replay rewrites history; type 1 sinks keep their findings and messages."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from lint_helpers import lint_code
from upsertsink.lint.command.cli import lint_command
from upsertsink.lint.run.config import Settings
from upsertsink.lint.run.runner import lint_paths

HISTORY = Path(__file__).resolve().parent / "fixtures" / "history"
REWRITES = "rewrites history on every replay"
TYPE_1 = "the newer-wins check compares values that no longer describe the data"


def findings(code: str) -> list[tuple[str, int, str, str | None, str | None]]:
    """(rule, line, severity, target, column) per finding."""
    return [(f.rule, f.line, f.severity, f.target, f.column_name) for f in lint_code(code)]


def only(code: str):
    found = lint_code(code)
    assert len(found) == 1, [(f.rule, f.line, f.message) for f in found]
    return found[0]


def sink_job(sink: str, value: str = "F.current_timestamp()", prelude: str = "") -> str:
    return (
        "from pyspark.sql import functions as F\n"
        "from upsertsink import UpsertSink\n"
        f"{prelude}"
        f"out = changes.withColumn('seq', {value})\n"
        f"{sink}.write(out, batch_id=1)\n"
    )


def test_scd2_sink_with_a_wall_clock_sequence_is_an_error_that_rewrites_history() -> None:
    f = only(sink_job("UpsertSink('/lake/h', keys=['id'], sequence_by='seq', scd_type=2)"))
    assert (f.rule, f.line, f.severity, f.target, f.column_name) == ("ND001", 3, "error", "sequence", "seq")
    assert REWRITES in f.message
    assert "sequence column `seq` of an `scd_type=2` sink" in f.message
    assert "__START_AT" in f.message and "__END_AT" in f.message
    assert TYPE_1 not in f.message
    assert "take the sequence from the data" in f.message  # the rule's sequence advice


@pytest.mark.parametrize(
    "sink",
    [
        "UpsertSink('/lake/t', keys=['id'], sequence_by='seq')",
        "UpsertSink('/lake/t', keys=['id'], sequence_by='seq', scd_type=1)",
        "UpsertSink('/lake/t', keys=['id'], sequence_by='seq', scd_type=scd)",  # unknown: type 1 behaviour
        "UpsertSink.for_table('db.t', keys=['id'], sequence_by='seq', scd_type=1)",
    ],
)
def test_type_1_sinks_keep_todays_severity_and_message(sink: str) -> None:
    f = only(sink_job(sink))
    assert (f.rule, f.severity, f.target, f.column_name) == ("ND001", "error", "sequence", "seq")
    assert TYPE_1 in f.message
    assert REWRITES not in f.message and "scd_type" not in f.message


def test_type_1_and_type_2_findings_only_differ_in_the_message() -> None:
    type1 = only(sink_job("UpsertSink('/lake/t', keys=['id'], sequence_by='seq')"))
    type2 = only(sink_job("UpsertSink('/lake/t', keys=['id'], sequence_by='seq', scd_type=2)"))
    same = ("line", "column", "end_line", "end_column", "rule", "severity", "target", "column_name")
    assert [getattr(type1, a) for a in same] == [getattr(type2, a) for a in same]
    assert type1.message != type2.message


def test_for_table_with_scd_type_2() -> None:
    f = only(sink_job("UpsertSink.for_table('crm.customers', ['id'], sequence_by='seq', scd_type=2)"))
    assert (f.rule, f.severity, f.target, f.column_name) == ("ND001", "error", "sequence", "seq")
    assert REWRITES in f.message
    # qualified through the module, and bound to a name first
    code = (
        "import upsertsink\nfrom pyspark.sql import functions as F\n"
        "sink = upsertsink.UpsertSink.for_table('crm.customers', keys=['id'], sequence_by='seq', scd_type=2)\n"
        "sink.write(changes.withColumn('seq', F.current_timestamp()), batch_id=7)\n"
    )
    f = only(code)
    assert (f.line, f.severity, f.target) == (4, "error", "sequence") and REWRITES in f.message


def test_for_table_is_a_sink_the_write_rules_know_too() -> None:
    # before, UpsertSink.for_table(...) was not recognized at all: its keys were unknown and its writes
    # in batch functions unchecked
    code = """
        from pyspark.sql import functions as F
        from upsertsink import UpsertSink

        sink = UpsertSink.for_table("sales.orders", keys=["order_id"])

        def handle(batch_df, epoch_id):
            sink.write(batch_df.withColumn("order_id", F.uuid()))

        stream.writeStream.foreachBatch(handle).start()
    """
    assert sorted(findings(code)) == [
        ("ND003", 8, "error", "key", "order_id"),
        ("ND014", 8, "error", "write", "*"),
    ]
    # another class's for_table is not a sink: the column is only a written column
    code = sink_job("Catalog.for_table('db.t', keys=['id'], sequence_by='seq', scd_type=2)")
    assert findings(code) == [("ND001", 3, "warning", "column", "seq")]


def test_scd2_with_a_deterministic_sequence_from_the_data_is_clean() -> None:
    for value in ("F.col('_commit_version')", "F.col('event_ts').cast('long')", "F.to_timestamp('changed')"):
        for sink in (
            "UpsertSink('/lake/h', keys=['id'], sequence_by='seq', scd_type=2)",
            "UpsertSink.for_table('db.h', keys=['id'], sequence_by='seq', scd_type=2)",
        ):
            assert lint_code(sink_job(sink, value)) == []


def test_track_history_lists_are_not_findings() -> None:
    code = """
        from pyspark.sql import functions as F
        from upsertsink import UpsertSink

        TRACKED = ["street", "city"]
        a = UpsertSink("/lake/a", keys=["id"], sequence_by="seq", scd_type=2, track_history=TRACKED)
        b = UpsertSink.for_table(
            "db.b", keys=["id"], sequence_by="seq", scd_type=2, track_history_except=["last_login"],
            ignore_null_updates=True,
        )
        a.write(changes.withColumn("city", F.upper("city")), batch_id=1)
        b.write(changes.withColumn("street", F.trim("street")), batch_id=1)
    """
    assert lint_code(code) == []
    # a tracked column is not a key or a sequence: a clock there stays a column warning
    code = sink_job("UpsertSink('/lake/a', keys=['id'], sequence_by='v', scd_type=2, track_history=['seq'])")
    assert findings(code) == [("ND001", 3, "warning", "column", "seq")]


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("F.rand()", "ND002"),
        ("F.expr('uuid()')", "ND003"),
        ("F.monotonically_increasing_id()", "ND004"),
        ("F.row_number().over(Window.orderBy('ts'))", "ND006"),
    ],
)
def test_other_nondeterministic_sequences_rewrite_history_too(value: str, rule: str) -> None:
    prelude = "from pyspark.sql import Window\n"
    code = sink_job("UpsertSink('/lake/h', keys=['id'], sequence_by='seq', scd_type=2)", value, prelude)
    f = next(f for f in lint_code(code) if f.rule == rule)
    assert (f.severity, f.target, f.column_name) == ("error", "sequence", "seq")
    assert REWRITES in f.message
    type1 = sink_job("UpsertSink('/lake/h', keys=['id'], sequence_by='seq')", value, prelude)
    f1 = next(f for f in lint_code(type1) if f.rule == rule)
    assert f1.severity == "error" and REWRITES not in f1.message


def test_python_clock_and_sql_text_reach_the_history_sequence() -> None:
    code = """
        import datetime
        from pyspark.sql import functions as F
        from upsertsink import UpsertSink

        out = changes.withColumn("seq", F.lit(datetime.datetime.now()))
        UpsertSink("/lake/h", keys=["id"], sequence_by="seq", scd_type=2).write(out, batch_id=3)
        sql_out = spark.sql("SELECT id, name, current_timestamp() AS sql_seq FROM changes")
        UpsertSink("/lake/h2", keys=["id"], sequence_by="sql_seq", scd_type=2).write(sql_out, batch_id=3)
    """
    found = lint_code(code)
    assert [(f.rule, f.line, f.severity, f.column_name) for f in found] == [
        ("ND001", 6, "error", "seq"),
        ("ND001", 8, "error", "sql_seq"),
    ]
    assert all(REWRITES in f.message for f in found)


@pytest.mark.parametrize(
    ("prelude", "sink"),
    [
        ("SCD_TYPE = 2\n", "UpsertSink('/t', keys=['id'], sequence_by='seq', scd_type=SCD_TYPE)"),
        ("HISTORY = 2\nSCD = HISTORY\n", "UpsertSink('/t', keys=['id'], sequence_by='seq', scd_type=SCD)"),
        (
            "OPTS = {'sequence_by': 'seq', 'scd_type': 2}\n",
            "UpsertSink('/t', keys=['id'], **OPTS)",
        ),
        ("", "UpsertSink.for_table('db.t', ['id'], **dict(sequence_by='seq', scd_type=2))"),
        ("", "UpsertSink('/t', ['id'], **{'sequence_by': 'seq', 'scd_type': 2})"),
    ],
)
def test_scd_type_given_through_constants_and_option_dicts(prelude: str, sink: str) -> None:
    f = only(sink_job(sink, prelude=prelude))
    assert (f.rule, f.severity, f.target, f.column_name) == ("ND001", "error", "sequence", "seq")
    assert REWRITES in f.message


@pytest.mark.parametrize(
    ("prelude", "sink"),
    [
        ("SCD_TYPE = 1\n", "UpsertSink('/t', keys=['id'], sequence_by='seq', scd_type=SCD_TYPE)"),
        (
            "SCD_TYPE = 2\nSCD_TYPE = 1\n",
            "UpsertSink('/t', keys=['id'], sequence_by='seq', scd_type=SCD_TYPE)",
        ),
        ("", "UpsertSink('/t', keys=['id'], sequence_by='seq', scd_type=True)"),
        ("", "UpsertSink('/t', keys=['id'], sequence_by='seq', scd_type='2')"),
        ("", "UpsertSink('/t', ['id'], **{'sequence_by': 'seq', 'scd_type': 1})"),
    ],
)
def test_scd_type_other_than_2_or_unknown_is_type_1(prelude: str, sink: str) -> None:
    f = only(sink_job(sink, prelude=prelude))
    assert (f.severity, f.target) == ("error", "sequence")
    assert REWRITES not in f.message and TYPE_1 in f.message


def test_class_attribute_scd_type() -> None:
    code = """
        from pyspark.sql import functions as F
        from upsertsink import UpsertSink

        class CustomerHistory:
            def __init__(self):
                self.scd = 2

            def write(self, changes, batch_id):
                out = changes.withColumn("valid_from", F.current_timestamp())
                sink = UpsertSink("/lake/h", keys=["id"], sequence_by="valid_from", scd_type=self.scd)
                sink.write(out, batch_id=batch_id)
    """
    f = only(code)
    assert (f.line, f.severity, f.column_name) == (10, "error", "valid_from") and REWRITES in f.message


def test_a_row_choice_of_the_history_sequence_says_so() -> None:
    # keys unknown to the linter: dropDuplicates without the sequence column decides which version survives
    code = """
        from upsertsink import UpsertSink

        deduped = changes.dropDuplicates(["id"])
        UpsertSink("/lake/h", keys=KEYS, sequence_by="seq", scd_type=2).write(deduped, batch_id=1)
    """
    f = only(code)
    assert (f.rule, f.severity, f.target, f.column_name) == ("ND007", "error", "sequence", "seq")
    assert "which duplicate row survives (sequence column `seq` of an `scd_type=2` sink)" in f.message
    assert REWRITES in f.message
    type1 = only(code.replace(", scd_type=2", ""))
    assert type1.severity == "error" and REWRITES not in type1.message


def test_a_sequence_column_that_is_also_a_key_is_reported_as_the_key() -> None:
    code = sink_job("UpsertSink('/t', keys=['seq'], sequence_by='seq', scd_type=2)")
    f = only(code)
    assert (f.severity, f.target) == ("error", "key") and REWRITES not in f.message


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "history"
    shutil.copytree(HISTORY, root)
    return root


def test_fixture_job_across_files(tmp_path: Path, monkeypatch) -> None:
    """The SCD type is a constant of another module, and a helper in another module builds a history sink
    (UpsertSink.for_table) that the job's column reaches."""
    root = _copy(tmp_path)
    monkeypatch.chdir(root)
    settings = Settings()
    settings.root = root
    for use_cache in (False, True, True):  # the second cached run reads the cache
        result = lint_paths([root], settings, use_cache=use_cache)
        got = [
            (
                Path(f.path).name,
                f.line,
                f.column,
                f.rule,
                f.severity,
                f.target,
                f.column_name,
                REWRITES in f.message,
            )
            for f in result.findings
        ]
        assert got == [
            ("customers_history_job.py", 14, 47, "ND001", "error", "sequence", "loaded_at", True),
            ("customers_history_job.py", 29, 53, "ND001", "error", "sequence", "synced_at", False),
            ("customers_history_job.py", 37, 55, "ND001", "error", "sequence", "changed_at", True),
        ]


def test_fixture_job_type_1_when_the_constant_changes(tmp_path: Path, monkeypatch) -> None:
    root = _copy(tmp_path)
    settings_py = root / "lib" / "settings.py"
    settings_py.write_text(settings_py.read_text().replace("SCD_TYPE = 2", "SCD_TYPE = 1"))
    monkeypatch.chdir(root)
    settings = Settings()
    settings.root = root
    result = lint_paths([root], settings, use_cache=False)
    by_column = {f.column_name: f for f in result.findings}
    assert sorted(by_column) == ["changed_at", "loaded_at", "synced_at"]
    assert REWRITES not in by_column["loaded_at"].message  # the job's own sink is type 1 now
    assert REWRITES in by_column["changed_at"].message  # the helper's sink still says scd_type=2


def test_fixture_through_the_cli() -> None:
    result = CliRunner().invoke(lint_command, [str(HISTORY), "--format", "json", "--no-cache"])
    doc = json.loads(result.output)
    assert [
        (f["line"], f["rule"], f["severity"], f["target"], f["column_name"]) for f in doc["findings"]
    ] == [
        (14, "ND001", "error", "sequence", "loaded_at"),
        (29, "ND001", "error", "sequence", "synced_at"),
        (37, "ND001", "error", "sequence", "changed_at"),
    ]
    assert result.exit_code == 1
