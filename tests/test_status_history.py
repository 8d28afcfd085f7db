"""`upsertsink status PATH@N` lists the commits up to version N under their own versions (issue #45, item 1).

deltalake 1.6's ``history()`` lists the log from its latest version down but numbers the entries from the
version the handle is at: ``status t@2`` of a table at version 4 showed batches 5, 4, 3 as versions 2, 1, 0.
Each check here compares what ``status`` prints with the table's own log files, on tables written by either
engine."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable

from upsertsink import UpsertSink
from upsertsink.cli import main
from upsertsink.table import commit_log

SCHEMA = {"id": pa.int64(), "v": pa.int64()}
BATCHES = [20260101, 20260102, 20260103, 20260104, 20260105]


def log_commits(path: str, up_to: int) -> list[tuple[int, int | None, int]]:
    """(version, batch id, timestamp) of each commit up to ``up_to``, newest first, from the log files."""
    out = []
    for version in range(up_to, -1, -1):
        lines = (Path(path) / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
        info = next(json.loads(line)["commitInfo"] for line in lines if line.startswith('{"commitInfo"'))
        meta = json.loads(info["userMetadata"]) if info.get("userMetadata") else {}
        out.append((version, meta.get("batch_id"), info["timestamp"]))
    return out


def status(*args: str) -> str:
    result = CliRunner().invoke(main, ["status", *args])
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.fixture
def table(engine, tmp_path) -> str:
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id", app_id="job")
    for i, batch in enumerate(BATCHES):
        sink.write(engine.frame([{"id": i, "v": batch}], SCHEMA), batch_id=batch)
    return path


def test_status_at_each_version_lists_that_version_and_older_ones_under_their_own_numbers(table):
    latest = DeltaTable(table).version()
    assert latest >= len(BATCHES) - 1
    for at in sorted({0, 1, 2, latest - 1, latest}):
        spec = table if at == latest else f"{table}@{at}"
        expected = log_commits(table, at)
        info = json.loads(status(spec, "--json", "--limit", "50"))
        assert info["version"] == at
        assert [(c["version"], c["batch_id"], c["timestamp"]) for c in info["commits"]] == expected
        # the marker at that version is the batch of its newest commit that carries one
        assert info["batches"] == {"job": next(b for _, b, _ in expected if b is not None)}
        limited = json.loads(status(spec, "--json", "--limit", "2"))
        assert [c["version"] for c in limited["commits"]] == [v for v, _, _ in expected][:2]
        # the text output: one row per commit, its version first and its batch id in the batch column
        lines = status(spec, "--limit", "50").splitlines()
        header = next(i for i, line in enumerate(lines) if line.startswith("version"))
        rows = [line.split() for line in lines[header + 1:]]
        assert [(int(r[0]), r[5]) for r in rows] == [(v, str(b)) for v, b, _ in expected]


def test_a_handle_left_behind_by_other_commits_lists_its_own_version_down(tmp_path):
    """The same numbering applied to a handle that another writer's commits overtook (the sink's kept
    handles): its history must still be its own version's."""
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id", app_id="job")
    for i, batch in enumerate(BATCHES[:3]):
        sink.write(pa.Table.from_pylist([{"id": i, "v": batch}], schema=pa.schema(list(SCHEMA.items()))),
                   batch_id=batch)
    handle = DeltaTable(path)
    for i, batch in enumerate(BATCHES[3:], start=3):
        sink.write(pa.Table.from_pylist([{"id": i, "v": batch}], schema=pa.schema(list(SCHEMA.items()))),
                   batch_id=batch)
    assert handle.version() == 2
    for limit in (1, 2, None):
        listed = commit_log.history(handle, limit)
        expected = log_commits(path, 2)[: limit or None]
        assert [(c["version"], json.loads(c["userMetadata"])["batch_id"], c["timestamp"]) for c in listed] == expected
