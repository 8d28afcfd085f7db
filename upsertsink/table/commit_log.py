"""The table's log as the sink reads it: commit infos, the sink's commit metadata, history, time travel.

A committed batch leaves two things in the one commit that also holds its data:

- a ``txn`` action (appId = the sink's app id, version = the batch id): the marker Delta itself knows, which
  both delta-spark and deltalake read and write, so a table can move between engines;
- ``commitInfo.userMetadata``: a JSON object ``{"upsertsink": 1, "app_id", "batch_id", "fingerprint",
  "rows", "algorithm", "engine", "write", "batches", "read_version", "table_id", ...}``: the content check of
  replays, the record of committed batch ids (``records.py``) and what ``upsertsink status`` shows.

Both are read with deltalake (no JVM) or, for a table known by name only, from ``DESCRIBE HISTORY``.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from upsertsink.fingerprint import Fingerprint
from upsertsink.sidecar.folder import deltalake_uri

log = logging.getLogger(__name__)


METADATA_MARK = "upsertsink"


RECENT_COMMITS = 20  # looked at first: a replay is most often of one of the last batches


STATUS_HISTORY = 200


def encode_metadata(app_id: str, batch_id: int | None, fp: Fingerprint, engine: str, **extra: Any) -> dict[str, Any]:
    return {
        METADATA_MARK: 1,
        "app_id": app_id,
        "batch_id": batch_id,
        "engine": engine,
        "algorithm": fp.algorithm,
        "rows": fp.rows,
        "fingerprint": fp.value,
        **extra,
    }


def decode_metadata(commit: dict[str, Any]) -> dict[str, Any] | None:
    """The upsertsink metadata of one history entry, or None when the commit is not ours."""
    raw = commit.get("userMetadata")
    if not raw or not isinstance(raw, str):
        return None
    try:
        meta = json.loads(raw)
    except ValueError:
        return None
    return meta if isinstance(meta, dict) and meta.get(METADATA_MARK) == 1 else None


def fingerprint_of(meta: dict[str, Any]) -> Fingerprint | None:
    try:
        return Fingerprint(str(meta["algorithm"]), int(meta["rows"]), str(meta["fingerprint"]))
    except (KeyError, TypeError, ValueError):
        return None


def local_path(path: str) -> str | None:
    """The local folder of a path or file URI; None on object storage. deltalake's table URIs are
    percent-encoded (``hash#tag`` is ``file:///.../hash%23tag/``); a target given as a file URI holds no ``%``
    (refused by the sink), so decoding it changes nothing."""
    if "://" in path and not path.startswith("file://"):
        return None
    if path.startswith("file://"):
        from urllib.parse import unquote

        return unquote(path.removeprefix("file://"))
    return path


def commit_file_stamp(uri: str, version: int, storage_options: dict[str, str] | None) -> tuple[int, float] | None:
    """(size, mtime) of one commit file: tells the handle's history from a table replaced at the same path."""
    local = local_path(uri)
    try:
        if local is not None:
            st = os.stat(os.path.join(local, "_delta_log", f"{version:020d}.json"))
            return st.st_size, st.st_mtime
        info = log_fs(uri, storage_options).get_file_info(f"_delta_log/{version:020d}.json")
        return (info.size, info.mtime.timestamp() if info.mtime else 0.0) if info.size is not None else None
    except (FileNotFoundError, OSError):
        return None


def log_fs(uri: str, storage_options: dict[str, str] | None) -> Any:
    import pyarrow.fs as pafs
    from deltalake.fs import DeltaStorageHandler

    if "://" not in uri:  # a local path: as the file URI deltalake itself gives (``#`` and ``?`` escaped)
        from pathlib import Path

        uri = Path(uri).absolute().as_uri()
    uri = deltalake_uri(uri)  # a target URI as given (the Spark engine's): its '#' is a character
    return pafs.PyFileSystem(DeltaStorageHandler(uri, storage_options))


def read_commit_info(uri: str, version: int, storage_options: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The commitInfo action of one table version, read from its log file; None when the log lacks it."""
    return _log_entry(uri, version, storage_options) or None


def _log_entry(uri: str, version: int, storage_options: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The commitInfo of one version's log file, ``{}`` for a commit file without one (Delta makes it optional);
    None when the log holds no file for that version."""
    try:
        with log_fs(uri, storage_options).open_input_stream(f"_delta_log/{version:020d}.json") as f:
            text = f.read().decode()
    except (FileNotFoundError, OSError):
        return None
    for line in text.splitlines():
        if line.strip().startswith('{"commitInfo"'):
            return json.loads(line)["commitInfo"]
    return {}


# Commits that begin a table identity: a table created, replaced or cloned in place.
IDENTITY_STARTS = frozenset({
    "CREATE TABLE", "CREATE TABLE AS SELECT", "CREATE OR REPLACE TABLE", "REPLACE TABLE",
    "CREATE OR REPLACE TABLE AS SELECT", "REPLACE TABLE AS SELECT", "CLONE",
})


def identity(snapshot: Any, current: str | None, metadata_id_at: Any) -> str | None:
    """The identity of the table at ``snapshot``: the ``metaData.id`` of the commit that began it (version 0,
    a REPLACE or a CLONE in place), found by walking back from the snapshot's version to that commit, or to a
    commit of the sink that recorded the identity it read.

    Delta's ``metaData.id`` is meant to stay the same for the life of a table, but deltalake (1.6) gives a
    table a new one whenever a write changes its schema (a MERGE with schema evolution): the id the table has
    now is not its identity. ``metadata_id_at(v)`` reads the id a commit set (None when the log cannot say);
    when the walk reaches no such commit (log cleanup), the id the table has now stands for it."""
    v = snapshot.version
    while v is not None and v >= 0:
        info = snapshot.commit_info(v)
        if info is None:
            break
        if v == 0 or info.get("operation") in IDENTITY_STARTS:
            found = metadata_id_at(v)
            return current if found is None else found
        meta = decode_metadata(info)
        if meta is not None and isinstance(meta.get("table_id"), str):
            return meta["table_id"]
        v -= 1
    return current


def metadata_id(uri: str, version: int, storage_options: dict[str, str] | None = None) -> str | None:
    """The ``metaData.id`` one version's commit file sets; None when it sets none or the log lacks it."""
    try:
        with log_fs(uri, storage_options).open_input_stream(f"_delta_log/{version:020d}.json") as f:
            text = f.read().decode()
    except (FileNotFoundError, OSError):
        return None
    for line in text.splitlines():
        if line.strip().startswith('{"metaData"'):
            found = json.loads(line)["metaData"].get("id")
            return None if found is None else str(found)
    return None


def history(
    table: Any, limit: int | None, storage_options: dict[str, str] | None = None, at: int | None = None,
) -> list[dict[str, Any]]:
    """The commit infos of ``table`` from version ``at`` (default: the version the handle is at) down (``limit``
    of them, or all the log holds), newest first, each with its ``version``.

    deltalake's ``history()`` (1.6) lists the commits from the log's *latest* version down, but numbers them from
    the version the handle is at: on a table opened at an older version (``PATH@N``), or a handle that another
    writer's commits have left behind, its entries carry other commits' versions. Its list is used only when the
    handle is at the latest version (no commit file after it once the list is read); otherwise, for a folder
    whose name holds a ``#`` (for which deltalake finds nothing), and when deltalake cannot parse a commit info
    (Spark's SHALLOW CLONE writes statistics of -1), the log files are read one by one."""
    top = table.version() if at is None else at
    if top is None or top < 0:
        return []
    if top == table.version():
        try:
            found = table.history(limit)
        except Exception as err:  # noqa: BLE001 - read the files ourselves
            log.debug("deltalake could not list the history of %s (%s): reading its log files", table.table_uri, err)
            found = []
        if found and commit_file_stamp(table.table_uri, top + 1, storage_options) is None:
            listed = [c for c in found if 0 <= c.get("version", -1) <= top]
            return listed if limit is None else listed[:limit]
    out = []
    stop = -1 if limit is None else max(-1, top - limit)
    for version in range(top, stop, -1):
        info = _log_entry(table.table_uri, version, storage_options)
        if info is None:
            break  # log cleanup removed the older ones
        out.append({**info, "version": version})
    return out


def restored_version(snapshot: Any, info: dict[str, Any], at: int) -> int | None:
    """The version the RESTORE commit ``info`` at version ``at`` went back to; None when the log cannot say.

    Both engines record ``operationParameters.version`` for a RESTORE to a version. Spark records a RESTORE
    to a timestamp as that timestamp in its session's time zone, and went back to the latest commit at or
    before it (Delta's rule: by commit time, the file's modification time made monotonic, or the commit's
    in-commit timestamp). That is resolved here for UTC and for this process's zone, and a candidate counts
    only when the number of files at it is the one the RESTORE reported (``numOfFilesAfterRestore``)."""
    params = info.get("operationParameters") or {}
    version = params.get("version")
    if version not in (None, "", "null"):
        try:
            found = int(version)
        except (TypeError, ValueError):
            return None
        return found if 0 <= found < at else None
    stamp = params.get("timestamp") or params.get("datetime")
    if not stamp:
        return None
    times = snapshot.commit_times(at - 1)
    metrics = info.get("operationMetrics") or {}
    expected = metrics.get("numOfFilesAfterRestore")
    for moment in _instants(str(stamp)):
        before = [v for v, t in times.items() if t <= moment]
        if not before:
            continue
        candidate = max(before)
        if expected is None or snapshot.files_at(candidate) == int(expected):
            return candidate
    return None


def _instants(stamp: str) -> list[int]:
    """Milliseconds since the epoch that a RESTORE's timestamp text may mean: UTC, then this process's zone."""
    from datetime import UTC, datetime

    try:
        parsed = datetime.fromisoformat(stamp.strip().replace(" ", "T", 1))
    except ValueError:
        return []
    if parsed.tzinfo is not None:
        return [int(parsed.timestamp() * 1000)]
    return list(dict.fromkeys([int(parsed.replace(tzinfo=UTC).timestamp() * 1000),
                               int(parsed.timestamp() * 1000)]))


def commit_times(snapshot: Any, up_to: int) -> dict[int, int]:
    """Version -> commit time in milliseconds, as Delta orders commits for time travel (file modification
    times made strictly increasing), for the versions the log holds up to ``up_to``."""
    import pyarrow.fs as pafs

    fs = log_fs(snapshot.uri, snapshot.storage_options)
    raw = {}
    for entry in fs.get_file_info(pafs.FileSelector("_delta_log")):
        name = entry.base_name
        if name.endswith(".json") and name[:20].isdigit() and int(name[:20]) <= up_to and entry.mtime is not None:
            raw[int(name[:20])] = int(entry.mtime.timestamp() * 1000)
    out, last = {}, None
    for version in sorted(raw):
        t = raw[version]
        info = snapshot.commit_info(version) or {}
        if isinstance(info.get("inCommitTimestamp"), int):
            t = info["inCommitTimestamp"]
        elif last is not None and t <= last:
            t = last + 1
        out[version] = last = t
    return out


def find_write(
    uri: str, token: str | None, after: int, latest: int, storage_options: dict[str, str] | None = None
) -> int | None:
    """The version in (after, latest] whose upsertsink metadata carries write token ``token``, newest last
    searched first from the oldest (a commit usually lands right after the version it read)."""
    if token is None:
        return None
    for version in range(after + 1, latest + 1):
        meta = decode_metadata(read_commit_info(uri, version, storage_options) or {})
        if meta and meta.get("write") == token:
            return version
    return None


def late_batch(meta: dict[str, Any] | None) -> bool:
    """Was the commit's batch applied late (behind its app's marker, ``late_batches="apply"``)?"""
    if not meta:
        return False
    if "late_batch" in meta:
        return bool(meta["late_batch"])
    return meta.get("late") is not None  # commits made before the flag: every late-chain commit was late


def marker_only(meta: dict[str, Any] | None, commit: dict[str, Any], metrics: dict[str, Any]) -> bool:
    if not meta or meta.get("batch_id") is None:
        return False
    if meta.get("marker_only"):
        return True
    # commits made before the flag existed: an append of no file
    added = metric(metrics, "num_added_files", "numFiles")
    return commit.get("operation") == "WRITE" and (added == 0 or (not metrics and commit.get("version", 0) > 0))


def metric(metrics: dict[str, Any], *names: str) -> int | None:
    for name in names:
        if name in metrics and metrics[name] is not None:
            return int(metrics[name])
    return None


__all__ = ['METADATA_MARK', 'RECENT_COMMITS', 'STATUS_HISTORY', 'commit_file_stamp', 'commit_times', 'decode_metadata', 'encode_metadata', 'find_write', 'fingerprint_of', 'history', 'late_batch', 'local_path', 'log_fs', 'marker_only', 'metric', 'read_commit_info', 'restored_version']
