"""Interrupted writes (issue #45, item 2): whether the batch committed is read from the table's log and said in
one line; the command line exits 130 (nothing written) or 3 (committed); the Python API raises the interrupt
unchanged and logs the same line; a streaming query stopped mid-batch ends with that one line, never a JVM
stack overflow.

Writers run as real child processes, stopped at a named step of the protocol (``UPSERTSINK_FAULT_MODE=pause``)
and sent a real SIGINT or SIGTERM there, or at a moment chosen by the clock."""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from sink_helpers import read_rows

from upsertsink import UpsertSink, faults, interrupts

CLI = str(Path(sys.executable).with_name("upsertsink"))
JOBS = Path(__file__).parent / "jobs"
BEFORE = "upsertsink: interrupted before the commit: nothing was written; sending batch {b} again is safe"
AFTER = "upsertsink: interrupted after the commit of batch {b} (version {v}): nothing to re-send"


def cli(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], check=False, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_COLOR": "1", **env})


def interruptible(*args: str) -> list[str]:
    """The command line ``upsertsink ARGS`` started with SIGINT as a terminal delivers it. A shell ignores
    SIGINT in the jobs it starts in the background (`make test` runs these tests so), children inherit an
    ignored signal, and the command keeps an ignored SIGINT ignored: a small Python resets it and execs."""
    reset = "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])"
    return [sys.executable, "-c", reset, CLI, *args]


def batch_csv(folder: Path, batch: int, rows: int = 3) -> Path:
    path = folder / f"b{batch}.csv"
    path.write_text("id,v,seq\n" + "".join(f"{i},{batch * 100 + i},{batch}\n" for i in range(rows)))
    return path


