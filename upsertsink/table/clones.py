"""Tables made by Delta's CLONE: what a clone takes over from its source.

A SHALLOW CLONE (Spark: ``CREATE TABLE c SHALLOW CLONE src [VERSION AS OF n]``) is a new table (a new
``metaData.id``) whose first commit names its source and the cloned version, and whose data files are the
source's, by absolute path. Nothing the sink keeps for the source comes with it: not Delta's ``txn``
markers, not the sink's record of committed batches (in the source's commits), not its tombstones (beside
the source). A clone that took over none of them would apply a replayed batch a second time, and let an
older row bring back a key the source had deleted.

So the first write to a clone takes over, from the source as it was at the cloned version:

- the record of every app that wrote the source (the apps listed beside it, those of its recent commits,
  and the writing one), kept in the clone's ``_upsertsink/clone.json``;
- the tombstones that acted on the source at that version, copied into the clone's own tombstone folders.

``clone.json`` is written last: a write killed before it takes them over again (the same rows again, which
count once). After that the clone needs nothing of its source. Where the source cannot be read at that first
write (it is gone, or this job may not read it), the sink refuses to write the clone and says what to do:
give the job read access for one write, or, when the source is gone for good, adopt the clone without its
source's history (``upsertsink maintain CLONE --adopt-clone``).
"""

from __future__ import annotations

import json
import logging
import re
import threading
from typing import Any

from upsertsink.sidecar.folder import ROOT_DIR, Folder, deltalake_uri, folder_about, scopes
from upsertsink.sidecar.tombstones import TOMBSTONE_ROOT, TombstoneStore
from upsertsink.table import lineage, records

log = logging.getLogger(__name__)

INHERITED = "clone.json"
_lock = threading.Lock()


def source_of(info: dict[str, Any]) -> tuple[str | None, int | None, str]:
    """(the source's path or URI, the cloned version, the source as the commit names it) of a CLONE commit;
    the path is None when the commit names a catalog table (not a path)."""
    params = info.get("operationParameters") or {}
    named = str(params.get("source") or "")
    version = params.get("sourceVersion")
    try:
        cloned = None if version in (None, "", "null") else int(version)
    except (TypeError, ValueError):
        cloned = None
    found = re.fullmatch(r"delta\.`(.+)`", named)
    path = found.group(1).replace("``", "`") if found else None
    if path is not None and path.startswith("file:"):
        path = "/" + path[len("file:"):].lstrip("/")
    return path, cloned, named


def inherited_record(snapshot: Any, info: dict[str, Any], app_id: str) -> records.Record | str:
    """The record ``app_id`` had in the clone's source at the cloned version, or a sentence saying why it
    cannot be known."""
    data = inheritance(snapshot, info)
    if isinstance(data, str):
        return data
    found = records.Record.decode((data.get("apps") or {}).get(app_id))
    return found if found is not None else records.Record()


def inheritance(snapshot: Any, info: dict[str, Any]) -> dict[str, Any] | str:
    """What the clone took over from its source (taking it over now when it has not yet), or a sentence
    saying why it cannot."""
    folder = snapshot.sidecar(ROOT_DIR)
    if folder is None:
        return ("it is a clone, and a table known by name only (Spark-only mode) cannot take over its source's "
                "remembered deletes")
    with _lock:
        known = _read(folder)
        if known is not None and known.get("table_id") == snapshot.table_id:
            return known
        path, version, named = source_of(info)
        if path is None or version is None:
            return (f"it is a clone of {named or 'a table the log does not name'}, which the sink can only read "
                    "by path; " + _what_to_do(snapshot))
        try:
            source = _open(path, version, snapshot.storage_options)
            data = _take_over(snapshot, source, path, version, info)
        except Exception as err:  # noqa: BLE001 - any failure to read the source: refuse, saying why
            text = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
            return (f"it is a clone of {path} (version {version}), whose remembered deletes and batch records "
                    f"the sink takes over at its first write to the clone, but the source cannot be read here "
                    f"({text}); " + _what_to_do(snapshot))
        folder.write_bytes(INHERITED, json.dumps(data).encode())
        log.info("clone %s took over %d app record(s) and the tombstones of %s at version %s", snapshot.path,
                 len(data["apps"]), path, version)
        return data


