"""Bad input never crashes a run: random bytes, syntax errors, huge files, deep nesting, other encodings."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from upsertsink.lint.check.checker import check_bytes
from upsertsink.lint.command.cli import lint_command


def test_random_bytes_never_crash() -> None:
    rng = random.Random(1234)
    for size in (1, 10, 100, 1000, 10_000):
        for _ in range(20):
            data = bytes(rng.randrange(256) for _ in range(size))
            result = check_bytes("noise.py", data, ["id"], [])
            assert all(f.rule == "ND000" for f in result.findings)
            assert len(result.findings) <= 1


def test_random_python_like_text_never_crashes() -> None:
    rng = random.Random(99)
    atoms = [
        "F.rand()",
        "(",
        ")",
        "[",
        "]",
        "'",
        '"""',
        "f'{",
        "}",
        "\n",
        " ",
        "df.withColumn(",
        "'id',",
        "spark.sql(",
        "SELECT rand() FROM t",
        "lambda x:",
        "def f(",
        "):",
        "import pyspark.sql.functions as F",
        "\\",
        "#",
        "noqa",
        "over(",
        "Window.partitionBy(",
        "\t",
        "é",
        ",",
    ]
    for _ in range(300):
        text = "".join(rng.choice(atoms) for _ in range(rng.randrange(1, 60)))
        check_bytes("fuzz.py", text.encode(), ["id"], ["ts"])


def test_invalid_syntax_is_one_error_finding() -> None:
    for code in (
        "def f(:\n    pass\n",
        "this is not python at all\n",
        "x = (\n",
        "from pyspark.sql import F\nif x\n",
    ):
        findings = check_bytes("broken.py", code.encode(), [], []).findings
        assert len(findings) == 1
        f = findings[0]
        assert (f.rule, f.severity, f.target, f.column_name) == ("ND000", "error", None, None)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="the linter's Python reads 3.12 syntax itself")
def test_syntax_of_a_later_python_says_so() -> None:
    # PEP 701 f-strings and PEP 695 type aliases are valid Python 3.12: the finding says the linter's own
    # Python cannot read them and how to check the file, not "fix the syntax error"
    for code in (
        'CFG = {"t": "x"}\nspark.sql(f"SELECT * FROM {CFG["t"]}")\n',
        "type Rows = list[dict]\n",
        "def first[T](xs: list[T]) -> T:\n    return xs[0]\n",
    ):
        [f] = check_bytes("new.py", code.encode(), [], []).findings
        assert (f.rule, f.severity) == ("ND000", "error")
        assert "syntax of a Python later than 3.11" in f.message, code
        assert "Fix the syntax error" not in f.message
    [f] = check_bytes("broken.py", b"x = (\n", [], []).findings
    assert "later than" not in f.message and "Fix the syntax error" in f.message


def test_null_bytes_and_undecodable_files() -> None:
    assert [f.rule for f in check_bytes("nul.py", b"x = 1\0\n", [], []).findings] == ["ND000"]
    # latin-1 bytes without a coding declaration are not valid Python source
    assert [
        f.rule for f in check_bytes("l1.py", "s = 'caf\xe9 rand()'\n".encode("latin-1"), [], []).findings
    ] == ["ND000"]


def test_latin1_file_with_coding_declaration_is_analyzed_with_correct_columns() -> None:
    code = "# -*- coding: latin-1 -*-\nfrom pyspark.sql import functions as F\nx = df.withColumn('é', F.rand())\n"
    findings = check_bytes("l1.py", code.encode("latin-1"), [], []).findings
    assert [(f.rule, f.line, f.column, f.column_name) for f in findings] == [("ND002", 3, 24, "é")]


def test_utf8_non_ascii_columns_are_in_characters() -> None:
    code = "from pyspark.sql import functions as F\nx = df.withColumn('äöü', F.rand())\n"
    [f] = check_bytes("u.py", code.encode(), [], []).findings
    assert (f.line, f.column, f.end_column) == (2, 26, 34)


def test_deep_nesting_does_not_crash() -> None:
    depth = 5000
    code = (
        "from pyspark.sql import functions as F\nx = df.withColumn('a', "
        + "(" * depth
        + "F.rand()"
        + ")" * depth
        + ")\n"
    )
    findings = check_bytes("deep.py", code.encode(), [], []).findings
    assert len(findings) == 1 and findings[0].rule in ("ND000", "ND002")
    chain = "from pyspark.sql import functions as F\nx = F.lit(1)" + " + F.lit(1)" * 20000 + " + F.rand()\n"
    chain += "df2 = df.withColumn('k', x)\n"
    findings = check_bytes("chain.py", chain.encode(), ["k"], []).findings
    assert len(findings) == 1 and findings[0].rule in ("ND000", "ND002")


def test_huge_file() -> None:
    body = "\n".join(
        f"def f{i}(df):\n    return df.withColumn('c{i}', F.col('a') + {i})\n" for i in range(20000)
    )
    code = "from pyspark.sql import functions as F\n" + body + "\nz = df.withColumn('z', F.rand())\n"
    findings = check_bytes("huge.py", code.encode(), [], []).findings
    assert [(f.rule, f.column_name) for f in findings] == [("ND002", "z")]


