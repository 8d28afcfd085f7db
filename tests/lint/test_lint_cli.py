"""The command line: exit codes, output formats, config, excludes, select/ignore, explain."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from upsertsink.lint.command.cli import lint_command
from upsertsink.lint.command.report import escape_data, escape_property
from upsertsink.lint.rules import ALL_RULES

REPO = Path(__file__).resolve().parents[2]
BAD_JOB = """\
from pyspark.sql import functions as F
from upsertsink import UpsertSink

df2 = df.withColumn("id", F.monotonically_increasing_id())
df3 = df2.withColumn("ingested_at", F.current_timestamp())
UpsertSink("/tables/t", keys=["id"]).write(df3)
"""
WARN_JOB = """\
from pyspark.sql import functions as F
df2 = df.withColumn("ingested_at", F.current_timestamp())
"""
CLEAN_JOB = """\
from pyspark.sql import functions as F
df2 = df.withColumn("id", F.sha2(F.concat_ws("|", "a", "b"), 256))
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "bad.py").write_text(BAD_JOB)
    (tmp_path / "jobs" / "warn.py").write_text(WARN_JOB)
    (tmp_path / "jobs" / "clean.py").write_text(CLEAN_JOB)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(lint_command, [*args, "--no-cache"], catch_exceptions=False)


def test_text_output_and_exit_code(project: Path) -> None:
    result = run("jobs")
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert lines[0].startswith("jobs/bad.py:4:27: ND004 ")
    assert lines[1].startswith("jobs/bad.py:5:37: ND001 ")
    assert lines[2].startswith("jobs/warn.py:2:36: ND001 ")
    assert lines[-1] == "Found 3 findings (1 error, 2 warnings) in 3 files checked."


def test_exit_codes_follow_fail_on(project: Path) -> None:
    assert run("jobs/clean.py").exit_code == 0
    assert run("jobs/warn.py").exit_code == 0
    assert run("jobs/warn.py", "--fail-on", "warning").exit_code == 1
    assert run("jobs/bad.py", "--fail-on", "error").exit_code == 1


@pytest.mark.parametrize(
    "args",
    [
        ("--format", "xml"),
        ("--explain", "ND999"),
        ("--select", "ND001,XY1"),
        ("--ignore", "NOPE"),
        ("does-not-exist.py",),
        ("--fail-on", "info"),
        ("--config", "missing.toml"),
        ("--bogus-flag",),
    ],
)
def test_usage_errors_exit_2(project: Path, args: tuple[str, ...]) -> None:
    result = CliRunner().invoke(lint_command, list(args))
    assert result.exit_code == 2, result.output
    assert result.stdout == ""  # errors go to stderr; stdout stays parseable
    assert result.stderr.startswith("upsertsink: error: ") and result.stderr.count("\n") == 1


def test_invalid_config_exits_2(project: Path) -> None:
    (project / "bad.toml").write_text("[tool.upsertsink.lint\nkeys = ")
    assert run("--config", "bad.toml", "jobs").exit_code == 2
    (project / "unknown.toml").write_text("[tool.upsertsink.lint]\nkeyz = ['id']\n")
    assert run("--config", "unknown.toml", "jobs").exit_code == 2
    (project / "wrongtype.toml").write_text("[tool.upsertsink.lint]\nkeys = 3\n")
    assert run("--config", "wrongtype.toml", "jobs").exit_code == 2
    (project / "pyproject.toml").write_text("[tool.upsertsink.lint]\nfail-on = 'sometimes'\n")
    assert run("jobs").exit_code == 2


