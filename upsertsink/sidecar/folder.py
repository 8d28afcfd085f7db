"""A folder of files the sink keeps beside a table (``<table>/_upsertsink/...``), local or on an object store.

Files are written whole (a local file is renamed into place; an object-store PUT appears whole) and never
changed: the sink's side stores (tombstones, history events, the list of apps, a clone's inheritance) are
folders of immutable files, listed and read through :class:`Folder`.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import time
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

ROOT_DIR = "_upsertsink"


LEGACY_DIR = "_upsertsink_tombstones"  # upsertsink 0.1: one Delta table per target, whatever the keys


# Folders the sink keeps inside a target: a target that holds only these is still a new table. Delta's VACUUM
# and readers leave names starting with "_" alone.
HELPER_DIRS = (ROOT_DIR, LEGACY_DIR)


def deltalake_uri(target: str) -> str:
    """``target`` in the form deltalake reads as the literal folder or key. Every deltalake call the sink
    makes (markers, history, the embedded engine, tombstone files on object storage) goes through it.

    A local path is literal to deltalake already. A URI (``s3a://``, ``file://``) is parsed as a URL, so a
    ``#`` or ``?`` would end the path (``s3a://b/hash#tag`` is the table ``s3a://b/hash``) and ``%`` starts an
    escape, while Spark (Hadoop's ``Path``) takes every character of it literally: ``%``, ``#`` and ``?`` are
    escaped. A target holding an escape already (``%`` and two hex digits) is refused by the sink, so such a
    URI is one deltalake gave (a ``table_uri``) or one escaped here, and is returned as it is.
    """
    if "://" not in target or re.search(r"%[0-9A-Fa-f]{2}", target):
        return target
    scheme, rest = target.split("://", 1)
    return f"{scheme}://" + rest.replace("%", "%25").replace("#", "%23").replace("?", "%3F")


class Folder:
    """List, read, write and delete the files of one folder under a target (local or object store)."""

    def __init__(self, target: str, relative: str, storage_options: dict[str, str] | None):
        self.target = target.rstrip("/")
        self.relative = relative
        local = target.removeprefix("file://") if "://" not in target or target.startswith("file://") else None
        self.local = None if local is None else os.path.join(local, relative)
        self._fs: Any = None
        self.storage_options = storage_options

    @property
    def uri(self) -> str:
        return self.local if self.local is not None else f"{self.target}/{self.relative}"

    def _remote(self) -> Any:
        if self._fs is None:
            import pyarrow.fs as pafs
            from deltalake.fs import DeltaStorageHandler

            self._fs = pafs.PyFileSystem(DeltaStorageHandler(deltalake_uri(self.target), self.storage_options))
        return self._fs

    def names(self) -> list[str]:
        """The folder's file names (hidden ones included); empty when the folder is absent."""
        if self.local is not None:
            try:
                return os.listdir(self.local)
            except FileNotFoundError:
                return []
        return list(self.list())

    def list(self) -> dict[str, float]:
        """File name -> modification time (seconds), hidden names included; empty when the folder is absent."""
        if self.local is not None:
            try:
                with os.scandir(self.local) as entries:
                    return {e.name: e.stat().st_mtime for e in entries if e.is_file()}
            except FileNotFoundError:
                return {}
        import pyarrow.fs as pafs

        infos = self._remote().get_file_info(pafs.FileSelector(self.relative, allow_not_found=True))
        return {
            i.base_name: (i.mtime.timestamp() if i.mtime else time.time())
            for i in infos if i.type == pafs.FileType.File
        }

    def read_bytes(self, name: str) -> bytes | None:
        """The whole file; None when it does not exist."""
        try:
            if self.local is not None:
                with open(os.path.join(self.local, name), "rb") as f:
                    return f.read()
            with self._remote().open_input_stream(f"{self.relative}/{name}") as f:
                return f.read()
        except (FileNotFoundError, OSError):
            return None

    def read(self, name: str) -> pa.Table | None:
        """The file's rows; None for an empty file, which is never a tombstone file: a file is written whole
        (a local rename, one PUT), so an empty one is the trace of a write that failed, and the writer that
        failed never committed the batch whose deletes it held (an earlier version's failed writes on object
        storage left such files)."""
        if self.local is not None:
            full = os.path.join(self.local, name)
            if os.path.getsize(full) == 0:
                return None
            return pq.read_table(full)
        with self._remote().open_input_file(f"{self.relative}/{name}") as f:
            if f.size() == 0:
                return None
            return pq.read_table(f)

    def write(self, name: str, table: pa.Table, metadata: dict[str, str]) -> None:
        """Write ``name`` whole: readers see the complete file or none."""
        table = table.replace_schema_metadata({**(table.schema.metadata or {}), **{
            k.encode(): v.encode() for k, v in metadata.items()}})
        buf = io.BytesIO()
        pq.write_table(table, buf)
        self.write_bytes(name, buf.getvalue())

    def write_bytes(self, name: str, data: bytes) -> None:
        """Write ``name`` whole (a local file is renamed into place; an object-store PUT appears whole)."""
        if self.local is not None:
            os.makedirs(self.local, exist_ok=True)
            temp = os.path.join(self.local, f".tmp-{uuid.uuid4().hex}")
            with open(temp, "wb") as f:
                f.write(data)
            os.replace(temp, os.path.join(self.local, name))
            return
        # A PUT: whole or nothing. deltalake's raw stream takes bytes (through pyarrow's PyFileSystem every
        # write failed with "'Buffer' object is not an instance of 'bytes'"), and it is closed, which is what
        # uploads it, only after the whole file was written: a failed write leaves no object behind.
        stream = self._raw_output(f"{self.relative}/{name}")
        stream.write(data)
        stream.close()

    def _raw_output(self, path: str) -> Any:
        from deltalake.fs import DeltaStorageHandler

        handler = DeltaStorageHandler(deltalake_uri(self.target), self.storage_options)
        return handler._handler.open_output_stream(path, None)

    def delete(self, name: str) -> None:
        try:
            if self.local is not None:
                os.remove(os.path.join(self.local, name))
            else:
                self._remote().delete_file(f"{self.relative}/{name}")
        except FileNotFoundError:
            pass  # a concurrent compaction removed it first


def scopes(root: Folder) -> list[str]:
    if root.local is not None:
        import os

        try:
            return [d for d in os.listdir(root.local) if os.path.isdir(os.path.join(root.local, d))]
        except FileNotFoundError:
            return []
    import pyarrow.fs as pafs

    infos = root._remote().get_file_info(pafs.FileSelector(root.relative, allow_not_found=True))
    return [i.base_name for i in infos if i.type == pafs.FileType.Directory]


def folder_about(folder: Folder, key: str) -> dict[str, Any] | None:
    """What the first of a folder's parquet files says of itself under metadata ``key`` (the key and sequence
    columns of a tombstone scope or a history event log); None when no file says it."""
    for name in sorted(n for n in folder.names() if n.endswith(".parquet") and not n.startswith(".")):
        try:
            if folder.local is not None:
                schema = pq.read_schema(f"{folder.local}/{name}")
            else:
                with folder._remote().open_input_file(f"{folder.relative}/{name}") as f:
                    schema = pq.read_schema(f)
        except FileNotFoundError:
            continue
        raw = (schema.metadata or {}).get(key.encode())
        if raw:
            return json.loads(raw)
    return None


def now_us() -> int:
    """The wall clock in microseconds since the epoch (when a side file's rows were recorded, and expire)."""
    return int(time.time() * 1_000_000)


def scope_id(keys: tuple[str, ...], sequence: str, **about: Any) -> str:
    """The folder name of a key set's store: the key columns (as a set), the sequence column and what else
    tells stores apart (``history=2`` for history events), by name; in a column-mapped table, by physical
    names (stable under ``RENAME COLUMN``; a table that turned column mapping on keeps its columns' names of
    that moment as their physical names, so its scopes stay)."""
    text = json.dumps({"keys": sorted(keys), "sequence": sequence, **about}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


__all__ = ["HELPER_DIRS", "LEGACY_DIR", "ROOT_DIR", "Folder", "deltalake_uri", "folder_about", "now_us", "scope_id",
           "scopes"]
