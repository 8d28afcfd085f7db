"""Helpers of the cluster / object-store tests (imported by name: `conftest` is ambiguous across folders)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
JOBS = HERE / "jobs"
for extra in (str(ROOT / "scripts"), str(JOBS)):
    if extra not in sys.path:
        sys.path.insert(0, extra)

import localcluster as lc

JOB_TIMEOUT = 900


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
