"""Run records (issue #24, item 5: speed): a warm ``upsertsink lint`` is answered from the record of the same
command, with the same output and exit code as the full run, before click or the linter load; and never
when anything the run read has changed since.

Every command runs in a fresh interpreter, as the ``upsertsink`` script does (:mod:`upsertsink.launch`).
A record is not written while a path it depends on changed during the run or just before it (50 ms, two
seconds for whole-second times), so the tests give every file they touch a modification time of its own in
the past (``age``): a change is then seen by its stat, never only by that margin.
"""

from __future__ import annotations

import itertools
import json
import marshal
import os
import random
import tempfile
import time
from pathlib import Path

import pytest
from lint_helpers import LAUNCH, launch, run_python
from upsertsink.lint.run import runrecord
from upsertsink.lint.run.cache import CACHE_DIR

# a fresh interpreter: the launcher's replay alone, reporting whether it served the command and what it loaded
REPLAY = """
import json, sys
out, args = sys.argv[1], sys.argv[2:]
from upsertsink.lint.run.runrecord import replay
code = replay(args)
with open(out, "w", encoding="utf-8") as fh:
    json.dump({"code": code, "modules": sorted(sys.modules)}, fh)
"""

_CLOCK = itertools.count()
_BASE = time.time() - 7 * 24 * 3600


def age(*paths: Path) -> None:
    """Give each path a modification time of its own, days old (as if edited long before the run)."""
    for p in paths:
        t = _BASE + next(_CLOCK) * 10
        os.utime(p, (t, t))


def age_tree(root: Path) -> None:
    age(root, *sorted(root.rglob("*")))


def replay(cwd: Path, *args: str, extra_env: dict[str, str] | None = None) -> tuple[dict, str, str]:
    """The launcher's replay alone: ({code: exit code or None when not served, modules}, stdout, stderr)."""
    fd, name = tempfile.mkstemp(suffix=".json")  # outside the project: nothing there changes
    os.close(fd)
    report = Path(name)
    proc = run_python(cwd, REPLAY, [str(report), *args], extra_env)
    assert report.stat().st_size, proc.stderr
    data = json.loads(report.read_text(encoding="utf-8"))
    report.unlink()
    return data, proc.stdout, proc.stderr


def records(root: Path) -> list[Path]:
    return sorted((root / CACHE_DIR).glob(runrecord.PREFIX + "*"))


