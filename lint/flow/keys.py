"""Keys and sequence columns: what the code declares (sinks, MERGE conditions, dbt models, DDL, joins against
a written table, other files' declarations) and what the user configured, derived from the frozen facts."""

from __future__ import annotations

import ast
import fnmatch
from collections.abc import Callable

from ..model import chains
from ..model.callsites import arguments, call_sites
from ..model.scopes import Scope
from ..model.semantic import SemanticModel
from ..values import sql as sqlmod
from ..values.columns import condition_names
from ..values.evaluate import Values
from .facts import SCD2_FLOW_LABEL, Facts, KeyDecl, norm, strip_qualifier
from .tables import merge_target, sink_sources, sink_target

_ORDER_OPS = (ast.Gt, ast.GtE, ast.Lt, ast.LtE)


class Keys:
    """The key and sequence columns of one module, with how each was learned (for messages)."""

    def __init__(
        self,
        keys: list[str],
        sequence: list[str],
        key_patterns: list[str] | tuple[str, ...] = (),
    ) -> None:
        self.keys: list[str] = list(keys)
        self.sequence: list[str] = list(sequence)
        self.key_patterns = [p.lower() for p in key_patterns]
        self.labels: dict[str, str] = {}  # normalized key -> how it was learned
        self.scopes: dict[str, list[Scope]] = {}  # normalized key -> scopes that declared it
        # normalized sequence columns of SCD type 2 sinks, with the scopes that declared them
        self.history: dict[str, list[Scope]] = {}
        self.history_of: dict[str, str] = {}  # sequence -> what keeps its history, when not a sink
        self.by_table: dict[str, set[str]] = {}  # table -> its normalized keys
        self.untabled: set[str] = {norm(k) for k in keys}  # keys configured or declared for no known table
        self.seq_by_table: dict[str, set[str]] = {}  # table -> its normalized sequence columns
        self.untabled_seq: set[str] = {norm(s) for s in sequence}  # sequences configured or of no known table
        # the keys of no known table other than a MERGE's or a sink's into a table of unknown name: configured
        # (--key, the config), a DDL's, a join's against a written table...
        self.not_merged: set[str] = set(self.untabled)

    @classmethod
    def of(
        cls,
        facts: Facts,
        model: SemanticModel,
        values: Values,
        keys: list[str],
        sequence: list[str],
        key_patterns: list[str] | tuple[str, ...] = (),
    ) -> Keys:
        """The keys configured plus every key the facts declare, in the order the code declares them."""
        out = cls(keys, sequence, key_patterns)
        for decl in facts.declared:
            out.learn(decl)
        for decl in _declarations(facts, model, values):
            out.learn(decl)
        return out

    def learn(self, decl: KeyDecl) -> None:
        name = strip_qualifier(decl.column)
        n = norm(name)
        if decl.scope is not None:
            self.scopes.setdefault(n, []).append(decl.scope)
        if decl.history:
            self.history.setdefault(n, []).append(decl.scope)
            if decl.label == SCD2_FLOW_LABEL:
                self.history_of[n] = "an SCD type 2 pipeline flow (`stored_as_scd_type=2`)"
        if decl.sequence:
            if decl.table is not None:
                self.seq_by_table.setdefault(decl.table, set()).add(n)
            else:
                self.untabled_seq.add(n)
            if n not in {norm(x) for x in self.sequence}:
                self.sequence.append(name)
            return
        if decl.table is not None:
            self.by_table.setdefault(decl.table, set()).add(n)
        else:
            self.untabled.add(n)
            if decl.label != "merge key":
                self.not_merged.add(n)
        if n not in {norm(x) for x in self.keys}:
            self.keys.append(name)
            self.labels.setdefault(n, decl.label)

    def of_tables(
        self, tables: frozenset[str], keyless: frozenset[str] | set[str] = frozenset()
    ) -> list[str]:
        """The keys a write into ``tables`` is judged against: those tables' keys and the keys of no known
        table (``keyless`` tables are written without a key); every key of the module when a table's keys
        are not known (or no table is). A write only into named tables written without a key anywhere in the
        module (``write_deltalake(PREVIEW, pdf.head(50))``) is not judged against the keys of a MERGE into a
        table of unknown name: those are that table's."""
        if tables and all(t in keyless and t not in self.by_table for t in tables):
            return [k for k in self.keys if norm(k) in self.not_merged]
        if not tables or any(t not in self.by_table and t not in keyless for t in tables):
            return self.keys
        wanted = set(self.untabled).union(*(self.by_table.get(t, ()) for t in tables))
        return [k for k in self.keys if norm(k) in wanted]

    def sequences_of(self, tables: frozenset[str], keyless: frozenset[str] | set[str] = frozenset()) -> list[str]:
        """The sequence columns a write into ``tables`` is judged against: those tables' and those of no
        known table; every sequence of the module when a table's are not known (or no table is). A table
        written without a key and no sequence of its own (a pipeline's ``@dlt.table``) has none but the
        latter."""
        known = set(self.by_table) | set(self.seq_by_table) | set(keyless)
        if not tables or any(t not in known for t in tables):
            return self.sequence
        wanted = self.untabled_seq.union(*(self.seq_by_table.get(t, ()) for t in tables))
        return [s for s in self.sequence if norm(s) in wanted]

    def table_of_key(self, column: str, tables: frozenset[str]) -> str | None:
        """The one table among ``tables`` (all tables with keys, when empty) whose key ``column`` is."""
        n = norm(column)
        owners = [t for t in (tables or self.by_table) if n in self.by_table.get(t, ())]
        return owners[0] if len(owners) == 1 else None

    def pattern(self, col_n: str) -> str | None:
        """The configured key-name pattern a column name matches, if any."""
        for pat in self.key_patterns:
            if fnmatch.fnmatchcase(col_n, pat):
                return pat
        return None


