"""What a run loads and reads (issue #24, item 5: start-up), observed as behaviour, never as timings.

Each command runs in a fresh interpreter that reports the modules it ended with: ``upsertsink lint`` on a file
never imports Spark, Arrow, the SQL parser, the fixer (libcst), rich or package metadata unless the run needs
them; a run served from the cache does not even load the analysis or the rules. The cache knows unchanged
files by their stat (modification time and size) and does not read them again, but never trusts the stat of
a file modified within the last two seconds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

import pytest
from lint_helpers import launch
from upsertsink.lint.run.config import Settings
from upsertsink.lint.run.runner import lint_paths

JOB = "from pyspark.sql import functions as F\ndf2 = df.withColumn('id', F.rand())\n"
SQL_JOB = "spark.sql('INSERT INTO t SELECT uuid() AS id, v FROM s')\n"
NEVER = ("pyspark", "py4j", "delta", "deltalake", "pyarrow", "pandas", "numpy", "datafusion", "libcst")
LAZY = (
    "rich",
    "sqlglot",
    "importlib.metadata",
    "pathspec",
    "concurrent.futures.process",
    "xml.sax.saxutils",
    "upsertsink.session",
    "logging",  # only with sqlglot, to quiet its logger
    "pkgutil",  # the rules are found by listing their folder
    "dataclasses",  # the linter's data classes are structs (upsertsink.lint.base.structs): no code compiled
)

DRIVER = """
import json, sys
out, args = sys.argv[1], sys.argv[2:]
try:
    from upsertsink.cli import main
    main(args, prog_name="upsertsink")
except SystemExit as exc:
    code = exc.code
else:
    code = 0
with open(out, "w", encoding="utf-8") as fh:
    json.dump({"code": code, "modules": sorted(sys.modules)}, fh)
