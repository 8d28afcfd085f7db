"""``upsertsink lint``'s command line read without click (issue #24, item 5: start-up): the quick reading
gives the parameters click gives, or hands the command line to click; a run through the ``upsertsink`` script
behaves as the click command does and never imports click."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from lint_helpers import LAUNCH, launch, run_python
from upsertsink.lint.base.structs import fields_of
from upsertsink.lint.command.cli import lint_command
from upsertsink.lint.command.options import FORMAT_ENV, OPTIONS, LintArgs, quick_parse

JOB = "from pyspark.sql import functions as F\n\ndf2 = df.withColumn('id', F.rand())\n"
CLEAN = "x = 1\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "job.py").write_text(JOB, encoding="utf-8")
    (tmp_path / "jobs" / "clean.py").write_text(CLEAN, encoding="utf-8")
    (tmp_path / "pyproject.toml").write_text("[tool.upsertsink.lint]\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(FORMAT_ENV, raising=False)
    return tmp_path


def click_params(args: list[str]) -> dict | None:
    """What click passes to the command for ``args``, or None when click refuses them (or prints help)."""
    try:
        ctx = lint_command.make_context("lint", list(args))
    except SystemExit:
        return None
    return dict(ctx.params)


PLAIN = [
    [],
    ["jobs"],
    ["jobs/job.py", "--no-cache"],
    ["--format", "json", "jobs"],
    ["--output-format=sarif", "jobs", "-e", "-q"],
    ["--key", "id", "--key", "ts", "--sequence", "v", "jobs"],
    ["--select", "ND001,ND002", "--extend-select=ND011", "--ignore", "ND003", "."],
    ["--fail-on", "warning", "--config", "pyproject.toml", "jobs"],
    ["-o", "out.txt", "--statistics", "jobs"],
    ["--output-file=report.json", "--format", "json", "jobs/job.py"],
    ["--fix", "--unsafe-fixes", "--diff", "jobs"],
    ["--add-noqa", "jobs"],
    ["--clean"],
    ["--show-files", "--force-exclude", "--exclude", "a/*,b", "--extend-exclude", "c"],
    ["--show-settings", "jobs"],
    ["--explain", "ND001"],
    ["-", "--stdin-filename", "jobs/job.py"],
    ["jobs", "--", "-q", "--weird"],
    ["--format", "text", "--format", "json", "jobs"],
    ["missing.py", "--config", "missing.toml"],
]
HANDED_TO_CLICK = [
    ["--help"],
    ["-h"],
    ["--bogus", "jobs"],
    ["--format", "xml", "jobs"],
    ["--format"],
    ["--fail-on", "info"],
    ["-eq", "jobs"],
    ["-oout.txt", "jobs"],
    ["-o=out.txt", "jobs"],
    ["--fix=yes", "jobs"],
    ["--output-file", "jobs"],  # a folder where a file is asked for
    ["--key", "-x", "jobs"],
    ["-weird.py"],
]


@pytest.mark.parametrize("args", PLAIN, ids=" ".join)
def test_a_plain_command_line_is_read_as_click_reads_it(project: Path, args: list[str]) -> None:
    quick = quick_parse(args, {})
    assert quick is not None
    assert quick == click_params(args)


@pytest.mark.parametrize("args", HANDED_TO_CLICK, ids=" ".join)
def test_help_errors_and_unusual_forms_go_to_click(project: Path, args: list[str]) -> None:
    assert quick_parse(args, {}) is None


def test_the_format_comes_from_the_environment_as_with_click(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FORMAT_ENV, "json")
    assert quick_parse(["jobs"], {FORMAT_ENV: "json"}) == click_params(["jobs"])
    assert quick_parse(["jobs"], {FORMAT_ENV: "json"})["fmt"] == "json"
    assert quick_parse(["--format", "text", "jobs"], {FORMAT_ENV: "json"})["fmt"] == "text"
    monkeypatch.setenv(FORMAT_ENV, "xml")
    assert quick_parse(["jobs"], {FORMAT_ENV: "xml"}) is None and click_params(["jobs"]) is None


def test_every_option_of_the_table_is_an_option_of_the_click_command() -> None:
    click_flags = {flag for p in lint_command.params for flag in p.opts}
    assert {flag for opt in OPTIONS for flag in opt.flags} == click_flags - {"paths"}


def test_the_command_line_read_has_a_field_for_every_option_and_its_default() -> None:
    read = LintArgs()
    assert set(fields_of(LintArgs)) == {"paths"} | {opt.dest for opt in OPTIONS}
    for opt in OPTIONS:
        empty = () if opt.kind == "multiple" else False if opt.kind == "flag" else opt.default
        assert getattr(read, opt.dest) == empty, opt.dest


TOKENS = [
    "jobs", "jobs/job.py", "missing.py", "-", "--", ".", "--format", "json", "xml", "--format=text",
    "--key", "id", "--select", "ND001", "-e", "-q", "-o", "out.txt", "--fix", "--no-cache", "--help",
    "--fail-on", "error", "--config", "pyproject.toml", "--stdin-filename", "-eq", "--exclude=a,b",
    "--bogus", "--explain", "=", "--quiet=1",
]  # fmt: skip


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("options")
    (root / "jobs").mkdir()
    (root / "jobs" / "job.py").write_text(JOB, encoding="utf-8")
    (root / "pyproject.toml").write_text("[tool.upsertsink.lint]\n", encoding="utf-8")
    return root


@settings(max_examples=300, deadline=None)
@given(args=st.lists(st.sampled_from(TOKENS), max_size=7))
def test_whatever_the_quick_reading_accepts_click_reads_the_same(tree: Path, args: list[str]) -> None:
    cwd = os.getcwd()
    os.chdir(tree)
    try:
        quick = quick_parse(args, {})
        if quick is not None:
            assert quick == click_params(args), args
    finally:
        os.chdir(cwd)


def _traced(cwd: Path, *args: str) -> tuple[int, str, set[str]]:
    """``upsertsink lint ARGS`` as the script runs it, under ``-X importtime``: (exit code, stdout, modules)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UPSERTSINK_")}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", LAUNCH, "lint", *args],
        cwd=cwd, capture_output=True, text=True, check=False, env=env, timeout=300,
    )  # fmt: skip
    modules = {
        m.group(1)
        for m in re.finditer(r"^import time:\s+\d+ \|\s+\d+ \|\s+([\w.]+)", proc.stderr, re.MULTILINE)
    }
    return proc.returncode, proc.stdout, modules


