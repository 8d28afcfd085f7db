"""A cold run of a large tree (issue #24, item 5: cold at most 10x ruff on pyspark's sources), observed as
behaviour, never as timings:

- the files that hold SQL text go to one worker as one task, so that only that worker loads sqlglot; the
  findings are those of a run in one process;
- a lint run ends without the interpreter's teardown, its output whole and its exit code kept;
- a file's lines are split only when something asks for them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner
from lint_helpers import launch
from upsertsink.lint.check.checker import CheckOptions, SourceLines
from upsertsink.lint.command.cli import lint_command
from upsertsink.lint.run import workers
from upsertsink.lint.run.config import Settings
from upsertsink.lint.run.runner import lint_paths
from upsertsink.lint.run.workers import PARALLEL_MIN_BYTES, _plan
from upsertsink.lint.values import sql as sqlmod

PLAIN = (
    "import uuid\n"
    "from pyspark.sql import functions as F\n\n"
    "df2 = df.withColumn('id', F.lit(str(uuid.uuid4())))\n"
    "df2.write.format('delta').mode('append').save('/lake/p{n}')\n"
)
WITH_SQL = (
    "out = spark.sql('SELECT uuid() AS id, v FROM src_{n}')\n"
    "out.write.format('delta').mode('append').save('/lake/s{n}')\n"
)
FILLER = "# " + "x" * 78 + "\n"


def _settings(root: Path) -> Settings:
    s = Settings()
    s.root = root
    return s


def _tree(root: Path, plain: int, with_sql: int, filler: int) -> Path:
    jobs = root / "jobs"
    jobs.mkdir()
    for n in range(plain):
        (jobs / f"plain{n}.py").write_text(PLAIN.format(n=n) + FILLER * filler, encoding="utf-8")
    for n in range(with_sql):
        (jobs / f"sql{n}.py").write_text(WITH_SQL.format(n=n), encoding="utf-8")
    return jobs


def _item(name: str, text: str | None, size: int = 0) -> tuple:
    data = text.encode() if text is not None else None
    return (name, data, CheckOptions(origin=f"/nonexistent/{name}"), True, size)


# ------------------------------------------------------------------------------- the plan of the tasks


def test_the_largest_plain_files_go_first_then_the_sql_files_as_one_task() -> None:
    items = [
        _item("big.py", "x = 1\n" * 400),
        _item("sql_a.py", "spark.sql('SELECT 1')\n" * 20),
        _item("mid.py", "x = 1\n" * 300),
        _item("sql_b.py", "df.selectExpr('a')\n"),
        _item("small.py", "x = 1\n" * 100),
        _item("tiny.py", "x = 1\n"),
    ]
    order = sorted(range(len(items)), key=lambda i: -len(items[i][1]))
    tasks: list[list[str]] = []
    rest, grouped = _plan(items, order, 2, lambda task: tasks.append([items[i][0] for i in task]))
    # one plain file per worker at once, then every file with SQL in one task, largest first
    assert tasks == [["big.py"], ["mid.py"], ["sql_a.py", "sql_b.py"]]
    assert [items[i][0] for i in rest] == ["small.py", "tiny.py"]
    assert grouped == 2


def test_sql_files_beyond_one_workers_share_are_not_grouped_nor_read_further(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    items = [
        _item("sql_a.py", "spark.sql('SELECT 1')\n" * 200),
        _item("sql_b.py", "dt.merge(src, 't.id = s.id')\n" * 100),
        _item("plain_a.py", "x = 1\n" * 50),
        _item("plain_b.py", "x = 1\n" * 40),
        _item("plain_c.py", "x = 1\n" * 30),
    ]
    read: list[str] = []
    content = workers._content
    monkeypatch.setattr(workers, "_content", lambda item: read.append(item[0]) or content(item))
    order = sorted(range(len(items)), key=lambda i: -len(items[i][1]))
    tasks: list[list[str]] = []
    rest, grouped = _plan(items, order, 2, lambda task: tasks.append([items[i][0] for i in task]))
    # sql_a alone is more than half of the bytes: no group, and no other file is read for one
    assert (grouped, read) == (0, ["sql_a.py"])
    assert tasks == [["sql_b.py"], ["plain_a.py"]]
    # the rest in the usual order: largest first
    assert [items[i][0] for i in rest] == ["sql_a.py", "plain_b.py", "plain_c.py"]


def test_a_file_that_cannot_be_read_for_the_plan_is_left_to_its_worker(tmp_path: Path) -> None:
    items = [_item("a.py", "x = 1\n" * 10), _item("b.py", "x = 1\n" * 5), _item("gone.py", None, size=3)]
    tasks: list[list[str]] = []
    rest, grouped = _plan(items, [0, 1, 2], 2, lambda task: tasks.append([items[i][0] for i in task]))
    assert (tasks, [items[i][0] for i in rest], grouped) == ([["a.py"], ["b.py"]], ["gone.py"], 0)


# ------------------------------------------------------------------------------- a run with workers


def test_sql_text_is_analyzed_by_one_worker_and_the_findings_are_a_serial_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    per_file = PARALLEL_MIN_BYTES // 10 // len(FILLER) + 1
    jobs = _tree(tmp_path, plain=12, with_sql=4, filler=per_file)
    serial = lint_paths([jobs], _settings(tmp_path), use_cache=False, jobs=1)

    # the workers are forked from this process: they inherit this wrapper, which notes who analyzed SQL
    marks = tmp_path / "sql_pids"
    original = sqlmod.analyze_statements

    def noting(text: str) -> sqlmod.SqlResult:
        with open(marks, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()}\n")
        return original(text)

    monkeypatch.setattr(sqlmod, "analyze_statements", noting)
    parallel = lint_paths([jobs], _settings(tmp_path), use_cache=False, jobs=2)

    assert parallel.stats.workers == 2 and parallel.stats.sql_group == 4
    analyzers = set(marks.read_text(encoding="utf-8").split())
    assert len(analyzers) == 1 and analyzers != {str(os.getpid())}

    def rows(result):
        return sorted((f.path, f.line, f.column, f.rule, f.message) for f in result.findings)

    assert rows(parallel) == rows(serial)
    assert {f.rule for f in parallel.findings} >= {"ND003"}
    assert {Path(f.path).name for f in parallel.findings} >= {"sql0.py", "plain0.py"}


# ------------------------------------------------------------------------------- the end of a lint run


def test_a_lint_run_ends_with_its_whole_output_and_its_exit_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # more output than a pipe holds (64 KiB): the end of the process must not cut it
    lines = "".join(f"df{n} = df.withColumn('id', F.rand())\n" for n in range(600))
    (tmp_path / "pyproject.toml").write_text("[tool.upsertsink.lint]\n", encoding="utf-8")
    (tmp_path / "job.py").write_text("from pyspark.sql import functions as F\n" + lines, encoding="utf-8")
    args = ["job.py", "--format", "json", "--no-cache", "--key", "id"]  # a random key: errors, exit 1
    code, out, _err = launch(tmp_path, *args)
    assert len(out) > 64 * 1024
    monkeypatch.chdir(tmp_path)
    reference = CliRunner().invoke(lint_command, args)
    assert (code, out) == (reference.exit_code, reference.output)
    assert code == 1 and len(json.loads(out)["findings"]) == 600

    code, _out, err = launch(tmp_path, "pyproject.toml", "--no-cache")  # no Python file: nothing to report
    assert code == 0, err
    code, _out, err = launch(tmp_path, "--no-such-option")
    assert code == 2 and "--no-such-option" in err


# ------------------------------------------------------------------------------- a file's lines


def test_a_files_lines_are_split_when_first_asked_for_and_read_like_a_list() -> None:
    text = "a = 1\nb = 'x'\r\nc = 3"
    lines = SourceLines(text)
    assert lines._lines is None
    assert lines[1] == "b = 'x'\r\n" and lines._lines is not None
    expected = text.splitlines(keepends=True)
    assert (len(lines), lines[-1], lines[0:2], list(lines), "".join(lines)) == (
        3,
        "c = 3",
        expected[0:2],
        expected,
        text,
    )
    assert list(SourceLines("")) == [""]
