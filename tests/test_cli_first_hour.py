"""The first hour of a new user (issue #45, item 7): what the command line says when a user slips. Every
command runs as the installed console script in a new process."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

CLI = str(Path(sys.executable).with_name("upsertsink"))


def run(*args: str, prefix: tuple[str, ...] = (), cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*prefix, CLI, *args], check=False, capture_output=True, text=True, timeout=300, cwd=cwd,
                          env={**os.environ, "NO_COLOR": "1"})


@pytest.fixture
def source(tmp_path) -> Path:
    pq.write_table(pa.table({"id": [1, 2], "v": [10, 20]}), tmp_path / "s.parquet")
    return tmp_path / "s.parquet"


def test_a_first_write_says_it_created_a_new_table(source, tmp_path):
    """A misspelled --target silently made a new table."""
    target = tmp_path / "tabels" / "orders"
    first = run("write", str(source), "--target", "tabels/orders", "--key", "id", "--batch-id", "0", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == [
        f"created a new table at {target}", "batch 0 -> tabels/orders version 0: 2 inserted, 0 updated, 0 deleted"]
    second = run("write", str(source), "--target", "tabels/orders", "--key", "id", "--batch-id", "1", cwd=tmp_path)
    assert second.returncode == 0 and "created" not in second.stdout
    as_json = run("write", str(source), "--target", str(tmp_path / "other"), "--key", "id", "--json")
    assert json.loads(as_json.stdout)["created"] is True
    again = run("write", str(source), "--target", str(tmp_path / "other"), "--key", "id", "--json")
    assert json.loads(again.stdout)["created"] is False


def test_every_command_that_prints_json_takes_json(source, tmp_path):
    target = str(tmp_path / "t")
    for args in (("write", str(source), "--target", target, "--key", "id", "--batch-id", "0"),
                 ("status", target), ("maintain", target)):
        done = run(*args, "--json")
        assert done.returncode == 0, (args, done.stderr)
        assert isinstance(json.loads(done.stdout), dict)
    # diff keeps --format json; --json says the same
    by_flag = run("diff", str(source), target, "--key", "id", "--json")
    by_format = run("diff", str(source), target, "--key", "id", "--format", "json")
    assert by_flag.returncode == by_format.returncode == 0, by_flag.stderr
    assert json.loads(by_flag.stdout) == json.loads(by_format.stdout)
    assert json.loads(by_flag.stdout)["equal"] is True
    both = run("diff", str(source), target, "--key", "id", "--json", "--format", "text")
    assert both.returncode == 2 and both.stdout == ""
    assert both.stderr.startswith("upsertsink: error: --json and --format text contradict each other")


@pytest.mark.parametrize(
    "typed, expected",
    [
        ("stauts", "No such command 'stauts'. Did you mean 'status'? (see 'upsertsink --help')"),
        ("wirte", "No such command 'wirte'. Did you mean 'write'?"),
        ("replaycheck", "Did you mean 'replay-check'?"),
        ("maintian", "Did you mean 'maintain'?"),
        ("frobnicate", "No such command 'frobnicate' (see 'upsertsink --help')"),
    ],
)
def test_a_misspelled_command_name_gets_a_suggestion(typed, expected):
    done = run(typed, "t")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("upsertsink: error: ")
    assert expected in done.stderr, done.stderr


# ---------------------------------------------------------------- a folder the user cannot write


def _unprivileged() -> tuple[str, ...]:
    """A prefix that runs a command as a user whom file permissions apply to (root ignores them)."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: a read-only folder would not stop root's writes")
    return (setpriv, "--reuid=65534", "--regid=65534", "--clear-groups")


@pytest.fixture
def public_dir():
    """A folder every user may read (pytest's tmp_path is private to its owner): the unprivileged writer
    must reach the source and the table."""
    folder = Path(tempfile.mkdtemp(prefix="upsertsink-perm-"))
    folder.chmod(0o755)
    yield folder
    for root, dirs, _ in os.walk(folder):
        for d in dirs:
            os.chmod(os.path.join(root, d), 0o755)
    shutil.rmtree(folder, ignore_errors=True)


def _read_only(path: Path) -> None:
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            full = os.path.join(root, name)
            os.chmod(full, os.stat(full).st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    path.chmod(0o555)


def _one_permission_line(done: subprocess.CompletedProcess, target: Path) -> str:
    assert done.returncode == 2 and done.stdout == ""
    assert "panicked" not in done.stderr and "Already shut down" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    line = lines[0]
    assert line.startswith(f"upsertsink: error: writing batch 1 to {target} failed: permission denied (")
    assert "not retryable" in line and "write access" in line
    assert "sending it again is safe" not in line  # the retryable wording of other failures
    return line


def test_a_read_only_table_is_one_line_naming_the_permission_problem_as_not_retryable(public_dir):
    """delta-rs printed a panic (`tokio-rt-worker panicked ... Already shut down`) before the sink's message,
    which called the failure retryable."""
    prefix = _unprivileged()
    pq.write_table(pa.table({"id": [1, 2], "v": [10, 20]}), public_dir / "s.parquet")
    pq.write_table(pa.table({"id": [2, 3], "v": [21, 30]}), public_dir / "changes.parquet")
    (public_dir / "s.parquet").chmod(0o644)
    (public_dir / "changes.parquet").chmod(0o644)
    target = public_dir / "t"
    assert run("write", str(public_dir / "s.parquet"), "--target", str(target), "--key", "id",
               "--batch-id", "0").returncode == 0
    _read_only(target)
    done = run("write", str(public_dir / "changes.parquet"), "--target", str(target), "--key", "id",
               "--batch-id", "1", prefix=prefix)
    line = _one_permission_line(done, target)
    assert f"{target}/" in line  # the file it could not write
    # a new table in a folder the user cannot write
    parent = public_dir / "locked"
    parent.mkdir()
    parent.chmod(0o555)
    done = run("write", str(public_dir / "changes.parquet"), "--target", str(parent / "new"), "--key", "id",
               "--batch-id", "1", prefix=prefix)
    _one_permission_line(done, parent / "new")


def test_panic_reports_are_told_apart_from_other_native_output():
    from upsertsink.cli_common import without_panics

    text = (
        "a native warning\n"
        "\n"
        "thread 'tokio-rt-worker' (13949) panicked at /cargo/object_store-0.13.2/src/buffered.rs:369:41:\n"
        "Already shut down\n"
        "stack backtrace:\n"
        "   0: rust_begin_unwind\n"
        "             at /rustc/library/std/src/panicking.rs:665:5\n"
        "note: Some details are omitted, run with `RUST_BACKTRACE=full` for a verbose backtrace.\n"
        "thread 'main' panicked at src/lib.rs:1:1:\n"
        "boom\n"
        "note: run with `RUST_BACKTRACE=1` environment variable to display a backtrace\n"
        "after\n"
    )
    kept, panics = without_panics(text)
    assert kept == "a native warning\nafter\n"
    assert len(panics) == 2 and panics[0].endswith("verbose backtrace.") and panics[1].startswith("thread 'main'")