def _declarations(facts: Facts, model: SemanticModel, values: Values) -> list[KeyDecl]:
    """The keys and sequences the facts declare beyond the ones recorded while collecting."""
    out: list[KeyDecl] = []
    for call, scope in facts.sink_calls:
        for table, keys, seqs, history in _at_calls(model, values, scope, _sink_keys, call):
            out.extend(KeyDecl(k, "merge key", scope, table=table) for k in keys)
            # an SCD type 2 sink's sequence becomes every version's __START_AT/__END_AT
            out.extend(
                KeyDecl(s, "sequence column", scope, sequence=True, history=history, table=table) for s in seqs
            )
    for call, cond, scope in facts.merges:
        if cond is None:
            continue
        for table, cols in _at_calls(model, values, scope, _merge_keys, call, cond):
            out.extend(KeyDecl(c, "merge key", scope, table=table) for c in cols)
    for cond, scope in facts.seq_conds:  # whenMatchedUpdate(condition="s.v > t.v"): newer wins by v
        for _table, newer in _at_calls(model, values, scope, _newer_columns, cond, tabled=False):
            out.extend(KeyDecl(c, "sequence column", scope, sequence=True) for c in newer)
    for call, scope in facts.dbt_keys:
        for k in values.const_strings(model.kwarg(call, "unique_key"), scope) or []:
            out.append(KeyDecl(k, "unique key of the dbt model", scope))
    for column, table, what, ddl_scope in facts.ddl_keys:
        out.append(KeyDecl(column, f"{what} of table `{table}`" if table != "?" else what, ddl_scope))
    for k, scope, table in facts.ext_keys:
        out.append(KeyDecl(k, "merge key", scope, table=table))
    for call, scope in facts.joins:
        sides = [call.func.value, call.args[0]]
        tables = [_table_read(model, values, side, scope) for side in sides]
        written = [t for t in tables if t is not None and t in facts.tables_written]
        if not written:
            continue
        on = call.args[1] if len(call.args) > 1 else model.kwarg(call, "on")
        if on is None:
            continue
        names = values.const_strings(on, scope)
        if names is None:
            names = []
            for cmp in ast.walk(on):
                if type(cmp) is ast.Compare and len(cmp.ops) == 1 and type(cmp.ops[0]) is ast.Eq:
                    for side in (cmp.left, cmp.comparators[0]):
                        names.extend(c for c in values.col_names(side, scope) if not c.startswith("<"))
        for k in names:
            out.append(KeyDecl(k, f"join key against the written table `{written[0]}`", scope))
    return out


