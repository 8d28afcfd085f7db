"""Issue #45: on a terminal the text report shows each finding's severity, in colour (none with ``NO_COLOR``
or when piped, where the text is as it always was), and ``--explain`` is readable text (Markdown when piped
or with ``--format markdown``). The README's way of seeing the broken example rejected works."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from lint_helpers import LAUNCH

REPO = Path(__file__).resolve().parents[2]
JOB = (
    "import uuid\nfrom pyspark.sql import functions as F\nfrom upsertsink import UpsertSink\n\n"
    "out = df.withColumn('id', F.lit(str(uuid.uuid4()))).withColumn('seen_at', F.current_timestamp())\n"
    "UpsertSink('/lake/t', keys=['id']).write(out)\n"
)
ESC = "\x1b["


def on_terminal(cwd: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run ``upsertsink ARGS`` with its stdout on a pseudo-terminal: (exit code, what the terminal got)."""
    leader, follower = pty.openpty()
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "UPSERTSINK_OUTPUT_FORMAT")}
    environ.update({"TERM": "xterm", "UPSERTSINK_NO_RUN_RECORD": "1", **(env or {})})
    proc = subprocess.Popen(
        [sys.executable, "-c", LAUNCH, *args], cwd=cwd, stdout=follower, stderr=subprocess.PIPE, env=environ
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal is closed once the process has exited
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    code = proc.wait(timeout=120)
    return code, b"".join(chunks).decode("utf-8").replace("\r\n", "\n")


def piped(cwd: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "UPSERTSINK_OUTPUT_FORMAT")}
    environ.update({"UPSERTSINK_NO_RUN_RECORD": "1", **(env or {})})
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCH, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=environ,
        timeout=120,
        check=False,
    )
    return proc.returncode, proc.stdout


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.upsertsink.lint]\n")
    (tmp_path / "job.py").write_text(JOB)
    return tmp_path


def test_a_terminal_shows_the_severity_in_colour(project: Path) -> None:
    code, out = on_terminal(project, "lint", "job.py", "--no-cache")
    assert code == 1
    first, second = out.splitlines()[:2]
    assert first.startswith(f"{ESC}1mjob.py:5:37{ESC}0m: {ESC}1m{ESC}31merror{ESC}0m {ESC}1m{ESC}31mND003{ESC}0m ")
    assert f"{ESC}33mwarning{ESC}0m {ESC}1m{ESC}33mND001{ESC}0m" in second


def test_no_color_keeps_the_severity_without_colour(project: Path) -> None:
    code, out = on_terminal(project, "lint", "job.py", "--no-cache", env={"NO_COLOR": "1"})
    assert code == 1 and ESC not in out
    assert out.splitlines()[0].startswith("job.py:5:37: error ND003 ")


def test_piped_text_is_as_it_always_was(project: Path) -> None:
    code, out = piped(project, "lint", "job.py", "--no-cache")
    assert code == 1 and ESC not in out
    lines = out.splitlines()
    assert lines[0].startswith("job.py:5:37: ND003 `uuid.uuid4()` generates a random UUID")
    assert lines[1].startswith("job.py:5:75: ND001 ")
    assert lines[2] == "Found 2 findings (1 error, 1 warning) in 1 file checked."


def test_explain_on_a_terminal_is_readable_text(project: Path) -> None:
    code, out = on_terminal(project, "lint", "--explain", "ND001", env={"NO_COLOR": "1"})
    assert code == 0
    assert out.startswith("ND001 wall-clock\n")
    assert "<!--" not in out and "```" not in out and "**" not in out
    assert "\n    from pyspark.sql import functions as F\n" in out  # an example, indented
    code, colored = on_terminal(project, "lint", "--explain", "ND001")
    assert code == 0 and colored.startswith(f"{ESC}1mND001 wall-clock{ESC}0m\n")


def test_explain_is_markdown_when_piped_or_asked_for(project: Path) -> None:
    from upsertsink.lint.rules import RULES

    assert piped(project, "lint", "--explain", "ND001") == (0, RULES["ND001"].explain())
    code, out = on_terminal(project, "lint", "--explain", "ND001", "--format", "markdown")
    assert code == 0 and out == RULES["ND001"].explain()


def test_a_report_in_markdown_is_a_usage_error(project: Path) -> None:
    assert piped(project, "lint", "job.py", "--format", "markdown")[0] == 2


def test_the_readme_shows_how_the_broken_example_is_rejected() -> None:
    """`upsertsink lint examples` passes (the project's config excludes the broken example, so CI can lint
    the examples); naming the file lints it, as the README says."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert "`upsertsink lint examples/broken_wallclock_key.py`" in readme
    assert piped(REPO, "lint", "examples", "--no-cache", "-q")[0] == 0
    code, out = piped(REPO, "lint", "examples/broken_wallclock_key.py", "--no-cache")
    assert code == 1 and "ND001" in out and "merge key `event_id`" in out
