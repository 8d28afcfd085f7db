"""The keyed comparison on Arrow (no JVM): the same semantics as the Spark comparison, with pyarrow
compute kernels and numpy over dense key ids (see docs/diff.md, "How it works")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from upsertsink import io
from upsertsink.diffing.inputs import Request, Side, history_keys, plan_columns, type_mismatch
from upsertsink.diffing.result import DiffResult, equal_result, sample_frame, sample_records
from upsertsink.fingerprint import fingerprint


def _data(side: Side) -> Any:
    """A pyarrow Table, or a Dataset read lazily (only the compared columns)."""
    return io.arrow_source(side.path) if side.path is not None else io.to_arrow_table(side.obj)


def _arrow_common_type(name: str, lt: Any, rt: Any) -> Any:
    import pyarrow as pa

    t = pa.types
    if lt.equals(rt):
        return lt
    if t.is_null(lt):
        return rt
    if t.is_null(rt):
        return lt
    if t.is_integer(lt) and t.is_integer(rt):
        return pa.int64()
    if (t.is_integer(lt) or t.is_floating(lt)) and (t.is_integer(rt) or t.is_floating(rt)):
        return pa.float64()
    if t.is_decimal(lt) and t.is_decimal(rt):
        scale = max(lt.scale, rt.scale)
        return pa.decimal128(min(38, max(lt.precision - lt.scale, rt.precision - rt.scale) + scale), scale)
    if t.is_decimal(lt) or t.is_decimal(rt):
        dec, other = (lt, rt) if t.is_decimal(lt) else (rt, lt)
        if t.is_integer(other):
            return pa.decimal128(min(38, max(dec.precision - dec.scale, 19) + dec.scale), dec.scale)
        if t.is_floating(other):
            return pa.float64()
    if (t.is_string(lt) or t.is_large_string(lt)) and (t.is_string(rt) or t.is_large_string(rt)):
        return pa.large_string()
    if (t.is_binary(lt) or t.is_large_binary(lt)) and (t.is_binary(rt) or t.is_large_binary(rt)):
        return pa.large_binary()
    if t.is_timestamp(lt) and t.is_timestamp(rt):
        return pa.timestamp("us", tz="UTC")
    if t.is_date(lt) and t.is_date(rt):
        return pa.date32()
    raise type_mismatch(name, str(lt), str(rt))


def _arrow_project(data: Any, cols: list[str], types: dict[str, Any]) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    table = data.to_table(columns=cols) if hasattr(data, "to_table") else data.select(cols)
    arrays = []
    for c in cols:
        arr = table.column(c)
        if not arr.type.equals(types[c]):
            arr = pc.cast(arr, types[c], safe=False)
        arrays.append(arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0))
    return pa.table(arrays, names=cols) if arrays else table


def _arrow_key_ids(left: Any, right: Any, keys: list[str]) -> tuple[Any, Any, int]:
    """Dense ids of the key values of both sides (nulls equal nulls), and how many distinct keys exist."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import pyarrow.compute as pc

    n = left.num_rows
    combined = None
    for k in keys:
        arr = pa.concat_arrays([left.column(k).combine_chunks(), right.column(k).combine_chunks()])
        try:
            codes = pc.dictionary_encode(arr, null_encoding="encode").indices.to_numpy(zero_copy_only=False)
            codes = codes.astype(np.int64)
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, TypeError):
            codes = pd.factorize(np.array([repr(v) for v in arr.to_pylist()], dtype=object))[0]
        if combined is None:
            combined = codes
        else:  # re-densify after each column so the mixed radix never overflows
            combined = pd.factorize(combined * (int(codes.max(initial=0)) + 1) + codes)[0].astype(np.int64)
    assert combined is not None
    groups = int(combined.max(initial=-1)) + 1
    return combined[:n], combined[n:], groups


def _arrow_differs(a: Any, b: Any, tol: float | None) -> Any:
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    t = a.type
    try:
        same = pc.fill_null(pc.equal(a, b), False)
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid, TypeError):
        av, bv = a.to_pylist(), b.to_pylist()
        return np.array([x != y for x, y in zip(av, bv)], dtype=bool)
    same = pc.or_(same, pc.and_(pc.is_null(a), pc.is_null(b)))
    if pa.types.is_floating(t):
        same = pc.or_(same, pc.fill_null(pc.and_(pc.is_nan(a), pc.is_nan(b)), False))
    if tol is not None and (pa.types.is_floating(t) or pa.types.is_decimal(t)):
        gap = pc.abs(pc.subtract(pc.cast(a, pa.float64()), pc.cast(b, pa.float64())))
        same = pc.or_(same, pc.fill_null(pc.less_equal(gap, tol), False))
    return ~same.to_numpy(zero_copy_only=False)


def _arrow_has_duplicates(table: Any, keys: list[str]) -> bool:
    import numpy as np

    ids, _, groups = _arrow_key_ids(table, table.slice(0, 0), keys)
    return bool((np.bincount(ids, minlength=groups) > 1).any())


