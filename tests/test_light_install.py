"""`pip install upsertsink` is light: the wheel is built and installed into fresh virtual environments (pip's
cache is reused; PyPI must be reachable) and used there as a user would.

- Without extras (the linter's environment, and the one the pre-commit hook builds with `language: python`):
  its size is measured, the linter runs, no pyspark, pyarrow, pandas, deltalake or datafusion is installed,
  and every entry point that needs an extra names it in one line.
- With `[embedded]`: an embedded write and an Arrow diff, still without pyspark.

Sizes are the bytes of the files (`os.path.getsize`, the .pyc files pip compiles included; symbolic links not
followed), in MB of 10**6 bytes; docs/linter.md ("Install size") has the figures.
"""

from __future__ import annotations

import importlib.util
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
SPARK_EXTRA = 'pip install "upsertsink[spark]"'
EMBEDDED_EXTRA = 'pip install "upsertsink[embedded]"'
MB = 10**6
LINTER_ENV_LIMIT = 40 * MB
PRE_COMMIT_ENV_LIMIT = 60 * MB
EMBEDDED = {"deltalake", "pyarrow", "pandas", "numpy", "datafusion"}
SPARK = {"pyspark", "delta-spark", "py4j"}

# Per distribution: the bytes of the files its RECORD lists (pip records the .pyc files it compiles), as JSON.
SIZES = """
import json, os
from importlib.metadata import distributions
sizes = {}
for dist in distributions():
    paths = {os.path.realpath(dist.locate_file(f)) for f in dist.files or ()}
    sizes[dist.metadata["Name"].lower()] = sum(os.path.getsize(p) for p in paths if os.path.isfile(p))
print(json.dumps(sizes))
"""


