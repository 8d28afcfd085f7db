"""Benchmark: the determinism linter against parsing the same files with libcst, side by side in one run.

Corpus: pyspark's own Python sources (about 270k lines) from the installed distribution. Measured:

- baseline: ``libcst.parse_module`` on every file once, in this process (what a libcst-based linter pays
  before it has looked at anything);
- cold: ``upsertsink lint`` on the corpus with an empty cache (parallel workers, pre-filter, cache write);
- warm: the same command again, the cache filled and no file changed.

cold and warm are measured twice: in-process (``upsertsink.lint.runner.lint_paths``) and as the real command
in a subprocess (interpreter start-up and imports included). Prints a table, writes bench/results/lint.json.
Usage: ``.venv/bin/python bench/bench_lint.py [--corpus DIR] [--repeat N]``
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def pyspark_dir() -> Path:
    spec = importlib.util.find_spec("pyspark")  # locates the package without importing it
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("pyspark is not installed: pass --corpus DIR")
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
    try:
        load = os.getloadavg()
    except OSError:
        load = None
    return {
        "cpu_model": model,
        "cores": os.cpu_count(),
        "memory_gib": mem_gib,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_at_start": load,
    }


def baseline(files: list[Path]) -> float:
    import libcst

    sources = [f.read_bytes() for f in files]
    start = time.perf_counter()
    for src in sources:
        try:
            libcst.parse_module(src)
        except Exception:  # noqa: BLE001, S112 - a file libcst cannot parse still counts as visited
            continue
    return time.perf_counter() - start


def in_process(corpus: Path, cache_root: Path) -> tuple[float, float, dict, dict]:
    from upsertsink.lint.config import Settings
    from upsertsink.lint.runner import lint_paths

    settings = Settings()
    settings.root = cache_root
    t0 = time.perf_counter()
    cold = lint_paths([corpus], settings)
    t1 = time.perf_counter()
    warm = lint_paths([corpus], settings)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, vars(cold.stats), vars(warm.stats)


def cli_run(corpus: Path, cwd: Path) -> float:
    # an explicit, empty config in the scratch folder: the cache then lives there (a fresh one per repeat),
    # not next to whatever pyproject.toml sits above the corpus
    config = cwd / "pyproject.toml"
    if not config.exists():
        config.write_text("[tool.upsertsink.lint]\n", encoding="utf-8")
    exe = Path(sys.executable).parent / "upsertsink"
    args = [str(corpus), "--format", "json", "--config", str(config)]
    cmd = [str(exe), "lint", *args] if exe.exists() else [sys.executable, "-m", "upsertsink.lint", *args]
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        raise SystemExit(f"lint failed: {proc.stderr}")
    json.loads(proc.stdout)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=None)
    parser.add_argument(
        "--repeat", type=int, default=2, help="cold/warm repetitions (the minimum is reported)"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "lint.json")
    args = parser.parse_args()
    corpus = (args.corpus or pyspark_dir()).resolve()
    files = sorted(p for p in corpus.rglob("*.py") if p.is_file())
    lines = sum(f.read_bytes().count(b"\n") for f in files)
    info = machine()
    print(f"corpus: {corpus} ({len(files)} files, {lines} lines)")
    print(
        f"machine: {info['cpu_model']}, {info['cores']} cores, {info['memory_gib']} GiB, "
        f"load {info['load_average_at_start']}"
    )

    parse_s = baseline(files)
    cold_ip, warm_ip, cold_cli, warm_cli = [], [], [], []
    stats: dict = {}
    for _ in range(max(1, args.repeat)):
        work = Path(tempfile.mkdtemp(prefix="bench-lint-"))
        try:
            c, w, cold_stats, warm_stats = in_process(corpus, work / "inproc")
            cold_ip.append(c)
            warm_ip.append(w)
            stats = {"cold": cold_stats, "warm": warm_stats}
            (work / "cli").mkdir()
            cold_cli.append(cli_run(corpus, work / "cli"))
            warm_cli.append(cli_run(corpus, work / "cli"))
        finally:
            shutil.rmtree(work, ignore_errors=True)

    rows = [
        ("libcst.parse_module, every file once (baseline)", parse_s),
        ("lint cold, in-process", min(cold_ip)),
        ("lint warm, in-process", min(warm_ip)),
        ("lint cold, `upsertsink lint` subprocess", min(cold_cli)),
        ("lint warm, `upsertsink lint` subprocess", min(warm_cli)),
    ]
    print()
    print(f"| {'measurement':<50} | {'seconds':>8} | {'x parse':>8} |")
    print(f"|{'-' * 52}|{'-' * 10}|{'-' * 10}|")
    for name, secs in rows:
        print(f"| {name:<50} | {secs:8.3f} | {secs / parse_s:8.3f} |")
    print()
    targets = {"cold": 0.3, "warm": 0.05}
    result = {
        "benchmark": "lint",
        "corpus": {"path": str(corpus), "files": len(files), "lines": lines},
        "machine": info,
        "repeat": args.repeat,
        "seconds": {
            "parse_baseline": parse_s,
            "cold_in_process": min(cold_ip),
            "warm_in_process": min(warm_ip),
            "cold_cli": min(cold_cli),
            "warm_cli": min(warm_cli),
            "cold_in_process_all": cold_ip,
            "warm_in_process_all": warm_ip,
            "cold_cli_all": cold_cli,
            "warm_cli_all": warm_cli,
        },
        "ratios": {
            "cold_in_process": min(cold_ip) / parse_s,
            "warm_in_process": min(warm_ip) / parse_s,
            "cold_cli": min(cold_cli) / parse_s,
            "warm_cli": min(warm_cli) / parse_s,
            "median_cold_cli": statistics.median(cold_cli) / parse_s,
        },
        "targets": targets,
        "met": {
            "cold_cli": min(cold_cli) / parse_s <= targets["cold"],
            "warm_cli": min(warm_cli) / parse_s <= targets["warm"],
        },
        "lint_stats": stats,
    }
    try:
        result["machine"]["load_average_at_end"] = os.getloadavg()
    except OSError:
        pass
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for key, limit in (("cold_cli", targets["cold"]), ("warm_cli", targets["warm"])):
        ratio = result["ratios"][key]
        print(
            f"{key}: {ratio:.3f}x parse time (target <= {limit}x): {'met' if ratio <= limit else 'NOT met'}"
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
