"""A Spark standalone cluster and an S3-compatible object store on 127.0.0.1, from the project's own venv.

    .venv/bin/python scripts/localcluster.py start [--dir .cluster] [--workers 2]
    .venv/bin/python scripts/localcluster.py status | env | stop [--dir .cluster]
    .venv/bin/python scripts/localcluster.py submit [--dir .cluster] [--cores N] JOB.py [ARGS...]
    .venv/bin/python scripts/localcluster.py kill-worker N | start-worker N     (fault injection)

Spark comes from pip's pyspark (``SPARK_HOME`` = the pyspark package folder, which ships ``bin/spark-class``
and ``bin/spark-submit``): one master and N workers (1 core and 1 GiB each, every worker with its own work
directory), started with ``spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``. The
object store is moto's server (``scripts/objectstore_server.py``) with one bucket. All ports are free ones
picked at start; everything a later command needs is in ``<dir>/cluster.json``. Every process is started in
a session of its own and stopped by its process-group id, never by name.

``submit`` runs ``spark-submit`` against the cluster with the Delta JARs and upsertsink's S3 LogStore shipped
(``--jars``), hadoop-aws and the AWS SDK on the driver's and executors' class path (the JARs are in the local
Maven repository, which every node of this cluster shares; see docs/deployment.md for a real cluster), and the
S3A settings for the object store. Nothing is fetched at run time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HOST = "127.0.0.1"
BUCKET = "lake"
ACCESS_KEY = "upsertsink"
SECRET_KEY = "upsertsink-secret"
REGION = "us-east-1"
WORKER_MEMORY = "1g"
EXECUTOR_MEMORY = "1g"
DAEMON_MEMORY = "256m"
START_TIMEOUT = 120.0


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


@dataclass
class Proc:
    pid: int
    log: str
    port: int = 0
    webui: int = 0
    work_dir: str = ""


@dataclass
class State:
    dir: str
    master_url: str = ""
    master: Proc | None = None
    workers: dict[str, Proc] = field(default_factory=dict)
    s3: Proc | None = None
    s3_endpoint: str = ""
    bucket: str = BUCKET
    connect: Proc | None = None  # a Spark Connect server whose Spark runs on the cluster
    connect_url: str = ""

    @staticmethod
    def path(run_dir: Path) -> Path:
        return run_dir / "cluster.json"

    def save(self) -> None:
        State.path(Path(self.dir)).write_text(json.dumps(asdict(self), indent=2))

    @staticmethod
    def load(run_dir: Path) -> State:
        raw = json.loads(State.path(run_dir).read_text())
        master = Proc(**raw["master"]) if raw.get("master") else None
        s3 = Proc(**raw["s3"]) if raw.get("s3") else None
        workers = {k: Proc(**v) for k, v in raw.get("workers", {}).items()}
        connect = Proc(**raw["connect"]) if raw.get("connect") else None
        return State(raw["dir"], raw["master_url"], master, workers, s3, raw["s3_endpoint"], raw["bucket"],
                     connect, raw.get("connect_url", ""))


# ---------------------------------------------------------------- processes


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(spark_home()),
        SPARK_LOCAL_IP=HOST,
        SPARK_DAEMON_MEMORY=DAEMON_MEMORY,
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
    )
    env.pop("PYSPARK_GATEWAY_PORT", None)
    env.pop("PYSPARK_GATEWAY_SECRET", None)
    return env


def _launch(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> int:
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=env or _env(), cwd=str(ROOT), start_new_session=True,
        )
    return proc.pid


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie child of ours is reaped and counts as gone)."""
    _reap(pid)
    return _state(pid) not in (None, "Z")


def _reap(pgid: int) -> None:
    """Collect the exit status of our finished children in group ``pgid`` (so they stop being zombies)."""
    with contextlib.suppress(ChildProcessError):  # none left in that group
        while os.waitpid(-pgid, os.WNOHANG)[0] > 0:
            continue  # reaped one; look for the next


