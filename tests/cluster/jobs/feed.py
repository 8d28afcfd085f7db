"""The change feeds of the cluster/object-store scenarios: the reliability harness's (tests/reliability), per
writer.

``harness.change_feed`` gives inserts, updates, deletes, exact duplicates, several rows of one key in a batch,
late (older) events and an entirely stale batch, with one content per (key, sequence). Writers with feeds of
their own (own app ids) must not share a (key, sequence) pair either, so writer ``w``'s sequence numbers are
rebased to ``seq * 10 + w``: each feed keeps its own order and ``harness.model`` of all of them together is
the one table every interleaving of their commits converges to.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "reliability"))

from harness import DELETE_WHEN, KEYS, SCHEMA, SEQUENCE, arrow_batch, change_feed, model

__all__ = ["DELETE_WHEN", "KEYS", "SCHEMA", "SEQUENCE", "arrow_batch", "feed", "model", "state"]

BATCHES = 6


def feed(writer: int, batches: int = BATCHES, seed: int = 7) -> list[list[dict]]:
    """Writer ``writer``'s feed (0..9): the harness feed of seed ``seed + writer``, sequences rebased."""
    rebased = []
    for rows in change_feed(seed + writer, batches=batches):
        rebased.append([{**r, "seq": r["seq"] * 10 + writer, "val": f"{r['val']}-w{writer}"} for r in rows])
    return rebased


def expected(*writers: int, batches: int = BATCHES) -> dict[int, tuple[str, int]]:
    """The table that the feeds of ``writers``, each applied once, converge to: {id: (val, seq)}."""
    return model([rows for w in writers for rows in feed(w, batches)])


def state(path: str, options: dict[str, str] | None) -> dict[int, tuple[str, int]]:
    """The table as {id: (val, seq)}, read with deltalake; fails on a duplicate key."""
    from deltalake import DeltaTable

    rows = DeltaTable(path, storage_options=options).to_pyarrow_table(columns=["id", "val", "seq"]).to_pylist()
    found: dict[int, tuple[str, int]] = {}
    for r in rows:
        if r["id"] in found:
            raise AssertionError(f"duplicate key {r['id']} in {path}")
        found[r["id"]] = (r["val"], r["seq"])
    return dict(sorted(found.items()))
