"""Finding the commit that recorded a batch: its fingerprint, for the content check of a replay.

The recent commits first, then the commit that moved the app's ``txn`` to the batch id (a binary search over
table versions: one app's ``txn`` only grows), then every commit the log holds; for a batch a clone took over,
its source's log."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from upsertsink.fingerprint import Fingerprint
from upsertsink.table.commit_log import decode_metadata, fingerprint_of

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Committed:
    """What the log says about one committed (app id, batch id): ``state`` is one of

    ``found`` (its commit and fingerprint are here), ``no-fingerprint`` (its commit carries none: an older
    algorithm, or another Delta writer), ``gone`` (the log no longer holds its commit).
    """

    state: str
    fingerprint: Fingerprint | None = None
    version: int | None = None
    tombstones_version: int | None = None  # the tombstone table's version the batch's writer had seen


def _ours(commit: dict[str, Any] | None, app_id: str, batch_id: int) -> dict[str, Any] | None:
    meta = decode_metadata(commit) if commit else None
    return meta if meta and meta.get("app_id") == app_id and meta.get("batch_id") == batch_id else None


def _committed(meta: dict[str, Any], version: int | None) -> Committed:
    found = fingerprint_of(meta)
    return Committed("found" if found else "no-fingerprint", found, version, meta.get("tombstones_version"))


def committed_fingerprint(snapshot: Any, app_id: str, batch_id: int) -> Committed:
    """Find the newest commit that recorded ``batch_id`` for ``app_id`` and its fingerprint (metadata only):
    the recent commits first, then the commit that moved the marker to it (a binary search), then, for a
    batch applied late (which does not move the marker), every commit the log holds."""
    for commit in snapshot.recent_commits():
        meta = _ours(commit, app_id, batch_id)
        if meta:
            return _committed(meta, commit.get("version"))
    try:
        version = snapshot.first_version_reaching(app_id, batch_id)
    except Exception as err:  # noqa: BLE001 - a version the log can no longer rebuild
        log.debug("searching the log of %s for batch %s: %s", snapshot.path, batch_id, err)
        version = None
    if version is not None:
        meta = _ours(snapshot.commit_info(version), app_id, batch_id)
        if meta:
            return _committed(meta, version)
    for commit in snapshot.all_commits():
        meta = _ours(commit, app_id, batch_id)
        if meta:
            return _committed(meta, commit.get("version"))
    if version is not None and snapshot.txn_at(app_id, version) == batch_id:
        return Committed("no-fingerprint", version=version)  # its marker, written by another Delta writer
    source = snapshot.clone_source() if hasattr(snapshot, "clone_source") else None
    if source is not None:  # a batch the clone took over: its commit is in the source's log
        found = committed_fingerprint(source, app_id, batch_id)
        if found.state != "gone":
            return Committed(found.state, found.fingerprint, None, None)
    return Committed("gone")


__all__ = ['Committed', 'committed_fingerprint']
