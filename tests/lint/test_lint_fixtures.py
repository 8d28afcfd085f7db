"""Whole job files (tests/lint/fixtures/jobs) against their expected findings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from upsertsink.lint.command.cli import lint_command

JOBS = Path(__file__).resolve().parent / "fixtures" / "jobs"

EXPECTED = {
    "clean_job.py": [],
    "delta_merge_job.py": [
        (9, 30, "ND010", "error", "key", "region"),
        (16, 9, "ND005", "warning", "column", "email"),
        (17, 9, "ND005", "warning", "column", "tags"),
        (24, 71, "ND001", "warning", "column", "updated_at"),
    ],
    "orders_job.py": [
        (14, 14, "ND003", "warning", "column", "run_id"),
        (28, 49, "ND001", "warning", "column", "ingested_at"),
        (33, 46, "ND004", "error", "key", "order_key"),
        (41, 13, "ND001", "error", "key", "order_key"),
    ],
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_job_fixture(name: str) -> None:
    result = CliRunner().invoke(lint_command, [str(JOBS / name), "--format", "json", "--no-cache"])
    doc = json.loads(result.output)
    got = [
        (f["line"], f["column"], f["rule"], f["severity"], f["target"], f["column_name"])
        for f in doc["findings"]
    ]
    assert got == EXPECTED[name]
    assert result.exit_code == (1 if any(e[3] == "error" for e in EXPECTED[name]) else 0)