def test_run_with_bad_files_reports_and_continues(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "noise.py").write_bytes(bytes(range(256)) * 4)
    (tmp_path / "broken.py").write_text("def f(:\n")
    (tmp_path / "ok.py").write_text(
        "from pyspark.sql import functions as F\nx = df.withColumn('a', F.rand())\n"
    )
    (tmp_path / "deep.py").write_text("x = " + "[" * 3000 + "]" * 3000 + "\n")
    result = CliRunner().invoke(lint_command, [".", "--format", "json", "--no-cache"], catch_exceptions=False)
    doc = json.loads(result.output)
    rules = sorted((f["path"], f["rule"]) for f in doc["findings"])
    assert ("broken.py", "ND000") in rules and ("noise.py", "ND000") in rules and ("ok.py", "ND002") in rules
    assert doc["files_checked"] == 4
    assert result.exit_code == 1


def test_odd_notebooks_never_crash() -> None:
    rng = random.Random(7)
    sources = [
        "!pip install x\n",
        "%%sql\nSELECT rand() AS r FROM t\n",
        "%%sql\nSELECT '\"\"\"' AS q, '''x''' FROM t\n",
        "%sql",
        "x = df.withColumn('id', F.rand())\n",
        "def f(:\n",
        "%%bash\necho hi\n",
        "    !ls\n",
        "files = !ls\n",
        "",
        "%run ./nothing",
    ]
    shapes = [
        lambda src: {"cell_type": "code", "source": src},
        lambda src: {"cell_type": "code", "source": src.splitlines(keepends=True)},
        lambda src: {"cell_type": "code", "source": [1, 2, None]},
        lambda src: {"cell_type": "markdown", "source": src},
        lambda src: {"cell_type": "code"},
        lambda src: "not a cell",
        lambda src: {
            "cell_type": "code",
            "source": src,
            "metadata": {"application/vnd.databricks.v1+cell": 3},
        },
    ]
    for _ in range(200):
        cells = [rng.choice(shapes)(rng.choice(sources)) for _ in range(rng.randrange(0, 6))]
        doc = rng.choice(
            [{"cells": cells}, {"cells": cells, "metadata": {"kernelspec": {"language": "sql"}}}]
        )
        result = check_bytes("nb.ipynb", json.dumps(doc).encode(), ["id"], [])
        for f in result.findings:
            assert f.line >= 1 and f.column >= 1
    for bad in (b"[]", b"{}", b'{"cells": 3}', b"\xff\xfe", b"null"):
        [finding] = check_bytes("nb.ipynb", bad, [], []).findings
        assert finding.rule == "ND000"


def test_odd_databricks_exports_never_crash() -> None:
    rng = random.Random(11)
    lines = [
        "# MAGIC %sql",
        "# MAGIC SELECT rand() AS r FROM t",
        '# MAGIC SELECT """ AS x',
        "# MAGIC",
        "# COMMAND ----------",
        "x = 1",
        "# MAGIC %run ./other",
        "# MAGIC %sql SELECT uuid() AS u",
        "    y = (",
        "",
    ]
    for _ in range(200):
        text = "# Databricks notebook source\n" + "\n".join(
            rng.choice(lines) for _ in range(rng.randrange(20))
        )
        check_bytes("export.py", text.encode(), ["id"], [])


def _checked(source: str, summarize: bool = False) -> list:
    """The findings of ``source`` (an error anywhere in the analysis fails the test: ND000 on valid code)."""
    from upsertsink.lint.check.checker import CheckOptions

    result = check_bytes("job.py", source.encode(), [], [], options=CheckOptions(summarize=summarize))
    assert not [f for f in result.findings if f.rule == "ND000"], result.findings
    return result.findings


@pytest.mark.parametrize("attr", ["limit", "head", "tail", "sample", "sampleBy", "dropDuplicates", "iloc"])
def test_a_subscripted_attribute_named_like_a_dataframe_method_is_not_a_call(attr: str) -> None:
    # ``cfg.limit[0]`` is a read of a list, not a call of limit(): it used to reach limit()'s detector,
    # which failed on it and turned the whole (valid) file into an ND000 error
    _checked(f"import pandas as pd\n\n\ndef size(cfg):\n    return cfg.{attr}[0]\n\n\nx = size(opts)\n")


def test_iloc_called_as_a_method_is_not_a_row_pick() -> None:
    # pandas' ``df.iloc(axis=0)[2] = 5`` (pandas' own tests) calls iloc: it used to reach the iloc[:n]
    # detector, which expects a subscript
    assert _checked("import pandas as pd\n\npdf = pd.read_csv('x.csv')\npdf.iloc(axis=0)[2] = 5\n") == []
    # the subscript still chooses rows
    [finding] = _checked(
        "import pandas as pd\nfrom deltalake import write_deltalake\n\n"
        "pdf = pd.read_parquet('in')\nwrite_deltalake('/t', pdf.iloc[:10], mode='append')\n"
    )
    assert finding.rule == "ND008"


