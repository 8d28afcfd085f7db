"""Shared fixtures of the reliability tests: a change feed on disk and its uninterrupted run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import change_feed, save_feed


@pytest.fixture(scope="session")
def feed(tmp_path_factory) -> tuple[list[list[dict]], Path]:
    data = change_feed(seed=7, batches=24)
    return data, save_feed(data, tmp_path_factory.mktemp("feed") / "feed.json")


@pytest.fixture(scope="session")
def short_feed(tmp_path_factory) -> tuple[list[list[dict]], Path]:
    data = change_feed(seed=11, batches=8)
    return data, save_feed(data, tmp_path_factory.mktemp("short") / "feed.json")