def test_a_one_file_run_through_the_script_never_imports_click(project: Path) -> None:
    code, out, modules = _traced(project, "jobs/job.py", "--no-cache", "--format", "json")
    assert code == 0 and '"rule": "ND002"' in out
    assert "upsertsink.lint.check.analysis" in modules  # the trace sees the run's imports
    assert not {"click", "inspect", "dataclasses"} & modules
    code, out, modules = _traced(project, "--help")
    assert code == 0 and "--output-format" in out and "click" in modules


CASES = [
    ["jobs", "--no-cache"],  # findings: exit 0 (warnings only) with the summary on stdout
    ["jobs", "--no-cache", "--fail-on", "warning", "--format", "json"],  # exit 1
    ["jobs/clean.py", "--no-cache", "-q"],
    ["jobs", "--no-cache", "--statistics"],
    ["jobs", "--no-cache", "--format", "concise", "-e", "--fail-on", "warning"],
    ["--config", "missing.toml", "jobs"],  # configuration error: exit 2, one line
    ["--explain", "ND001"],
    ["--explain", "XX"],  # unknown rule: exit 2
    ["--show-files", "jobs"],
    ["--add-noqa", "--fix", "jobs"],  # refused combination: exit 2
    ["jobs", "--no-cache", "-o", "out/report.txt"],
]


@pytest.mark.parametrize("args", CASES, ids=" ".join)
def test_the_script_behaves_as_the_click_command(project: Path, args: list[str]) -> None:
    assert quick_parse(args, {}) is not None  # the script reads it without click
    quick = launch(project, *args)
    out_file = project / "out" / "report.txt"
    quick_file = out_file.read_text(encoding="utf-8") if out_file.exists() else None
    if out_file.exists():
        out_file.unlink()
    clicked = run_python(project, "from upsertsink.lint.command.cli import main; main()", list(args))
    click_file = out_file.read_text(encoding="utf-8") if out_file.exists() else None
    assert quick == (clicked.returncode, clicked.stdout, clicked.stderr)
    assert quick_file == click_file


def test_shell_completion_stays_with_click(project: Path) -> None:
    env = {"_UPSERTSINK_COMPLETE": "bash_complete", "COMP_WORDS": "upsertsink lint --outp", "COMP_CWORD": "2"}
    code, out, err = launch(project, "jobs", extra_env=env)  # a command line the quick reading accepts
    assert (code, err) == (0, "") and "--output-format" in out and "--output-file" in out
    assert "ND002" not in out  # completed, not linted