def _at_calls(
    model: SemanticModel,
    values: Values,
    scope: Scope,
    read: Callable[..., tuple],
    *args: ast.AST,
    tabled: bool = True,
) -> list[tuple]:
    """What ``read`` finds for a write: its table, then the columns it declares, then anything else. When
    the table or the columns are not known and the write is inside a function of this module with
    parameters (``def upsert(df, table, keys)``), once for each call of that function in the module, with
    the parameters bound to that call's arguments; else (or when no call tells more) as the code stands.
    ``tabled=False``: what ``read`` finds has no table (None), and the columns alone decide."""
    first = read(model, values, *args, scope)
    fscope = scope
    while fscope is not None and not (fscope.kind == "function" and hasattr(fscope.node, "name")):
        fscope = fscope.parent
    # a column named by a template ({key}: a value not known here) may be known at each call
    complete = (first[0] is not None or not tabled) and first[1] and not any("{" in c for c in first[1])
    if complete or fscope is None or not fscope.params or not values.may_call(fscope):
        return [first]
    out = []
    for site, site_scope in call_sites(model, fscope):
        with values.at_call(fscope, arguments(site, site_scope, fscope)):
            found = read(model, values, *args, scope)
        if found[1]:
            out.append(found)
    return out or [first]


_MARK = "upsertsink_param_"  # a parameter's stand-in value while a helper is read for another file


def param_keys(model: SemanticModel, values: Values, facts: Facts, fscope: Scope) -> dict[str, list]:
    """For the files that call this module's top-level function ``fscope``: which of its parameters give
    the keys and the table of a MERGE or an ``UpsertSink`` inside it (``def upsert(df, table, keys)``).
    Each parameter is bound to a stand-in text (then to a list of one) and the keys and table found are
    read back: ``{"key_args": [[position, name]], "table_arg": [[position, name]], "cond_arg": [[position,
    name]], "seq_args": ...}`` (``cond_arg``: a parameter that is a MERGE's whole condition; ``seq_args``: a
    sink's ``sequence_by``), empty when no parameter gives them."""
    node = fscope.node
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not values.may_call(fscope):
        return {}
    params = [x.arg for x in node.args.posonlyargs + node.args.args]
    merges = [(c, cond, sc) for c, cond, sc in facts.merges if cond is not None and _inside(sc, fscope)]
    sinks = [(c, sc) for c, sc in facts.sink_calls if _inside(sc, fscope)]
    if not params or not (merges or sinks):
        return {}
    key_args: set[int] = set()
    table_args: set[int] = set()
    cond_args: set[int] = set()  # a parameter that is a MERGE's whole condition
    seq_args: set[int] = set()  # a parameter that is a sink's sequence_by
    for form in ("str", "list"):
        bound: dict[str, tuple[ast.AST, Scope]] = {}
        for i, p in enumerate(params):
            mark = ast.Constant(f"{_MARK}{i}", lineno=node.lineno, col_offset=node.col_offset)
            mark.stand_in = True  # type: ignore[attr-defined]  # Values reads its text, not the file's
            bound[p] = (mark if form == "str" else ast.List([mark], ast.Load()), model.module)
        with values.at_call(fscope, bound):
            found = [_merge_keys(model, values, c, cond, sc) for c, cond, sc in merges]
            read = [_sink_keys(model, values, c, sc) for c, sc in sinks]
            found += [r[:2] for r in read]
            for seq in (s for r in read for s in r[2]):
                seq_args.update(_stand_in(strip_qualifier(seq), len(params)))
            if form == "str":
                for _c, cond, sc in merges:
                    text = values.str_value(cond, sc)
                    cond_args.update(_stand_in(text.text if text is not None else None, len(params)))
        for table, cols in found:
            if form == "str":
                table_args.update(_stand_in(table, len(params)))
            for col in cols:
                key_args.update(_stand_in(strip_qualifier(col), len(params)))
    out: dict[str, list] = {}
    # the parameter holding the DataFrame written (the MERGE's source, what the sink writes): the caller's
    # argument goes to the table the caller gives (tables.Targets)
    written = [c.args[0] if c.args else model.kwarg(c, "source") for c, _cond, _sc in merges]
    written += [frame for c, sc in sinks for frame, where in sink_sources(model, c) if where is sc]
    frame_args = {params.index(n) for n in (_base_name(model, w) for w in written) if n in params}
    if key_args:
        out["key_args"] = [[i, params[i]] for i in sorted(key_args)]
    if frame_args and table_args:
        out["frame_arg"] = [[i, params[i]] for i in sorted(frame_args)]
    if table_args:
        out["table_arg"] = [[i, params[i]] for i in sorted(table_args)]
    if cond_args:
        out["cond_arg"] = [[i, params[i]] for i in sorted(cond_args)]
    if seq_args:
        out["seq_args"] = [[i, params[i]] for i in sorted(seq_args)]
    return out


