"""The content-hash cache and the pre-filter, observed through the run statistics (never timings)."""

from __future__ import annotations

from pathlib import Path

import pytest
from upsertsink.lint.run.config import Settings
from upsertsink.lint.run.runner import lint_paths

JOB = "from pyspark.sql import functions as F\ndf2 = df.withColumn('id', F.rand())\n"


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    s = Settings()
    s.root = tmp_path
    return s


def test_second_run_parses_nothing_and_gives_the_same_findings(tmp_path: Path, settings: Settings) -> None:
    for i in range(5):
        (tmp_path / f"job{i}.py").write_text(JOB)
    (tmp_path / "plain.py").write_text("x = 1\n")
    first = lint_paths([tmp_path], settings)
    assert first.stats.files_checked == 6
    assert first.stats.parsed == 5 and first.stats.prefiltered == 1 and first.stats.cache_hits == 0
    assert len(list((tmp_path / ".upsertsink_cache").glob("lint-*.json"))) == 1
    second = lint_paths([tmp_path], settings)
    assert second.stats.parsed == 0 and second.stats.prefiltered == 0 and second.stats.cache_hits == 6
    assert second.findings == first.findings


def test_changed_file_is_reanalyzed(tmp_path: Path, settings: Settings) -> None:
    job = tmp_path / "job.py"
    job.write_text(JOB)
    lint_paths([tmp_path], settings)
    job.write_text(JOB + "df3 = df.withColumn('x', F.uuid())\n")
    again = lint_paths([tmp_path], settings)
    assert again.stats.parsed == 1 and again.stats.cache_hits == 0
    assert [f.rule for f in again.findings] == ["ND002", "ND003"]


def test_settings_change_invalidates_cache(tmp_path: Path, settings: Settings) -> None:
    (tmp_path / "job.py").write_text(JOB)
    assert lint_paths([tmp_path], settings).findings[0].severity == "warning"
    settings.keys = ["id"]
    res = lint_paths([tmp_path], settings)
    assert res.stats.cache_hits == 0 and res.findings[0].severity == "error"


def test_no_cache_reads_and_writes_nothing(tmp_path: Path, settings: Settings) -> None:
    (tmp_path / "job.py").write_text(JOB)
    res = lint_paths([tmp_path], settings, use_cache=False)
    assert res.stats.parsed == 1
    assert not (tmp_path / ".upsertsink_cache").exists()


def test_corrupt_cache_is_ignored(tmp_path: Path, settings: Settings) -> None:
    (tmp_path / "job.py").write_text(JOB)
    lint_paths([tmp_path], settings)
    [cache_file] = (tmp_path / ".upsertsink_cache").glob("lint-*.json")
    cache_file.write_text("{not json")
    res = lint_paths([tmp_path], settings)
    assert res.stats.parsed == 1 and len(res.findings) == 1


def test_alternating_settings_keep_their_own_caches(tmp_path: Path, settings: Settings) -> None:
    (tmp_path / "job.py").write_text(JOB)
    lint_paths([tmp_path], settings)
    settings.keys = ["id"]
    lint_paths([tmp_path], settings)
    assert lint_paths([tmp_path], settings).stats.cache_hits == 1
    settings.keys = []
    assert lint_paths([tmp_path], settings).stats.cache_hits == 1


def test_prefilter_skips_analysis_of_files_without_trigger_words(tmp_path: Path, settings: Settings) -> None:
    (tmp_path / "a.py").write_text("def add(a, b):\n    return a + b\n")
    res = lint_paths([tmp_path], settings, use_cache=False)
    assert res.stats.prefiltered == 1 and res.stats.parsed == 0


def test_parallel_and_serial_runs_agree(tmp_path: Path, settings: Settings) -> None:
    filler = "\n".join(f"# filler line {i} " + "x" * 60 for i in range(600))
    for i in range(12):
        (tmp_path / f"job{i}.py").write_text(JOB.replace("'id'", f"'c{i}'") + filler + "\n")
    serial = lint_paths([tmp_path], settings, use_cache=False, jobs=1)
    parallel = lint_paths([tmp_path], settings, use_cache=False, jobs=2)
    assert parallel.stats.workers == 2 and serial.stats.workers == 1
    assert parallel.findings == serial.findings and len(serial.findings) == 12


def test_progress_callback_reports_every_analyzed_file(tmp_path: Path, settings: Settings) -> None:
    for i in range(4):
        (tmp_path / f"job{i}.py").write_text(JOB)
    seen: list[tuple[int, int]] = []
    lint_paths([tmp_path], settings, use_cache=False, jobs=1, progress=lambda d, t: seen.append((d, t)))
    assert seen == [(1, 4), (2, 4), (3, 4), (4, 4)]