def test_json_output_exact_shape(project: Path) -> None:
    result = run("jobs", "--format", "json")
    assert result.exit_code == 1
    doc = json.loads(result.output)  # exactly one JSON document on stdout
    assert set(doc) == {"version", "files_checked", "findings"}
    assert doc["version"] == 1 and doc["files_checked"] == 3
    keys = {
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
    }
    for f in doc["findings"]:
        assert set(f) == keys
        assert f["severity"] in ("error", "warning")
        assert f["target"] in ("key", "sequence", "column")
        assert f["line"] >= 1 and f["column"] >= 1
    first = doc["findings"][0]
    assert (first["path"], first["line"], first["column"], first["end_line"], first["end_column"]) == (
        "jobs/bad.py",
        4,
        27,
        4,
        58,
    )
    assert (first["rule"], first["severity"], first["target"], first["column_name"]) == (
        "ND004",
        "error",
        "key",
        "id",
    )


def test_json_parse_error_has_null_target(project: Path) -> None:
    (project / "jobs" / "broken.py").write_text("def f(:\n    pass\n")
    doc = json.loads(run("jobs/broken.py", "--format", "json").output)
    [f] = doc["findings"]
    assert (f["rule"], f["severity"], f["target"], f["column_name"], f["line"]) == (
        "ND000",
        "error",
        None,
        None,
        1,
    )


def test_sarif_output_has_what_github_requires(project: Path) -> None:
    result = run("jobs", "--format", "sarif")
    doc = json.loads(result.output)
    assert doc["version"] == "2.1.0"
    assert doc["$schema"].endswith("sarif-2.1.0.json")
    [sarif_run] = doc["runs"]
    driver = sarif_run["tool"]["driver"]
    assert driver["name"] and driver["informationUri"].startswith("https://")
    ids = [r["id"] for r in driver["rules"]]
    assert ids == [r.code for r in ALL_RULES]
    for rule in driver["rules"]:
        assert rule["shortDescription"]["text"] and rule["fullDescription"]["text"]
        assert rule["help"]["text"] and rule["help"]["markdown"]
        assert rule["defaultConfiguration"]["level"] in ("error", "warning", "note")
        assert rule["name"]
    assert len(sarif_run["results"]) == 3
    for res in sarif_run["results"]:
        assert driver["rules"][res["ruleIndex"]]["id"] == res["ruleId"]
        assert res["level"] in ("error", "warning")
        assert res["message"]["text"]
        [loc] = res["locations"]
        art = loc["physicalLocation"]["artifactLocation"]
        assert not art["uri"].startswith("/") and "\\" not in art["uri"]
        assert art["uriBaseId"] == "%SRCROOT%"
        region = loc["physicalLocation"]["region"]
        assert {"startLine", "startColumn", "endLine", "endColumn"} <= set(region)
        assert res["partialFingerprints"]
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in sarif_run["results"]}
    assert uris == {"jobs/bad.py", "jobs/warn.py"}


def test_sarif_uri_is_relative_to_the_repository_root(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (project / ".git").mkdir()
    monkeypatch.chdir(project / "jobs")
    doc = json.loads(run("bad.py", "--format", "sarif").output)
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in doc["runs"][0]["results"]
    }
    assert uris == {"jobs/bad.py"}


def test_github_format_and_escaping(project: Path) -> None:
    result = run("jobs", "--format", "github")
    lines = result.output.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("::error file=jobs/bad.py,line=4,col=27,endLine=4,endColumn=58,title=ND004 ")
    assert lines[2].startswith("::warning file=jobs/warn.py,line=2,col=36,")
    assert escape_data("100% a\r\nb") == "100%25 a%0D%0Ab"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"


def test_github_escapes_file_names(project: Path) -> None:
    (project / "jobs" / "we,ird:name.py").write_text(WARN_JOB)
    out = run("jobs/we,ird:name.py", "--format", "github").output
    assert out.startswith("::warning file=jobs/we%2Cird%3Aname.py,line=2,")


