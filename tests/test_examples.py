"""The examples, run as CI runs them: each one a real process of this interpreter (Spark ones start a JVM)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from deltalake import DeltaTable

ROOT = Path(__file__).resolve().parent.parent
CLI = str(Path(sys.executable).with_name("upsertsink"))
ENV = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
TIMEOUT = 600


def run(*args: str) -> subprocess.CompletedProcess:
    """Run a command from the repository root, as CI does, and capture its output."""
    return subprocess.run(
        list(args), cwd=ROOT, env=ENV, capture_output=True, text=True, check=False, timeout=TIMEOUT
    )


def example(name: str, *args: str) -> subprocess.CompletedProcess:
    return run(sys.executable, str(ROOT / "examples" / name), *args)


def lint(*args: str) -> tuple[subprocess.CompletedProcess, dict]:
    proc = run(CLI, "lint", "--format", "json", "--no-cache", *args)
    return proc, json.loads(proc.stdout)


def table_rows(path: Path, *columns: str) -> list[tuple]:
    df = DeltaTable(str(path)).to_pandas(columns=list(columns))
    return sorted(tuple(r) for r in df.itertuples(index=False))


@pytest.fixture(scope="module")
def orders_json(tmp_path_factory) -> Path:
    """Input for the wall-clock jobs: 40 order changes as JSON lines."""
    path = tmp_path_factory.mktemp("wallclock") / "orders.json"
    statuses = ("created", "paid", "shipped")
    rows = [
        {"order_id": i, "customer": f"c{i % 3}", "status": statuses[i % 3], "amount": 10.0 * i,
         "updated_at": f"2026-11-02 09:{i:02d}:00"}
        for i in range(1, 41)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# ---------------------------------------------------------------- the jobs (each starts its own JVM)


@pytest.mark.spark
def test_orders_change_feed(tmp_path):
    proc = example("orders_change_feed.py", str(tmp_path / "orders"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "identical" in proc.stdout and "different" not in proc.stdout, proc.stdout
    assert "last committed batch id for app 'orders-cdc': 4" in proc.stdout


@pytest.mark.spark
def test_streaming_orders_stopped_crashed_and_restarted_equals_one_run(tmp_path):
    proc = example("streaming_orders.py", str(tmp_path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "the sink found batch 2 committed and skipped it" in out, out
    assert "identical" in out, out
    # Spark really ran epoch 2 twice: its commit file exists again after the restart.
    assert (tmp_path / "run_b" / "checkpoint" / "commits" / "2").is_file()
    # Both tables hold what the feed means (deletes and late rows applied), not merely the same thing.
    expected = [
        (1, "shipped", 3), (2, "shipped", 3), (4, "paid", 2), (5, "shipped", 3), (7, "paid", 2), (8, "created", 1),
    ]  # fmt: skip
    for run_dir in ("run_a", "run_b"):
        table = tmp_path / run_dir / "orders"
        assert table_rows(table, "order_id", "status", "seq") == expected, run_dir
        assert DeltaTable(str(table)).transaction_version("orders-stream") == 5, run_dir


@pytest.mark.spark
def test_replay_check_shows_the_broken_job_differing(orders_json):
    proc = run(
        CLI, "replay-check", "examples.broken_wallclock_key:build", "--key", "event_id",
        "--input", f"orders={orders_json}", "--format", "json",
    )  # fmt: skip
    assert proc.returncode == 1, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["equal"] is False
    # every key of run 1 is gone in run 2, and run 2 has as many new ones: the same rows under other keys
    assert result["diffs"][0]["only_in_left"] == 40 and result["diffs"][0]["only_in_right"] == 40


@pytest.mark.spark
def test_replay_check_passes_the_fixed_job(orders_json):
    proc = run(
        CLI, "replay-check", "examples.fixed_wallclock_key:build", "--key", "event_id",
        "--input", f"orders={orders_json}",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "baseline, 40 rows" in proc.stdout and "all runs equal" in proc.stdout, proc.stdout


@pytest.mark.spark
def test_wallclock_twins_write_with_the_sink(tmp_path):
    # Both mains in one process (each stops its session; the second one reuses the JVM): saves a JVM start.
    script = (
        "from examples import broken_wallclock_key as broken, fixed_wallclock_key as fixed\n"
        f"print('exit codes', broken.main({str(tmp_path / 'broken')!r}), fixed.main({str(tmp_path / 'fixed')!r}))\n"
    )
    proc = run(sys.executable, "-c", script)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    broken_out, fixed_out = proc.stdout.split("exit codes")[0].split("batch 1 written")[1:]
    assert "retry of batch 1: refused" in broken_out, proc.stdout
    assert "re-sent as batch 2: 4 inserted, 0 updated; 8 events in the table for 4" in broken_out, proc.stdout
    assert "retry of batch 1: skipped, same content" in fixed_out, proc.stdout
    assert "re-sent as batch 2: 0 inserted, 0 updated; 4 events in the table for 4" in fixed_out, proc.stdout
    assert proc.stdout.rstrip().endswith("exit codes 1 0"), proc.stdout
    assert len(DeltaTable(str(tmp_path / "broken")).to_pandas()) == 8
    assert len(DeltaTable(str(tmp_path / "fixed")).to_pandas()) == 4


# ---------------------------------------------------------------- the linter (no JVM)


def test_lint_rejects_the_broken_job():
    proc, report = lint("examples/broken_wallclock_key.py")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    assert [(f["rule"], f["target"], f["column_name"]) for f in errors] == [("ND001", "key", "event_id")]
    assert "current_timestamp" in errors[0]["message"]


def test_lint_passes_the_fixed_job():
    proc, report = lint("examples/fixed_wallclock_key.py")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert report["files_checked"] == 1 and report["findings"] == []


def test_lint_of_the_examples_folder_passes_and_skips_the_broken_job():
    proc, report = lint("examples")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not [f for f in report["findings"] if f["severity"] == "error"], report
    checked = sorted(p.name for p in (ROOT / "examples").glob("*.py") if not p.name.startswith("broken_"))
    assert report["files_checked"] == len(checked) >= 3
