"""spark_session(): a local Delta-enabled SparkSession, started quietly; require_spark(): the Spark extra.

pyspark and delta-spark are the optional extra ``upsertsink[spark]``: the linter, the embedded engine and
the Arrow diff work without them. Every Spark entry point calls :func:`require_spark` first, so a missing
extra is one clear error instead of an ``ImportError`` from deep inside.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import select
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Self

from upsertsink.errors import UpsertSinkError
from upsertsink.frames import is_connect  # noqa: F401 - also known by this name

log = logging.getLogger(__name__)

SPARK_EXTRA_INSTALL = 'pip install "upsertsink[spark]"'
CONNECT_EXTRA_INSTALL = 'pip install "upsertsink[connect]"'
# The Connect client's own packages (pyspark's ``connect`` extra); the server side is the Spark extra.
_CONNECT_MODULES = (("grpc", "grpcio"), ("grpc_status", "grpcio-status"), ("google.rpc", "googleapis-common-protos"),
                    ("zstandard", "zstandard"))

_DELTA_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    # Timestamps as parquet's microsecond type, not INT96: deltalake's readers (the embedded engine, the Arrow
    # diff) turn INT96 into nanoseconds and wrap dates outside 1677-2262 (issue #22). A user's conf wins.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}


class SparkNotInstalledError(UpsertSinkError, ImportError):
    """A Spark feature was used but pyspark or delta-spark (the ``upsertsink[spark]`` extra) is missing."""


def require_spark(feature: str = "this", *, delta: bool = True) -> None:
    """Raise :class:`SparkNotInstalledError` naming ``pip install "upsertsink[spark]"`` when pyspark (and,
    with ``delta``, delta-spark's ``delta`` package) cannot be imported. ``feature`` names what needs them."""
    missing = []
    for module, dist in (("pyspark", "pyspark"), ("delta", "delta-spark")):
        if module == "delta" and not delta:
            continue
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(dist)
    if missing:
        raise SparkNotInstalledError(
            f"{feature} needs Spark, but {' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
            f"not installed: {SPARK_EXTRA_INSTALL}"
        )


def require_connect(feature: str = "this") -> None:
    """Raise :class:`SparkNotInstalledError` naming ``pip install "upsertsink[connect]"`` when the Spark Connect
    client's packages (grpcio and friends, or pyspark itself) are missing."""
    missing = [] if spark_installed() else ["pyspark"]
    for module, dist in _CONNECT_MODULES:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(dist)
    if missing:
        raise SparkNotInstalledError(
            f"{feature} needs the Spark Connect client, but {', '.join(missing)} "
            f"{'is' if len(missing) == 1 else 'are'} not installed: {CONNECT_EXTRA_INSTALL}"
        )


_connect_lock = threading.Lock()
_connect_url: dict[int, str] = {}  # id(SparkContext) -> the URL of the Connect server started on it


def _local_connect_server(app_name: str, master: str | None, conf: dict[str, Any]) -> str:
    """The URL of a Spark Connect server on this process's local Delta-enabled Spark, started if needed.

    The server runs in the same JVM as the classic session (so one test run holds one JVM); it listens on
    127.0.0.1 on a free port and runs Python code sent to it (``mapInArrow``, ``foreachBatch``) with this
    interpreter."""
    with _connect_lock:
        classic = spark_session(app_name, master if master is not None else "local[*]", **conf)
        sc = classic.sparkContext
        url = _connect_url.get(id(sc))
        if url is not None:
            return url
        jvm = sc._jvm
        env_conf = jvm.org.apache.spark.SparkEnv.get().conf()
        if not env_conf.contains("spark.connect.grpc.binding.address"):
            env_conf.set("spark.connect.grpc.binding.address", "127.0.0.1")
        if not env_conf.contains("spark.connect.grpc.binding.port"):
            env_conf.set("spark.connect.grpc.binding.port", "0")  # a free port, read back below
        service = jvm.org.apache.spark.sql.connect.service.SparkConnectService
        try:
            service.start(sc._jsc.sc())
        except Exception as err:
            raise UpsertSinkError(f"the local Spark Connect server did not start: {_first_line(err)}") from err
        module = jvm.java.lang.Class.forName("org.apache.spark.sql.connect.service.SparkConnectService$")
        port = int(module.getField("MODULE$").get(None).localPort())
        url = f"sc://127.0.0.1:{port}"
        _connect_url[id(sc)] = url
        log.info("Spark Connect server for %s listening at %s", app_name, url)
        return url


def _connect_client(url: str, app_name: str, conf: dict[str, Any]) -> Any:
    """A new Spark Connect session on the server at ``url`` (its own session id, settings and temp views)."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    builder = ConnectSession.builder.remote(url)
    for key, value in conf.items():
        builder = builder.config(key, str(value))
    try:
        session = builder.create()
        _session_urls[str(session.session_id)] = url
    except Exception as err:
        raise UpsertSinkError(f"could not reach the Spark Connect server at {url}: {_first_line(err)}") from err
    log.debug("Spark Connect session %s on %s for %s", session.session_id, url, app_name)
    return session


_session_urls: dict[str, str] = {}


def connect_url(session: Any) -> str | None:
    """The ``sc://`` URL of the Connect server a session from :func:`spark_session` talks to (for other
    processes to join it with ``spark_session(remote=...)``); None for a classic session or another's."""
    return _session_urls.get(str(getattr(session, "session_id", "")))


