"""Deterministic change feeds for the cluster/object-store tests, and the model they must converge to.

A feed is a list of batches of rows (id, name, amount, seq, op); ``op = 'D'`` marks a delete. Sequence
numbers are unique across every writer of a scenario, so the model is simple: per key, the row with the
highest sequence decides (a delete removes the key), whatever order the writers' commits land in.
"""

from __future__ import annotations

import random

SCHEMA = "id long, name string, amount double, seq long, op string"
COLUMNS = ["id", "name", "amount", "seq", "op"]
KEYS = ["id"]
SEQUENCE = "seq"
DELETE_WHEN = "op = 'D'"


def feed(writer: int, batches: int, rows: int, keys: int, seed: int = 7) -> list[list[tuple]]:
    """``batches`` batches of ``rows`` rows over ids ``0..keys-1`` for writer number ``writer`` (0..9).

    About one row in six is a delete; the first batch of writer 0 inserts only.
    """
    rng = random.Random(seed * 1000 + writer)
    out = []
    for b in range(batches):
        ids = rng.sample(range(keys), min(rows, keys))
        batch = []
        for j, key in enumerate(ids):
            seq = ((b * 10 + writer) * 100_000) + j + 1  # unique per (batch, writer, row)
            op = "D" if (b or writer) and rng.random() < 1 / 6 else "U"
            batch.append((key, f"w{writer}b{b}r{j}", round(rng.uniform(1, 1000), 2), seq, op))
        out.append(batch)
    return out


def model(*feeds: list[list[tuple]]) -> dict[int, tuple]:
    """The table every order of applying ``feeds`` converges to: id -> (id, name, amount, seq, op)."""
    latest: dict[int, tuple] = {}
    for batches in feeds:
        for batch in batches:
            for row in batch:
                if row[0] not in latest or row[3] > latest[row[0]][3]:
                    latest[row[0]] = row
    return {k: r for k, r in latest.items() if r[4] != "D"}