"""


def run_cli(cwd: Path, *args: str) -> tuple[dict, str]:
    """Run ``upsertsink ARGS`` in a new interpreter: (its exit code and modules, its stdout)."""
    report = cwd / "modules.json"
    env = {k: v for k, v in os.environ.items() if k != "UPSERTSINK_OUTPUT_FORMAT"}
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER, str(report), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=120,
    )
    assert report.exists(), proc.stderr
    return json.loads(report.read_text(encoding="utf-8")), proc.stdout


def loaded(modules: list[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.upsertsink.lint]\n", encoding="utf-8")
    (tmp_path / "job.py").write_text(JOB, encoding="utf-8")
    return tmp_path


def test_lint_of_one_file_loads_the_analysis_and_nothing_heavy(project: Path) -> None:
    result, out = run_cli(project, "lint", "job.py", "--no-cache", "--format", "json")
    assert result["code"] == 0  # a warning: the exit code stays 0
    assert [f["rule"] for f in json.loads(out)["findings"]] == ["ND002"]
    modules = result["modules"]
    assert "upsertsink.lint.check.analysis" in modules
    for name in NEVER + LAZY:
        assert not loaded(modules, name), name


def test_a_run_served_from_the_cache_does_not_load_the_analysis(project: Path) -> None:
    first, out1 = run_cli(project, "lint", "job.py", "--format", "json")
    again, out2 = run_cli(project, "lint", "job.py", "--format", "json")
    assert out1 == out2 and json.loads(out2)["findings"][0]["rule"] == "ND002"
    assert "upsertsink.lint.check.analysis" in first["modules"]
    for name in ("upsertsink.lint.check.analysis", "upsertsink.lint.rules", "upsertsink.lint.values.sql", *NEVER, *LAZY):
        assert not loaded(again["modules"], name), name


def test_the_sql_parser_loads_when_a_file_holds_sql(project: Path) -> None:
    (project / "sql_job.py").write_text(SQL_JOB, encoding="utf-8")
    result, out = run_cli(project, "lint", "sql_job.py", "--no-cache", "--format", "json")
    assert "ND003" in {f["rule"] for f in json.loads(out)["findings"]}
    assert loaded(result["modules"], "sqlglot")
    assert not loaded(result["modules"], "pyspark")


def test_a_run_without_a_config_file_loads_no_toml_reader(tmp_path: Path) -> None:
    (tmp_path / "job.py").write_text(JOB, encoding="utf-8")
    result, out = run_cli(tmp_path, "lint", "job.py", "--no-cache", "--format", "json")
    assert [f["rule"] for f in json.loads(out)["findings"]] == ["ND002"]
    assert not loaded(result["modules"], "tomllib")
    (tmp_path / "pyproject.toml").write_text("[tool.upsertsink.lint]\nignore = ['ND002']\n", encoding="utf-8")
    result, out = run_cli(tmp_path, "lint", "job.py", "--no-cache", "--format", "json")
    assert json.loads(out)["findings"] == [] and loaded(result["modules"], "tomllib")


def _git_project(root: Path, gitignore: str) -> None:
    """A project as users have one: a .gitignore, exclude globs in pyproject.toml, files both ignore."""
    (root / ".gitignore").write_text(gitignore, encoding="utf-8")
    (root / "pyproject.toml").write_text(
        "[tool.upsertsink.lint]\nexclude = ['legacy/', '*_old.py']\n", encoding="utf-8"
    )
    for rel in ("job.py", "jobs/etl.py", "build/lib/job.py", "legacy/job.py", "jobs/etl_old.py", "data/x.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(JOB, encoding="utf-8")


GITIGNORE = "# the usual\n__pycache__/\n*.py[cod]\nbuild/\n/data/\n.venv\n"


def test_a_project_with_a_gitignore_and_excludes_loads_no_pathspec(tmp_path: Path) -> None:
    """The simple forms of ignore files and exclude globs are matched without pathspec, whose import costs
    more than the rest of a one-file run's start-up (lint/run/globs.py); what they exclude stays excluded."""
    _git_project(tmp_path, GITIGNORE)
    result, out = run_cli(tmp_path, "lint", "job.py", "--no-cache", "--format", "json")
    assert [f["path"] for f in json.loads(out)["findings"]] == ["job.py"]
    assert not loaded(result["modules"], "pathspec")
    result, out = run_cli(tmp_path, "lint", ".", "--no-cache", "--format", "json")
    assert sorted(f["path"] for f in json.loads(out)["findings"]) == ["job.py", "jobs/etl.py"]
    assert not loaded(result["modules"], "pathspec")
    result, out = run_cli(tmp_path, "lint", "legacy/job.py", "--no-cache", "--force-exclude", "--format", "json")
    assert json.loads(out)["findings"] == [] and not loaded(result["modules"], "pathspec")


def test_an_ignore_file_beyond_the_simple_forms_is_matched_by_pathspec(tmp_path: Path) -> None:
    _git_project(tmp_path, GITIGNORE + "jobs/*\n!jobs/etl.py\n")
    result, out = run_cli(tmp_path, "lint", ".", "--no-cache", "--format", "json")
    assert sorted(f["path"] for f in json.loads(out)["findings"]) == ["job.py", "jobs/etl.py"]
    assert loaded(result["modules"], "pathspec")


def test_sql_the_parser_cannot_read_leaves_no_message_of_its_own(tmp_path: Path) -> None:
    """sqlglot logs a warning for statements it parses as a bare command (OPTIMIZE, VACUUM): the linter's
    output stays its own."""
    job = (
        "spark.sql('OPTIMIZE events ZORDER BY (id)')\n"
        "spark.sql('VACUUM events RETAIN 168 HOURS')\n"
        "spark.sql('INSERT INTO t SELECT uuid() AS id, v FROM s')\n"
    )
    (tmp_path / "job.py").write_text(job, encoding="utf-8")
    _code, out, err = launch(tmp_path, "job.py", "--no-cache", "--format", "json")
    assert "ND003" in {f["rule"] for f in json.loads(out)["findings"]}
    assert "unsupported syntax" not in err and err.strip() == "", err