def _base_name(model: SemanticModel, node: ast.AST | None) -> str | None:
    """The name a DataFrame expression starts from (``df`` of ``df.alias("s")``), if it is a name."""
    for _ in range(30):
        if type(node) is ast.Call and type(node.func) is ast.Attribute:
            node = node.func.value
        elif type(node) is ast.Attribute:
            node = node.value
        else:
            break
    return node.id if type(node) is ast.Name else None


def _stand_in(text: str | None, count: int) -> tuple[int, ...]:
    """The parameter a stand-in text is (``upsertsink_param_2``: the third of ``count``), if it is one."""
    i = text[len(_MARK) :] if text is not None and text.startswith(_MARK) else ""
    return (int(i),) if i.isdigit() and int(i) < count else ()


def _inside(scope: Scope | None, fscope: Scope) -> bool:
    while scope is not None:
        if scope is fscope:
            return True
        scope = scope.parent
    return False


def _sink_keys(
    model: SemanticModel, values: Values, call: ast.Call, scope: Scope
) -> tuple[str | None, list[str], list[str], bool]:
    """An ``UpsertSink``'s table, keys, sequence columns and whether it keeps history (SCD type 2)."""
    keys_node = model.kwarg(call, "keys") or (call.args[1] if len(call.args) > 1 else None)
    seq_node = _sink_option(model, call, scope, "sequence_by", "sequence")
    history = values.const_int(_sink_option(model, call, scope, "scd_type"), scope) == 2
    keys = values.const_strings(keys_node, scope) or []
    seqs = values.const_strings(seq_node, scope) or []
    # partial_update's sequence_groups={"pay_seq": ["paid_at", "amount"], ...}: each group's sequence column
    groups = _sink_option(model, call, scope, "sequence_groups")
    groups = model.resolve_dict(groups, scope) if groups is not None else None
    if type(groups) is ast.Dict:
        for k in groups.keys:
            names = values.const_strings(k, scope) if k is not None else None
            seqs += [n for n in names or () if n not in seqs]
    return sink_target(model, values, call, scope), keys, seqs, history


def _sink_option(model: SemanticModel, call: ast.Call, scope: Scope, *names: str) -> ast.AST | None:
    """A keyword argument of a sink call: ``name=...``, or an entry of a ``**{...}`` / ``**dict(...)``
    argument (also through a name bound once to one)."""
    found = model.kwarg(call, *names)
    if found is not None:
        return found
    for kw in call.keywords:
        if kw.arg is not None:
            continue
        value: ast.AST | None = kw.value
        if type(value) is ast.Name:
            bound = model.single_value(value, scope)
            value = bound[0] if bound is not None else None
        if type(value) is ast.Dict:
            for k, v in zip(value.keys, value.values, strict=False):
                if type(k) is ast.Constant and k.value in names:
                    return v
        elif type(value) is ast.Call and type(value.func) is ast.Name and value.func.id == "dict":
            for inner in value.keywords:
                if inner.arg in names:
                    return inner.value
    return None


