"""Benchmark: the determinism linter against ruff, side by side in one run (issue #24, item 5: speed).

Measured, every command a real subprocess (interpreter start-up and imports included), ours and ruff's
interleaved so that both see the same load:

- start-up: ``upsertsink lint`` on one small file (with the cache empty and filled), ``upsertsink --version``
  and ``python -c pass`` (the interpreter's own floor), ruff on the same file;
- two trees, cold and warm: ``upsertsink lint TREE`` against ``ruff check --select DTZ,S311 TREE`` (ruff's
  rules for wall-clock and random values, the nearest it has). Cold: ``--no-cache`` for both. Warm: the cache
  filled by an untimed run, nothing changed since;
- in process (``upsertsink.lint.run.runner.lint_paths``, no start-up) on pyspark, and ``libcst.parse_module`` on
  every pyspark file once (the earlier targets: cold <= 0.3x, warm <= 0.05x that parse).

The trees: job code, a stand-in for the ~70 public job files the issue measured (which are not in this
repository): tests/lint/fixtures/corpus, examples/ and tests/lint/fixtures/jobs, copied with their
modification times into a scratch folder; and pyspark's own sources in the virtualenv, linted in place.

Bytecode: the commands run as after ``pip install`` (compiled modules cached, here under a scratch
``PYTHONPYCACHEPREFIX``, one warm-up run first). Start-up is measured a second time in this shell's own
environment, which may set ``PYTHONDONTWRITEBYTECODE=1`` (then every run compiles the project's modules from
source, as an editable install here does). Wall clock and the CPU time of the command (user + system, its
worker processes included) are recorded; minimum and median of ``--repeat`` runs. ``--pythonpath DIR`` runs
another checkout of the package (e.g. the code before a change) instead of the installed one.

Usage: ``.venv/bin/python bench/bench_lint.py [--repeat N] [--out FILE] [--pythonpath DIR] [--no-parse]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
JOB_TREES = ["tests/lint/fixtures/corpus", "examples", "tests/lint/fixtures/jobs"]
SMALL_JOB = "from pyspark.sql import functions as F\n\ndf2 = df.withColumn('id', F.rand())\n"
# an upsert job as most are: a merge condition, a newer-wins update condition, columns as values
MERGE_JOB = (
    "from delta.tables import DeltaTable\n"
    "from pyspark.sql import functions as F\n\n"
    "updates = spark.read.table('staging').withColumn('loaded_at', F.current_timestamp())\n"
    "(\n"
    "    DeltaTable.forName(spark, 'orders').alias('t')\n"
    "    .merge(updates.alias('s'), 't.order_id = s.order_id')\n"
    "    .whenMatchedUpdate(condition='s.version > t.version', set={'status': 's.status'})\n"
    "    .whenNotMatchedInsertAll()\n"
    "    .execute()\n"
    ")\n"
)
# a project as most are: a .gitignore (lines of GitHub's Python template) and exclude globs in its config
PROJECT_GITIGNORE = "__pycache__/\n*.py[cod]\nbuild/\ndist/\n*.egg-info/\n.venv\n.pytest_cache/\n/site\n"
PROJECT_CONFIG = '[tool.upsertsink.lint]\nexclude = ["tests/**", "legacy/"]\n'
RUFF_SELECT = "DTZ,S311"
TARGETS = {"startup_s": 0.1, "warm_x_ruff": 2.0, "cold_x_ruff_pyspark": 10.0}


def pyspark_dir() -> Path:
    spec = importlib.util.find_spec("pyspark")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("pyspark is not installed (the spark extra): it is the benchmark's second tree")
    return Path(next(iter(spec.submodule_search_locations)))


def machine() -> dict:
    model = platform.processor() or "unknown"
    try:
        for line in subprocess.run(
            ["lscpu"], capture_output=True, text=True, check=False
        ).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except OSError:
        pass
    mem_gib = None
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    mem_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    ruff = subprocess.run(
        [ruff_exe(), "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    return {
        "cpu_model": model,
        "cores": os.cpu_count(),
        "memory_gib": mem_gib,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "ruff": ruff,
        "shell_PYTHONDONTWRITEBYTECODE": os.environ.get("PYTHONDONTWRITEBYTECODE"),
        "load_average_at_start": os.getloadavg(),
    }


def ruff_exe() -> str:
    exe = Path(sys.executable).parent / "ruff"
    return str(exe) if exe.exists() else "ruff"


def files_of(tree: Path) -> list[Path]:
    return sorted(p for p in tree.rglob("*") if p.suffix in (".py", ".pyi", ".ipynb") and p.is_file())


class Runner:
    """Runs commands in a scratch folder and records wall and CPU seconds per measurement name."""

    def __init__(self, scratch: Path, env: dict[str, str]) -> None:
        self.scratch = scratch
        self.env = env
        self.wall: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}

    def run(self, name: str | None, cmd: list[str], env: dict[str, str] | None = None) -> str:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(
            cmd, cwd=self.scratch, env=env or self.env, capture_output=True, text=True, check=False
        )
        elapsed = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr[-2000:]}")
        if name is not None:
            self.wall.setdefault(name, []).append(elapsed)
            cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            self.cpu.setdefault(name, []).append(cpu)
        return proc.stdout


def summary(samples: dict[str, list[float]]) -> dict[str, dict]:
    return {
        k: {"min": min(v), "median": statistics.median(v), "all": [round(x, 4) for x in v]}
        for k, v in samples.items()
    }


def in_process(corpus: Path, cache_root: Path) -> dict:
    from upsertsink.lint.run.config import Settings
    from upsertsink.lint.run.runner import lint_paths

    settings = Settings()
    settings.root = cache_root
    t0 = time.perf_counter()
    cold = lint_paths([corpus], settings)
    t1 = time.perf_counter()
    warm = lint_paths([corpus], settings)
    t2 = time.perf_counter()
    return {
        "cold_s": t1 - t0,
        "warm_s": t2 - t1,
        "cold_stats": vars(cold.stats),
        "warm_stats": vars(warm.stats),
    }


def parse_baseline(files: list[Path]) -> float:
    import libcst

    sources = [f.read_bytes() for f in files if f.suffix == ".py"]
    start = time.perf_counter()
    for src in sources:
        try:
            libcst.parse_module(src)
        except Exception:  # noqa: BLE001, S112 - a file libcst cannot parse still counts as visited
            continue
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per measurement (min and median)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "lint.json")
    parser.add_argument("--pythonpath", type=Path, default=None, help="run this checkout of the package")
    parser.add_argument("--no-parse", action="store_true", help="skip the libcst parse baseline (~9 s)")
    args = parser.parse_args()
    info = machine()
    pyspark = pyspark_dir()
    scratch = Path(tempfile.mkdtemp(prefix="bench-lint-"))
    try:
        result = measure(args, info, pyspark, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    result["machine"]["load_average_at_end"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")


def measure(args: argparse.Namespace, info: dict, pyspark: Path, scratch: Path) -> dict:
    jobs = scratch / "jobs"
    for rel in JOB_TREES:
        shutil.copytree(ROOT / rel, jobs / rel.replace("/", "_"))  # copy2: modification times kept
    small = scratch / "one" / "job.py"
    small.parent.mkdir()
    small.write_text(SMALL_JOB, encoding="utf-8")
    merge_job = small.parent / "merge_job.py"
    merge_job.write_text(MERGE_JOB, encoding="utf-8")
    hour_ago = time.time() - 3600
    os.utime(small, (hour_ago, hour_ago))
    project = scratch / "project"
    (project / "jobs").mkdir(parents=True)
    (project / ".gitignore").write_text(PROJECT_GITIGNORE, encoding="utf-8")
    (project / "pyproject.toml").write_text(PROJECT_CONFIG, encoding="utf-8")
    project_job = project / "jobs" / "job.py"
    project_job.write_text(SMALL_JOB, encoding="utf-8")
    config = scratch / "pyproject.toml"  # an explicit, empty config: our cache lives in the scratch folder
    config.write_text("[tool.upsertsink.lint]\n", encoding="utf-8")
    # a run record is written only when nothing it read changed just before the run (lint/run/runrecord.py), as
    # a real warm run finds it: the trees keep their times, the config is dated as the small file is
    os.utime(config, (hour_ago, hour_ago))
    trees = {"jobs": jobs, "pyspark": pyspark}
    tree_info = {}
    for name, tree in trees.items():
        files = files_of(tree)
        lines = sum(f.read_bytes().count(b"\n") for f in files)
        tree_info[name] = {"path": str(tree), "files": len(files), "lines": lines}
        print(f"tree {name}: {tree} ({len(files)} files, {lines} lines)")
    print(
        f"machine: {info['cpu_model']}, {info['cores']} cores, {info['memory_gib']} GiB, Python {info['python']},"
        f" {info['ruff']}, load {info['load_average_at_start']}"
    )

    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "UPSERTSINK_OUTPUT_FORMAT")
    }
    env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    shell_env = {k: v for k, v in os.environ.items() if k != "UPSERTSINK_OUTPUT_FORMAT"}
    if args.pythonpath is not None:
        for e in (env, shell_env):
            e["PYTHONPATH"] = str(args.pythonpath.resolve())
    r = Runner(scratch, env)
    us = [str(Path(sys.executable).parent / "upsertsink")]
    if not Path(us[0]).exists():
        us = [sys.executable, "-m", "upsertsink"]
    ruff = [ruff_exe(), "check", "--isolated", "--select", RUFF_SELECT]
    ruff_cache = ["--cache-dir", str(scratch / "ruff_cache")]
    lint = [*us, "lint", "--format", "json", "--config", str(config)]

    def ours(tree: Path, *extra: str) -> list[str]:
        return [*lint, str(tree), *extra]

    # warm-up: compile and cache the bytecode, fill both caches (untimed)
    for tree in (small, jobs, pyspark):
        r.run(None, ours(tree))
        r.run(None, [*ruff, *ruff_cache, str(tree)])
    r.run(None, [*us, "--version"])
    records = sorted(p.name for p in (scratch / ".upsertsink_cache").glob("run-*"))
    print(f"run records after the warm-up: {len(records)} (one per command that a warm run replays)")
    for _ in range(max(1, args.repeat)):
        r.run("python -c pass", [sys.executable, "-c", "pass"])
        r.run("upsertsink --version", [*us, "--version"])
        r.run("startup: lint one file, no cache", ours(small, "--no-cache"))
        r.run("startup: lint one file, cached", ours(small))
        r.run(
            "startup: lint one file in a project, no cache",
            [
                *us,
                "lint",
                "--format",
                "json",
                "--config",
                str(project / "pyproject.toml"),
                str(project_job),
                "--no-cache",
            ],
        )
        r.run("startup: lint one merge job, no cache", ours(merge_job, "--no-cache"))
        r.run("startup: ruff one file, no cache", [*ruff, "--no-cache", str(small)])
        r.run("startup: ruff one file, cached", [*ruff, *ruff_cache, str(small)])
        r.run("shell env: upsertsink --version", [*us, "--version"], env=shell_env)
        r.run("shell env: lint one file, no cache", ours(small, "--no-cache"), env=shell_env)
        r.run("shell env: lint one file, cached", ours(small), env=shell_env)
        for name, tree in trees.items():
            r.run(f"{name}: lint cold", ours(tree, "--no-cache"))
            r.run(f"{name}: ruff cold", [*ruff, "--no-cache", str(tree)])
            r.run(f"{name}: lint warm", ours(tree))
            r.run(f"{name}: ruff warm", [*ruff, *ruff_cache, str(tree)])
        r.run(
            "pyspark: ast.parse alone", [sys.executable, str(ROOT / "bench" / "parse_floor.py"), str(pyspark)]
        )
    wall, cpu = summary(r.wall), summary(r.cpu)

    ratios = {}
    for name in trees:
        for kind in ("cold", "warm"):
            for stat in ("min", "median"):
                ratios[f"{name} {kind} x ruff ({stat})"] = (
                    wall[f"{name}: lint {kind}"][stat] / wall[f"{name}: ruff {kind}"][stat]
                )
    met = {
        "startup: lint one file, no cache < 0.1 s (min)": wall["startup: lint one file, no cache"]["min"]
        < TARGETS["startup_s"],
        "startup: lint one file, cached < 0.1 s (min)": wall["startup: lint one file, cached"]["min"]
        < TARGETS["startup_s"],
        "startup: lint one merge job, no cache < 0.1 s (min)": wall["startup: lint one merge job, no cache"][
            "min"
        ]
        < TARGETS["startup_s"],
        "startup: lint one file in a project, no cache < 0.1 s (min)": wall[
            "startup: lint one file in a project, no cache"
        ]["min"]
        < TARGETS["startup_s"],
        "jobs warm <= 2x ruff (min)": ratios["jobs warm x ruff (min)"] <= TARGETS["warm_x_ruff"],
        "pyspark warm <= 2x ruff (min)": ratios["pyspark warm x ruff (min)"] <= TARGETS["warm_x_ruff"],
        "pyspark cold <= 10x ruff (min)": ratios["pyspark cold x ruff (min)"]
        <= TARGETS["cold_x_ruff_pyspark"],
    }

    sys.path.insert(0, str(args.pythonpath.resolve()) if args.pythonpath else str(ROOT))
    inproc = in_process(pyspark, scratch / "inproc")
    parse_s = None if args.no_parse else parse_baseline(files_of(pyspark))

    print()
    print(f"| {'measurement (seconds, wall)':<44} | {'min':>7} | {'median':>7} | {'CPU min':>7} |")
    print(f"|{'-' * 46}|{'-' * 9}|{'-' * 9}|{'-' * 9}|")
    for name in wall:
        print(
            f"| {name:<44} | {wall[name]['min']:7.3f} | {wall[name]['median']:7.3f} | {cpu[name]['min']:7.3f} |"
        )
    print()
    for stat in ("min", "median"):  # what CPython's parser alone takes of the cold target
        ratios[f"pyspark ast.parse alone x ruff cold ({stat})"] = (
            wall["pyspark: ast.parse alone"][stat] / wall["pyspark: ruff cold"][stat]
        )
    for name, value in ratios.items():
        print(f"{name}: {value:.2f}")
    print(f"in process, pyspark: cold {inproc['cold_s']:.3f} s, warm {inproc['warm_s']:.3f} s")
    if parse_s is not None:
        print(
            f"libcst parse of pyspark: {parse_s:.2f} s; cold CLI {wall['pyspark: lint cold']['min'] / parse_s:.3f}x,"
            f" warm CLI {wall['pyspark: lint warm']['min'] / parse_s:.3f}x"
        )
    for name, ok in met.items():
        print(f"{name}: {'met' if ok else 'NOT met'}")
    return {
        "benchmark": "lint",
        "code": str(args.pythonpath) if args.pythonpath else "installed (this checkout)",
        "trees": tree_info,
        "machine": info,
        "repeat": args.repeat,
        "ruff_select": RUFF_SELECT,
        "run_records_after_warmup": len(records),
        "seconds_wall": wall,
        "seconds_cpu": cpu,
        "ratios": ratios,
        "targets": TARGETS,
        "met": met,
        "in_process_pyspark": inproc,
        "libcst_parse_pyspark_s": parse_s,
        "x_parse": None
        if parse_s is None
        else {
            "cold_cli": wall["pyspark: lint cold"]["min"] / parse_s,
            "warm_cli": wall["pyspark: lint warm"]["min"] / parse_s,
            "cold_in_process": inproc["cold_s"] / parse_s,
            "warm_in_process": inproc["warm_s"] / parse_s,
        },
    }


if __name__ == "__main__":
    main()
