"""A run without the cache lets the worker that analyzes a file read it (issue #24, item 5: cold speed): the
parent only lists and sizes the files. The findings are those of a run that reads every file itself."""

from __future__ import annotations

from pathlib import Path

from upsertsink.lint.check.checker import CheckOptions
from upsertsink.lint.run.config import Settings
from upsertsink.lint.run.runner import lint_paths
from upsertsink.lint.run.workers import PARALLEL_MIN_BYTES, PARALLEL_MIN_FILES, work

JOB = (
    "import uuid\n"
    "from pyspark.sql import functions as F\n\n"
    "df2 = df.withColumn('id', F.lit(str(uuid.uuid4())))\n"
    "df2.write.format('delta').mode('append').save('/lake/t{n}')\n"
)


def _tree(root: Path) -> Path:
    jobs = root / "jobs"
    jobs.mkdir()
    filler = "# " + "x" * 78 + "\n"
    per_file = PARALLEL_MIN_BYTES // PARALLEL_MIN_FILES + 1
    for n in range(PARALLEL_MIN_FILES + 2):  # enough files and bytes for the process pool
        (jobs / f"job{n}.py").write_text(
            JOB.format(n=n) + filler * (per_file // len(filler)), encoding="utf-8"
        )
    (jobs / "broken.py").write_text("def f(:\n", encoding="utf-8")
    return jobs


def _settings(root: Path) -> Settings:
    s = Settings()
    s.root = root
    return s


def test_a_run_without_the_cache_finds_what_a_cached_run_finds(tmp_path: Path) -> None:
    jobs = _tree(tmp_path)
    no_cache = lint_paths([jobs], _settings(tmp_path), use_cache=False, jobs=2)
    cached = lint_paths([jobs], _settings(tmp_path), use_cache=True, jobs=2)
    serial = lint_paths([jobs], _settings(tmp_path), use_cache=False, jobs=1)
    rows = [[(f.path, f.line, f.rule) for f in r.findings] for r in (no_cache, cached, serial)]
    assert rows[0] == rows[1] == rows[2]
    assert {r for _, _, r in rows[0]} == {"ND000", "ND003"}
    assert no_cache.stats.workers == 2 and no_cache.stats.files_checked == PARALLEL_MIN_FILES + 3


def test_a_file_gone_before_its_worker_reads_it_is_reported_as_unreadable(tmp_path: Path) -> None:
    missing = tmp_path / "gone.py"
    result = work(("gone.py", None, CheckOptions(origin=str(missing), root=str(tmp_path)), True, 10))
    [finding] = result.findings
    assert (finding.rule, finding.path) == ("ND000", "gone.py")
    assert "cannot read the file" in finding.message