def _first_line(err: BaseException) -> str:
    from upsertsink.errors import first_line

    return first_line(err)


def spark_installed() -> bool:
    """True when pyspark can be imported (checked without importing it)."""
    try:
        return importlib.util.find_spec("pyspark") is not None
    except (ImportError, ValueError):  # ValueError: sys.modules["pyspark"] is None
        return False


_QUIET_PROGRESS: ContextVar[bool] = ContextVar("upsertsink_quiet_progress", default=False)


@contextmanager
def no_console_progress() -> Iterator[None]:
    """Sessions started within this block draw no Spark console progress bars (``[Stage N: ...]``): the CLI
    draws its own progress on stderr, and the two would garble each other."""
    token = _QUIET_PROGRESS.set(True)
    try:
        yield
    finally:
        _QUIET_PROGRESS.reset(token)


def _console_progress() -> str:
    return "false" if _QUIET_PROGRESS.get() else ("true" if sys.stderr.isatty() else "false")


def _local_defaults(master: str) -> dict[str, str]:
    """Settings that make a small local session fast; a user's own conf always wins."""
    if not master.startswith("local"):
        return {"spark.ui.showConsoleProgress": "false"} if _QUIET_PROGRESS.get() else {}
    cores = max(2, os.cpu_count() or 2)
    return {
        "spark.sql.shuffle.partitions": str(cores),
        "spark.default.parallelism": str(cores),
        "spark.databricks.delta.snapshotPartitions": str(cores),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": _console_progress(),
        "spark.driver.memory": "4g",
        "spark.log.level": "ERROR",
        "spark.sql.session.timeZone": "UTC",
    }