def sh(*args: str | Path, cwd: Path | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    env.update(PIP_DISABLE_PIP_VERSION_CHECK="1", NO_COLOR="1")
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip


def dist_sizes(bin_dir: Path) -> dict[str, int]:
    proc = sh(bin_dir / "python", "-I", "-c", SIZES)  # -I: not the source tree's upsertsink.egg-info
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def tree_size(root: Path) -> int:
    """The bytes of every file under root (symbolic links, e.g. the venv's python, not followed)."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def make_venv(root: Path) -> tuple[Path, dict[str, int]]:
    """A fresh `python -m venv`: its bin directory and what the venv itself holds (pip, setuptools...)."""
    made = sh(sys.executable, "-m", "venv", root)
    assert made.returncode == 0, made.stderr
    return root / "bin", dist_sizes(root / "bin")


def pip_install(bin_dir: Path, requirement: str | Path) -> None:
    installed = sh(bin_dir / "python", "-m", "pip", "install", "--quiet", requirement)
    assert installed.returncode == 0, installed.stderr


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
def light_env(tmp_path_factory, wheel) -> tuple[Path, dict[str, int]]:
    """A fresh venv with the built wheel installed without extras: its bin directory, and the size of each
    distribution that `pip install upsertsink` added (the venv's own pip and setuptools left out)."""
    bin_dir, seeded = make_venv(tmp_path_factory.mktemp("light") / "venv")
    pip_install(bin_dir, wheel)
    added = {name: size for name, size in dist_sizes(bin_dir).items() if name not in seeded}
    return bin_dir, added


@pytest.fixture(scope="module")
def light(light_env) -> Path:
    return light_env[0]


@pytest.fixture(scope="module")
def embedded(tmp_path_factory, wheel) -> Path:
    """A fresh venv with `upsertsink[embedded]` installed; returns its bin directory."""
    bin_dir, _ = make_venv(tmp_path_factory.mktemp("embedded") / "venv")
    pip_install(bin_dir, f"{wheel}[embedded]")
    return bin_dir


def test_the_wheel_holds_every_package(wheel):
    import zipfile

    names = zipfile.ZipFile(wheel).namelist()
    for module in ("upsertsink/diffing/compare.py", "upsertsink/io.py", "upsertsink/cli_common.py",
                   "upsertsink/__main__.py", "upsertsink/lint/command/cli.py", "upsertsink/testing/pytest_plugin.py",
                   "upsertsink/jvm/S3ConditionalPutLogStore.java"):
        assert module in names, module
    assert not [n for n in names if n.startswith(("lint/", "tests/"))]


def test_the_light_install_has_neither_spark_nor_arrow(light_env, tmp_path):
    light, added = light_env
    assert "upsertsink" in added and "libcst" in added and "sqlglot" in added
    assert not set(added) & (SPARK | EMBEDDED), sorted(added)
    for module in ("pyspark", "pyarrow", "pandas", "deltalake", "datafusion", "numpy"):
        assert sh(light / "python", "-I", "-c", f"import {module}").returncode == 1, module
    shown = sh(light / "upsertsink", "--version")
    assert shown.stdout == f"upsertsink {version('upsertsink')}\n"  # the same pyproject.toml
    code = ("import upsertsink, upsertsink.testing, upsertsink.lint as lint\n"
            "print(upsertsink.__file__, upsertsink.spark_session.__name__, lint.__name__)")
    imported = sh(light / "python", "-c", code, cwd=tmp_path)
    assert imported.returncode == 0, imported.stderr
    where, *names = imported.stdout.split()
    assert where.startswith(str(light.parent)), where  # the installed package, not the source tree
    assert names == ["spark_session", "upsertsink.lint"], imported.stdout


def test_the_linters_environment_is_under_40_mb(light_env):
    """What `pip install upsertsink` adds to an environment: upsertsink and its dependencies, every file pip
    wrote for them (the .pyc files included)."""
    _, added = light_env
    total = sum(added.values())
    largest_first = sorted(added.items(), key=lambda item: -item[1])
    by_size = ", ".join(f"{name} {size / MB:.1f}" for name, size in largest_first)
    print(f"\nthe linter's environment: {total / MB:.1f} MB ({by_size})")
    assert total < LINTER_ENV_LIMIT, f"{total / MB:.1f} MB: {by_size}"
    assert "rich" not in added and "pygments" not in added  # terminal niceties come with the extras


def test_the_pre_commit_environment_is_under_60_mb(tmp_path, wheel):
    """The environment pre-commit builds for the hook (`language: python`): `python -m virtualenv ENV`, then
    `ENV/bin/python -m pip install .` (pre-commit's languages/python.py); measured whole, with the pip and
    setuptools virtualenv seeds into it. It also lints."""
    if importlib.util.find_spec("virtualenv") is not None:  # pre-commit's own dependency
        virtualenv = Path(sys.executable)
    else:
        tool, _ = make_venv(tmp_path / "tool")
        pip_install(tool, "virtualenv")
        virtualenv = tool / "python"
    env = tmp_path / "py_env"
    made = sh(virtualenv, "-m", "virtualenv", env, cwd=Path("/"))
    assert made.returncode == 0, made.stdout + made.stderr
    pip_install(env / "bin", wheel)
    total = tree_size(env)
    print(f"\nthe pre-commit hook's environment: {total / MB:.1f} MB "
          f"(pip {dist_sizes(env / 'bin').get('pip', 0) / MB:.1f} MB of it)")  # fmt: skip
    assert total < PRE_COMMIT_ENV_LIMIT, f"{total / MB:.1f} MB"
    job = "import uuid\nUpsertSink('t', keys=['id']).write(df.withColumn('id', F.lit(str(uuid.uuid4()))))\n"
    (tmp_path / "job.py").write_text(job)
    lint = sh(env / "bin" / "upsertsink", "lint", "job.py", "--no-cache", cwd=tmp_path)
    assert lint.returncode == 1 and "ND003" in lint.stdout, lint.stdout + lint.stderr


def test_lint_works_in_the_light_install(light, tmp_path):
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
    module = sh(light / "python", "-m", "upsertsink.lint", "jobs", "--no-cache", cwd=tmp_path)
    assert module.returncode == 1 and "ND0" in module.stdout, module.stdout + module.stderr


def one_line_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("upsertsink: error: ") and proc.stderr.count("\n") == 1, proc.stderr
    return proc.stderr.strip()


def test_cli_entry_points_name_the_missing_extra(light, tmp_path):
    (tmp_path / "batch.csv").write_text("id\n1\n")
    (tmp_path / "t" / "_delta_log").mkdir(parents=True)
    for args in (
        ["write", "batch.csv", "--target", "t", "--key", "id"],
        ["status", "t"],
        ["maintain", "t"],
        ["diff", "batch.csv", "batch.csv", "--key", "id"],
        ["diff", "t", "batch.csv", "--key", "id", "--engine", "embedded"],
    ):
        message = one_line_error(sh(light / "upsertsink", *args, cwd=tmp_path))
        assert f"upsertsink {args[0]} needs the embedded extra" in message, message
        assert message.endswith(EMBEDDED_EXTRA), message
    for args in (  # on Spark: the spark extra, which brings the embedded one
        ["write", "batch.csv", "--target", "t", "--key", "id", "--engine", "spark"],
        ["write", "batch.csv", "--table", "s.t", "--key", "id"],
        ["status", "--table", "s.t"],
        ["diff", "batch.csv", "batch.csv", "--key", "id", "--engine", "spark"],
        ["replay-check", "jobs:build", "--key", "id"],
    ):
        message = one_line_error(sh(light / "upsertsink", *args, cwd=tmp_path))
        assert "needs Spark" in message and message.endswith(SPARK_EXTRA), (args, message)


@pytest.mark.parametrize(
    ("code", "error"),
    [
        ("from upsertsink import UpsertSink",
         "upsertsink.errors.EmbeddedNotInstalledError: upsertsink.UpsertSink needs the embedded extra"),
        ("import upsertsink; upsertsink.WriteResult",
         "upsertsink.errors.EmbeddedNotInstalledError: upsertsink.WriteResult needs the embedded extra"),
        ("import upsertsink; upsertsink.diff('a.csv', 'a.csv', 'id')",
         "upsertsink.errors.EmbeddedNotInstalledError: upsertsink.diff needs the embedded extra"),
        ("from upsertsink.testing import assert_frame_equal_by_key as eq; eq('a.csv', 'a.csv', 'id')",
         "upsertsink.errors.EmbeddedNotInstalledError: assert_frame_equal_by_key needs the embedded extra"),
        ("import upsertsink; upsertsink.spark_session()",
         "upsertsink.session.SparkNotInstalledError: upsertsink.spark_session() needs Spark"),
        ("import upsertsink; upsertsink.diff('a.csv', 'a.csv', 'id', engine='spark')",
         "upsertsink.session.SparkNotInstalledError: diff on Spark needs Spark"),
    ],
)  # fmt: skip
def test_python_entry_points_name_the_missing_extra(light, tmp_path, code, error):
    (tmp_path / "a.csv").write_text("id\n1\n")
    proc = sh(light / "python", "-c", f"{code}\nprint('no error')", cwd=tmp_path)
    last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else proc.stdout
    extra = SPARK_EXTRA if "Spark" in error else EMBEDDED_EXTRA
    assert last.startswith(error) and last.endswith(extra), proc.stderr
    if "EmbeddedNotInstalledError" in error:  # an ImportError too, and an UpsertSinkError
        check = (f"import upsertsink\ntry:\n    exec({code!r})\n"
                 "except ImportError as e:\n    print(isinstance(e, upsertsink.UpsertSinkError))")
        caught = sh(light / "python", "-c", check, cwd=tmp_path)
        assert caught.stdout == "True\n", caught.stdout + caught.stderr


def test_embedded_write_and_arrow_diff_with_the_embedded_extra(embedded, tmp_path):
    listed = sh(embedded / "python", "-m", "pip", "list", "--format", "json")
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert EMBEDDED <= names and not names & SPARK, names
    (tmp_path / "batch.csv").write_text("id,name\n1,a\n2,b\n")
    write = sh(embedded / "upsertsink", "write", "batch.csv", "--target", "t", "--key", "id",
               "--batch-id", "0", "--json", cwd=tmp_path)  # fmt: skip
    assert write.returncode == 0, write.stderr
    result = json.loads(write.stdout)
    assert (result["engine"], result["inserted"], result["skipped"]) == ("embedded", 2, False)
    status = sh(embedded / "upsertsink", "status", "t", "--json", cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["batches"] == {"upsertsink:t": 0}
    diff = sh(embedded / "upsertsink", "diff", "t", "batch.csv", "--key", "id", cwd=tmp_path)
    assert diff.returncode == 0, diff.stdout + diff.stderr
    assert "equal: 2 rows" in diff.stdout
    api = sh(embedded / "python", "-c", textwrap.dedent("""\
        import pandas as pd
        import upsertsink
        from upsertsink import UpsertSink

        batch = pd.DataFrame({"id": [2, 3], "name": ["B", "c"]})
        result = UpsertSink("t", keys=["id"]).write(batch, batch_id=1)
        d = upsertsink.diff("t", "batch.csv", "id")
        print(result.updated, result.inserted, d.equal, d.changed, d.only_in_left)
    """), cwd=tmp_path)  # fmt: skip
    assert api.returncode == 0, api.stderr
    assert api.stdout.split() == ["1", "1", "False", "1", "1"], api.stdout
    spark = one_line_error(sh(embedded / "upsertsink", "write", "batch.csv", "--target", "t", "--key", "id",
                              "--engine", "spark", cwd=tmp_path))  # fmt: skip
    assert spark.endswith(SPARK_EXTRA), spark


def test_the_ci_example_installs_upsertsink_with_a_working_step(light, wheel):
    """examples/ci/upsertsink-lint.yml: the default is a PEP 508 reference to upsertsink's git repository, and
    the install step works as written with the documented alternative, a wheel kept in the repository."""
    import yaml  # libcst's dependency, so always installed
    from packaging.requirements import Requirement

    workflow = yaml.safe_load((REPO / "examples" / "ci" / "upsertsink-lint.yml").read_text())
    requirement = Requirement(workflow["env"]["UPSERTSINK_PACKAGE"])
    assert requirement.name == "upsertsink" and not requirement.extras  # light: the linter only in CI
    assert requirement.url and requirement.url.startswith("git+https://")
    (step,) = [s for s in workflow["jobs"]["lint"]["steps"] if s.get("name") == "Install upsertsink"]
    env = {**os.environ, "UPSERTSINK_PACKAGE": str(wheel), "PATH": f"{light}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "-c", step["run"]], env=env, capture_output=True, text=True, timeout=300,
                          check=False)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "upsertsink" in proc.stdout  # "Requirement already satisfied" or "Successfully installed"
