"""Whole-project answers from partial runs: given some files, the linter reads the project modules they
import (to follow values across files) and reports findings only in the files given. Shown with the CLI
and with a real ``pre-commit run`` on a scratch git repository."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from upsertsink.lint.command.cli import lint_command
from upsertsink.lint.run.config import resolve_settings
from upsertsink.lint.run.runner import lint_paths

HELPERS = """\
import uuid

from pyspark.sql import functions as F


def new_key():
    return str(uuid.uuid4())


def stamp(df):
    return df.withColumn("loaded_at", F.current_timestamp())
"""
USES_HELPER = """\
from pyspark.sql import functions as F

from jobs.helpers import new_key
from upsertsink import UpsertSink

orders = spark.table("raw.orders").withColumn("order_id", F.lit(new_key()))
UpsertSink("/lake/orders", keys=["order_id"]).write(orders)
"""
# no trigger word of its own (the pre-filter would skip it): the source is only in the imported module
CONSTANTS = """\
import uuid

RUN_KEY = str(uuid.uuid4())
"""
USES_CONSTANT = """\
from jobs.constants import RUN_KEY
from upsertsink import UpsertSink

UpsertSink("/lake/runs", keys=["run_key"]).write(spark.table("raw.runs").withColumn("run_key", lit(RUN_KEY)))
"""
UNRELATED = """\
def add(a, b):
    return a + b
"""


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'scratch'\n\n[tool.upsertsink.lint]\n")
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "__init__.py").write_text("")
    (jobs / "helpers.py").write_text(HELPERS)
    (jobs / "uses_helper.py").write_text(USES_HELPER)
    (jobs / "constants.py").write_text(CONSTANTS)
    (jobs / "uses_constant.py").write_text(USES_CONSTANT)
    (jobs / "unrelated.py").write_text(UNRELATED)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run(*args: str):
    return CliRunner().invoke(lint_command, [*args, "--no-cache", "--format", "json"], catch_exceptions=False)


def rules(output: str) -> list[tuple[str, int, str, str]]:
    return [(f["path"], f["line"], f["rule"], f["severity"]) for f in json.loads(output)["findings"]]


def test_one_file_given_reads_its_helper_and_reports_only_itself(project: Path) -> None:
    whole = run("jobs")
    assert ("jobs/uses_helper.py", 6, "ND003", "error") in rules(whole.output)
    result = run("jobs/uses_helper.py")
    assert result.exit_code == 1
    assert rules(result.output) == [("jobs/uses_helper.py", 6, "ND003", "error")]
    doc = json.loads(result.output)
    assert doc["files_checked"] == 1
    assert "jobs/helpers.py:7" in doc["findings"][0]["message"]


def test_a_file_the_prefilter_would_skip_still_follows_its_import(project: Path) -> None:
    result = run("jobs/uses_constant.py")
    assert rules(result.output) == [("jobs/uses_constant.py", 4, "ND003", "error")]


def test_the_helpers_own_findings_are_not_reported_when_it_is_not_given(project: Path) -> None:
    (project / "jobs" / "helpers.py").write_text(
        HELPERS + 'df = spark.table("x").withColumn("id", F.rand())\n'
    )
    assert any(p == "jobs/helpers.py" for p, *_ in rules(run("jobs").output))
    assert all(p == "jobs/uses_helper.py" for p, *_ in rules(run("jobs/uses_helper.py").output))


def test_modules_are_found_from_the_config_root_and_not_outside_it(project: Path, tmp_path: Path) -> None:
    # the same job outside the project (its helper not importable from there) gets nothing invented
    elsewhere = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    elsewhere.mkdir()
    (elsewhere / "uses_helper.py").write_text(USES_HELPER)
    assert rules(run(str(elsewhere / "uses_helper.py")).output) == []
    # run from a subfolder: the config's folder is still the root the import resolves from
    os.chdir(project / "jobs")
    result = run("uses_helper.py")
    assert rules(result.output) == [("uses_helper.py", 6, "ND003", "error")]


def test_runner_counts_the_modules_it_read(project: Path) -> None:
    settings = resolve_settings([project / "jobs" / "uses_helper.py"])
    res = lint_paths([project / "jobs" / "uses_helper.py"], settings, use_cache=False)
    assert res.stats.files_checked == 1
    assert res.stats.modules_read == 1  # jobs/helpers.py; not unrelated.py or constants.py
    assert [f.rule for f in res.findings] == ["ND003"]


def test_cached_partial_runs_give_the_same_answer_and_follow_a_changed_helper(project: Path) -> None:
    def cached(*args: str):
        return CliRunner().invoke(lint_command, [*args, "--format", "json"], catch_exceptions=False)

    assert rules(cached("jobs/uses_helper.py").output) == [("jobs/uses_helper.py", 6, "ND003", "error")]
    assert rules(cached("jobs/uses_helper.py").output) == [("jobs/uses_helper.py", 6, "ND003", "error")]
    # the unchanged job's cache entry must not hide a change in the helper it was not given with
    (project / "jobs" / "helpers.py").write_text(HELPERS.replace("str(uuid.uuid4())", '"fixed-key"'))
    assert rules(cached("jobs/uses_helper.py").output) == []


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    return subprocess.run(["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True)


def test_pre_commit_hook_sees_the_unchanged_helper(project: Path) -> None:
    pre_commit = Path(sys.executable).parent / "pre-commit"
    upsertsink = Path(sys.executable).parent / "upsertsink"
    if not pre_commit.exists() or shutil.which("git") is None:
        pytest.fail("pre-commit (the dev extra) and git are needed for this test")
    (project / ".pre-commit-config.yaml").write_text(
        "repos:\n"
        "  - repo: local\n"
        "    hooks:\n"
        "      - id: upsertsink-lint\n"
        "        name: upsertsink determinism lint\n"
        f"        entry: {upsertsink} lint --force-exclude\n"
        "        language: system\n"
        "        types_or: [python, pyi, jupyter]\n"
        "        require_serial: true\n"
    )
    # the commit that adds the helper: nothing to report (its uuid reaches no column there)
    staged = project / "jobs" / "uses_helper.py"
    staged.rename(project / "uses_helper.keep")
    _git(project, "init", "-q", "-b", "main")
    _git(project, "add", ".")
    _git(project, "commit", "-q", "-m", "helpers", "--no-verify")
    (project / "uses_helper.keep").rename(staged)
    _git(project, "add", "jobs/uses_helper.py")
    env = {**os.environ, "PRE_COMMIT_HOME": str(project / ".pre-commit-home")}
    env.pop("PYTHONPATH", None)
    proc = subprocess.run(
        [str(pre_commit), "run", "--color", "never"],  # the staged files only: jobs/uses_helper.py
        cwd=project,
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "jobs/uses_helper.py:6:65: ND003" in proc.stdout
    assert "jobs/helpers.py:" not in proc.stdout.replace("(jobs/helpers.py:7)", "")
    assert "in 1 file checked" in proc.stdout
    # and the hook passes once the key no longer comes from uuid4 in the helper (a change in that file)
    (project / "jobs" / "helpers.py").write_text(HELPERS.replace("str(uuid.uuid4())", '"fixed-key"'))
    _git(project, "add", "jobs/helpers.py")
    proc = subprocess.run(
        [str(pre_commit), "run", "--color", "never", "--files", "jobs/uses_helper.py"],
        cwd=project,
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
