"""ruff's conventions, with ruff's meanings and exit codes: per-file-ignores and extend-exclude in the
config; --extend-select, --exclude, --extend-exclude; a file on stdin ('-' with --stdin-filename);
--show-files and --show-settings; the concise, pylint, gitlab and junit output formats."""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner
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
KEY_JOB = """\
from pyspark.sql import functions as F
from upsertsink import UpsertSink

df2 = df.withColumn("id", F.monotonically_increasing_id())
df3 = df2.withColumn("ingested_at", F.current_timestamp())
UpsertSink("/tables/t", keys=["id"]).write(df3)
"""
HELPER = """\
import uuid


def new_key():
    return str(uuid.uuid4())
"""
USES_HELPER = """\
from jobs.helpers import new_key
from upsertsink import UpsertSink

UpsertSink("/lake/orders", keys=["order_id"]).write(spark.table("o").withColumn("order_id", lit(new_key())))
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "stream.py").write_text(STREAM_JOB)
    (jobs / "keys.py").write_text(KEY_JOB)
    (jobs / "helpers.py").write_text(HELPER)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_keys.py").write_text(KEY_JOB)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("UPSERTSINK_OUTPUT_FORMAT", raising=False)
    monkeypatch.delenv("CI_PROJECT_DIR", raising=False)
    return tmp_path


def config(project: Path, body: str) -> None:
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n\n[tool.upsertsink.lint]\n" + body)


def run(*args: str, stdin: str | None = None):
    return CliRunner().invoke(lint_command, [*args, "--no-cache"], input=stdin, catch_exceptions=False)


def found(*args: str, stdin: str | None = None) -> list[tuple[str, int, str]]:
    result = run(*args, "--format", "json", stdin=stdin)
    assert result.exit_code in (0, 1), result.output
    return [(f["path"], f["line"], f["rule"]) for f in json.loads(result.stdout)["findings"]]


def assert_usage_error(result, needle: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("upsertsink: error: ") and result.stderr.count("\n") == 1
    assert needle in result.stderr


# ---------------------------------------------------------------- per-file-ignores, extend-exclude


def test_per_file_ignores_as_ruff(project: Path) -> None:
    everything = found(".")
    assert ("jobs/keys.py", 4, "ND004") in everything and ("tests/test_keys.py", 4, "ND004") in everything
    config(
        project,
        '[tool.upsertsink.lint.per-file-ignores]\n"tests/**" = ["ND"]\n"keys.py" = ["ND004"]\n'
        '"!jobs/stream.py" = ["ND002"]\n',
    )
    got = found(".")
    assert not any(p.startswith("tests/") for p, _, _ in got)  # a path glob, codes by prefix
    assert ("jobs/keys.py", 4, "ND004") not in got  # a glob without "/" matches the file name anywhere
    assert ("jobs/keys.py", 5, "ND001") in got  # only the codes listed
    assert ("jobs/stream.py", 5, "ND002") in got  # "!glob": the files it does not match
    # the exit code follows what is left
    config(project, '[tool.upsertsink.lint.per-file-ignores]\n"*.py" = ["ND004", "ND011"]\n')
    assert run("jobs/keys.py").exit_code == 0


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ('per-file-ignores = ["tests/**"]\n', "per-file-ignores must be a table"),
        ('[tool.upsertsink.lint.per-file-ignores]\n"tests/**" = 3\n', "must be a list of rule codes"),
        ('[tool.upsertsink.lint.per-file-ignores]\n"tests/**" = ["XX1"]\n', "unknown rule code 'XX1'"),
        ("extend-exclude = 3\n", "extend-exclude must be a string or a list of strings"),
    ],
)
def test_bad_per_file_ignores_or_extend_exclude_exit_2(project: Path, body: str, needle: str) -> None:
    config(project, body)
    assert_usage_error(run("jobs"), needle)


def test_extend_exclude_in_config_adds_to_exclude(project: Path) -> None:
    config(project, 'exclude = ["tests/"]\nextend-exclude = ["jobs/keys.py"]\n')
    assert {p for p, _, _ in found(".")} == {"jobs/stream.py"}
    # a file named explicitly is still linted, unless --force-exclude (as ruff)
    assert {p for p, _, _ in found("jobs/keys.py")} == {"jobs/keys.py"}
    assert found("jobs/keys.py", "--force-exclude") == []


def test_exclude_flag_replaces_and_extend_exclude_flag_adds(project: Path) -> None:
    config(project, 'exclude = ["tests/"]\n')
    assert {p for p, _, _ in found(".")} == {"jobs/keys.py", "jobs/stream.py"}
    # --exclude replaces the configured list: tests/ is linted again, jobs/keys.py is not
    assert {p for p, _, _ in found(".", "--exclude", "jobs/keys.py")} == {
        "jobs/stream.py",
        "tests/test_keys.py",
    }
    # --extend-exclude adds to it (comma-separated and repeatable)
    assert {p for p, _, _ in found(".", "--extend-exclude", "jobs/keys.py,jobs/nothing.py")} == {
        "jobs/stream.py"
    }
    assert found(".", "--extend-exclude", "jobs/keys.py", "--extend-exclude", "jobs/stream.py") == []
    # and --force-exclude applies them to named files
    assert found("jobs/stream.py", "--force-exclude", "--extend-exclude", "jobs/stream.py") == []


# ---------------------------------------------------------------- --extend-select


def test_extend_select_adds_to_the_selection(project: Path) -> None:
    config(project, 'select = ["ND004"]\n')
    assert {r for _, _, r in found("jobs")} == {"ND004"}
    assert {r for _, _, r in found("jobs", "--extend-select", "ND001")} == {"ND004", "ND001"}
    # --select replaces, --extend-select adds to the result; --ignore still wins
    got = {
        r
        for _, _, r in found(
            "jobs", "--select", "ND002", "--extend-select", "ND011,ND001", "--ignore", "ND001"
        )
    }
    assert got == {"ND002", "ND011"}
    assert_usage_error(run("jobs", "--extend-select", "ND4X"), "--extend-select: unknown rule code")


# ---------------------------------------------------------------- stdin


def test_stdin_is_reported_under_stdin_filename(project: Path) -> None:
    result = run("-", "--stdin-filename", "jobs/new_job.py", stdin=KEY_JOB)
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("jobs/new_job.py:4:27: ND004 ")
    assert lines[-1] == "Found 2 findings (1 error, 1 warning) in 1 file checked."
    # no name: reported as "-" (as ruff); no path at all with --stdin-filename reads stdin too
    assert found("-", stdin=KEY_JOB)[0] == ("-", 4, "ND004")
    assert found("--stdin-filename", "jobs/x.py", stdin=KEY_JOB)[0] == ("jobs/x.py", 4, "ND004")
    # clean input: exit 0
    assert run("-", "--stdin-filename", "a.py", stdin="x = 1\n").exit_code == 0


def test_stdin_content_wins_over_the_file_on_disk(project: Path) -> None:
    assert found("-", "--stdin-filename", "jobs/keys.py", stdin="x = 1\n") == []


def test_stdin_config_applies_to_the_name(project: Path) -> None:
    config(
        project, 'exclude = ["generated/"]\n[tool.upsertsink.lint.per-file-ignores]\n"tests/**" = ["ND004"]\n'
    )
    assert [r for _, _, r in found("-", "--stdin-filename", "tests/t.py", stdin=KEY_JOB)] == ["ND001"]
    # an excluded name is linted when named, and skipped with --force-exclude (as ruff)
    assert found("-", "--stdin-filename", "generated/g.py", stdin=KEY_JOB) != []
    result = run("-", "--stdin-filename", "generated/g.py", "--force-exclude", stdin=KEY_JOB)
    assert result.exit_code == 0
    assert result.stdout == "All checks passed (0 files checked).\n"


def test_stdin_follows_imports_of_the_project(project: Path) -> None:
    got = found("-", "--stdin-filename", "jobs/uses_helper.py", stdin=USES_HELPER)
    assert got == [("jobs/uses_helper.py", 4, "ND003")]


def test_stdin_fix_prints_the_fixed_source_and_diff_prints_the_diff(project: Path) -> None:
    result = run("-", "--stdin-filename", "jobs/stream2.py", "--fix", stdin=STREAM_JOB)
    assert '.option("txnAppId", "jobs.stream2.write_batch").option("txnVersion", epoch_id)' in result.stdout
    assert result.stdout.startswith("from pyspark.sql import functions as F\n")
    assert "ND002" in result.stderr and "ND011" not in result.stderr  # what remains, on stderr
    assert result.exit_code == 0  # ND002 here is a warning
    assert (project / "jobs" / "stream.py").read_text() == STREAM_JOB  # nothing written
    unsafe = run("-", "--stdin-filename", "jobs/stream2.py", "--fix", "--unsafe-fixes", stdin=STREAM_JOB)
    assert "F.rand(seed=" in unsafe.stdout
    diff = run("-", "--stdin-filename", "jobs/stream2.py", "--diff", stdin=STREAM_JOB)
    assert diff.exit_code == 1
    assert diff.stdout.startswith("--- jobs/stream2.py\n+++ jobs/stream2.py\n")
    nothing = run("-", "--stdin-filename", "a.py", "--fix", stdin="x = 1\n")
    assert (nothing.exit_code, nothing.stdout) == (0, "x = 1\n")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("-", "jobs"), "cannot be combined with other paths"),
        (("jobs", "--stdin-filename", "x.py"), "--stdin-filename needs the path '-'"),
        (("-", "--add-noqa"), "--add-noqa cannot be used with standard input"),
    ],
)
def test_stdin_usage_errors(project: Path, args: tuple[str, ...], needle: str) -> None:
    assert_usage_error(run(*args, stdin=KEY_JOB), needle)


def test_stdin_through_a_real_pipe(project: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "upsertsink.lint", "-", "--stdin-filename", "jobs/piped.py", "--no-cache"],
        input=KEY_JOB,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith("jobs/piped.py:4:27: ND004 ")


# ---------------------------------------------------------------- --show-files, --show-settings


def test_show_files(project: Path) -> None:
    config(project, 'exclude = ["tests/"]\n')
    result = run("--show-files")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        str((project / "jobs" / name).resolve()) for name in ("helpers.py", "keys.py", "stream.py")
    ]
    assert run("--show-files", "--exclude", "jobs/").stdout.splitlines() == [
        str((project / "tests" / "test_keys.py").resolve())
    ]
    assert run("--show-files", "--extend-exclude", "jobs/").stdout == ""
    # exit 0 even though these files have errors; a missing path is still a usage error
    assert run("jobs/keys.py", "--show-files").exit_code == 0
    assert_usage_error(run("nope.py", "--show-files"), "path does not exist")


def test_show_settings_prints_the_resolved_settings_as_a_valid_config(project: Path) -> None:
    config(
        project,
        'keys = ["order_id"]\nselect = ["ND00"]\nexclude = ["tests/"]\n'
        '[tool.upsertsink.lint.per-file-ignores]\n"jobs/*" = ["ND004"]\n',
    )
    result = run(
        "--show-settings", "--key", "line_no", "--extend-select", "ND011", "--extend-exclude", "gen/"
    )
    assert result.exit_code == 0
    assert result.stdout.startswith(
        f"# Resolved settings for: {(project / 'jobs' / 'helpers.py').resolve()}\n"
    )
    assert f"# Settings path: {(project / 'pyproject.toml').resolve()}\n" in result.stdout
    table = tomllib.loads(result.stdout)["tool"]["upsertsink"]["lint"]
    assert table["keys"] == ["order_id", "line_no"]
    assert table["select"] == ["ND00", "ND011"]
    assert table["exclude"] == ["tests/"] and table["extend-exclude"] == ["gen/"]
    assert table["per-file-ignores"] == {"jobs/*": ["ND004"]}
    assert (
        "# enabled rules: ND000, ND001, ND002, ND003, ND004, ND005, ND006, ND007, ND008, ND009, ND011\n"
        in (result.stdout)
    )
    # the printed table is a config file that gives the same settings
    (project / "resolved.toml").write_text(result.stdout)
    again = run("--show-settings", "--config", "resolved.toml")
    assert tomllib.loads(again.stdout)["tool"]["upsertsink"]["lint"] == table


# ---------------------------------------------------------------- output formats


def test_concise_marks_the_fixes_this_run_would_apply(project: Path) -> None:
    result = run("jobs/stream.py", "--output-format", "concise")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0].startswith("jobs/stream.py:5:43: ND002 `F.rand()`")  # its fix is unsafe: no mark
    assert lines[1].startswith("jobs/stream.py:9:10: ND011 [*] ")
    assert lines[-1].startswith("Found 2 findings")
    unsafe = run("jobs/stream.py", "--output-format", "concise", "--unsafe-fixes").stdout.splitlines()
    assert unsafe[0].startswith("jobs/stream.py:5:43: ND002 [*] ")
    assert run("jobs/stream.py", "--output-format", "concise", "-q").stdout.count("\n") == 2


def test_pylint_format(project: Path) -> None:
    result = run("jobs/keys.py", "--output-format", "pylint")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("jobs/keys.py:4: [ND004] `F.monotonically_increasing_id()`")
    assert lines[1].startswith("jobs/keys.py:5: [ND001] ")


def test_gitlab_code_quality(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    result = run("jobs", "tests", "--output-format", "gitlab")
    assert result.exit_code == 1
    issues = json.loads(result.stdout)
    assert [i["check_name"] for i in issues] == ["ND004", "ND001", "ND002", "ND011", "ND004", "ND001"]
    first = issues[0]
    assert set(first) == {"check_name", "description", "severity", "fingerprint", "location"}
    assert first["description"].startswith("ND004: `F.monotonically_increasing_id()`")
    assert first["severity"] == "major" and issues[1]["severity"] == "minor"
    assert first["location"] == {
        "path": "jobs/keys.py",
        "positions": {"begin": {"line": 4, "column": 27}, "end": {"line": 4, "column": 58}},
    }
    prints = [i["fingerprint"] for i in issues]
    assert len(set(prints)) == len(prints) and all(int(p, 16) >= 0 for p in prints)
    # stable when the code moves (rule and path, not the line)
    (project / "jobs" / "keys.py").write_text("\n\n" + KEY_JOB)
    moved = json.loads(run("jobs", "tests", "--output-format", "gitlab").stdout)
    assert [i["fingerprint"] for i in moved] == prints
    assert moved[0]["location"]["positions"]["begin"]["line"] == 6
    # paths relative to $CI_PROJECT_DIR when GitLab sets it
    monkeypatch.setenv("CI_PROJECT_DIR", str(project / "jobs"))
    assert (
        json.loads(run("jobs/keys.py", "--output-format", "gitlab").stdout)[0]["location"]["path"]
        == "keys.py"
    )
    assert run("jobs/helpers.py", "--output-format", "gitlab").stdout == "[]\n"


def test_junit_xml(project: Path) -> None:
    result = run("jobs", "--output-format", "junit")
    assert result.exit_code == 1
    assert result.stdout.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    root = ET.fromstring(result.stdout.split("\n", 1)[1])
    assert root.tag == "testsuites" and root.get("tests") == "4" and root.get("failures") == "4"
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["jobs/keys.py", "jobs/stream.py"]
    assert [s.get("tests") for s in suites] == ["2", "2"]
    case = suites[0].find("testcase")
    assert case.get("name") == "org.upsertsink.ND004" and case.get("classname") == "jobs/keys"
    assert (case.get("line"), case.get("column")) == ("4", "27")
    assert case.find("properties/property").attrib == {"name": "severity", "value": "error"}
    failure = case.find("failure")
    assert failure.get("message").startswith("`F.monotonically_increasing_id()`")
    assert failure.text.startswith("line 4, col 27, `F.monotonically_increasing_id()`")
    assert suites[1].findall("testcase")[0].find("properties/property").get("value") == "warning"
    clean = run("jobs/helpers.py", "--output-format", "junit")
    assert clean.exit_code == 0
    only = ET.fromstring(clean.stdout.split("\n", 1)[1]).find("testsuite/testcase")
    assert only.get("name") == "No errors found" and only.find("failure") is None


def test_junit_escapes_markup(project: Path) -> None:
    (project / "jobs" / "a&b.py").write_text(KEY_JOB)
    root = ET.fromstring(run("jobs/a&b.py", "--output-format", "junit").stdout.split("\n", 1)[1])
    assert root.find("testsuite").get("name") == "jobs/a&b.py"


@pytest.mark.parametrize("fmt", ["concise", "junit", "gitlab", "pylint"])
def test_format_alias_and_environment(project: Path, fmt: str) -> None:
    by_output_format = run("jobs", "--output-format", fmt)
    by_format = run("jobs", "--format", fmt)
    by_env = CliRunner().invoke(
        lint_command, ["jobs", "--no-cache"], env={"UPSERTSINK_OUTPUT_FORMAT": fmt}, catch_exceptions=False
    )
    assert by_output_format.exit_code == by_format.exit_code == by_env.exit_code == 1
    assert by_output_format.stdout == by_format.stdout == by_env.stdout


def test_unknown_output_format_still_exits_2(project: Path) -> None:
    assert_usage_error(run("jobs", "--output-format", "checkstyle"), "checkstyle")


def test_notebook_findings_in_the_line_based_formats(project: Path) -> None:
    cells = [
        {"cell_type": "markdown", "metadata": {}, "source": ["# job\n"]},
        {
            "cell_type": "code",
            "metadata": {},
            "outputs": [],
            "execution_count": None,
            "source": KEY_JOB.splitlines(True),
        },
    ]
    doc = {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (project / "nb.ipynb").write_text(json.dumps(doc, indent=1))
    file_line = next(
        i
        for i, line in enumerate((project / "nb.ipynb").read_text().splitlines(), 1)
        if "monotonically" in line
    )
    pylint = run("nb.ipynb", "--output-format", "pylint").stdout.splitlines()
    assert pylint[0].startswith(f"nb.ipynb:{file_line}: [ND004] cell 2, line 4, column 27: ")
    assert run("nb.ipynb", "--output-format", "concise").stdout.startswith("nb.ipynb:cell 2:4:27: ND004 ")
    issue = json.loads(run("nb.ipynb", "--output-format", "gitlab").stdout)[0]
    assert issue["location"]["positions"]["begin"] == {"line": file_line, "column": 1}
    assert issue["description"].startswith("ND004: cell 2, line 4, column 27: ")
    case = ET.fromstring(run("nb.ipynb", "--output-format", "junit").stdout.split("\n", 1)[1]).find(
        "testsuite/testcase"
    )
    assert case.get("line") is None and case.find("failure").text.startswith("cell 2, line 4, column 27: ")