def _state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def _group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group ``pgid``."""
    _reap(pgid)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry.name))
    return found


def _stop_group(pgid: int, sig: int = signal.SIGTERM, timeout: float = 15.0) -> None:
    """Stop the process group ``pgid`` (one this script started with a session of its own): ``sig``, then
    SIGKILL for whatever is left after ``timeout`` seconds."""
    for current, wait in ((sig, timeout), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, current)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _group_members(pgid):
                return
            time.sleep(0.2)


def _wait(what: str, check, timeout: float = START_TIMEOUT, log: str | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):  # not listening yet
            if check():
                return
        time.sleep(0.5)
    tail = ""
    if log and Path(log).is_file():
        tail = "\n".join(Path(log).read_text(errors="replace").splitlines()[-20:])
    raise RuntimeError(f"{what} did not come up within {timeout:.0f}s{': ' + log if log else ''}\n{tail}")


def master_json(state: State) -> dict:
    assert state.master is not None
    with urllib.request.urlopen(f"http://{HOST}:{state.master.webui}/json/", timeout=5) as resp:
        return json.loads(resp.read())


def alive_workers(state: State) -> int:
    return sum(1 for w in master_json(state).get("workers", []) if w.get("state") == "ALIVE")


def _start_worker(state: State, name: str) -> Proc:
    run_dir = Path(state.dir)
    work = run_dir / name / "work"
    work.mkdir(parents=True, exist_ok=True)
    port, webui = free_port(), free_port()
    log = run_dir / name / "worker.log"
    cmd = [
        str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.worker.Worker",
        "--host", HOST, "--port", str(port), "--webui-port", str(webui),
        "--cores", "1", "--memory", WORKER_MEMORY, "--work-dir", str(work), state.master_url,
    ]
    return Proc(_launch(cmd, log), str(log), port, webui, str(work))


def _port_open(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1):
            return True
    except OSError:
        return False


def start_connect(state: State) -> None:
    """A Spark Connect server (spark-submit of Spark's SparkConnectServer, with Delta) whose Spark runs on the
    cluster's master and workers, with the object store's settings when there is one. It holds one core of
    the cluster, so that jobs submitted beside it still get executors."""
    port = free_port()
    log = Path(state.dir) / "connect" / "connect-server.log"
    cmd = submit_command(state, "", [], cores=1, extra_conf={
        "spark.connect.grpc.binding.address": HOST, "spark.connect.grpc.binding.port": str(port),
    })[:-1]  # no job file: the server is the application
    at = cmd.index("--master")
    cmd[at:at] = ["--class", "org.apache.spark.sql.connect.service.SparkConnectServer", "--name", "upsertsink-connect"]
    env = {**_env(), "SPARK_DAEMON_MEMORY": "1g"}  # spark-submit sizes a server's driver as a daemon
    state.connect = Proc(_launch(cmd, log, env), str(log), port)
    state.connect_url = f"sc://{HOST}:{port}"
    state.save()
    _wait("the Spark Connect server", lambda: _port_open(port), log=str(log))


def stop_connect(state: State) -> None:
    """Stop the Connect server started by :func:`start_connect` (its cores go back to the cluster)."""
    if state.connect is not None:
        _stop_group(state.connect.pid)
        state.connect, state.connect_url = None, ""
        state.save()


def start(
    run_dir: Path, workers: int = 2, spark: bool = True, storage: bool = True, connect: bool = False
) -> State:
    """Start the master, the workers and the object store (what is asked for) and wait until they serve."""
    run_dir = run_dir.resolve()
    if State.path(run_dir).is_file():
        old = State.load(run_dir)
        procs = [p for p in [old.master, old.s3, *old.workers.values()] if p is not None]
        if any(_alive(p.pid) for p in procs):
            raise RuntimeError(f"a cluster is already running from {run_dir}: stop it first")
    run_dir.mkdir(parents=True, exist_ok=True)
    state = State(str(run_dir))
    state.save()
    try:
        if storage:
            port = free_port()
            log = run_dir / "objectstore.log"
            cmd = [sys.executable, str(ROOT / "scripts" / "objectstore_server.py"), "--port", str(port)]
            state.s3 = Proc(_launch(cmd, log), str(log), port)
            state.s3_endpoint = f"http://{HOST}:{port}"
            state.save()
        if spark:
            port, webui = free_port(), free_port()
            log = run_dir / "master" / "master.log"
            cmd = [
                str(spark_home() / "bin" / "spark-class"), "org.apache.spark.deploy.master.Master",
                "--host", HOST, "--port", str(port), "--webui-port", str(webui),
            ]
            state.master = Proc(_launch(cmd, log), str(log), port, webui)
            state.master_url = f"spark://{HOST}:{port}"
            state.save()
            _wait("the Spark master", lambda: master_json(state) is not None, log=str(log))
            for i in range(1, workers + 1):
                state.workers[f"worker-{i}"] = _start_worker(state, f"worker-{i}")
                state.save()
            _wait(f"{workers} Spark workers", lambda: alive_workers(state) >= workers,
                  log=state.workers[f"worker-{workers}"].log if workers else None)
        if storage:
            _wait("the object store", lambda: _s3_ready(state), log=state.s3.log if state.s3 else None)
            _create_bucket(state)
        if spark and connect:
            start_connect(state)
    except BaseException:
        stop(run_dir)
        raise
    return state


def _s3_ready(state: State) -> bool:
    try:
        with urllib.request.urlopen(state.s3_endpoint + "/", timeout=2):
            return True
    except urllib.error.HTTPError:
        return True  # it answered
    except OSError:
        return False


def _create_bucket(state: State) -> None:
    import boto3

    s3 = boto3.client(
        "s3", endpoint_url=state.s3_endpoint, aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY, region_name=REGION,
    )
    s3.create_bucket(Bucket=state.bucket)


def stop(run_dir: Path) -> list[str]:
    """Stop everything started from ``run_dir`` (workers first) and return what was stopped."""
    run_dir = run_dir.resolve()
    if not State.path(run_dir).is_file():
        return []
    state = State.load(run_dir)
    stopped = []
    if state.connect is not None:
        _stop_group(state.connect.pid)
        stopped.append("Spark Connect server")
    for name, proc in state.workers.items():
        _stop_group(proc.pid)
        stopped.append(name)
    for name, proc in (("master", state.master), ("object store", state.s3)):
        if proc is not None:
            _stop_group(proc.pid)
            stopped.append(name)
    for proc in state.workers.values():
        shutil.rmtree(proc.work_dir, ignore_errors=True)  # shipped JARs and executor logs of old apps
    State.path(run_dir).unlink(missing_ok=True)
    return stopped


def kill_worker(run_dir: Path, name: str) -> None:
    """SIGKILL a worker and the executors it launched (its process group): a machine lost mid-job."""
    state = State.load(run_dir.resolve())
    _stop_group(state.workers[name].pid, signal.SIGKILL, timeout=5)


def restart_worker(run_dir: Path, name: str) -> None:
    state = State.load(run_dir.resolve())
    old = state.workers[name]
    if _alive(old.pid):
        raise RuntimeError(f"{name} is running")
    state.workers[name] = _start_worker(state, name)
    state.save()
    want = len(state.workers)
    _wait(f"{name} to re-register", lambda: alive_workers(state) >= want, log=state.workers[name].log)


# ---------------------------------------------------------------- jobs


def s3_settings(state: State) -> dict[str, str]:
    """The object store as ``upsertsink.storage`` takes it."""
    return {"endpoint": state.s3_endpoint, "access_key": ACCESS_KEY, "secret_key": SECRET_KEY, "region": REGION}


def deltalake_options(state: State) -> dict[str, str]:
    from upsertsink.storage import s3_deltalake_options

    return s3_deltalake_options(**s3_settings(state))


def submit_command(state: State | None, job: str, args: list[str], cores: int = 2, master: str | None = None,
                   extra_conf: dict[str, str] | None = None) -> list[str]:
    """The ``spark-submit`` command line for ``job`` on the cluster (or on ``master``, e.g. ``local[2]``)."""
    from upsertsink import jars
    from upsertsink.storage import s3a_spark_conf

    delta = jars.delta_jars() or jars.ensure()
    s3 = jars.s3a_jars()
    if s3 is None:
        s3 = jars.ensure(s3a=True)[len(delta):]
    logstore = [p for p in s3 if p.name.startswith("upsertsink-delta-logstore-")]
    classpath = os.pathsep.join(str(p) for p in s3 if p not in logstore)
    conf = {
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.executor.extraClassPath": classpath,
        "spark.executor.memory": EXECUTOR_MEMORY,
        "spark.cores.max": str(cores),
        "spark.pyspark.python": sys.executable,
        "spark.pyspark.driver.python": sys.executable,
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "4",
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.log.level": "ERROR",
    }
    if state is not None and state.s3_endpoint:
        conf.update(s3a_spark_conf(**s3_settings(state)))
    conf.update(extra_conf or {})
    target = master or (state.master_url if state is not None else "local[*]")
    cmd = [
        str(spark_home() / "bin" / "spark-submit"), "--master", target, "--deploy-mode", "client",
        "--driver-memory", "1g", "--jars", ",".join(str(p) for p in [*delta, *logstore]),
        "--driver-class-path", classpath,
    ]
    for key, value in conf.items():
        cmd += ["--conf", f"{key}={value}"]
    return [*cmd, job, *args]


def submit_env() -> dict[str, str]:
    return _env()


# ---------------------------------------------------------------- command line


def _print_env(state: State) -> None:
    print(f"export UPSERTSINK_SPARK_MASTER={state.master_url}")
    if state.connect_url:
        print(f"export UPSERTSINK_SPARK_REMOTE={state.connect_url}")
    if state.s3_endpoint:
        print(f"export UPSERTSINK_S3_ENDPOINT={state.s3_endpoint}")
        print(f"export UPSERTSINK_S3_BUCKET={state.bucket}")
        for key, value in deltalake_options(state).items():
            print(f"export {key}={value}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/localcluster.py", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    default_dir = str(ROOT / ".cluster")
    sub = {}
    for name, text in (
        ("start", "start the master, the workers and the object store"),
        ("stop", "stop everything started from the run directory"),
        ("status", "print the cluster's state"),
        ("env", "print the object store's settings as shell exports"),
        ("submit", "spark-submit a job to the cluster"),
        ("kill-worker", "SIGKILL worker N and its executors"),
        ("start-worker", "start worker N again"),
    ):
        sub[name] = commands.add_parser(name, help=text)
        sub[name].add_argument("--dir", default=default_dir, help="run directory (default .cluster)")
    sub["start"].add_argument("--workers", type=int, default=2)
    sub["start"].add_argument("--no-storage", action="store_true", help="no object store")
    sub["start"].add_argument("--connect", action="store_true",
                              help="also a Spark Connect server in front of the cluster (sc://...)")
    sub["submit"].add_argument("--cores", type=int, default=2, help="spark.cores.max for the job (default 2)")
    sub["submit"].add_argument("job")
    sub["submit"].add_argument("args", nargs=argparse.REMAINDER)
    for name in ("kill-worker", "start-worker"):
        sub[name].add_argument("n", type=int)
    args = parser.parse_args(argv)
    run_dir = Path(args.dir)
    if args.command == "start":
        state = start(run_dir, args.workers, storage=not args.no_storage, connect=args.connect)
        assert state.master is not None
        print(f"Spark master    {state.master_url}  (web UI http://{HOST}:{state.master.webui})")
        for name, proc in state.workers.items():
            print(f"{name:15} pid {proc.pid}, 1 core, {WORKER_MEMORY}, work dir {proc.work_dir}")
        if state.s3_endpoint:
            print(f"object store    {state.s3_endpoint}  bucket s3a://{state.bucket}  key {ACCESS_KEY}  "
                  f"secret {SECRET_KEY}  region {REGION}")
        if state.connect_url:
            print(f"Spark Connect   {state.connect_url}  (upsertsink.spark_session(remote=\"{state.connect_url}\"))")
        here = f"--dir {run_dir}" if str(run_dir) != default_dir else ""
        print(f"submit a job:   .venv/bin/python scripts/localcluster.py submit {here} JOB.py [ARGS]")
        print(f"settings:       .venv/bin/python scripts/localcluster.py env {here}")
        print(f"stop it all:    make cluster-stop   (or .venv/bin/python scripts/localcluster.py stop {here})")
        return 0
    if args.command == "stop":
        stopped = stop(run_dir)
        print("stopped: " + (", ".join(stopped) if stopped else "nothing was running"))
        return 0
    if not State.path(run_dir.resolve()).is_file():
        print(f"upsertsink: error: no cluster is running from {run_dir} (run `make cluster`)", file=sys.stderr)
        return 2
    state = State.load(run_dir.resolve())
    if args.command == "status":
        print(json.dumps(asdict(state), indent=2))
        print(f"alive workers: {alive_workers(state)}")
        return 0
    if args.command == "env":
        _print_env(state)
        return 0
    if args.command == "submit":
        cmd = submit_command(state, args.job, args.args, cores=args.cores)
        return subprocess.call(cmd, env=submit_env(), cwd=str(ROOT))
    if args.command == "kill-worker":
        kill_worker(run_dir, f"worker-{args.n}")
        return 0
    restart_worker(run_dir, f"worker-{args.n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