def test_formats_that_need_the_rules_still_load_them(project: Path) -> None:
    run_cli(project, "lint", "job.py", "--format", "json")  # fill the cache
    result, out = run_cli(project, "lint", "job.py", "--format", "sarif")
    sarif = json.loads(out)
    assert sarif["runs"][0]["tool"]["driver"]["rules"] and sarif["runs"][0]["results"][0]["ruleId"] == "ND002"
    assert "upsertsink.lint.rules" in result["modules"]


def test_version_and_help_load_no_linter(project: Path) -> None:
    result, out = run_cli(project, "--version")
    assert result["code"] == 0 and out == f"upsertsink {version('upsertsink')}\n"
    assert not loaded(result["modules"], "upsertsink.lint")
    result, out = run_cli(project, "lint", "--explain", "ND002")
    assert result["code"] == 0 and "ND002" in out


def test_importing_the_package_loads_neither_spark_nor_metadata() -> None:
    code = (
        "import sys, json, upsertsink; before = sorted(sys.modules); "
        "v = upsertsink.__version__; s = upsertsink.spark_session; "
        "print(json.dumps([before, v, s.__module__]))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    before, ver, where = json.loads(proc.stdout)
    for name in ("importlib.metadata", "upsertsink.session", "pyspark", "click", "upsertsink.lint"):
        assert not loaded(before, name), name
    assert ver == version("upsertsink") and where == "upsertsink.session"


def _settings(root: Path) -> Settings:
    s = Settings()
    s.root = root
    return s


def _age(path: Path, seconds: float) -> None:
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp))


def test_unchanged_files_are_known_by_their_stat_and_not_read(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / f"job{i}.py").write_text(JOB, encoding="utf-8")
        _age(tmp_path / f"job{i}.py", 3600)
    settings = _settings(tmp_path)
    first = lint_paths([tmp_path], settings)
    second = lint_paths([tmp_path], settings)
    assert second.stats.cache_hits == 3 and second.stats.unread == 3 and second.stats.parsed == 0
    assert second.findings == first.findings


def test_a_changed_file_of_the_same_size_is_read_again(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(JOB, encoding="utf-8")
    _age(job, 3600)
    settings = _settings(tmp_path)
    assert [f.rule for f in lint_paths([tmp_path], settings).findings] == ["ND002"]
    job.write_text(JOB.replace("F.rand()", "F.lit(1)"), encoding="utf-8")  # same size, a new mtime
    assert job.stat().st_size == len(JOB)
    again = lint_paths([tmp_path], settings)
    assert again.stats.unread == 0 and again.stats.parsed == 1 and again.findings == []


def test_a_file_modified_in_the_last_seconds_is_never_served_by_its_stat(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(JOB, encoding="utf-8")  # modified now: its stat is not recorded
    settings = _settings(tmp_path)
    lint_paths([tmp_path], settings)
    second = lint_paths([tmp_path], settings)
    assert second.stats.cache_hits == 1 and second.stats.unread == 0  # read and hashed: a content hit
    cache_file = next((tmp_path / ".upsertsink_cache").glob("lint-*.json"))
    assert str(job.resolve()) not in json.loads(cache_file.read_text(encoding="utf-8")).get("stats", {})


def test_no_progress_bar_and_no_error_without_rich(monkeypatch):
    """The light install has no rich (it comes with upsertsink[embedded]): on a terminal, no bar, no error."""
    import builtins

    from upsertsink.lint.command import main as cli

    real = builtins.__import__

    def without_rich(name, *args, **kwargs):
        if name == "rich" or name.startswith("rich."):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_rich)
    monkeypatch.setattr(cli, "_stderr_is_terminal", lambda: True)
    with cli._progress_bar(True) as bar:
        assert bar is None