def test_key_and_sequence_flags(project: Path) -> None:
    doc = json.loads(run("jobs/warn.py", "--format", "json", "--sequence", "ingested_at").output)
    assert [(f["target"], f["severity"]) for f in doc["findings"]] == [("sequence", "error")]
    doc = json.loads(run("jobs/warn.py", "--format", "json", "--key", "x", "--key", "ingested_at").output)
    assert [(f["target"], f["column_name"]) for f in doc["findings"]] == [("key", "ingested_at")]
    doc = json.loads(run("jobs/warn.py", "--format", "json", "--key", "x,ingested_at").output)
    assert [(f["target"], f["column_name"]) for f in doc["findings"]] == [("key", "ingested_at")]


def test_select_and_ignore(project: Path) -> None:
    doc = json.loads(run("jobs", "--format", "json", "--select", "ND004").output)
    assert {f["rule"] for f in doc["findings"]} == {"ND004"}
    doc = json.loads(run("jobs", "--format", "json", "--ignore", "ND004,ND002", "--ignore", "ND003").output)
    assert {f["rule"] for f in doc["findings"]} == {"ND001"}
    assert run("jobs", "--ignore", "ND004").exit_code == 0


def test_config_table(project: Path) -> None:
    (project / "pyproject.toml").write_text(
        "[tool.upsertsink.lint]\n"
        "keys = ['ingested_at']\n"
        "ignore = ['ND004']\n"
        "exclude = ['jobs/clean.py']\n"
        "fail-on = 'warning'\n"
    )
    doc = json.loads(run("--format", "json").output)
    assert doc["files_checked"] == 2
    assert [(f["path"], f["rule"], f["target"]) for f in doc["findings"]] == [
        ("jobs/bad.py", "ND001", "key"),
        ("jobs/warn.py", "ND001", "key"),
    ]


def test_config_found_by_walking_up_from_the_first_path(project: Path, tmp_path_factory) -> None:
    (project / "pyproject.toml").write_text("[tool.upsertsink.lint]\nsequence = ['ingested_at']\n")
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    os.chdir(elsewhere)
    doc = json.loads(run(str(project / "jobs" / "warn.py"), "--format", "json").output)
    assert [f["target"] for f in doc["findings"]] == ["sequence"]


def test_explicit_config_file(project: Path) -> None:
    (project / "lint.toml").write_text("keys = ['ingested_at']\n")
    doc = json.loads(run("--config", "lint.toml", "jobs/warn.py", "--format", "json").output)
    assert [f["target"] for f in doc["findings"]] == ["key"]


def test_excluded_folder_walk_but_explicit_file_is_linted(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.upsertsink.lint]\nexclude = ['jobs/bad*']\n")
    doc = json.loads(run("--format", "json").output)
    assert {f["path"] for f in doc["findings"]} == {"jobs/warn.py"}
    doc = json.loads(run("jobs/bad.py", "--format", "json").output)
    assert {f["path"] for f in doc["findings"]} == {"jobs/bad.py"}


def test_gitignore_respected(project: Path) -> None:
    (project / ".gitignore").write_text("jobs/warn.py\nbuild_out/\n")
    (project / "build_out").mkdir()
    (project / "build_out" / "gen.py").write_text(BAD_JOB)
    doc = json.loads(run("--format", "json").output)
    assert {f["path"] for f in doc["findings"]} == {"jobs/bad.py"}
    assert doc["files_checked"] == 2


def test_explain_prints_rule_docs() -> None:
    result = CliRunner().invoke(lint_command, ["--explain", "nd006"])
    assert result.exit_code == 0
    assert result.output.startswith("## ND006 window-ordering-may-tie")
    assert "```python" in result.output and "tie-breaker" in result.output


def test_default_path_is_current_folder(project: Path) -> None:
    result = run("--format", "json")
    assert json.loads(result.output)["files_checked"] == 3