def test_names_bound_to_each_other_in_a_cycle_are_unknown_values() -> None:
    # six.py: ``advance_iterator = next`` (or a def) and ``next = advance_iterator``; reading the names as
    # constant strings (for a module's summary, a column name, SQL text) used to recurse without end and
    # report "nested too deeply" (ND000) for valid code
    six = (
        "try:\n    advance_iterator = next\nexcept NameError:\n"
        "    def advance_iterator(it):\n        return it.next()\nnext = advance_iterator\n"
    )
    assert _checked(six, summarize=True) == []
    job = (
        "from pyspark.sql import functions as F\n\n"
        "a = b\nb = a\np = q + 'x'\nq = p + 'y'\n"
        "df.withColumn(a, F.col('v')).select(b).dropDuplicates([p]).write.saveAsTable(q)\n"
        "spark.sql(p)\n"
    )
    _checked(job, summarize=True)
    # the rest of the file is still analyzed
    findings = _checked(job + "df.withColumn('id', F.rand()).write.mode('append').saveAsTable('t')\n")
    assert any(f.rule == "ND002" for f in findings)


def _program(rng: random.Random) -> str:
    """A random job module: names bound to each other (cycles), sources, DataFrame methods called and
    subscripted, helpers, a class, and a write."""
    names = ["a", "b", "c", "df", "w", "cond", "sql", "cols", "key"]
    methods = [
        "limit", "head", "tail", "sample", "iloc", "first", "mode", "merge", "sql", "dropDuplicates",
        "withColumn", "alias", "write", "orderBy", "over", "select", "filter", "transform", "foreachBatch",
        "whenMatchedUpdate", "toPandas", "save", "saveAsTable", "drop_duplicates", "partitionBy", "join",
    ]  # fmt: skip
    atoms = [
        "F.rand()", "F.current_timestamp()", "F.col('id')", "F.row_number()", "uuid.uuid4()",
        "datetime.now()", "F.expr('id = 1')", "'t.id = s.id'", "'SELECT * FROM t'", "'id'", "['id']",
        "1", "None", "spark.read.table('x')", "Window.partitionBy('id')", "lambda d: d", "{'a': F.rand()}",
    ]  # fmt: skip

    def expr(depth: int = 0) -> str:
        k = rng.random()
        if depth > 3 or k < 0.25:
            return rng.choice(names)
        if k < 0.45:
            return rng.choice(atoms)
        if k < 0.75:
            args = ", ".join(expr(depth + 1) for _ in range(rng.randint(0, 2)))
            return f"{expr(depth + 1)}.{rng.choice(methods)}({args})"
        if k < 0.82:
            return f"{expr(depth + 1)}.{rng.choice(methods)}[{rng.choice(['0', ':10', 'a', '1:2'])}]"
        if k < 0.88:
            return f"{expr(depth + 1)} + {expr(depth + 1)}"
        if k < 0.94:
            return f"f{rng.choice('ghk')}({expr(depth + 1)})"
        return f"self.{rng.choice(names)}"

    def stmt(indent: int) -> str:
        k, pad = rng.random(), " " * indent
        if k < 0.45:
            return f"{pad}{rng.choice(names)} = {expr()}"
        if k < 0.55:
            return f"{pad}self.{rng.choice(names)} = {expr()}"
        if k < 0.8:
            return f"{pad}{expr()}"
        if k < 0.9 and indent:
            return f"{pad}return {expr()}"
        return f"{pad}for {rng.choice(names)} in {expr()}:\n{pad}    {rng.choice(names)} = {expr()}"

    out = [
        "from pyspark.sql import functions as F",
        "from pyspark.sql.window import Window",
        "from delta.tables import DeltaTable",
        "import uuid",
        "from datetime import datetime",
        "from upsertsink import UpsertSink",
    ]
    for fn in ("fg", "fh", "fk"):
        out.append(f"def {fn}({rng.choice(names)}):")
        out += [stmt(4) for _ in range(rng.randint(1, 4))]
    out.append("class Job:\n    def run(self, df):")
    out += [stmt(8) for _ in range(rng.randint(1, 4))]
    out += [stmt(0) for _ in range(rng.randint(2, 10))]
    out.append(
        rng.choice(
            [
                "UpsertSink('/t', keys=[key], sequence_by=a).write(df)",
                (
                    "DeltaTable.forPath(spark, '/t').alias('t').merge(df.alias('s'), cond)"
                    ".whenMatchedUpdateAll().execute()"
                ),
                "df.write.mode('append').saveAsTable('t')",
            ]
        )
    )
    return "\n".join(out) + "\n"


def test_random_job_programs_are_analyzed_without_internal_errors() -> None:
    # every generated module is valid Python: none may end in ND000 (an internal error or a recursion)
    rng = random.Random(2026)
    checked = 0
    while checked < 300:
        source = _program(rng)
        try:
            compile(source, "job.py", "exec")
        except SyntaxError:
            continue
        _checked(source, summarize=True)
        checked += 1
