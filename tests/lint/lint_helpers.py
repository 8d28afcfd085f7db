"""Shared helpers for the linter tests: lint a snippet through the real checker; run ``upsertsink lint`` as the
script does, in a fresh interpreter."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

from click.testing import CliRunner
from upsertsink.lint.check.checker import CheckOptions, Finding, check_bytes
from upsertsink.lint.command.cli import lint_command
from upsertsink.lint.run.config import DEFAULT_KEY_PATTERNS


def lint_code(
    code: str,
    keys: tuple[str, ...] = (),
    sequence: tuple[str, ...] = (),
    key_patterns: tuple[str, ...] | None = None,
) -> list[Finding]:
    """Findings for a code snippet (dedented), as the CLI would compute them (pre-filter included)."""
    patterns = list(DEFAULT_KEY_PATTERNS if key_patterns is None else key_patterns)
    options = CheckOptions(key_patterns=patterns)
    data = textwrap.dedent(code).encode("utf-8")
    return check_bytes("job.py", data, list(keys), list(sequence), options=options).findings


def summary(findings: list[Finding]) -> list[tuple[str, int, int, str | None, str | None]]:
    """(rule, line, column, target, column_name) per finding."""
    return [(f.rule, f.line, f.column, f.target, f.column_name) for f in findings]


# the `upsertsink` script's entry point
LAUNCH = "import sys; sys.argv = ['upsertsink', *sys.argv[1:]]; from upsertsink.launch import main; main()"


def run_python(
    cwd: Path, code: str, args: list[str], extra_env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess:
    """``python -c CODE ARGS`` in ``cwd`` (``stdin`` as its input), without the caller's ``UPSERTSINK_*``
    settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("UPSERTSINK_")}
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        env={**env, **(extra_env or {})},
        timeout=300,
    )


def launch(cwd: Path, *args: str, extra_env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``upsertsink lint ARGS`` as the script runs it: (exit code, stdout, stderr)."""
    proc = run_python(cwd, LAUNCH, ["lint", *args], extra_env)
    return proc.returncode, proc.stdout, proc.stderr


# a finding a labelled tree expects on a line: ``# expect: RULE SEVERITY TARGET COLUMN`` (``-- expect: ...``
# inside SQL text)
_EXPECT = re.compile(r"expect: (ND\d{3}) (error|warning) (key|sequence|column|write) (\S+)")


def labelled(tree: Path) -> set[tuple]:
    """(path, cell, line, rule, severity, target, column) for every label of a labelled tree."""
    out: set[tuple] = set()
    for path in sorted(tree.rglob("*")):
        rel = path.relative_to(tree).as_posix()
        if path.suffix == ".py":
            for number, text in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                for m in _EXPECT.finditer(text):
                    out.add((rel, None, number, *m.groups()))
        elif path.suffix == ".ipynb":
            nb = json.loads(path.read_text(encoding="utf-8"))
            for cell_no, cell in enumerate(nb["cells"], 1):
                lines = "".join(cell["source"]).splitlines()
                for number, text in enumerate(lines, 1):
                    for m in _EXPECT.finditer(text):
                        out.add((rel, cell_no, number, *m.groups()))
    return out


def lint_tree(tree: Path, work: Path) -> dict:
    """The JSON report of a copy of ``tree`` linted as one project (its own empty config, no cache), with
    paths relative to it."""
    shutil.copytree(tree, work / tree.name)
    (work / tree.name / "pyproject.toml").write_text("[tool.upsertsink.lint]\n", encoding="utf-8")
    before = Path.cwd()
    os.chdir(work / tree.name)
    try:
        result = CliRunner().invoke(lint_command, [".", "--format", "json", "--no-cache"], catch_exceptions=False)
    finally:
        os.chdir(before)
    return json.loads(result.output)


def reported(doc: dict) -> set[tuple]:
    """(path, cell, line, rule, severity, target, column) for every finding of a JSON report."""
    return {
        (f["path"], f.get("cell"), f["line"], f["rule"], f["severity"], f["target"], f["column_name"])
        for f in doc["findings"]
    }
