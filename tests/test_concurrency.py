"""Concurrent writers: conflicts are retried, and the same batch id sent twice at once is applied once."""

from __future__ import annotations

import multiprocessing as mp
import threading

import pyarrow as pa
from deltalake import DeltaTable
from sink_helpers import read_rows

from upsertsink import UpsertSink
from upsertsink.table.commit_log import decode_metadata


def commits_for(path: str, app_id: str, batch_id: int) -> int:
    found = 0
    for commit in DeltaTable(path).history():
        meta = decode_metadata(commit)
        if meta and meta["app_id"] == app_id and meta["batch_id"] == batch_id:
            found += 1
    return found


def _write_in_process(path: str, app_id: str, batch_id: int, ids: list[int], barrier, out) -> None:
    sink = UpsertSink(path, "id", sequence_by="seq", app_id=app_id)
    batch = pa.table({"id": ids, "name": [f"n{i}" for i in ids], "seq": [batch_id + 1] * len(ids)})
    barrier.wait()
    result = sink.write(batch, batch_id=batch_id)
    out.put((result.skipped, result.inserted, result.updated))


def _run_processes(jobs: list[tuple]) -> list[tuple]:
    ctx = mp.get_context("spawn")
    barrier, out = ctx.Barrier(len(jobs)), ctx.Queue()
    procs = [ctx.Process(target=_write_in_process, args=(*job, barrier, out)) for job in jobs]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    return [out.get(timeout=5) for _ in procs]


def _seed(path: str) -> None:
    UpsertSink(path, "id", sequence_by="seq", app_id="seed").write(
        pa.table({"id": [0], "name": ["n0"], "seq": [0]}), batch_id=0
    )


def test_two_processes_sending_the_same_batch_id_apply_it_once(tmp_path):
    path = str(tmp_path / "t")
    _seed(path)
    results = _run_processes([(path, "job", 1, [1, 2, 3]), (path, "job", 1, [1, 2, 3])])
    assert sorted(r[0] for r in results) == [False, True]  # one applied it, the other saw it applied
    assert commits_for(path, "job", 1) == 1
    assert [r["id"] for r in read_rows(path)] == [0, 1, 2, 3]


def test_concurrent_writers_with_different_app_ids_both_land_after_retries(tmp_path):
    path = str(tmp_path / "t")
    _seed(path)
    results = _run_processes([(path, "job-a", 1, [1, 2]), (path, "job-b", 1, [3, 4])])
    assert all(not skipped for skipped, *_ in results)
    assert [r["id"] for r in read_rows(path)] == [0, 1, 2, 3, 4]
    assert commits_for(path, "job-a", 1) == 1 and commits_for(path, "job-b", 1) == 1


def test_threads_on_one_spark_session_apply_a_batch_once_and_never_mix_markers(spark, tmp_path):
    path = str(tmp_path / "t")
    schema = "id long, name string, seq long"
    UpsertSink(path, "id", app_id="seed").write(spark.createDataFrame([(0, "n0", 0)], schema), batch_id=0)
    results: dict[str, object] = {}
    barrier = threading.Barrier(3)

    def write(name: str, app_id: str, batch_id: int, rows: list[tuple]) -> None:
        sink = UpsertSink(path, "id", sequence_by="seq", app_id=app_id)
        df = spark.createDataFrame(rows, schema)
        barrier.wait()
        try:
            results[name] = sink.write(df, batch_id=batch_id)
        except Exception as err:  # noqa: BLE001 - any failure is reported by the assertion below
            results[name] = err

    threads = [
        threading.Thread(target=write, args=("a1", "job-a", 5, [(1, "a", 1)])),
        threading.Thread(target=write, args=("a2", "job-a", 5, [(1, "a", 1)])),
        threading.Thread(target=write, args=("b", "job-b", 9, [(2, "b", 1)])),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert all(not isinstance(r, Exception) for r in results.values()), results
    assert sorted([results["a1"].skipped, results["a2"].skipped]) == [False, True]
    assert not results["b"].skipped
    table = DeltaTable(path)
    assert table.transaction_version("job-a") == 5 and table.transaction_version("job-b") == 9
    assert commits_for(path, "job-a", 5) == 1 and commits_for(path, "job-b", 9) == 1
    assert [r["id"] for r in read_rows(path)] == [0, 1, 2]


def test_two_processes_resending_a_batch_a_restore_undid_apply_it_once(tmp_path):
    """Issue #44: after a RESTORE, two writers re-send the same undone batch at once: it is applied once
    (on the late chain, whose marker makes the two commits conflict), and recorded once more."""
    path = str(tmp_path / "t")
    _seed(path)
    sink = UpsertSink(path, "id", sequence_by="seq", app_id="job")
    kept = sink.write(pa.table({"id": [1], "name": ["n1"], "seq": [2]}), batch_id=1).version
    sink.write(pa.table({"id": [1, 2, 3], "name": ["n1", "n2", "n3"], "seq": [3, 3, 3]}), batch_id=2)
    DeltaTable(path).restore(kept)
    results = _run_processes([(path, "job", 2, [1, 2, 3]), (path, "job", 2, [1, 2, 3])])
    assert sorted(r[0] for r in results) == [False, True]  # one applied it again, the other saw it applied
    assert commits_for(path, "job", 2) == 2  # the undone commit, and the one that applied it again
    assert [r["id"] for r in read_rows(path)] == [0, 1, 2, 3]
    assert UpsertSink(path, "id", sequence_by="seq", app_id="job").last_batch_id() == 2
