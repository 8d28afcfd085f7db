"""Notebooks: .ipynb files and Databricks source exports, magics, SQL cells, %run, positions in every format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from upsertsink.lint.check.checker import check_bytes
from upsertsink.lint.check.notebooks import convert_databricks, convert_ipynb
from upsertsink.lint.command.cli import lint_command


def notebook(*cells: tuple[str, str], language: str = "python") -> str:
    """An nbformat 4 notebook; each cell is (cell_type, source), sources stored as lists of lines."""
    out = []
    for kind, source in cells:
        cell = {"cell_type": kind, "metadata": {}, "source": source.splitlines(keepends=True)}
        if kind == "code":
            cell.update({"execution_count": None, "outputs": []})
        out.append(cell)
    doc = {
        "cells": out,
        "metadata": {"kernelspec": {"language": language, "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return json.dumps(doc, indent=1)


NB = notebook(
    ("markdown", "# Daily orders\nSome text.\n"),
    ("code", "!pip install -q delta-spark\n%load_ext autoreload\nfrom pyspark.sql import functions as F\n"),
    (
        "code",
        (
            "orders = spark.table('raw.orders')\n"
            "orders = orders.withColumn('order_key', F.monotonically_increasing_id())\n"
            "orders.write.mode('append').saveAsTable('dw.orders')\n"
        ),
    ),
    ("code", "%%sql\nINSERT INTO dw.loaded SELECT order_id,\n       current_timestamp() AS loaded_at\nFROM dw.orders\n"),
    ("code", "files = !ls /dbfs/landing\nfor f in files:\n    !echo {f}\n"),
    ("code", "%md\nnot python at all: )))\n"),
    ("code", "baseline = orders.withColumn('score', F.rand())\ndisplay(baseline)\n"),
)


@pytest.fixture
def nb_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.upsertsink.lint]\n")
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "notebooks" / "daily.ipynb").write_text(NB)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(lint_command, [*args, "--no-cache"], catch_exceptions=False)


def test_ipynb_in_a_folder_is_linted_magics_and_shell_lines_skipped(nb_project: Path) -> None:
    doc = json.loads(run("notebooks", "--format", "json").output)
    assert doc["files_checked"] == 1
    got = [
        (f["cell"], f["line"], f["column"], f["rule"], f["severity"], f["column_name"])
        for f in doc["findings"]
    ]
    # cell numbers count every cell on screen (the Markdown cell is cell 1)
    assert got == [
        (3, 2, 41, "ND004", "error", "order_key"),
        (4, 3, 8, "ND001", "warning", "loaded_at"),
    ]
    for f in doc["findings"]:
        assert set(f) == {
            "path",
            "line",
            "column",
            "end_line",
            "end_column",
            "rule",
            "severity",
            "message",
            "target",
            "column_name",
            "cell",
        }
        assert f["path"] == "notebooks/daily.ipynb"


def test_ipynb_text_github_and_sarif_name_the_cell(nb_project: Path) -> None:
    text = run("notebooks").output.splitlines()
    assert text[0].startswith("notebooks/daily.ipynb:cell 3:2:41: ND004 ")
    assert text[1].startswith("notebooks/daily.ipynb:cell 4:3:8: ND001 ")
    raw_lines = (nb_project / "notebooks" / "daily.ipynb").read_text().splitlines()
    key_line = next(i for i, t in enumerate(raw_lines, 1) if "monotonically_increasing_id" in t)
    github = run("notebooks", "--format", "github").output.splitlines()
    assert github[0].startswith(
        f"::error file=notebooks/daily.ipynb,line={key_line},endLine={key_line},title=ND004 "
    )
    assert "::ND004 cell 3, line 2, column 41: " in github[0]
    sarif = json.loads(run("notebooks", "--format", "sarif").output)
    first = sarif["runs"][0]["results"][0]
    assert first["locations"][0]["physicalLocation"]["region"] == {"startLine": key_line}
    assert first["properties"]["cell"] == 3 and first["properties"]["cell_line"] == 2
    assert first["message"]["text"].startswith("cell 3, line 2, column 41: ")


def test_shell_and_magic_lines_no_longer_make_a_notebook_unparseable() -> None:
    src = notebook(("code", "!pip install x\nimport os\nout = !ls\n%time x = 1\nobj?\nprint(os.sep)\n"))
    assert check_bytes("n.ipynb", src.encode(), [], [], prefilter=False).findings == []
    conv = convert_ipynb(src)
    assert conv.text.splitlines() == ["pass", "import os", "out = None", "pass", "pass", "print(os.sep)", ""]


def test_a_real_syntax_error_in_a_cell_points_at_the_cell() -> None:
    src = notebook(("markdown", "x"), ("code", "import os\n"), ("code", "a = 1\ndef broken(:\n"))
    [f] = check_bytes("n.ipynb", src.encode(), [], []).findings
    assert (f.rule, f.cell, f.line) == ("ND000", 3, 2)


def test_invalid_notebook_json_is_a_parse_error() -> None:
    [f] = check_bytes("n.ipynb", b"{not json", [], []).findings
    assert f.rule == "ND000" and "notebook" in f.message


def test_sql_notebook_language_makes_every_cell_sql() -> None:
    src = notebook(("code", "INSERT INTO r SELECT id, rand() AS r FROM t\n"), language="sql")
    [f] = check_bytes("q.ipynb", src.encode(), [], []).findings
    assert (f.rule, f.cell, f.line, f.column, f.column_name) == ("ND002", 1, 1, 26, "r")


DBX = """\
# Databricks notebook source
# MAGIC %md
# MAGIC # Orders

