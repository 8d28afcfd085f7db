"""The cluster / object-store suite: a real Spark standalone cluster and moto's S3 server on 127.0.0.1.

Which tests run is chosen with ``UPSERTSINK_CLUSTER_SUITE``:

- ``short`` (default; what the README's ``make test`` runs): one cluster job writing to S3, one object-store
  write per engine, one concurrent pair of writers (one per engine), the server's conditional-write check;
- ``full`` (``make cluster-test``): also the examples on the cluster against ``local[*]``, four mixed-engine
  writers with deletes, a worker killed in the middle of a write, and the LogStore's refusal of a taken commit;
- ``off``: none of it.

The cluster and the server are started once per test run, in a temporary folder, and always stopped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
JOBS = HERE / "jobs"
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(JOBS))

import localcluster as lc

SUITE = os.environ.get("UPSERTSINK_CLUSTER_SUITE", "short").strip().lower()
JOB_TIMEOUT = 900


def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for item in items:
        if HERE not in Path(str(item.fspath)).resolve().parents:
            keep.append(item)
            continue
        item.add_marker(pytest.mark.cluster)
        full_only = item.get_closest_marker("cluster_full") is not None
        if SUITE == "off" or (full_only and SUITE != "full"):
            drop.append(item)
        else:
            keep.append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    """A master, two workers (1 core, 1 GiB each) and the object store; stopped at the end whatever happens."""
    run_dir = tmp_path_factory.mktemp("cluster")
    try:
        state = lc.start(run_dir, workers=2)
        yield state
    finally:
        lc.stop(run_dir)


@pytest.fixture
def s3_path(cluster):
    """A fresh table URI in the bucket, for one test."""
    return f"s3a://{cluster.bucket}/{uuid.uuid4().hex[:12]}"


@pytest.fixture
def dl_options(cluster) -> dict[str, str]:
    return lc.deltalake_options(cluster)


def submit(cluster, job: str | Path, *args: str, cores: int = 2, master: str | None = None,
           env: dict[str, str] | None = None, wait: bool = True) -> subprocess.CompletedProcess | subprocess.Popen:
    """spark-submit ``job`` to the cluster (or ``master``); with ``wait`` its completed process."""
    cmd = lc.submit_command(cluster, str(job), list(args), cores=cores, master=master)
    full_env = {**lc.submit_env(), **(env or {})}
    if not wait:
        return subprocess.Popen(cmd, env=full_env, cwd=str(ROOT), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    return subprocess.run(cmd, env=full_env, cwd=str(ROOT), capture_output=True, text=True, timeout=JOB_TIMEOUT,
                          check=False)


def writer_args(target: str, app_id: str, writer: int, result: Path, **kw) -> list[str]:
    args = ["--target", target, "--app-id", app_id, "--writer", str(writer), "--result", str(result)]
    for key, value in kw.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    return args


def embedded_writer(target: str, app_id: str, writer: int, result: Path, options: dict[str, str],
                    **kw) -> subprocess.Popen:
    cmd = [sys.executable, str(JOBS / "writer.py"), "--engine", "embedded",
           *writer_args(target, app_id, writer, result, options=json.dumps(options), **kw)]
    return subprocess.Popen(cmd, cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def spark_writer(cluster, target: str, app_id: str, writer: int, result: Path, cores: int = 1,
                 **kw) -> subprocess.Popen:
    return submit(cluster, JOBS / "writer.py", "--engine", "spark",
                  *writer_args(target, app_id, writer, result, **kw), cores=cores, wait=False)


def finish(procs: list[subprocess.Popen], timeout: float = JOB_TIMEOUT) -> list[str]:
    """Wait for every process; return their outputs (and fail naming the one that exited non-zero)."""
    outputs = []
    deadline = time.monotonic() + timeout
    for proc in procs:
        try:
            out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            raise AssertionError(f"writer {proc.args[-1]} timed out:\n{out[-3000:]}") from None
        assert proc.returncode == 0, f"{' '.join(map(str, proc.args[-12:]))} exited {proc.returncode}:\n{out[-5000:]}"
        outputs.append(out)
    return outputs


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def start_together(ready: list[Path], go: Path, procs: list[subprocess.Popen], timeout: float = 300) -> None:
    """Wait until every writer is ready (Spark jobs take a while to start), then let them all go at once."""
    deadline = time.monotonic() + timeout
    while not all(p.exists() for p in ready):
        dead = [p for p in procs if p.poll() is not None]
        if dead:
            out = dead[0].communicate()[0]
            raise AssertionError(f"a writer exited before it was ready ({dead[0].returncode}):\n{out[-5000:]}")
        if time.monotonic() > deadline:
            raise AssertionError("writers were not ready in time")
        time.sleep(0.2)
    go.write_text("go")
