"""The linter installs as ``upsertsink.lint`` (from the top-level lint/ folder), never as a module ``lint``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

import upsertsink.lint
from upsertsink.lint import catalogue

REPO = Path(__file__).resolve().parents[2]
JOB = (
    "from pyspark.sql import functions as F\nfrom upsertsink import UpsertSink\n"
    'df2 = df.withColumn("id", F.rand())\nUpsertSink("/t", keys=["id"]).write(df2)\n'
)


def test_package_is_served_from_the_lint_folder() -> None:
    assert Path(upsertsink.lint.__file__).resolve().parent == REPO / "lint"


@pytest.fixture
def user_project(tmp_path: Path) -> Path:
    # a user's own lint.py (and a lint/ package) in the working folder must not be imported
    (tmp_path / "lint.py").write_text("raise SystemExit('the user lint.py was imported')\n")
    (tmp_path / "upsertsink_tools").mkdir()
    (tmp_path / "upsertsink_tools" / "lint").mkdir()
    (tmp_path / "upsertsink_tools" / "lint" / "__init__.py").write_text(
        "raise SystemExit('a lint package')\n"
    )
    (tmp_path / "job.py").write_text(JOB)
    return tmp_path


@pytest.mark.parametrize(
    "cmd",
    [
        [str(Path(sys.executable).parent / "upsertsink"), "lint"],
        [sys.executable, "-m", "upsertsink.lint"],
    ],
    ids=["console-script", "python-m"],
)
def test_a_users_lint_py_does_not_break_the_command(user_project: Path, cmd: list[str]) -> None:
    out = subprocess.run(
        [*cmd, "job.py", "--format", "json", "--no-cache"],
        cwd=user_project,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
        env={**os.environ, "PYTHONPATH": f"{user_project}:{user_project / 'upsertsink_tools'}"},
    )
    assert out.returncode == 1, out.stderr
    [finding] = json.loads(out.stdout)["findings"]
    assert (finding["rule"], finding["target"], finding["column_name"]) == ("ND002", "key", "id")


def test_every_package_folder_is_listed_in_pyproject() -> None:
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    listed = set(cfg["packages"])
    assert cfg["package-dir"] == {"upsertsink.lint": "lint"}
    on_disk = {
        ".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "upsertsink").rglob("__init__.py")
    } | {
        ".".join(("upsertsink", *p.parent.relative_to(REPO).parts))
        for p in (REPO / "lint").rglob("__init__.py")
    }
    missing = on_disk - listed
    assert not missing, f"add {sorted(missing)} to [tool.setuptools] packages in pyproject.toml"
    assert "lint" not in listed


@pytest.mark.skipif(not (REPO / ".git").exists(), reason="needs the source tree")
def test_built_wheel_holds_upsertsink_lint_and_no_top_level_lint(tmp_path: Path) -> None:
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    if build.returncode != 0:
        pytest.skip(f"cannot build a wheel here (no build backend available): {build.stderr[-300:]}")
    [wheel] = tmp_path.glob("upsertsink-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "upsertsink/lint/command/cli.py" in names and "upsertsink/lint/rules/__init__.py" in names
    assert "upsertsink/lint/__main__.py" in names
    # the package's face is lint/__init__.py, not the source checkout's upsertsink/lint/__init__.py
    assert zipfile.ZipFile(wheel).read("upsertsink/lint/__init__.py") == (REPO / "lint" / "__init__.py").read_bytes()
    assert not [n for n in names if n.startswith("lint/")]


def test_nondeterministic_sql_functions_for_the_sink() -> None:
    names = catalogue.nondeterministic_sql_functions()
    assert isinstance(names, frozenset)
    for name in (
        "rand",
        "randn",
        "random",
        "uuid",
        "shuffle",
        "now",
        "current_timestamp",
        "current_date",
        "monotonically_increasing_id",
        "spark_partition_id",
        "input_file_name",
    ):
        assert name in names
    assert all(n == n.lower() for n in names)
    # deterministic functions, and ones that are only nondeterministic without an argument, are not in it
    for name in ("sha2", "concat_ws", "coalesce", "unix_timestamp", "row_number", "rank", "max"):
        assert name not in names
    # the same catalogue the rules report from: every name is a source some rule reports in SQL text
    from upsertsink.lint.values.sql import analyze_expression

    args = {"randstr": "5", "uniform": "0, 1", "shuffle": "a"}
    for name in sorted(names):
        ok, _alias, part = analyze_expression(f"{name}({args.get(name, '')}) = 1")
        assert ok and [s.rule for s in part.sites] in (["ND001"], ["ND002"], ["ND003"], ["ND004"]), name


def test_nondeterministic_sql_calls_finds_them_in_a_predicate() -> None:
    assert catalogue.nondeterministic_sql_calls("op = 'D' AND ts < current_timestamp - INTERVAL 1 DAY") == [
        "current_timestamp"
    ]
    assert catalogue.nondeterministic_sql_calls("rand() < 0.5 OR uuid() IS NULL") == ["rand", "uuid"]
    assert catalogue.nondeterministic_sql_calls("op = 'D' AND unix_timestamp(ts) > 5") == []
    assert catalogue.nondeterministic_sql_calls("unix_timestamp() > 5") == ["unix_timestamp"]