def _merge_keys(
    model: SemanticModel, values: Values, call: ast.Call, cond: ast.AST, scope: Scope
) -> tuple[str | None, list[str]]:
    """The table a MERGE writes and the key columns its condition compares."""
    table = merge_target(model, values, call, scope)
    text = values.str_value(cond, scope)
    cols: list[str] = []
    if text is not None:
        cols = condition_names(values, text, sqlmod.condition_keys(text.text), scope)
    else:
        cond, cond_scope = _resolved(model, cond, scope)
        for cmp in ast.walk(cond):
            pair = _equality(cmp)
            if pair is not None:
                sides = [values.col_names(side, cond_scope) for side in pair]
                if not all(sides) or not all(_is_column_ref(x) for x in pair):
                    continue  # F.col("s.rn") == 1: a filter, not a key
                for names in sides:
                    cols.extend(c for c in names if not c.startswith("<"))
    return table, cols


def _newer_columns(
    model: SemanticModel, values: Values, cond: ast.AST, scope: Scope
) -> tuple[None, list[str]]:
    """The columns an update condition compares so that the newer row wins (``s.v > t.v``)."""
    text = values.str_value(cond, scope)
    if text is not None:
        newer = sqlmod.named(sqlmod.condition_sequences(text.text))
    else:
        newer = []
        cond, cond_scope = _resolved(model, cond, scope)
        for cmp in ast.walk(cond):
            if type(cmp) is ast.Compare and len(cmp.ops) == 1 and type(cmp.ops[0]) in _ORDER_OPS:
                left = values.col_names(cmp.left, cond_scope)
                right = values.col_names(cmp.comparators[0], cond_scope)
                same = len(left) == len(right) == 1 and norm(left[0]) == norm(right[0])
                if same and left[0] != right[0] and not left[0].startswith("<"):
                    newer.append(left[0])
    return None, newer


def _resolved(model: SemanticModel, node: ast.AST, scope: Scope) -> tuple[ast.AST, Scope]:
    """A Column condition held in a name (``cond = F.col("t.id") == F.col("s.id")``): the one expression
    it is bound to, followed a few names deep (a cycle of names ends where it started)."""
    for _ in range(8):
        bound = model.single_value(node, scope) if type(node) is ast.Name else None
        if bound is None:
            break
        node, scope = bound
    return node, scope


def _equality(node: ast.AST) -> tuple[ast.AST, ast.AST] | None:
    """The two sides of ``a == b`` or of the null-safe ``a.eqNullSafe(b)``; None for anything else."""
    if type(node) is ast.Compare and len(node.ops) == 1 and type(node.ops[0]) is ast.Eq:
        return node.left, node.comparators[0]
    if (
        type(node) is ast.Call
        and type(node.func) is ast.Attribute
        and node.func.attr == "eqNullSafe"
        and len(node.args) == 1
    ):
        return node.func.value, node.args[0]
    return None


def _is_column_ref(node: ast.AST) -> bool:
    return not (type(node) is ast.Constant and not isinstance(node.value, str)) and not (
        type(node) is ast.Call and type(node.func) is ast.Attribute and node.func.attr == "lit"
    )


def _table_read(model: SemanticModel, values: Values, node: ast.AST, scope: Scope) -> str | None:
    """The table (name or path) a DataFrame expression reads, following the chain and variables."""
    for step, where in chains.down_chain(model, node, scope):
        if type(step) is not ast.Call:
            continue
        if type(step.func) is not ast.Attribute:
            return None
        m = step.func.attr
        if m in ("table", "load", "parquet", "delta") and step.args:
            names = values.const_strings(step.args[0], where)
            return names[0].lower() if names else None
        if m in ("forName", "forPath") and len(step.args) > 1:
            names = values.const_strings(step.args[1], where)
            return names[0].lower() if names else None
    return None
