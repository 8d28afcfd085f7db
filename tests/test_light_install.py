"""`pip install upsertsink` without the spark extra: the wheel is built, installed into a fresh virtual
environment (pip's cache is reused; PyPI must be reachable), and used there as a user would - linting,
an embedded write and an Arrow diff, with no pyspark anywhere - while every Spark entry point names the
missing extra. This is also the environment the pre-commit hook builds (`language: python`).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from importlib.metadata import version
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
EXTRA = 'pip install "upsertsink[spark]"'


def sh(*args: str | Path, cwd: Path | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", NO_COLOR="1")
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    # built from a copy of the sources: an in-tree build would reuse (and package) a stale build/ folder
    source = tmp_path_factory.mktemp("src") / "upsertsink"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".upsertsink_cache", "spark-warehouse"))  # fmt: skip
    dist = tmp_path_factory.mktemp("dist")
    built = sh(sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", dist, source)
    assert built.returncode == 0, built.stderr
    (path,) = dist.glob("upsertsink-*.whl")
    return path


@pytest.fixture(scope="module")
def light(tmp_path_factory, wheel) -> Path:
    """A fresh venv with the built wheel installed, without extras; returns its bin directory."""
    root = tmp_path_factory.mktemp("light")
    made = sh(sys.executable, "-m", "venv", root / "venv")
    assert made.returncode == 0, made.stderr
    bin_dir = root / "venv" / "bin"
    installed = sh(bin_dir / "python", "-m", "pip", "install", "--quiet", wheel)
    assert installed.returncode == 0, installed.stderr
    return bin_dir


def test_the_wheel_holds_every_package(wheel):
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    for module in ("upsertsink/diffing/compare.py", "upsertsink/io.py", "upsertsink/cli_common.py",
                   "upsertsink/__main__.py", "upsertsink/lint/cli.py", "upsertsink/testing/pytest_plugin.py",
                   "upsertsink/jvm/S3ConditionalPutLogStore.java"):
        assert module in names, module
    assert not [n for n in names if n.startswith(("lint/", "tests/"))]


def test_the_light_install_has_no_spark(light):
    listed = sh(light / "python", "-m", "pip", "list", "--format", "json")
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert "upsertsink" in names
    assert not names & {"pyspark", "delta-spark", "py4j"}, names
    assert sh(light / "python", "-c", "import pyspark").returncode == 1
    shown = sh(light / "upsertsink", "--version")
    assert shown.stdout == f"upsertsink {version('upsertsink')}\n"  # the same pyproject.toml


def test_lint_write_and_diff_work_without_spark(light, tmp_path):
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    (jobs / "job.py").write_text(textwrap.dedent("""\
        from pyspark.sql import functions as F
        from upsertsink import UpsertSink

        df2 = df.withColumn("id", F.monotonically_increasing_id())
        UpsertSink("/tables/t", keys=["id"]).write(df2)
    """))
    lint = sh(light / "upsertsink", "lint", "jobs", "--format", "json", "--no-cache", cwd=tmp_path)
    assert lint.returncode == 1, lint.stdout + lint.stderr
    findings = json.loads(lint.stdout)["findings"]
    assert findings and all(f["path"] == "jobs/job.py" for f in findings)

    (tmp_path / "batch.csv").write_text("id,name\n1,a\n2,b\n")
    write = sh(light / "upsertsink", "write", "batch.csv", "--target", "t", "--key", "id", "--batch-id", "0",
               "--json", cwd=tmp_path)  # fmt: skip
    assert write.returncode == 0, write.stderr
    result = json.loads(write.stdout)
    assert (result["engine"], result["inserted"], result["skipped"]) == ("embedded", 2, False)
    diff = sh(light / "upsertsink", "diff", "t", "batch.csv", "--key", "id", cwd=tmp_path)
    assert diff.returncode == 0, diff.stdout + diff.stderr
    assert "equal: 2 rows" in diff.stdout


def test_spark_entry_points_name_the_missing_extra(light, tmp_path):
    (tmp_path / "batch.csv").write_text("id\n1\n")
    for args in (
        ["write", "batch.csv", "--target", "t", "--key", "id", "--engine", "spark"],
        ["diff", "batch.csv", "batch.csv", "--key", "id", "--engine", "spark"],
        ["replay-check", "jobs:build", "--key", "id"],
    ):
        proc = sh(light / "upsertsink", *args, cwd=tmp_path)
        assert proc.returncode == 2, (args, proc.stderr)
        assert proc.stderr.startswith("upsertsink: error: ") and proc.stderr.strip().endswith(EXTRA), proc.stderr
    session = sh(light / "python", "-c", "import upsertsink; upsertsink.spark_session()")
    assert "upsertsink.session.SparkNotInstalledError: upsertsink.spark_session() needs Spark" in session.stderr


def test_the_ci_example_installs_upsertsink_with_a_working_step(light, wheel):
    """examples/ci/upsertsink-lint.yml: the default is a PEP 508 reference to upsertsink's git repository, and
    the install step works as written with the documented alternative, a wheel kept in the repository."""
    import yaml  # libcst's dependency, so always installed
    from packaging.requirements import Requirement

    workflow = yaml.safe_load((REPO / "examples" / "ci" / "upsertsink-lint.yml").read_text())
    requirement = Requirement(workflow["env"]["UPSERTSINK_PACKAGE"])
    assert requirement.name == "upsertsink" and not requirement.extras  # light: no Spark in CI
    assert requirement.url and requirement.url.startswith("git+https://")
    (step,) = [s for s in workflow["jobs"]["lint"]["steps"] if s.get("name") == "Install upsertsink"]
    env = {**os.environ, "UPSERTSINK_PACKAGE": str(wheel), "PATH": f"{light}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "-c", step["run"]], env=env, capture_output=True, text=True, timeout=300,
                          check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "upsertsink" in proc.stdout  # "Requirement already satisfied" or "Successfully installed"