def test_real_console_script_and_python_m_upsertsink_lint(project: Path) -> None:
    exe = Path(sys.executable).parent / "upsertsink"
    out1 = subprocess.run(
        [str(exe), "lint", "jobs", "--format", "json", "--no-cache"],
        check=False,
        capture_output=True,
        text=True,
        cwd=project,
        timeout=120,
    )
    out2 = subprocess.run(
        [sys.executable, "-m", "upsertsink.lint", "jobs", "--format", "json", "--no-cache"],
        check=False,
        capture_output=True,
        text=True,
        cwd=project,
        timeout=120,
    )
    assert out1.returncode == out2.returncode == 1, (out1.stderr, out2.stderr)
    assert json.loads(out1.stdout) == json.loads(out2.stdout)
    clean = subprocess.run(
        [sys.executable, "-m", "upsertsink.lint", "jobs/clean.py"],
        check=False,
        capture_output=True,
        text=True,
        cwd=project,
        timeout=120,
    )
    assert clean.returncode == 0
    bad = subprocess.run(
        [sys.executable, "-m", "upsertsink.lint", "--explain", "XX"],
        check=False,
        capture_output=True,
        text=True,
        cwd=project,
        timeout=120,
    )
    assert bad.returncode == 2 and "unknown rule code" in bad.stderr


def test_linter_never_imports_pyspark(project: Path) -> None:
    code = (
        "import sys, json\n"
        "from click.testing import CliRunner\n"
        "from upsertsink.lint.command.cli import lint_command\n"
        "CliRunner().invoke(lint_command, ['jobs', '--no-cache'])\n"
        "heavy = ('pyspark', 'py4j', 'pandas', 'pyarrow', 'deltalake', 'delta', 'libcst')\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in heavy)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=False, capture_output=True, text=True, cwd=project, timeout=120
    )
    assert json.loads(out.stdout) == []


def test_the_repository_examples_lint_clean_with_its_own_config() -> None:
    if not (REPO / "examples").is_dir():
        pytest.skip("no examples folder")
    result = subprocess.run(
        [sys.executable, "-m", "upsertsink.lint", "examples", "--no-cache"],
        check=False,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_force_exclude_applies_to_named_files(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.upsertsink.lint]\nexclude = ['jobs/bad*']\n")
    doc = json.loads(run("jobs/bad.py", "jobs/warn.py", "--force-exclude", "--format", "json").output)
    assert doc["files_checked"] == 1
    assert {f["path"] for f in doc["findings"]} == {"jobs/warn.py"}


def test_broken_pyproject_on_the_way_up_exits_2(project: Path) -> None:
    (project / "pyproject.toml").write_text("[tool.upsertsink.lint\n")
    result = CliRunner().invoke(lint_command, ["jobs"])
    assert result.exit_code == 2
    assert result.stdout == "" and "pyproject.toml" in result.stderr


def test_config_md_is_generated_and_up_to_date() -> None:
    from upsertsink.lint.command.reference import render_config_md

    committed = (REPO / "docs" / "config.md").read_text(encoding="utf-8")
    assert committed == render_config_md(), (
        "regenerate with: python -m upsertsink.lint.command.reference config > docs/config.md"
    )


def test_config_md_documents_every_setting_and_option_with_examples_that_load(tmp_path: Path) -> None:
    from upsertsink.lint.command.reference import render_config_md
    from upsertsink.lint.run.config import SETTINGS, TABLE_KEYS, load_table, resolve_settings

    text = render_config_md()
    assert {s.name for s in SETTINGS} == TABLE_KEYS
    for s in SETTINGS:
        assert f"## {s.name}\n" in text
        # every example is a valid config on its own (known setting, right type, known codes)
        cfg = tmp_path / f"{s.name}.toml"
        cfg.write_text(("" if s.example.startswith("[") else "[tool.upsertsink.lint]\n") + s.example + "\n")
        assert load_table(cfg, explicit=True)
        resolve_settings([tmp_path], cfg)
    for param in lint_command.params:
        if param.param_type_name == "option":
            assert f"`{param.opts[0]}`" in text, param.opts
    linter_md = (REPO / "docs" / "linter.md").read_text(encoding="utf-8")
    for param in lint_command.params:
        if param.param_type_name == "option":
            assert f"`{param.opts[0]}" in linter_md, f"{param.opts[0]} is not in docs/linter.md"