def adopt(snapshot: Any) -> None:
    """Let a clone whose source is gone for good be written without its source's history: it starts with no
    app records and no remembered deletes of its source."""
    folder = snapshot.sidecar(ROOT_DIR)
    data = {"table_id": snapshot.table_id, "source": None, "source_version": None, "apps": {}, "adopted": True}
    folder.write_bytes(INHERITED, json.dumps(data).encode())


def _what_to_do(snapshot: Any) -> str:
    return (f"give this job read access to the source for one write (the clone then keeps its own copy), or, if "
            f"the source is gone for good, run `upsertsink maintain {snapshot.path} --adopt-clone` to write the "
            "clone without it (a replayed batch of the source is then applied again, and the source's deletes "
            "are not remembered)")


def _read(folder: Folder) -> dict[str, Any] | None:
    raw = folder.read_bytes(INHERITED)
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _open(path: str, version: int, storage_options: dict[str, str] | None) -> Any:
    from deltalake import DeltaTable

    from upsertsink.table.files import Snapshot

    table = DeltaTable(deltalake_uri(path), version=version, storage_options=storage_options)
    return Snapshot(path, table, storage_options)


def _apps(source: Any) -> set[str]:
    """The apps that wrote the source: those listed beside it, and those of its recent commits."""
    from upsertsink.table.commit_log import decode_metadata

    found = set()
    folder = source.sidecar(lineage.APPS_DIR)
    for name in folder.names():
        if name.endswith(".json"):
            raw = folder.read_bytes(name)
            try:
                app = json.loads(raw or b"{}").get("app_id")
            except ValueError:
                app = None
            if isinstance(app, str):
                found.add(app)
    for commit in source.recent_commits():
        meta = decode_metadata(commit)
        if meta and isinstance(meta.get("app_id"), str):
            found.add(meta["app_id"])
    return found


def _take_over(clone: Any, source: Any, path: str, version: int, info: dict[str, Any]) -> dict[str, Any]:
    apps = {app: lineage.app_state(source, app).record.encode() for app in sorted(_apps(source))}
    _copy_tombstones(clone, source, info)
    return {"table_id": clone.table_id, "source": path, "source_version": version, "apps": apps}


def _copy_tombstones(clone: Any, source: Any, info: dict[str, Any]) -> None:
    """The tombstones that acted on the source at the cloned version, into the clone's own folders (as the
    clone's: its identity, recorded before its first commit; the recording app and batch kept)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from upsertsink.sidecar.tombstones import APP, BATCH, DELETED_AT, READ, TABLE

    in_effect = lineage.InEffect(source)
    cloned_at_us = int(info.get("timestamp") or 0) * 1000
    root = Folder(source.path, TOMBSTONE_ROOT, source.storage_options)
    for scope in sorted(scopes(root)):
        folder = Folder(source.path, f"{TOMBSTONE_ROOT}/{scope}", source.storage_options)
        about = folder_about(folder, "upsertsink.tombstones")
        if about is None:
            continue
        store = TombstoneStore.for_scope(source.path, scope, tuple(about["keys"]), about["sequence"],
                                         source.storage_options)
        rows = store.all_rows()
        if rows is None or rows.num_rows == 0:
            continue
        keep = in_effect.mask(rows)
        apps, batches = rows[APP].to_pylist(), rows[BATCH].to_pylist()
        deleted = rows[DELETED_AT].to_numpy(zero_copy_only=False)
        for i in np.flatnonzero(keep):
            if apps[i] is not None and batches[i] is not None:
                keep[i] = in_effect.record(apps[i]).verdict(batches[i]) == records.COMMITTED
            else:  # no batch id to go by: recorded before the clone was made
                keep[i] = deleted[i] <= cloned_at_us
        taken = rows.filter(pa.array(keep))
        if taken.num_rows == 0:
            continue
        n = taken.num_rows
        taken = taken.set_column(taken.schema.get_field_index(TABLE), TABLE, pa.array([clone.table_id] * n, pa.string()))
        taken = taken.set_column(taken.schema.get_field_index(READ), READ, pc.cast(pa.array([-1] * n), pa.int64()))
        target = Folder(clone.path, f"{TOMBSTONE_ROOT}/{scope}", clone.storage_options)
        target.write(f"i-{clone.table_id}.parquet", taken, {"upsertsink.tombstones": json.dumps(about)})


__all__ = ["adopt", "inheritance", "inherited_record", "source_of"]