# COMMAND ----------

# MAGIC %pip install delta-spark

# COMMAND ----------

# MAGIC %run ./setup

# COMMAND ----------

orders = spark.table("raw.orders").withColumn("batch", F.lit(BATCH_ID))
orders = orders.withColumn("order_sk", F.expr("uuid()"))
orders.write.saveAsTable("dw.orders")

# COMMAND ----------

# MAGIC %sql
# MAGIC MERGE INTO dw.orders t
# MAGIC USING updates s ON t.order_id = s.order_id
# MAGIC WHEN MATCHED THEN UPDATE SET t.touched = now()

# COMMAND ----------

# MAGIC %sql INSERT INTO dw.r SELECT order_id, rand() AS r FROM dw.orders
"""
SETUP = """\
# Databricks notebook source
import uuid
BATCH_ID = str(uuid.uuid4())
"""


def test_databricks_export_sql_cells_keep_their_lines() -> None:
    conv = convert_databricks(DBX)
    assert conv.runs == ["./setup"]
    assert len(conv.text.split("\n")) == len(DBX.split("\n"))
    findings = check_bytes("orders.py", DBX.encode(), [], []).findings
    got = [(f.line, f.column, f.rule, f.target, f.column_name) for f in findings]
    assert got == [
        (16, 48, "ND003", "key", "order_sk"),  # F is pyspark's functions by convention in a notebook
        (24, 50, "ND001", "column", "touched"),  # SQL inside "# MAGIC " lines, columns of the file
        (28, 48, "ND002", "column", "r"),  # SQL on the %sql line itself
    ]
    assert all(f.cell is None for f in findings)


def test_run_notebook_names_are_resolved_in_the_linted_tree(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.upsertsink.lint]\n")
    (tmp_path / "orders.py").write_text(DBX)
    (tmp_path / "setup.py").write_text(SETUP)
    monkeypatch.chdir(tmp_path)
    doc = json.loads(run(".", "--format", "json").output)
    got = [(f["path"], f["line"], f["rule"], f["column_name"]) for f in doc["findings"]]
    assert ("orders.py", 15, "ND003", "batch") in got
    batch = next(f for f in doc["findings"] if f["column_name"] == "batch")
    assert "setup.py:3" in batch["message"] and "`BATCH_ID`" in batch["message"]
    # linting orders.py alone still reads the %run notebook of the project (not reporting its findings)
    doc = json.loads(run("orders.py", "--format", "json").output)
    assert {f["path"] for f in doc["findings"]} == {"orders.py"}
    assert "batch" in [f["column_name"] for f in doc["findings"]]
    # without the %run notebook in the project the name is unknown: no finding for it
    (tmp_path / "setup.py").unlink()
    doc = json.loads(run("orders.py", "--format", "json").output)
    assert "batch" not in [f["column_name"] for f in doc["findings"]]


def test_run_of_an_ipynb_notebook(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.upsertsink.lint]\n")
    (tmp_path / "helpers.ipynb").write_text(
        notebook(("code", "import datetime\nLOAD_TS = datetime.datetime.now()\n"))
    )
    (tmp_path / "job.ipynb").write_text(
        notebook(
            ("code", "%run ./helpers\n"),
            ("code", "out = df.withColumn('loaded_at', F.lit(LOAD_TS))\nout.write.saveAsTable('t')\n"),
        )
    )
    monkeypatch.chdir(tmp_path)
    doc = json.loads(run(".", "--format", "json").output)
    got = [(f["path"], f["cell"], f["line"], f["rule"], f["column_name"]) for f in doc["findings"]]
    assert got == [("job.ipynb", 2, 1, "ND001", "loaded_at")]


def test_noqa_in_a_notebook_cell() -> None:
    src = notebook(
        ("code", "from pyspark.sql import functions as F\nx = df.withColumn('r', F.rand())  # noqa\n")
    )
    assert check_bytes("n.ipynb", src.encode(), [], []).findings == []
