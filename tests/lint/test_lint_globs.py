"""Gitignore-style matching without pathspec for the simple forms (lint/run/globs.py), checked against pathspec.

pathspec's ``GitIgnoreSpec`` is the reference: every generated list of patterns must give the same answer for
every generated path, whether globs.py matches the list itself or hands it to pathspec. The common ignore
files (GitHub's Python template, this repository's own) must be matched without pathspec at all.
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pathspec
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from lint_helpers import launch
from upsertsink.lint.run.globs import GlobError, compile_globs

ROOT = Path(__file__).resolve().parents[2]

# GitHub's Python .gitignore template, the lines that are patterns (comments and blanks are skipped anyway)
PYTHON_TEMPLATE = """
__pycache__/
*.py[cod]
*$py.class
*.so
.Python
build/
develop-eggs/
dist/
downloads/
eggs/
.eggs/
lib/
lib64/
parts/
sdist/
var/
wheels/
share/python-wheels/
*.egg-info/
.installed.cfg
*.egg
MANIFEST
*.manifest
*.spec
pip-log.txt
pip-delete-this-directory.txt
htmlcov/
.tox/
.nox/
.coverage
.coverage.*
.cache
nosetests.xml
coverage.xml
*.cover
*.py,cover
.hypothesis/
.pytest_cache/
cover/
*.mo
*.pot
*.log
local_settings.py
db.sqlite3
db.sqlite3-journal
instance/
.webassets-cache
.scrapy
docs/_build/
.pybuilder/
target/
.ipynb_checkpoints
profile_default/
ipython_config.py
.pdm.toml
__pypackages__/
celerybeat-schedule
celerybeat.pid
*.sage.py
.env
.venv
env/
venv/
ENV/
env.bak/
venv.bak/
.spyderproject
.spyproject
.ropeproject
/site
.mypy_cache/
.dmypy.json
dmypy.json
.pyre/
.pytype/
cython_debug/
""".splitlines()

PATHS = [
    "job.py",
    "jobs/etl.py",
    "__pycache__/",
    "pkg/__pycache__/mod.cpython-311.pyc",
    "pkg/mod.pyc",
    "pkg/mod.pyo",
    "pkg/mod.pyx",
    "build/",
    "build/lib/x.py",
    "src/build/",
    "x.egg-info/",
    "src/x.egg-info/PKG-INFO",
    "docs/_build/",
    "docs/_build/html/index.py",
    "pkg/docs/_build/",
    "site/",
    "pkg/site/",
    "site.py",
    ".venv/",
    "a/.venv",
    "notebooks/.ipynb_checkpoints/",
    "lib/",
    "pkg/lib/util.py",
    ".coverage.host1",
    "data/",
    "data/x.py",
    "pkg/data/",
    "bench/results/run.tmp",
    "bench/results/run.json",
    "bench/results/sub/run.tmp",
    "tests/",
    "tests/lint/test_x.py",
    "examples/broken_key.py",
    "examples/ci/",
    "bench/corpus/job.py",
]


def same(lines: list[str], paths: list[str]) -> None:
    ours = compile_globs(lines)
    ref = pathspec.GitIgnoreSpec.from_lines(lines)
    for p in paths:
        assert ours.match_file(p) == ref.match_file(p), (lines, p)


@pytest.mark.parametrize(
    "lines",
    [
        PYTHON_TEMPLATE,
        (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines(),
        tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["upsertsink"]["lint"][
            "exclude"
        ],
    ],
    ids=["python-template", "this-repository", "this-repository-excludes"],
)
def test_common_ignore_files_are_matched_without_pathspec(lines: list[str]) -> None:
    matcher = compile_globs(lines)
    assert not isinstance(matcher, pathspec.PathSpec)
    same(lines, PATHS)


@pytest.mark.parametrize(
    "line",
    [
        "!keep.py",
        "docs/**/",
        "docs/**/x",
        "**/tmp",
        "a\\#b",
        "trailing ",
        " leading",
        "a//b",
        "[]x",
        "[a",
        "./x",
        "[.-9]",
        "[!a]b",
    ],
)
def test_other_forms_go_to_pathspec(line: str) -> None:
    lines = ["build/", line]
    assert isinstance(compile_globs(lines), pathspec.PathSpec)
    same(lines, PATHS + ["keep.py", "docs/a/b.py", "x/tmp", "a#b", "trailing ", "x", "a/b", "/"])


_NAMES = ["a", "b", "ab", "x.py", ".a", "a-b", "_", "A", "9"]
SIMPLE_TOKENS = ["a", "b", "x", ".", "_", "-", "py", "*", "?", "[ab]", "[a-c]", "[0-9]", "[A-Z]", "[.]"]
OTHER_TOKENS = ["[!a]", "[^b]", "**", "\\*"]


def patterns(tokens: list[str]) -> st.SearchStrategy[str]:
    segment = st.lists(st.sampled_from(tokens), min_size=1, max_size=3).map("".join)
    return st.builds(
        lambda lead, segs, trail: ("/" if lead else "") + "/".join(segs) + trail,
        st.booleans(),
        st.lists(segment, min_size=1, max_size=3),
        st.sampled_from(["", "/", "/**"]),
    )


path = st.builds(
    lambda parts, trail: "/".join(parts) + ("/" if trail else ""),
    st.lists(st.sampled_from(_NAMES), min_size=1, max_size=4),
    st.booleans(),
)


def _without_trailing_all(line: str) -> str:
    return line[:-3] if line.endswith("/**") and line[:-3].strip("/") else line


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(patterns(SIMPLE_TOKENS), min_size=1, max_size=4), st.lists(path, min_size=1, max_size=12))
@example(lines=["a", "/**"], paths=["a"])  # "/**" is a leading "/" and a "**" segment, not a "/**" suffix
def test_generated_simple_patterns_match_as_pathspec_matches(lines: list[str], paths: list[str]) -> None:
    # "**" (two "*" tokens in a row) and "." or ".." segments go to pathspec; a trailing "/**" after a
    # segment does not
    other = any("**" in _without_trailing_all(line) or {".", ".."} & set(line.split("/")) for line in lines)
    assert isinstance(compile_globs(lines), pathspec.PathSpec) == other
    same(lines, paths)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(patterns(SIMPLE_TOKENS + OTHER_TOKENS), min_size=1, max_size=4),
    st.lists(path, min_size=1, max_size=12),
)
def test_generated_patterns_of_any_form_match_as_pathspec_matches(lines: list[str], paths: list[str]) -> None:
    same(lines, paths)


def test_comments_and_blank_lines_are_skipped() -> None:
    matcher = compile_globs(["# build/", "", "dist/"])
    assert not matcher.match_file("build/") and matcher.match_file("dist/")
    assert not isinstance(matcher, pathspec.PathSpec)


@pytest.mark.parametrize("bad", ["[?-.]", "!"])
def test_a_pattern_pathspec_cannot_read_is_named_or_left_out(bad: str) -> None:
    with pytest.raises(GlobError) as err:
        compile_globs(["build/", bad])
    assert err.value.pattern == bad and repr(bad) in str(err.value)
    matcher = compile_globs(["build/", bad, "*.log"], skip_invalid=True)  # an ignore file, as git reads it
    assert matcher.match_file("build/") and matcher.match_file("x/run.log") and not matcher.match_file("a.py")


JOB = "from pyspark.sql import functions as F\ndf2 = df.withColumn('id', F.rand())\n"


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ('exclude = ["legacy/", "[?-.]"]', "exclude: invalid pattern '[?-.]'"),
        ('extend-exclude = ["!"]', "exclude: invalid pattern '!'"),
        ('per-file-ignores = { "[?-.]" = ["ND002"] }', "per-file-ignores: invalid pattern '[?-.]'"),
    ],
)
def test_a_bad_glob_in_the_config_is_a_usage_error_naming_it(
    tmp_path: Path, setting: str, message: str
) -> None:
    """Before, pathspec's own exception (re.error, GitIgnorePatternError) reached the user as a traceback."""
    (tmp_path / "pyproject.toml").write_text(f"[tool.upsertsink.lint]\n{setting}\n", encoding="utf-8")
    (tmp_path / "job.py").write_text(JOB, encoding="utf-8")
    code, out, err = launch(tmp_path, ".", "--no-cache")
    assert code == 2 and out == ""
    assert message in err and str(tmp_path / "pyproject.toml") in err and "Traceback" not in err, err


def test_a_bad_line_in_a_gitignore_is_left_out_and_the_others_apply(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.upsertsink.lint]\n", encoding="utf-8")
    (tmp_path / ".gitignore").write_text("[?-.]\n!\ngenerated/\n", encoding="utf-8")
    for rel in ("job.py", "generated/job.py"):
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        (tmp_path / rel).write_text(JOB, encoding="utf-8")
    code, out, err = launch(tmp_path, ".", "--no-cache", "--format", "json")
    assert code == 0 and "Traceback" not in err, err
    assert [f["path"] for f in json.loads(out)["findings"]] == ["job.py"]
