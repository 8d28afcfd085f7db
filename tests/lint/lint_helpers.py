"""Shared helpers for the linter tests: lint a snippet through the real checker; run ``upsertsink lint`` as the
script does, in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from upsertsink.lint.check.checker import CheckOptions, Finding, check_bytes
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
