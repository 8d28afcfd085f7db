"""Bad input never crashes a run: random bytes, syntax errors, huge files, deep nesting, other encodings."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner
from upsertsink.lint.checker import check_bytes
from upsertsink.lint.cli import lint_command


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
