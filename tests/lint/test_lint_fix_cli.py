"""The command line as ruff users expect it: --fix / --unsafe-fixes / --diff / --add-noqa, --statistics,
--output-file, --exit-zero, -q, the full format, UPSERTSINK_OUTPUT_FORMAT, --clean, the SARIF version, the
error style and the progress display on stderr."""

from __future__ import annotations

import importlib.metadata
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from upsertsink.lint.check.checker import check_bytes
from upsertsink.lint.command.cli import lint_command

STREAM_JOB = """\
from pyspark.sql import functions as F


def write_batch(batch_df, epoch_id):
    scored = batch_df.withColumn("noise", F.rand())
    (scored.write
        .format("delta")
        .mode("append")
        .saveAsTable("dw.events"))


events.writeStream.foreachBatch(write_batch).start()
"""
PLAIN_JOB = """\
from pyspark.sql import functions as F
from upsertsink import UpsertSink

df2 = df.withColumn("id", F.monotonically_increasing_id())
UpsertSink("/tables/t", keys=["id"]).write(df2)
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "stream.py").write_text(STREAM_JOB)
    (tmp_path / "jobs" / "plain.py").write_text(PLAIN_JOB)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("UPSERTSINK_OUTPUT_FORMAT", raising=False)
    return tmp_path


def run(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(lint_command, [*args, "--no-cache"], catch_exceptions=False, env=env)


def codes(path: Path) -> list[tuple[str, int]]:
    return [(f.rule, f.line) for f in check_bytes(path.name, path.read_bytes(), [], []).findings]


def test_fix_applies_safe_fixes_only_and_reports_what_remains(project: Path) -> None:
    result = run("jobs/stream.py", "--fix")
    after = (project / "jobs" / "stream.py").read_text()
    assert (
        '(scored.write.option("txnAppId", "jobs.stream.write_batch").option("txnVersion", epoch_id)\n'
        in after
    )
    assert "F.rand())" in after  # unsafe: left alone
    assert "Fixed 1 finding in 1 file. 1 more fixable with --unsafe-fixes." in result.stderr
    assert result.stdout.splitlines()[0].startswith("jobs/stream.py:5:43: ND002 ")
    assert result.stdout.splitlines()[-1] == "Found 1 finding (0 errors, 1 warning) in 1 file checked."
    assert result.exit_code == 0  # what remains is a warning
    assert codes(project / "jobs" / "stream.py") == [("ND002", 5)]
    assert (
        after.replace('.option("txnAppId", "jobs.stream.write_batch").option("txnVersion", epoch_id)', "")
        == STREAM_JOB
    )


def test_unsafe_fixes_need_fix_or_diff(project: Path) -> None:
    run("jobs/stream.py", "--unsafe-fixes")
    assert (project / "jobs" / "stream.py").read_text() == STREAM_JOB
    result = run("jobs/stream.py", "--fix", "--unsafe-fixes")
    after = (project / "jobs" / "stream.py").read_text()
    assert "F.rand(seed=" in after and "txnAppId" in after
    assert "Fixed 2 findings in 1 file." in result.stderr
    # the seeded rand is partition-dependent (ND004), no longer an ND002 random value
    assert codes(project / "jobs" / "stream.py") == [("ND004", 5)]


def test_diff_prints_the_fixes_and_writes_nothing(project: Path) -> None:
    result = run("jobs", "--diff")
    assert result.exit_code == 1
    assert (project / "jobs" / "stream.py").read_text() == STREAM_JOB
    lines = result.stdout.splitlines()
    assert lines[:2] == ["--- jobs/stream.py", "+++ jobs/stream.py"]
    assert (
        '+    (scored.write.option("txnAppId", "jobs.stream.write_batch").option("txnVersion", epoch_id)'
        in lines
    )
    assert "-    (scored.write" in lines
    assert not any("seed=" in line for line in lines)
    assert "Would fix 1 finding in 1 file." in result.stderr
    assert "seed=" in run("jobs", "--diff", "--unsafe-fixes").stdout
    nothing = run("jobs/plain.py", "--diff")
    assert (nothing.exit_code, nothing.stdout) == (0, "")


def test_add_noqa_then_relint_is_clean(project: Path) -> None:
    job = project / "jobs" / "multi.py"
    job.write_text(
        "from pyspark.sql import functions as F\n"
        "out = spark.sql('''\n"
        "    SELECT id, current_timestamp() AS ts, rand() AS r\n"
        "    FROM t\n"
        "''')\n"
        "df2 = df.withColumn('r', F.rand()) \\\n"
        "    .withColumn('b', F.lit(1))\n"
        "df3 = df.withColumn('u', F.expr('uuid()'))  # noqa: ND001\n"
        "df4 = (df\n"
        "    .sample(0.5))\n"
    )
    before = codes(job)
    assert [c for c, _ in before] == ["ND001", "ND002", "ND002", "ND003", "ND009"]
    result = run("jobs/multi.py", "--add-noqa")
    assert result.exit_code == 0
    assert "Added 4 noqa directives to 1 file." in result.stderr
    text = job.read_text()
    assert "''')  # noqa: ND001, ND002\n" in text  # findings inside the string: after its closing quotes
    assert "    .withColumn('b', F.lit(1))  # noqa: ND002\n" in text  # after the backslash continuation
    assert "# noqa: ND001, ND003\n" in text  # an existing directive is extended
    assert "    .sample(0.5))  # noqa: ND009\n" in text
    assert codes(job) == []
    assert run("jobs/multi.py").exit_code == 0
    again = run("jobs/multi.py", "--add-noqa")
    assert "Added 0 noqa directives" in again.stderr and job.read_text() == text


def test_add_noqa_keeps_encoding_and_line_endings(project: Path) -> None:
    job = project / "jobs" / "latin.py"
    source = "# -*- coding: latin-1 -*-\r\nimport time\r\nlabel = 'caf\xe9'\r\nx = df.withColumn('t', F.lit(time.time()))\r\n"
    job.write_bytes(source.encode("latin-1"))
    run("jobs/latin.py", "--add-noqa")
    data = job.read_bytes()
    assert data.decode("latin-1").endswith("F.lit(time.time()))  # noqa: ND001\r\n")
    assert b"caf\xe9" in data and data.count(b"\r\n") == 4


def test_fix_and_add_noqa_leave_a_file_that_does_not_parse_alone(project: Path) -> None:
    broken = project / "jobs" / "broken.py"
    broken.write_text("from pyspark.sql import functions as F\nx = df.sample(0.1)\ndef f(:\n")
    before = broken.read_bytes()
    run("jobs/broken.py", "--fix", "--unsafe-fixes")
    run("jobs/broken.py", "--add-noqa")
    assert broken.read_bytes() == before


def test_add_noqa_and_fix_together_is_a_usage_error(project: Path) -> None:
    result = CliRunner().invoke(lint_command, ["jobs", "--add-noqa", "--fix"])
    assert result.exit_code == 2
    assert result.stderr == "upsertsink: error: --add-noqa cannot be combined with --fix or --diff\n"


def test_json_findings_carry_fix_only_when_they_have_one(project: Path) -> None:
    doc = json.loads(run("jobs", "--format", "json").output)
    by_rule = {f["rule"]: f for f in doc["findings"]}
    assert by_rule["ND011"]["fix"]["applicability"] == "safe"
    assert by_rule["ND002"]["fix"]["applicability"] == "unsafe"
    assert "partition" in by_rule["ND002"]["fix"]["message"]
    assert "fix" not in by_rule["ND004"]
    assert by_rule["ND011"]["target"] == "write" and by_rule["ND011"]["column_name"] == "*"


def test_statistics(project: Path) -> None:
    result = run("jobs", "--statistics")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "1\tND002\trandom-value",
        "1\tND004\tpartition-dependent-id",
        "1\tND011\t[*] append-in-foreach-batch",
    ]
    doc = json.loads(run("jobs", "--statistics", "--format", "json", "--unsafe-fixes").stdout)
    assert doc == [
        {"code": "ND002", "name": "random-value", "count": 1, "fixable": 1},
        {"code": "ND004", "name": "partition-dependent-id", "count": 1, "fixable": 0},
        {"code": "ND011", "name": "append-in-foreach-batch", "count": 1, "fixable": 1},
    ]


def test_output_file_exit_zero_and_quiet(project: Path) -> None:
    result = run("jobs", "--output-file", "reports/lint.json", "--format", "json", "--exit-zero")
    assert result.exit_code == 0 and result.stdout == ""
    doc = json.loads((project / "reports" / "lint.json").read_text())
    assert len(doc["findings"]) == 3
    quiet = run("jobs", "-q")
    assert quiet.exit_code == 1 and quiet.stderr == ""
    assert len(quiet.stdout.splitlines()) == 3
    assert not any(line.startswith(("Found", "All checks")) for line in quiet.stdout.splitlines())
    assert run("jobs/plain.py", "--quiet", "--ignore", "ND004").stdout == ""  # clean: nothing at all
    bad = CliRunner().invoke(lint_command, ["jobs", "-o", "jobs"])
    assert bad.exit_code == 2 and bad.stderr.startswith("upsertsink: error: ")


def test_full_format_shows_the_line_and_a_caret(project: Path) -> None:
    lines = run("jobs/plain.py", "--format", "full").stdout.splitlines()
    assert lines[0].startswith("jobs/plain.py:4:27: ND004 ")
    assert lines[1:5] == [
        "  |",
        '4 | df2 = df.withColumn("id", F.monotonically_increasing_id())',
        "  |                           " + "^" * 31 + " ND004",
        "  |",
    ]
    assert lines[-1] == "Found 1 finding (1 error, 0 warnings) in 1 file checked."


def test_full_format_in_a_notebook_shows_the_cell_line(project: Path) -> None:
    nb = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Title"]},
            {
                "cell_type": "code",
                "metadata": {},
                "execution_count": None,
                "outputs": [],
                "source": ["from pyspark.sql import functions as F\n", "df2 = df.withColumn('t', F.now())\n"],
            },
        ],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (project / "nb.ipynb").write_text(json.dumps(nb))
    lines = run("nb.ipynb", "--format", "full").stdout.splitlines()
    assert lines[0].startswith("nb.ipynb:cell 2:2:26: ND001 ")
    assert lines[2] == "2 | df2 = df.withColumn('t', F.now())"
    assert lines[3] == "  |                          ^^^^^^^ ND001"


def test_output_format_from_the_environment(project: Path) -> None:
    doc = json.loads(run("jobs/plain.py", env={"UPSERTSINK_OUTPUT_FORMAT": "json"}).stdout)
    assert doc["findings"][0]["rule"] == "ND004"
    flag_wins = run("jobs/plain.py", "--format", "text", env={"UPSERTSINK_OUTPUT_FORMAT": "json"})
    assert flag_wins.stdout.startswith("jobs/plain.py:4:27: ND004 ")
    bad = CliRunner().invoke(lint_command, ["jobs"], env={"UPSERTSINK_OUTPUT_FORMAT": "xml"})
    assert bad.exit_code == 2 and bad.stdout == ""
    assert bad.stderr.startswith("upsertsink: error: ") and "UPSERTSINK_OUTPUT_FORMAT" in bad.stderr


def test_clean_removes_the_cache(project: Path) -> None:
    CliRunner().invoke(lint_command, ["jobs"])
    cache = project / ".upsertsink_cache"
    assert list(cache.glob("lint-*.json"))
    result = CliRunner().invoke(lint_command, ["--clean"])
    assert result.exit_code == 0 and result.stdout == ""
    assert "Removed 1 lint cache file" in result.stderr
    assert not cache.exists()
    CliRunner().invoke(lint_command, ["jobs"])
    assert list(cache.glob("lint-*.json"))


def test_sarif_driver_version_is_the_package_version(project: Path) -> None:
    doc = json.loads(run("jobs", "--format", "sarif").stdout)
    driver = doc["runs"][0]["tool"]["driver"]
    assert driver["version"] == importlib.metadata.version("upsertsink")
    assert driver["semanticVersion"] == driver["version"]


@pytest.mark.parametrize(
    "args",
    [("--format", "xml"), ("--bogus-flag",), ("--explain", "ND999"), ("missing.py",), ("--select", "XX1")],
)
def test_every_usage_error_has_the_one_style(project: Path, args: tuple[str, ...]) -> None:
    exe = Path(sys.executable).parent / "upsertsink"
    for cmd in ([str(exe), "lint", *args], [sys.executable, "-m", "upsertsink.lint", *args]):
        out = subprocess.run(cmd, check=False, capture_output=True, text=True, cwd=project, timeout=120)
        assert out.returncode == 2, out.stderr
        assert out.stdout == ""
        assert out.stderr.startswith("upsertsink: error: ") and out.stderr.count("\n") == 1, out.stderr


def _run_with_stderr_on_a_terminal(args: list[str], cwd: Path) -> tuple[bytes, bytes]:
    """Run the linter with stdout piped and stderr a pseudo-terminal: (stdout, what the terminal got)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(args, cwd=cwd, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    terminal = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        terminal += chunk
    stdout = proc.stdout.read() if proc.stdout else b""
    proc.wait(timeout=120)
    os.close(master)
    return stdout, terminal


def test_progress_goes_to_stderr_when_it_is_a_terminal_whatever_stdout_is(project: Path) -> None:
    many = project / "many"
    many.mkdir()
    for i in range(60):
        (many / f"job_{i}.py").write_text(
            f"from pyspark.sql import functions as F\nx{i} = df.withColumn('a', F.col('b'))\n"
        )
    cmd = [sys.executable, "-m", "upsertsink.lint", "many", "--no-cache", "--format", "json"]
    stdout, terminal = _run_with_stderr_on_a_terminal(cmd, project)
    assert json.loads(stdout)["files_checked"] == 60  # stdout stays the report
    assert b"linting" in terminal
    piped = subprocess.run(cmd, check=False, capture_output=True, cwd=project, timeout=120)
    assert piped.stderr == b""  # not a terminal: no progress, no escape codes
    quiet, terminal_q = _run_with_stderr_on_a_terminal([*cmd, "-q"], project)
    assert b"linting" not in terminal_q and json.loads(quiet)["files_checked"] == 60


def test_pre_commit_hook_lints_notebooks_too() -> None:
    hooks = (Path(__file__).resolve().parents[2] / ".pre-commit-hooks.yaml").read_text()
    assert "types_or: [python, pyi, jupyter]" in hooks


def test_add_noqa_in_a_jupyter_notebook(project: Path) -> None:
    nb = {
        "cells": [
            {"cell_type": "markdown", "metadata": {}, "source": ["# Ingest"]},
            {
                "cell_type": "code",
                "execution_count": None,
                "metadata": {},
                "outputs": [],
                "source": [
                    "%pip install x\n",
                    "from pyspark.sql import functions as F\n",
                    "df2 = df.withColumn('t', F.now())\n",
                    "df3 = df.withColumn('r', F.rand())",
                ],
            },
            {
                "cell_type": "code",
                "execution_count": None,
                "metadata": {},
                "outputs": [],
                "source": ["%%sql\n", "INSERT INTO ids SELECT uuid() AS id FROM t"],
            },
        ],
        "metadata": {"language_info": {"name": "python"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    path = project / "ingest.ipynb"
    path.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
    result = run("ingest.ipynb", "--add-noqa")
    assert "Added 2 noqa directives to 1 file." in result.stderr
    assert "ingest.ipynb:cell 3:2: no noqa added (the line is SQL or a magic, not Python)" in result.stderr
    after = json.loads(path.read_text())
    assert after["cells"][1]["source"][2:] == [
        "df2 = df.withColumn('t', F.now())  # noqa: ND001\n",
        "df3 = df.withColumn('r', F.rand())  # noqa: ND002",
    ]
    assert after["cells"][2] == nb["cells"][2]  # the SQL cell is left as it was
    assert path.read_text().startswith('{\n "cells": [\n  {\n')  # the notebook keeps its JSON layout
    doc = json.loads(run("ingest.ipynb", "--format", "json").stdout)
    assert [f["rule"] for f in doc["findings"]] == ["ND003"]


def test_databricks_export_python_cells_are_fixed_and_annotated_sql_cells_left_alone(project: Path) -> None:
    job = project / "nb_export.py"
    job.write_text(
        "# Databricks notebook source\n"
        "from pyspark.sql import functions as F\n"
        "scored = df.withColumn('noise', F.rand())\n"
        "\n"
        "# COMMAND ----------\n"
        "\n"
        "# MAGIC %sql\n"
        "# MAGIC INSERT INTO ts SELECT id, current_timestamp() AS ts FROM t\n"
    )
    result = run("nb_export.py", "--add-noqa")
    assert "nb_export.py:8: no noqa added" in result.stderr
    lines = job.read_text().splitlines()
    assert lines[2] == "scored = df.withColumn('noise', F.rand())  # noqa: ND002"
    assert lines[7] == "# MAGIC INSERT INTO ts SELECT id, current_timestamp() AS ts FROM t"
    job.write_text(job.read_text().replace("  # noqa: ND002", ""))
    run("nb_export.py", "--fix", "--unsafe-fixes")
    assert "F.rand(seed=" in job.read_text().splitlines()[2]
    assert job.read_text().splitlines()[7] == "# MAGIC INSERT INTO ts SELECT id, current_timestamp() AS ts FROM t"