def compare(left: Side, right: Side, req: Request, say: Callable[[str], None]) -> DiffResult:
    """Compare two sides (Delta tables, files, pandas or Arrow frames) on Arrow, in this process."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    keys, tol = req.keys, req.tolerance
    ld, rd = _data(left), _data(right)
    keys = history_keys(ld.schema.names, rd.schema.names, keys)  # two history tables: version by version
    compared = plan_columns(ld.schema.names, rd.schema.names, keys, req.columns, req.ignore)
    cols = [*keys, *compared]
    types = {c: _arrow_common_type(c, ld.schema.field(c).type, rd.schema.field(c).type) for c in cols}
    say("reading both sides")
    left, right = _arrow_project(ld, cols, types), _arrow_project(rd, cols, types)  # tables from here on
    base = {"keys": keys, "columns": compared, "rows_left": left.num_rows, "rows_right": right.num_rows}
    say("fingerprinting both sides")
    fingerprint_match = fingerprint(left.select(cols)) == fingerprint(right.select(cols))
    if fingerprint_match:
        say("checking for duplicate keys")
        if not _arrow_has_duplicates(left, keys):
            return equal_result(keys, compared, left.num_rows, "embedded")

    say("comparing by key")
    nl_rows = left.num_rows
    lid, rid, groups = _arrow_key_ids(left, right, keys)
    cl, cr = np.bincount(lid, minlength=groups), np.bincount(rid, minlength=groups)
    pos_l, pos_r = np.full(groups, -1, dtype=np.int64), np.full(groups, -1, dtype=np.int64)
    pos_l[lid] = np.arange(len(lid))
    pos_r[rid] = np.arange(len(rid))
    dup = (cl > 1) | (cr > 1)
    only_l = ~dup & (cl == 1) & (cr == 0)
    only_r = ~dup & (cl == 0) & (cr == 1)
    both = np.flatnonzero(~dup & (cl == 1) & (cr == 1))
    li, ri = pos_l[both], pos_r[both]
    flags = np.zeros((groups, len(compared)), dtype=bool)
    for j, c in enumerate(compared):
        flags[both, j] = _arrow_differs(
            left.column(c).combine_chunks().take(li), right.column(c).combine_chunks().take(ri), tol
        )
    changed = np.zeros(groups, dtype=bool)
    changed[both] = flags[both].any(axis=1)
    differing = np.flatnonzero(dup | only_l | only_r | changed)

    say("collecting samples")
    rep = np.where(cl[differing] > 0, pos_l[differing], nl_rows + pos_r[differing])
    key_table = pa.concat_tables([left.select(keys), right.select(keys)]).take(pa.array(rep))
    try:  # pyarrow >= 25 takes the null placement per sort key
        order = pc.sort_indices(key_table, sort_keys=[(k, "ascending", "at_start") for k in keys])
    except (TypeError, ValueError, pa.ArrowInvalid):
        order = pc.sort_indices(
            key_table, sort_keys=[(k, "ascending") for k in keys], null_placement="at_start"
        )
    order = order.to_numpy()
    differing, rep = differing[order], rep[order]
    key_table = key_table.take(pa.array(order))

    def take(n: int) -> Any:
        groups_n = differing[:n]
        keyvals = key_table.slice(0, len(groups_n)).to_pylist()
        lvals = left.take(pa.array(np.maximum(pos_l[groups_n], 0))).to_pylist() if nl_rows else None
        rvals = right.take(pa.array(np.maximum(pos_r[groups_n], 0))).to_pylist() if right.num_rows else None
        rows = []
        for i, g in enumerate(groups_n):
            row: dict[str, Any] = {f"__k{x}": keyvals[i][k] for x, k in enumerate(keys)}
            row["__status"] = (
                "duplicate_key" if dup[g] else "only_in_left" if only_l[g]
                else "only_in_right" if only_r[g] else "changed"
            )  # fmt: skip
            row["__nl"], row["__nr"] = int(cl[g]), int(cr[g])
            for j, c in enumerate(compared):
                row[f"__l{j}"] = lvals[i][c] if lvals is not None and cl[g] else None
                row[f"__r{j}"] = rvals[i][c] if rvals is not None and cr[g] else None
                row[f"__d{j}"] = bool(flags[g, j])
            rows.append(row)
        return sample_frame(sample_records(rows, keys, compared), keys, compared)

    changed_columns = {
        c: int(flags[changed, j].sum()) for j, c in enumerate(compared) if flags[changed, j].any()
    }
    result = DiffResult(
        equal=False,
        only_in_left=int(only_l.sum()),
        only_in_right=int(only_r.sum()),
        changed=int(changed.sum()),
        changed_columns=changed_columns,
        duplicate_keys_left=int((cl > 1).sum()),
        duplicate_keys_right=int((cr > 1).sum()),
        duplicate_keys=int(dup.sum()),
        fingerprint_match=fingerprint_match,
        engine="embedded",
        _samples=take(req.sample_size),
        _more_samples=take,
        **base,
    )
    result.equal = result.differences == 0
    return result