def _submitted() -> bool:
    """True when this Python process was started by ``spark-submit`` (which chose the master and JARs)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def spark_session(
    app_name: str = "upsertsink", master: str | None = None, *, connect: bool = False, remote: str | None = None,
    **conf: Any,
):
    """Return a SparkSession with Delta Lake enabled (JARs from ~/.m2, fetched by Maven if missing).

    ``connect=True`` returns a Spark Connect session instead, served by a Connect server this process starts
    in its own local Delta-enabled Spark (``master``, ``conf`` as below; one server per process, shared by
    every such session). ``remote="sc://host:port"`` joins a Connect server that already runs (it must have
    Delta's JARs and settings itself; ``conf`` then holds runtime settings of the new session). Both need the
    ``upsertsink[connect]`` extra.

    ``master`` defaults to ``local[*]``; under ``spark-submit`` the submitted master and ``--jars`` are kept.
    Keyword arguments are Spark settings, e.g. ``spark_session(**{"spark.sql.shuffle.partitions": "8"})``.
    When this starts the JVM, its start-up messages (log4j set-up, native-library and JVM warnings) are
    kept off the terminal: they are logged at DEBUG on ``upsertsink.session``, and shown in the error if
    Spark fails to start. Everything the JVM prints afterwards reaches stderr as usual.
    """
    if remote is not None or connect:
        if remote is not None and connect:
            raise ValueError("spark_session: give connect=True (a local server) or remote=URL (a running one), not both")
        require_connect("upsertsink.spark_session(connect=True)" if connect else "upsertsink.spark_session(remote=...)")
        url = remote if remote is not None else _local_connect_server(app_name, master, conf)
        return _connect_client(url, app_name, {"spark.sql.session.timeZone": "UTC"} if connect else conf)
    require_spark("upsertsink.spark_session()")
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    from upsertsink import jars

    submitted = _submitted()
    explicit_master = master is not None
    if master is None:
        master = SparkConf().get("spark.master", "local[*]") if submitted else "local[*]"
    if master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers run upsertsink's own code (the Spark engine's one-pass batch statistics): they use this
    # interpreter unless the user chose another.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    settings: dict[str, str] = {**_local_defaults(master), **_DELTA_CONF}
    if not submitted:
        paths = jars.delta_jars() or jars.ensure()
        settings["spark.jars"] = ",".join(str(p) for p in paths)
    settings.update({k: str(v) for k, v in conf.items()})
    starts_jvm = (
        SparkContext._gateway is None and "PYSPARK_GATEWAY_PORT" not in os.environ and os.name == "posix"
    )
    chosen = master if explicit_master or not submitted else None  # spark-submit's master stays
    if starts_jvm:
        spark_conf = SparkConf().setAppName(app_name).setMaster(master).setAll(list(settings.items()))
        with _QuietJvm() as quiet:
            SparkContext(conf=spark_conf, gateway=quiet.launch(spark_conf))
            session = _build(SparkSession, app_name, chosen, settings)
        return session
    return _build(SparkSession, app_name, chosen, settings)


def _build(session_class: Any, app_name: str, master: str | None, settings: dict[str, str]) -> Any:
    builder = session_class.builder.appName(app_name)
    if master is not None:
        builder = builder.master(master)
    for key, value in settings.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def current_or_new_session(
    app_name: str = "upsertsink", master: str = "local[*]", feature: str = "this"
) -> Any:
    """The active SparkSession (or the one this process made last), else a new :func:`spark_session`.

    An existing session is returned untouched: none of its settings are changed. ``feature`` names what
    needs Spark in the error raised when the ``upsertsink[spark]`` extra is missing."""
    require_spark(feature, delta=False)
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    existing = getattr(SparkSession, "_instantiatedSession", None)
    if existing is not None and getattr(existing.sparkContext, "_jsc", None) is not None:
        return existing
    return spark_session(app_name, master)


class _QuietJvm:
    """Starts the py4j JVM with its stderr on a pipe. Until the session is up, what the JVM prints is
    held back (start-up noise); afterwards every byte is passed on to this process's stderr unchanged
    (so Spark's console progress bar and real errors still show)."""

    def __init__(self) -> None:
        self._read_fd, self._write_fd = os.pipe()
        self._held: list[bytes] = []
        self._release = threading.Event()
        self._released = threading.Event()
        self._thread = threading.Thread(target=self._pump, name="upsertsink-jvm-stderr", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def launch(self, conf: Any) -> Any:
        from pyspark.java_gateway import launch_gateway

        try:
            return launch_gateway(conf, popen_kwargs={"stderr": self._write_fd})
        finally:
            os.close(self._write_fd)  # the JVM holds its own copy; EOF comes when it exits
            self._write_fd = -1

    def _pump(self) -> None:
        forwarding = False
        while True:
            if not forwarding and self._release.is_set():
                # switch only once the pipe is drained: what the JVM printed while starting stays held
                ready, _, _ = select.select([self._read_fd], [], [], 0.05)
                if not ready:
                    forwarding = True
                    self._released.set()
                    continue
            else:
                ready, _, _ = select.select([self._read_fd], [], [], 0.05 if not forwarding else None)
                if not ready:
                    continue
            chunk = os.read(self._read_fd, 65536)
            if not chunk:
                break
            if forwarding:
                try:
                    os.write(2, chunk)
                except OSError:
                    break
            else:
                self._held.append(chunk)
        self._released.set()
        os.close(self._read_fd)

    def held_text(self) -> str:
        return b"".join(self._held).decode("utf-8", "replace")

    def __exit__(self, exc_type: object, exc: BaseException | None, tb: object) -> None:
        if self._write_fd != -1:  # launch() never ran
            os.close(self._write_fd)
            self._write_fd = -1
        self._release.set()
        self._released.wait(timeout=5)
        text = self.held_text().strip()
        if text:
            log.debug("JVM start-up output:\n%s", text)
        if exc is not None and not isinstance(exc, UpsertSinkError):
            from upsertsink.errors import first_line

            tail = "\n".join(text.splitlines()[-20:])
            raise UpsertSinkError(
                f"Spark did not start: {first_line(exc)}" + (f"\nJVM output:\n{tail}" if tail else "")
            ) from exc
