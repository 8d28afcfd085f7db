"""A cold run of a large tree (issue #24, item 5: cold at most 10x ruff on pyspark's sources), observed as
behaviour, never as timings:

- a lint run ends without the interpreter's teardown, its output whole and its exit code kept;
- a file's lines are split only when something asks for them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from upsertsink.lint.checker import SourceLines
from upsertsink.lint.cli import lint_command

LAUNCH = "import sys; sys.argv = ['upsertsink', *sys.argv[1:]]; from upsertsink.launch import main; main()"


# ------------------------------------------------------------------------------- the end of a lint run


def _launch(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UPSERTSINK_")}
    return subprocess.run(
        [sys.executable, "-c", LAUNCH, "lint", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=300,
    )


def test_a_lint_run_ends_with_its_whole_output_and_its_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # more output than a pipe holds (64 KiB): the end of the process must not cut it
    lines = "".join(f"df{n} = df.withColumn('id', F.rand())\n" for n in range(600))
    (tmp_path / "pyproject.toml").write_text("[tool.upsertsink.lint]\n", encoding="utf-8")
    (tmp_path / "job.py").write_text("from pyspark.sql import functions as F\n" + lines, encoding="utf-8")
    args = ["job.py", "--format", "json", "--no-cache", "--key", "id"]  # a random key: errors, exit 1
    proc = _launch(tmp_path, *args)
    assert len(proc.stdout) > 64 * 1024
    monkeypatch.chdir(tmp_path)
    reference = CliRunner().invoke(lint_command, args)
    assert (proc.returncode, proc.stdout) == (reference.exit_code, reference.output)
    assert proc.returncode == 1 and len(json.loads(proc.stdout)["findings"]) == 600

    clean = _launch(tmp_path, "pyproject.toml", "--no-cache")  # no Python file: nothing to report
    assert clean.returncode == 0, clean.stderr
    usage = _launch(tmp_path, "--no-such-option")
    assert usage.returncode == 2 and "--no-such-option" in usage.stderr


# ------------------------------------------------------------------------------- a file's lines


def test_a_files_lines_are_split_when_first_asked_for_and_read_like_a_list() -> None:
    text = "a = 1\nb = 'x'\r\nc = 3"
    lines = SourceLines(text)
    assert lines._lines is None
    assert lines[1] == "b = 'x'\r\n" and lines._lines is not None
    expected = text.splitlines(keepends=True)
    assert (len(lines), lines[-1], lines[0:2], list(lines), "".join(lines)) == (
        3,
        "c = 3",
        expected[0:2],
        expected,
        text,
    )
    assert list(SourceLines("")) == [""]