def interrupted_write(tmp_path: Path, point: str, sig: signal.Signals, batch: int, *extra: str,
                      pause: float = 120, twice: bool = False) -> subprocess.CompletedProcess:
    """`upsertsink write` of batch ``batch`` in a child process, sent ``sig`` while it waits at ``point`` (and
    a second time a second later, with ``twice``)."""
    ready = tmp_path / f"ready-{batch}"
    ready.unlink(missing_ok=True)
    env = {**os.environ, "NO_COLOR": "1", "UPSERTSINK_FAULT": point, "UPSERTSINK_FAULT_MODE": "pause",
           "UPSERTSINK_FAULT_READY": str(ready), "UPSERTSINK_FAULT_PAUSE": str(pause)}
    child = subprocess.Popen(
        interruptible("write", str(batch_csv(tmp_path, batch)), "--target", str(tmp_path / "t"), "--key", "id",
                      "--sequence-by", "seq", "--batch-id", str(batch), *extra),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 180
    while not ready.exists():
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the writer never reached " + point
        time.sleep(0.05)
    child.send_signal(sig)
    if twice:
        time.sleep(1)
        child.send_signal(sig)
    out, err = child.communicate(timeout=180)
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


def last_batch(folder: Path) -> int | None:
    """The last batch id of the CLI's default app id in the table ``folder/t``."""
    return DeltaTable(str(folder / "t")).transaction_version("upsertsink:t")


# ---------------------------------------------------------------- the command line, embedded engine


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_before_the_commit_says_nothing_was_written_and_exits_130(tmp_path, sig):
    assert cli("write", str(batch_csv(tmp_path, 1)), "--target", str(tmp_path / "t"), "--key", "id",
               "--sequence-by", "seq", "--batch-id", "1").returncode == 0
    for point in ("prepared", "before-commit"):
        done = interrupted_write(tmp_path, point, sig, 2)
        assert (done.returncode, done.stdout, done.stderr) == (130, "", BEFORE.format(b=2) + "\n"), point
        assert DeltaTable(str(tmp_path / "t")).version() == 0 and last_batch(tmp_path) == 1
    again = cli("write", str(batch_csv(tmp_path, 2)), "--target", str(tmp_path / "t"), "--key", "id",
                "--sequence-by", "seq", "--batch-id", "2", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["skipped"] is False  # sending it again writes it
    assert last_batch(tmp_path) == 2


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_after_the_commit_says_nothing_to_resend_and_exits_3(tmp_path, sig):
    # the first write creates the table (its commit point is "table-created"), the second MERGEs
    first = interrupted_write(tmp_path, "table-created", sig, 1)
    assert (first.returncode, first.stdout, first.stderr) == (3, "", AFTER.format(b=1, v=0) + "\n")
    second = interrupted_write(tmp_path, "data-committed", sig, 2)
    assert (second.returncode, second.stdout, second.stderr) == (3, "", AFTER.format(b=2, v=1) + "\n")
    assert last_batch(tmp_path) == 2
    again = cli("write", str(batch_csv(tmp_path, 2)), "--target", str(tmp_path / "t"), "--key", "id",
                "--sequence-by", "seq", "--batch-id", "2", "--json")
    assert json.loads(again.stdout)["skipped"] is True  # the log was right: it was committed
    assert DeltaTable(str(tmp_path / "t")).version() == 1


def test_an_interrupt_at_any_moment_of_a_large_write_agrees_with_the_log(tmp_path):
    """The reported case: a large write interrupted mid-way (delta-rs finishes its call before Python sees the
    signal). Whatever the moment (start-up, reading, the MERGE, after it), the one line agrees with the
    table's log, and sending the batch again ends with the batch written once."""
    rows = 600_000
    sources = []
    for n, modulus in enumerate((7, 5)):
        path = tmp_path / f"big{n}.csv"
        path.write_text("id,v,seq\n" + "".join(f"{i},{i % modulus},1\n" for i in range(rows)))
        sources.append(path)
    target = tmp_path / "t"
    base = ["--target", str(target), "--key", "id"]
    assert cli("write", str(sources[0]), *base, "--batch-id", "0").returncode == 0
    rng = random.Random(45)
    seen = set()
    for batch in range(1, 5):
        source = str(sources[batch % 2])  # each batch changes most rows
        child = subprocess.Popen(interruptible("write", source, *base, "--batch-id", str(batch)),
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(rng.uniform(0.2, 4.0))
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=300)
        seen.add(child.returncode)
        marker = last_batch(tmp_path)
        if child.returncode == 0:  # it had finished before the signal came
            assert f"batch {batch} -> " in out and marker == batch
            continue
        assert out == "" and err.count("\n") == 1, err
        if child.returncode == 3:
            assert err == AFTER.format(b=batch, v=DeltaTable(str(target)).version()) + "\n"
            assert marker == batch
        else:
            assert child.returncode == 130, err
            assert err in (BEFORE.format(b=batch) + "\n", "upsertsink: interrupted\n")  # in the write, or before
            assert marker == batch - 1
        resent = cli("write", source, *base, "--batch-id", str(batch), "--json")
        assert resent.returncode == 0 and json.loads(resent.stdout)["skipped"] is (child.returncode == 3)
    assert seen & {3, 130}, seen  # the signal reached at least one write while it ran
    assert [(r["id"], r["v"]) for r in read_rows(str(target))][:8] == [(i, i % 7) for i in range(8)]


def test_a_read_only_command_interrupted_says_so_in_one_line(tmp_path):
    """SIGTERM is handled as Ctrl-C by every command: one line and 130 (click's Abort said `aborted`, exit 1)."""
    assert cli("write", str(batch_csv(tmp_path, 1)), "--target", str(tmp_path / "t"), "--key", "id").returncode == 0
    ready = tmp_path / "ready"
    code = (  # `upsertsink status` whose reading of the log waits until it is signalled
        "import os, sys, time\n"
        "from upsertsink.table import status\n"
        "real = status.status\n"
        "def waiting(*args, **kwargs):\n"
        "    open(os.environ['READY'], 'w').close()\n"
        "    time.sleep(60)\n"
        "    return real(*args, **kwargs)\n"
        "status.status = waiting\n"
        "sys.argv = ['upsertsink', 'status', sys.argv[1]]\n"
        "from upsertsink.launch import main\n"
        "main()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path / "t")], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env={**os.environ, "READY": str(ready)})
    while not ready.exists():
        assert child.poll() is None, child.communicate()
        time.sleep(0.05)
    child.send_signal(signal.SIGTERM)
    out, err = child.communicate(timeout=60)
    assert (child.returncode, out, err) == (130, "", "upsertsink: interrupted\n")


# ---------------------------------------------------------------- the command line, Spark engine


def test_an_interrupted_write_on_spark_waits_for_its_step_and_reads_the_log(tmp_path):
    """On Spark the first signal cancels Spark's jobs and stops the write at its next step, where no Spark call
    is in flight (pyspark's own handler raised in the middle of the call)."""
    spark = ("--engine", "spark")
    done = interrupted_write(tmp_path, "table-created", signal.SIGTERM, 1, *spark, pause=1)
    assert (done.returncode, done.stdout, done.stderr) == (3, "", AFTER.format(b=1, v=0) + "\n")
    done = interrupted_write(tmp_path, "prepared", signal.SIGINT, 2, *spark, pause=1)
    assert (done.returncode, done.stdout, done.stderr) == (130, "", BEFORE.format(b=2) + "\n")
    # a second signal does not wait for the step: the JVM is stopped, then the log is read
    done = interrupted_write(tmp_path, "prepared", signal.SIGINT, 2, *spark, twice=True)
    assert (done.returncode, done.stdout, done.stderr) == (130, "", BEFORE.format(b=2) + "\n")
    assert last_batch(tmp_path) == 1 and DeltaTable(str(tmp_path / "t")).version() == 0


# ---------------------------------------------------------------- the Python API


class Interrupt(KeyboardInterrupt):
    pass


@pytest.mark.parametrize("point, committed", [("before-commit", False), ("data-committed", True)])
def test_the_api_raises_the_interrupt_unchanged_and_logs_the_line(engine, tmp_path, caplog, point, committed):
    path = str(tmp_path / "t")
    sink = UpsertSink(path, "id", app_id="api")
    schema = {"id": pa.int64(), "v": pa.int64()}
    sink.write(engine.frame([{"id": 1, "v": 1}], schema), batch_id=7)
    raised = Interrupt()

    def ctrl_c() -> None:
        raise raised

    with caplog.at_level(logging.WARNING, logger="upsertsink.interrupts"), faults.hook(point, ctrl_c), \
            pytest.raises(Interrupt) as caught:
        sink.write(engine.frame([{"id": 2, "v": 2}], schema), batch_id=8)
    assert caught.value is raised and caught.value.__cause__ is None  # the same exception, as it was raised
    lines = [r.getMessage() for r in caplog.records if r.name == "upsertsink.interrupts"]
    version = DeltaTable(path).version()
    assert lines == [AFTER.format(b=8, v=version) if committed else BEFORE.format(b=8)]
    assert interrupts.last().committed is committed
    assert sink.last_batch_id() == (8 if committed else 7)


# ---------------------------------------------------------------- a streaming query stopped mid-batch


def test_spark_reads_the_stop_marker_at_once_where_a_long_traceback_overflowed_its_regex(spark):
    """The cause of the stack overflow: Spark tells a stop from a failure of the batch function by matching its
    Python traceback with StreamExecution.PROXY_ERROR, whose `(.|\\r\\n|\\r|\\n)*` recurses once per character;
    the chained traceback of a wrapped Py4JJavaError (with its Java stack trace) overflowed the thread's stack."""
    from py4j.protocol import Py4JJavaError

    runtime = spark._jvm.org.apache.spark.sql.execution.streaming.runtime
    regex = getattr(getattr(runtime, "StreamExecution$"), "MODULE$").PROXY_ERROR()
    long_trace = ("py4j.protocol.Py4JJavaError: An error occurred while calling o12.sql.\n: "
                  "java.lang.InterruptedException\n" + "\tat org.apache.spark.Foo.bar(Foo.scala:12)\n" * 300)
    with pytest.raises(Py4JJavaError, match="StackOverflowError"):
        regex.findFirstIn(long_trace)
    interrupts.forget()
    stopped = interrupts.stream_stopped(None, InterruptedError("java.lang.InterruptedException"))
    assert stopped is not None and regex.findFirstIn(str(stopped)).isDefined()
    assert "interrupted before the commit: nothing was written" in str(stopped)


def test_foreach_batch_raises_other_failures_as_they_are(spark, tmp_path):
    """Only a stop is turned into StreamStoppedError: a batch that cannot be written fails the query as before."""
    from upsertsink import InvalidInputError

    sink = UpsertSink(str(tmp_path / "t"), "id")
    with pytest.raises(InvalidInputError) as caught:
        sink.foreach_batch(spark.createDataFrame([(1, 2)], "other long, v long"), 0)
    assert not isinstance(caught.value, interrupts.StreamStoppedError)
    interrupted = InterruptedError("java.lang.InterruptedException")  # no query behind it: the text decides
    assert isinstance(interrupts.stream_stopped(None, interrupted), interrupts.StreamStoppedError)


def test_a_stream_stopped_mid_batch_ends_with_one_line_and_a_right_table(tmp_path):
    done = subprocess.run([sys.executable, str(JOBS / "stream_stop.py"), str(tmp_path)], capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "StackOverflowError" not in done.stderr and "Exception in thread" not in done.stderr
    assert done.stderr.splitlines() == [BEFORE.format(b=0)], done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {"rows": 2000, "last_batch_id": 0}
