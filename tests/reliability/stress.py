"""Random kills and concurrent writers, compared with the model: the stress runs behind ``make stress``.

    python tests/reliability/stress.py [--kill-runs-embedded 50] [--kill-runs-spark 5] [--concurrency-runs 10]
                                       [--mixed-concurrency-runs 2] [--json bench/results/stress.json]

A kill run sends a change feed through a writer process, kills it with SIGKILL at a random moment (one to
three times), restarts it from a random earlier batch each time, and lets the last restart finish; the table
must then equal the model of the feed. A concurrency run starts four writer processes at once on a new table,
with deletes, either each with its own app id and its own share of the feed, or all with one app id sending
the same batches; every call must commit, skip, or raise ConcurrentWriteError, a re-send of what failed must
converge to the model, and with a shared app id every batch id must have exactly one commit. The concurrency
runs use four embedded writers; the mixed runs two Spark and two embedded writers on one table. The short versions
of both run in the test suite (tests/reliability/test_stress.py).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import WRITER, change_feed, model, record_of, run_writer, save_feed, table_state

from upsertsink.table.commit_log import decode_metadata
from upsertsink.table.files import last_batch_id

ALLOWED = {"written", "skipped", "conflict"}


@dataclass
class KillRun:
    engine: str
    seed: int
    kills: int = 0  # SIGKILLs that landed while the writer was still running
    restarts: int = 0
    converged: bool = False
    detail: str = ""


@dataclass
class ConcurrencyRun:
    engines: list[str]
    shared_app_id: bool
    late: bool = False
    calls: dict[str, int] = field(default_factory=dict)
    retries: int = 0  # extra commit attempts: lost races the writers retried
    converged: bool = False
    detail: str = ""


def _outcomes(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def kill_run(engine: str, seed: int, workdir: Path, max_delay: float) -> KillRun:
    """One feed, one to three SIGKILLs at random moments, restarts from earlier batches, then completion."""
    rng = random.Random(seed)
    feed = change_feed(seed, batches=10 if engine == "spark" else 24)
    feed_file = save_feed(feed, workdir / f"feed-{seed}.json")
    path = str(workdir / f"t-{seed}")
    results = workdir / f"outcomes-{seed}.jsonl"
    run = KillRun(engine, seed)
    for _ in range(rng.randint(1, 3)):
        done = last_batch_id(path, "feed")
        start = max(0, (-1 if done is None else done) + 1 - rng.randint(0, 4))
        cmd = [sys.executable, str(WRITER), "--path", path, "--feed", str(feed_file), "--engine", engine,
               "--start", str(start), "--result", str(results)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("UPSERTSINK_FAULT")}
        env.setdefault("UPSERTSINK_COMPACT_TOMBSTONES_AT", "3")  # kills can land in tombstone compactions
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.2, max_delay))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            run.kills += 1
        proc.wait()
        run.restarts += 1
    done = last_batch_id(path, "feed")
    start = max(0, (-1 if done is None else done) + 1 - rng.randint(0, 4))
    final = run_writer(path, feed_file, engine=engine, start=start, result_file=results, timeout=1200)
    bad = [o for o in _outcomes(results) if o["outcome"] not in ALLOWED - {"conflict"}]
    state = table_state(path) if last_batch_id(path, "feed") is not None else {}
    run.converged = final.returncode == 0 and not bad and state == model(feed) and (
        last_batch_id(path, "feed") == len(feed) - 1
    )
    if not run.converged:
        run.detail = f"rc={final.returncode} bad={bad[:3]} stderr={final.stderr[-500:]}"
    return run


def concurrency_run(
    workdir: Path, seed: int, shared_app_id: bool, engines: list[str], late: bool = False
) -> ConcurrencyRun:
    """Four writers (``engines`` cycled) at once on a new table, with deletes; then a re-send of failures.

    With ``late``, the writers share one app id and each sends the whole feed in its own shuffled order with
    ``late_batches="apply"``: batches below the marker are applied late, racing in-order ones."""
    feed = change_feed(seed, batches=16)
    path = str(workdir / f"c-{seed}-{int(shared_app_id)}{'-late' if late else ''}")
    writers = len(engines)
    shared_app_id = shared_app_id or late
    jobs = []
    for w, engine in enumerate(engines):
        share = feed if shared_app_id else feed[w::writers]
        feed_file = save_feed(share, workdir / f"cfeed-{seed}-{w}.json")
        app_id = "shared" if shared_app_id else f"writer-{w}"
        results = workdir / f"c-{seed}-{int(shared_app_id)}-{w}.jsonl"
        jobs.append((engine, feed_file, app_id, results, share))
    go = time.time() + (25 if "spark" in engines else 2)  # Spark writers need their JVM first
    procs = []
    for engine, feed_file, app_id, results, _ in jobs:
        cmd = [sys.executable, str(WRITER), "--path", path, "--feed", str(feed_file), "--engine", engine,
               "--app-id", app_id, "--result", str(results), "--start-at", str(go)]
        if late:
            order = list(range(len(feed)))
            random.Random(seed * 10 + len(procs)).shuffle(order)
            cmd += ["--order", ",".join(map(str, order)), "--late-batches", "apply"]
        env = {**os.environ, "UPSERTSINK_COMPACT_TOMBSTONES_AT": os.environ.get("UPSERTSINK_COMPACT_TOMBSTONES_AT", "3")}
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
    errors = [p.communicate(timeout=1800)[1] for p in procs]
    run = ConcurrencyRun(engines, shared_app_id, late)
    outcomes = [o for *_, results, _ in jobs for o in _outcomes(results)]
    for o in outcomes:
        run.calls[o["outcome"]] = run.calls.get(o["outcome"], 0) + 1
        run.retries += max(0, int(o.get("attempts") or 1) - 1)
    for engine, feed_file, app_id, results, _ in jobs:  # re-send: what raised ConcurrentWriteError lands now
        run_writer(path, feed_file, engine="embedded", app_id=app_id, result_file=results.with_suffix(".resend"),
                   late_batches="apply" if late else "refuse")
    resent = [o for *_, results, _ in jobs for o in _outcomes(results.with_suffix(".resend"))]
    if any(o["outcome"] not in ALLOWED for o in resent):
        run.detail += f" re-send: {[o for o in resent if o['outcome'] not in ALLOWED][:3]}"
    expected = model(feed)
    state = table_state(path)
    ok = set(run.calls) <= ALLOWED and all(p.returncode == 0 for p in procs) and state == expected
    if state != expected:
        differ = sorted(k for k in {*state, *expected} if state.get(k) != expected.get(k))
        run.detail += f" table differs from the model at {len(differ)} keys: " + ", ".join(
            f"{k}: {state.get(k)} (model {expected.get(k)})" for k in differ[:3])
    if shared_app_id:
        from deltalake import DeltaTable

        per_batch: dict[int, int] = {}
        for commit in DeltaTable(path).history():
            meta = decode_metadata(commit)
            if meta and meta.get("app_id") == "shared" and meta.get("batch_id") is not None:
                per_batch[meta["batch_id"]] = per_batch.get(meta["batch_id"], 0) + 1
        ok = ok and per_batch == {i: 1 for i in range(len(feed))}
        ok = ok and record_of(path, "shared") == ((0, len(feed) - 1),)
        if not ok:
            run.detail += f" commits per batch: {per_batch}"
    run.converged = ok
    if not ok:
        bad = [o for o in outcomes if o["outcome"] not in ALLOWED]
        run.detail += (f" calls={run.calls} return codes={[p.returncode for p in procs]}"
                       f" stderr={[e[-300:] for e in errors if e]} not allowed={bad[:3]}")
    return run


def machine() -> dict[str, object]:
    return {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform(),
            "load_average": os.getloadavg()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kill-runs-embedded", type=int, default=50)
    p.add_argument("--kill-runs-spark", type=int, default=5)
    p.add_argument("--concurrency-runs", type=int, default=10)
    p.add_argument("--mixed-concurrency-runs", type=int, default=2,
                   help="runs of four writers mixing engines (spark, embedded, spark, embedded)")
    p.add_argument("--json", default="bench/results/stress.json")
    args = p.parse_args()
    kills: list[KillRun] = []
    conc: list[ConcurrencyRun] = []
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="upsertsink-stress-") as tmp:
        work = Path(tmp)
        for i in range(args.kill_runs_embedded):
            kills.append(kill_run("embedded", 1000 + i, work, max_delay=4.0))
            print(f"kill run embedded #{i}: {asdict(kills[-1])}", flush=True)
        for i in range(args.kill_runs_spark):
            kills.append(kill_run("spark", 2000 + i, work, max_delay=45.0))
            print(f"kill run spark #{i}: {asdict(kills[-1])}", flush=True)
        for i in range(args.concurrency_runs):
            shared = i % 2 == 1
            conc.append(concurrency_run(work, 3000 + i, shared, ["embedded"] * 4, late=i % 3 == 2))
            print(f"concurrency run #{i}: {asdict(conc[-1])}", flush=True)
        for i in range(args.mixed_concurrency_runs):
            conc.append(concurrency_run(work, 4000 + i, i % 2 == 0, ["spark", "embedded"] * 2))
            print(f"mixed concurrency run #{i}: {asdict(conc[-1])}", flush=True)
    summary = {
        "machine": machine(),
        "seconds": round(time.time() - started, 1),
        "kill_runs": {
            engine: {
                "runs": sum(1 for r in kills if r.engine == engine),
                "kills": sum(r.kills for r in kills if r.engine == engine),
                "converged": sum(1 for r in kills if r.engine == engine and r.converged),
            }
            for engine in ("embedded", "spark")
        },
        "concurrency_runs": {
            "runs": len(conc),
            "converged": sum(1 for r in conc if r.converged),
            "mixed_engine_runs": sum(1 for r in conc if "spark" in r.engines),
            "mixed_engine_converged": sum(1 for r in conc if "spark" in r.engines and r.converged),
            "calls": {k: sum(r.calls.get(k, 0) for r in conc) for k in sorted({k for r in conc for k in r.calls})},
            "retries": sum(r.retries for r in conc),
        },
        "failures": [asdict(r) for r in kills if not r.converged] + [asdict(r) for r in conc if not r.converged],
    }
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "failures"}, indent=2))
    return 0 if not summary["failures"] else 1


if __name__ == "__main__":
    sys.exit(main())