def warm(root: Path, *args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    """Run the command until it has left a record (the first run makes the cache folder, which changes the
    project folder: it is aged, and the second run records)."""
    cwd = cwd or root
    result = launch(cwd, *args)
    age_tree(root)
    again = launch(cwd, *args)
    assert again == result
    return result


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """jobs/ (linted) imports lib/ (read for its exports), reads jobs/merge.sql and names queries/daily.sql,
    which is not there."""
    root = tmp_path / "proj"
    (root / "jobs").mkdir(parents=True)
    (root / "lib").mkdir()
    (root / "pyproject.toml").write_text('[tool.upsertsink.lint]\nkeys = ["id"]\n', encoding="utf-8")
    (root / "jobs" / "job.py").write_text(
        "from pyspark.sql import functions as F\n"
        "from lib.audit import add_audit\n\n"
        'df2 = add_audit(df.withColumn("id", F.rand()))\n'
        'df2.write.format("delta").mode("append").save("/lake/t")\n',
        encoding="utf-8",
    )
    (root / "jobs" / "sql_job.py").write_text(
        'from pathlib import Path\n\nspark.sql((Path(__file__).parent / "merge.sql").read_text())\n'
        'spark.sql(open("queries/daily.sql").read())\n',  # not there (yet)
        encoding="utf-8",
    )
    (root / "jobs" / "merge.sql").write_text("INSERT INTO t SELECT id, v FROM s\n", encoding="utf-8")
    (root / "jobs" / "sub").mkdir()
    (root / "jobs" / "sub" / "extra.py").write_text("x = 1\n", encoding="utf-8")
    (root / "jobs" / ".gitignore").write_text("# nothing ignored\n", encoding="utf-8")
    (root / "lib" / "sub").mkdir()
    (root / "lib" / "audit.py").write_text(
        "from pyspark.sql import functions as F\n\n\n"
        "def add_audit(df):\n"
        '    return df.withColumn("loaded_at", F.lit(1))\n',
        encoding="utf-8",
    )
    age_tree(root)
    return root


def test_a_warm_run_is_the_recorded_output_without_click_or_the_linter(project: Path) -> None:
    code, out, err = warm(project, "jobs")
    assert code == 1 and "ND002" in out
    assert len(records(project)) == 1
    served, r_out, r_err = replay(project, "jobs")
    assert (served["code"], r_out, r_err) == (code, out, err)
    loaded = served["modules"]
    for heavy in ("click", "upsertsink.lint.command.cli", "upsertsink.lint.run.runner", "ast", "tomllib"):
        assert heavy not in loaded, heavy
    # and the script gives the same through its launcher
    assert launch(project, "jobs") == (code, out, err)


@pytest.mark.parametrize(
    "args",
    [
        ("jobs",),
        ("jobs", "--format", "json"),
        ("jobs", "--statistics"),
        ("-q", "jobs/job.py"),
        ("jobs", "-e"),
    ],
)
def test_a_replay_is_byte_for_byte_the_full_run(project: Path, args: tuple[str, ...]) -> None:
    full = launch(project, *args, "--no-cache")
    assert warm(project, *args) == full
    served, out, err = replay(project, *args)
    assert (served["code"], out, err) == full


def _edit_same_size(root: Path) -> list[Path]:
    p = root / "jobs" / "job.py"
    p.write_text(p.read_text(encoding="utf-8").replace("F.rand()", "F.uuid()"), encoding="utf-8")
    return [p]


def _add_file(root: Path) -> list[Path]:
    p = root / "jobs" / "sub" / "new_job.py"  # below the folder named on the command line
    p.write_text("import uuid\nrow = {'id': str(uuid.uuid4())}\nt = df.withColumn('id', F.lit(row['id']))\n")
    return [root / "jobs" / "sub", p]


def _delete_file(root: Path) -> list[Path]:
    (root / "jobs" / "job.py").unlink()
    return [root / "jobs"]


def _gitignore(root: Path) -> list[Path]:
    p = root / "jobs" / ".gitignore"  # edited in place: its folder's listing does not change
    p.write_text("job.py\n", encoding="utf-8")
    return [p]


def _config(root: Path) -> list[Path]:
    p = root / "pyproject.toml"
    p.write_text('[tool.upsertsink.lint]\nkeys = ["id"]\nignore = ["ND002"]\n', encoding="utf-8")
    return [p]


def _imported_module(root: Path) -> list[Path]:
    p = root / "lib" / "audit.py"
    p.write_text(p.read_text(encoding="utf-8").replace("F.lit(1)", "F.current_timestamp()"), encoding="utf-8")
    return [p]


def _importing(root: Path, module: str) -> None:
    """job.py imports STAMP from ``module``, which does not exist yet (so it writes nothing known)."""
    job = root / "jobs" / "job.py"
    job.write_text(
        f"from pyspark.sql import functions as F\nfrom {module} import STAMP\n\n"
        "df2 = df.withColumn('loaded', F.lit(STAMP))\n"
        'df2.write.format("delta").mode("append").save("/lake/t")\n',
        encoding="utf-8",
    )
    age(job)


def _sql_file(root: Path) -> list[Path]:
    p = root / "jobs" / "merge.sql"
    p.write_text("INSERT INTO t SELECT uuid() AS id, v FROM s\n", encoding="utf-8")
    return [p]


def _sql_file_created(root: Path) -> list[Path]:
    folder = root / "queries"  # outside the linted folder: only the places looked at can tell
    folder.mkdir()
    p = folder / "daily.sql"
    p.write_text("INSERT INTO daily SELECT uuid() AS id, v FROM s\n", encoding="utf-8")
    return [folder, p]


CHANGES = {
    "a linted file edited (same size)": _edit_same_size,
    "a file added in a subfolder": _add_file,
    "a linted file deleted": _delete_file,
    "a .gitignore edited": _gitignore,
    "the configuration changed": _config,
    "an imported module outside the linted folder edited": _imported_module,
    "a .sql file the code reads edited": _sql_file,
    "a .sql file created where the code looked": _sql_file_created,
}


@pytest.mark.parametrize("change", list(CHANGES), ids=list(CHANGES))
def test_a_change_to_anything_the_run_read_is_never_served_from_the_record(
    project: Path, change: str
) -> None:
    before = warm(project, "jobs")
    touched = CHANGES[change](project)
    age(*touched)  # the change is old enough to be trusted: only its stat can tell
    served, out, err = replay(project, "jobs")
    assert served["code"] is None and out == "" and err == ""
    now = launch(project, "jobs", "--no-cache")
    assert now != before  # each change changes the report
    assert launch(project, "jobs") == now
    age_tree(project)
    assert launch(project, "jobs") == now  # recorded again
    served, out, err = replay(project, "jobs")
    assert (served["code"], out, err) == now


@pytest.mark.parametrize(
    "module", ["lib.stamps", "lib.sub.stamps", "newpkg.stamps"], ids=["beside", "deeper", "in a new package"]
)
def test_a_module_created_where_an_import_looked_is_seen(project: Path, module: str) -> None:
    _importing(project, module)
    before = warm(project, "jobs")
    p = project.joinpath(*module.split(".")).with_suffix(".py")
    p.parent.mkdir(exist_ok=True)
    p.write_text("import datetime\n\nSTAMP = datetime.datetime.now().isoformat()\n", encoding="utf-8")
    age(p.parent, p)
    served, _, _ = replay(project, "jobs")
    assert served["code"] is None
    now = launch(project, "jobs")
    assert now == launch(project, "jobs", "--no-cache") and now != before
    assert "ND001" in now[1] and "ND001" not in before[1]


def test_a_nearer_configuration_created_above_the_linted_folder_is_seen(project: Path) -> None:
    target = "jobs/sub"
    (project / "jobs" / "sub" / "extra.py").write_text(
        "from pyspark.sql import functions as F\n\n"
        'df2 = df.withColumn("id", F.rand())\n'
        'df2.write.format("delta").mode("append").save("/lake/t")\n'
    )
    age(project / "jobs" / "sub" / "extra.py")
    before = warm(project, target)
    cfg = project / "jobs" / "pyproject.toml"  # in a folder the run does not walk
    cfg.write_text('[tool.upsertsink.lint]\nignore = ["ND002"]\n', encoding="utf-8")
    age(project / "jobs", cfg)
    assert replay(project, target)[0]["code"] is None
    now = launch(project, target)
    assert now == launch(project, target, "--no-cache") and now != before
    assert "ND002" in before[1] and "ND002" not in now[1]


def test_the_key_is_the_command_the_folder_and_the_environment(project: Path) -> None:
    warm(project, "jobs")
    assert replay(project, "jobs", "--key", "id")[0]["code"] is None
    assert replay(project, "jobs", extra_env={"UPSERTSINK_OUTPUT_FORMAT": "json"})[0]["code"] is None
    assert replay(project / "jobs", ".")[0]["code"] is None  # the same files from another folder
    assert replay(project, "jobs", extra_env={runrecord.OFF_ENV: "1"})[0]["code"] is None
    # a run from a subfolder finds the record in the project's cache folder (the root is above it)
    code, out, err = warm(project, ".", cwd=project / "jobs")
    assert "job.py" in out and "jobs/" not in out
    served, r_out, r_err = replay(project / "jobs", ".")
    assert (served["code"], r_out, r_err) == (code, out, err)


@pytest.mark.parametrize(
    "args",
    [
        ("jobs", "--no-cache"),
        ("jobs", "--output-file", "report.txt"),
        ("jobs", "--format", "sarif"),
        ("jobs", "--diff"),
        ("jobs", "--show-files"),
    ],
)
def test_runs_that_write_files_or_read_more_than_their_files_leave_no_record(
    project: Path, args: tuple[str, ...]
) -> None:
    launch(project, *args)
    age_tree(project)
    launch(project, *args)
    assert records(project) == []
    assert replay(project, *args)[0]["code"] is None


def test_fix_is_never_replayed_and_standard_input_is_never_recorded(project: Path) -> None:
    warm(project, "jobs")
    before = records(project)
    assert replay(project, "jobs", "--fix")[0]["code"] is None
    stdin = "import random\nv = random.random()\n"
    proc = run_python(project, LAUNCH, ["lint", "-", "--stdin-filename", "x.py"], stdin=stdin)
    assert proc.returncode in (0, 1), proc.stderr
    assert records(project) == before


def test_clean_removes_the_records(project: Path) -> None:
    warm(project, "jobs")
    assert records(project)
    code, _, err = launch(project, "--clean")
    assert code == 0 and "Removed" in err
    assert records(project) == [] and replay(project, "jobs")[0]["code"] is None


def test_a_record_names_the_linter_sources_so_a_changed_linter_never_replays(project: Path) -> None:
    warm(project, "jobs")
    [record] = records(project)
    shape, paths, stats, _chunks, _code = marshal.loads(record.read_bytes())
    assert shape == runrecord.FORMAT
    assert os.path.realpath(runrecord.__file__) in paths
    assert str(project / "jobs" / "job.py") in paths and len(paths) == len(stats)


@pytest.mark.parametrize(
    ("before_start", "whole_seconds", "recorded"),
    [
        (-1.0, False, False),  # modified during the run
        (0.01, False, False),  # 10 ms before it: within a clock tick or two
        (0.3, False, True),
        (1.0, True, False),  # whole-second times (FAT, HFS+, ext3): two seconds
        (3.0, True, True),
    ],
)
def test_a_path_changed_just_before_the_run_keeps_it_from_being_recorded(
    tmp_path: Path, before_start: float, whole_seconds: bool, recorded: bool
) -> None:
    (tmp_path / CACHE_DIR).mkdir()
    f = tmp_path / "job.py"
    f.write_text("x = 1\n", encoding="utf-8")
    rec = runrecord.Recording(["job.py"])
    t_ns = rec.start_ns - int(before_start * 1e9)
    if whole_seconds:
        t_ns -= t_ns % 1_000_000_000
    elif t_ns % 1_000_000_000 == 0:
        t_ns -= 1  # a fraction of a second
    os.utime(f, ns=(t_ns, t_ns))
    rec.paths.add(str(f))
    assert rec.save(0, str(tmp_path)) is recorded
    assert bool(records(tmp_path)) is recorded


def test_runs_back_to_back_record_themselves(project: Path) -> None:
    """The first run makes the cache folder in the folder it walks; a run started 50 ms after that records
    (a benchmark's warm runs right after its first run are replayed)."""
    first = launch(project, ".")
    for _ in range(3):  # each run starts at least an interpreter's start-up after the one before ends
        assert launch(project, ".") == first
    assert records(project)
    served, out, err = replay(project, ".")
    assert (served["code"], out, err) == first


def test_a_corrupt_record_is_ignored(project: Path) -> None:
    expected = warm(project, "jobs")
    [record] = records(project)
    record.write_bytes(b"\x00not a record")
    assert replay(project, "jobs")[0]["code"] is None
    assert launch(project, "jobs") == expected


OPS = ["edit", "add", "delete", "gitignore", "config", "helper", "sql", "noop"]


@pytest.mark.parametrize("seed", [1, 2])
def test_random_changes_and_replays_agree_with_a_run_without_any_cache(project: Path, seed: int) -> None:
    """A model check: after each random change (or none), the launched command (replayed or not) and the
    run without any cache report the same."""
    rng = random.Random(seed)
    jobs = project / "jobs"
    for step in range(8):
        op = rng.choice(OPS)
        touched: list[Path] = []
        if op == "edit":
            p = jobs / rng.choice(["job.py", "sql_job.py", "extra.py"])
            old = p.read_text(encoding="utf-8") if p.exists() else ""
            p.write_text(old + rng.choice(["x = 1\n", "y = random.random()\nimport random\n", "# c\n"]))
            touched = [p, jobs]
        elif op == "add":
            p = jobs / f"step{step}.py"
            p.write_text(rng.choice(["import uuid\nk = uuid.uuid4()\n", "a = 1\n"]), encoding="utf-8")
            touched = [p, jobs]
        elif op == "delete":
            victims = sorted(jobs.glob("step*.py"))
            if victims:
                rng.choice(victims).unlink()
            touched = [jobs]
        elif op == "gitignore":
            p = jobs / ".gitignore"
            p.write_text(rng.choice(["", "step*.py\n", "extra.py\n"]), encoding="utf-8")
            touched = [p, jobs]
        elif op == "config":
            p = project / "pyproject.toml"
            body = rng.choice(['keys = ["id"]\n', 'keys = ["id"]\nignore = ["ND001"]\n', ""])
            p.write_text("[tool.upsertsink.lint]\n" + body, encoding="utf-8")
            touched = [p]
        elif op == "helper":
            p = project / "lib" / "audit.py"
            text = p.read_text(encoding="utf-8")
            swap = ("F.lit(1)", "F.current_timestamp()")
            p.write_text(text.replace(*swap) if swap[0] in text else text.replace(*swap[::-1]))
            touched = [p]
        elif op == "sql":
            p = jobs / "merge.sql"
            p.write_text(
                rng.choice(["INSERT INTO t SELECT uuid() AS id FROM s\n", "INSERT INTO t SELECT 1\n"])
            )
            touched = [p]
        age(*touched)
        expected = launch(project, "jobs", "--no-cache")
        assert launch(project, "jobs") == expected, (step, op)
        age_tree(project)
        assert launch(project, "jobs") == expected, (step, op)
        served, out, err = replay(project, "jobs")
        assert (served["code"], out, err) == expected, (step, op)
