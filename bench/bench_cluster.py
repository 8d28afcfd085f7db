"""Cluster and object-store figures: the same sink jobs on local[*] and on a standalone cluster, on local disk
and on S3 (moto on 127.0.0.1), four mixed-engine writers at once, and a worker killed mid-write.

    .venv/bin/python bench/bench_cluster.py [--runs 3] [--concurrent-runs 3] [--kill-runs 1] [--output F]

Starts its own cluster and S3 server (scripts/localcluster.py) in a temporary folder and stops them at the
end. Each run checks that the table converged to the model (the reliability harness's feeds); times are wall
clock on this machine, with the load average recorded next to them. Prints a table; writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "cluster"))

import clusterlib as C
import feed as F
from clusterlib import lc

from upsertsink import UpsertSink
from upsertsink.table.commit_log import decode_metadata


def spark_job(state, target: str, out: Path, master: str | None, app_id: str = "bench") -> dict:
    result = out / f"{uuid.uuid4().hex[:8]}.jsonl"
    started = time.monotonic()
    proc = C.submit(state, C.JOBS / "writer.py", "--engine", "spark",
                    *C.writer_args(target, app_id, 0, result), master=master)
    wall = time.monotonic() - started
    if proc.returncode != 0:
        raise RuntimeError(proc.stdout[-3000:] + proc.stderr[-3000:])
    calls = C.records(result)
    return {"wall_s": round(wall, 2), "writes_s": round(sum(c["seconds"] for c in calls), 2),
            "calls": [c["outcome"] for c in calls]}


def embedded_job(target: str, options: dict[str, str] | None) -> dict:
    sink = UpsertSink(target, F.KEYS, sequence_by=F.SEQUENCE, delete_when=F.DELETE_WHEN, app_id="bench",
                      storage_options=options)
    started = time.monotonic()
    calls = [sink.write(F.arrow_batch(rows), batch_id=i) for i, rows in enumerate(F.feed(0))]
    return {"wall_s": round(time.monotonic() - started, 2), "writes_s": round(time.monotonic() - started, 2),
            "calls": ["skipped" if c.skipped else "committed" for c in calls]}


def converged(target: str, options: dict[str, str] | None, *writers: int, extra: dict | None = None) -> bool:
    try:
        return F.state(target, options) == {**F.expected(*writers), **(extra or {})}
    except AssertionError as err:  # a duplicate key: not converged, and said so
        print(f"not converged: {err}", flush=True)
        return False


def concurrent_run(state, out: Path) -> dict:
    options = lc.deltalake_options(state)
    target = f"s3a://{state.bucket}/conc-{uuid.uuid4().hex[:8]}"
    seed = {"id": 10_000, "val": "seed", "seq": 0, "op": "U"}
    UpsertSink(target, F.KEYS, sequence_by=F.SEQUENCE, delete_when=F.DELETE_WHEN, app_id="seed",
               storage_options=options).write(F.arrow_batch([seed]), batch_id=0)
    plan = [("spark", "shared", 0), ("embedded", "shared", 0), ("spark", "own-s", 1), ("embedded", "own-e", 2)]
    go = out / f"go-{uuid.uuid4().hex[:6]}"
    ready = [out / f"ready-{uuid.uuid4().hex[:6]}" for _ in plan]
    results = [out / f"w-{uuid.uuid4().hex[:6]}.jsonl" for _ in plan]
    procs = []
    for i, (engine, app_id, writer) in enumerate(plan):
        if engine == "spark":
            procs.append(C.spark_writer(state, target, app_id, writer, results[i], ready=ready[i], go=go))
        else:
            procs.append(C.embedded_writer(target, app_id, writer, results[i], options, ready=ready[i], go=go))
    C.start_together(ready, go, procs)
    started = time.monotonic()
    C.finish(procs)
    wall = time.monotonic() - started
    calls = [c for r in results for c in C.records(r)]
    outcomes: dict[str, int] = {}
    for c in calls:
        key = c["outcome"] if "error" not in c else f"{c['outcome']}:{c['error']}"
        outcomes[key] = outcomes.get(key, 0) + 1
    for c in calls:  # a writer that gave up is re-sent from there, as an operator would
        if c["outcome"] == "gave up":
            sink = UpsertSink(target, F.KEYS, sequence_by=F.SEQUENCE, delete_when=F.DELETE_WHEN,
                              app_id=c["app_id"], storage_options=options)
            for b in range(c["batch_id"], F.BATCHES):
                sink.write(F.arrow_batch(F.feed(c["writer"])[b]), batch_id=b)
    once = True
    counts: dict[tuple, int] = {}
    from deltalake import DeltaTable

    for commit in DeltaTable(target, storage_options=options).history():
        meta = decode_metadata(commit)
        if meta and meta.get("batch_id") is not None:  # repair commits carry no batch id
            key = (meta.get("app_id"), meta["batch_id"])
            counts[key] = counts.get(key, 0) + 1
    for app_id in ("shared", "own-s", "own-e"):
        once &= all(counts.get((app_id, b)) == 1 for b in range(F.BATCHES))
    ok = converged(target, options, 0, 1, 2, extra={10_000: ("seed", 0)}) and once
    bad = [c for c in calls if "error" in c and c["error"] != "ConcurrentWriteError"]
    return {"wall_s": round(wall, 2), "converged": ok and not bad, "outcomes": outcomes,
            "unexpected_errors": [f"{c['error']}: {c['message'][:200]}" for c in bad]}


def kill_run(state, out: Path, rows: int) -> dict:
    import bigwrite

    options = lc.deltalake_options(state)
    target = f"s3a://{state.bucket}/kill-{uuid.uuid4().hex[:8]}"
    progress, first = out / f"p-{uuid.uuid4().hex[:6]}", out / f"k-{uuid.uuid4().hex[:6]}.jsonl"
    job = C.submit(state, C.JOBS / "bigwrite.py", target, "--rows", str(rows), "--progress", str(progress),
                   "--result", str(first), wait=False)
    while not (progress.exists() and progress.read_text() == "batch 1"):
        if job.poll() is not None:
            raise RuntimeError(job.communicate()[0][-3000:])
        time.sleep(0.2)
    time.sleep(3)
    lc.kill_worker(Path(state.dir), "worker-1")
    job.communicate(timeout=900)
    records = C.records(first)
    lc.restart_worker(Path(state.dir), "worker-1")
    again = out / f"r-{uuid.uuid4().hex[:6]}.jsonl"
    proc = C.submit(state, C.JOBS / "bigwrite.py", target, "--rows", str(rows), "--result", str(again))
    got = __import__("deltalake").DeltaTable(target, storage_options=options).to_pandas(columns=["id", "seq"])
    want = bigwrite.expected(rows, 3)
    ok = proc.returncode == 0 and sorted(got["id"]) == want["id"].tolist() and got["id"].is_unique
    last = records[-1] if records else {}
    return {"first_exit": job.returncode, "first_outcomes": [r["outcome"] for r in records],
            "error": f"{last.get('error')}: {last.get('message', '')[:300]}" if last.get("error") else None,
            "resend": [r["outcome"] for r in C.records(again)], "converged": bool(ok)}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--concurrent-runs", type=int, default=3)
    parser.add_argument("--kill-runs", type=int, default=1)
    parser.add_argument("--kill-rows", type=int, default=300_000)
    parser.add_argument("--output", default=str(ROOT / "bench" / "results" / "cluster.json"))
    args = parser.parse_args()

    report: dict = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                "load_before": os.getloadavg()}, "single": {}, "concurrent": [], "kill": []}
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as tmp:
        out = Path(tmp)
        started = time.monotonic()
        state = lc.start(out / "cluster", workers=2)
        report["cluster_start_s"] = round(time.monotonic() - started, 2)
        try:
            options = lc.deltalake_options(state)
            configs = {
                "spark local[2], local disk": lambda: (str(out / f"t-{uuid.uuid4().hex[:8]}"), None, "local[2]"),
                "spark cluster, local disk": lambda: (str(out / f"t-{uuid.uuid4().hex[:8]}"), None, None),
                "spark local[2], S3": lambda: (f"s3a://{state.bucket}/{uuid.uuid4().hex[:8]}", options, "local[2]"),
                "spark cluster, S3": lambda: (f"s3a://{state.bucket}/{uuid.uuid4().hex[:8]}", options, None),
                "embedded, local disk": lambda: (str(out / f"t-{uuid.uuid4().hex[:8]}"), None, "embedded"),
                "embedded, S3": lambda: (f"s3a://{state.bucket}/{uuid.uuid4().hex[:8]}", options, "embedded"),
            }
            for run in range(args.runs):
                for name, make in configs.items():
                    target, opts, master = make()
                    if master == "embedded":
                        res = embedded_job(target, opts)
                    else:
                        res = spark_job(state, target, out, master)
                    res["converged"] = converged(target, opts, 0)
                    report["single"].setdefault(name, []).append(res)
                    print(f"run {run + 1} {name}: {res}", flush=True)
            for run in range(args.concurrent_runs):
                res = concurrent_run(state, out)
                report["concurrent"].append(res)
                print(f"concurrent run {run + 1}: {res}", flush=True)
            for run in range(args.kill_runs):
                res = kill_run(state, out, args.kill_rows)
                report["kill"].append(res)
                print(f"worker-kill run {run + 1}: {res}", flush=True)
        finally:
            lc.stop(out / "cluster")
    report["machine"]["load_after"] = os.getloadavg()

    print(f"\n{'configuration':30} {'runs':>4} {'converged':>9} {'job wall s (median)':>20} {'writes s (median)':>18}")
    for name, runs in report["single"].items():
        walls = sorted(r["wall_s"] for r in runs)
        writes = sorted(r["writes_s"] for r in runs)
        print(f"{name:30} {len(runs):>4} {sum(r['converged'] for r in runs):>9} "
              f"{walls[len(walls) // 2]:>20.1f} {writes[len(writes) // 2]:>18.1f}")
    conc = report["concurrent"]
    print(f"4 mixed writers on S3: {sum(r['converged'] for r in conc)}/{len(conc)} converged")
    kills = report["kill"]
    print(f"worker killed mid-write: {sum(r['converged'] for r in kills)}/{len(kills)} converged after a re-send")
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
