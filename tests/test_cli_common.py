"""The `upsertsink` group: one error style for usage errors, --version, `python -m upsertsink`."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from click.testing import CliRunner

import upsertsink
from upsertsink.cli import main

EXE = str(Path(sys.executable).with_name("upsertsink"))


def test_version_agrees_everywhere():
    expected = version("upsertsink")
    assert upsertsink.__version__ == expected
    res = CliRunner().invoke(main, ["--version"])
    assert (res.exit_code, res.stdout) == (0, f"upsertsink {expected}\n")
    proc = subprocess.run([sys.executable, "-m", "upsertsink", "--version"], capture_output=True, text=True,
                          check=False, timeout=60)  # fmt: skip
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"upsertsink {expected}\n", "")


def test_python_dash_m_runs_the_same_commands(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "upsertsink", "--help"], capture_output=True, text=True,
                          check=False, timeout=60)  # fmt: skip
    assert proc.returncode == 0
    assert "Usage: upsertsink [OPTIONS] COMMAND" in proc.stdout
    for command in ("diff", "lint", "replay-check", "status", "write"):
        assert command in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "upsertsink", "status", str(tmp_path)], capture_output=True,
                          text=True, check=False, timeout=60)  # fmt: skip
    assert (proc.returncode, proc.stderr) == (2, f"upsertsink: error: {tmp_path} is not a Delta table\n")


@pytest.mark.parametrize(
    "args, message",
    [
        (["nope"], "No such command 'nope' (see 'upsertsink --help')"),
        (["--bogus"], "No such option '--bogus' (see 'upsertsink --help')"),
        (["diff", "a"], "Missing argument 'RIGHT' (see 'upsertsink diff --help')"),
        (["write", "x.parquet", "--target", "t"], "Missing option '--key' (see 'upsertsink write --help')"),
        (["status", "t", "--limit", "x"], "Invalid value for '--limit': 'x' is not a valid integer range"),
        (["replay-check", "m:f", "-k", "k", "--input", "bad"], "'bad' must be NAME=PATH"),
        (["diff", "a", "b", "-k", "id", "--engine", "gpu"], "Invalid value for '--engine'"),
    ],
)
def test_usage_errors_of_the_group_and_its_commands_share_one_style(args, message):
    proc = subprocess.run([EXE, *args], capture_output=True, text=True, check=False, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("upsertsink: error: ") and message in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1


def test_cli_runner_sees_the_same_style():
    res = CliRunner().invoke(main, ["diff", "a"])
    assert res.exit_code == 2
    assert res.stderr.startswith("upsertsink: error: Missing argument 'RIGHT' (see '")


def test_progress_goes_to_stderr_only_when_it_is_a_terminal(monkeypatch):
    from upsertsink.cli_common import Progress

    monkeypatch.setattr(sys.stdout, "isatty", lambda: False)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert Progress().enabled  # stdout piped, stderr a terminal: shown
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert not Progress().enabled  # stderr piped: never
