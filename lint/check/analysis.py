"""One module's analysis: the stages in order, and what each nondeterministic source reaches.

1. :mod:`~upsertsink.lint.model.semantic`: scopes, bindings, imports, qualified names (one pass over ``ast``);
2. :mod:`~upsertsink.lint.values.evaluate`: what expressions evaluate to (strings, SQL text, paths, constants);
3. :mod:`~upsertsink.lint.flow.collect`: the facts (column writes, row choices, sinks, MERGEs, joins), frozen;
4. :mod:`~upsertsink.lint.flow.keys`: the key and sequence columns declared and configured;
5. :mod:`~upsertsink.lint.flow.taint`: the sources reaching each fact, computed on demand and memoized;
6. the rules' module hooks, which see one :class:`~upsertsink.lint.rules.context.Context` and report.

:meth:`ModuleAnalysis.run` ranks what each source reaches (a key before a sequence before a column);
:meth:`ModuleAnalysis.summary` is what the module gives the files that import it.
"""

from __future__ import annotations

import ast
import bisect
import re
from collections.abc import Sequence
from functools import cache

from ..base.sources import SPARK_FUNCTIONS, SPARK_RANKING, UDF_FACTORIES
from ..base.types import Reach, Src
from ..flow.collect import collect
from ..flow.context import Context
from ..flow.derived import computed_alike, key_sources, param_reads
from ..flow.facts import EMPTY, Collector, Facts, RowEffect, Write, norm
from ..flow.keys import Keys, param_keys
from ..flow.tables import Targets
from ..flow.taint import Taint
from ..model.chains import Uses
from ..model.semantic import SemanticModel, top_function
from ..rules.hooks import FIX_HOOKS, METHOD_HOOKS, MODULE_HOOKS, SUBSCRIPT_HOOKS, TRIGGER_BYTES
from ..values.evaluate import Values

__all__ = ["ModuleAnalysis", "Reach", "Src", "noqa_codes"]


@cache
def _trigger_re() -> re.Pattern[str]:
    """Any catalogue word: compiled when a summary first needs it, not at every start-up."""
    return re.compile("|".join(re.escape(w.decode()) for w in TRIGGER_BYTES))


_NOQA_RE = re.compile(
    "#" + r"\s*noqa(?::\s*(?P<codes>[A-Za-z0-9_]+(?:[\s,]+[A-Za-z0-9_]+)*))?", re.IGNORECASE
)
_STAR_NAMES = frozenset(SPARK_FUNCTIONS) | SPARK_RANKING


class ModuleAnalysis:
    """Analyze one parsed module; :meth:`run` returns what each source reaches."""

    def __init__(
        self,
        tree: ast.Module,
        lines: Sequence[str],
        keys: list[str],
        sequence: list[str],
        key_patterns: list[str] | tuple[str, ...] = (),
        externals: dict[str, dict] | None = None,
        origin: str | None = None,
        root: str | None = None,
        runs: list[str] | tuple[str, ...] = (),
        notebook: bool = False,
    ) -> None:
        self.model = SemanticModel(tree, lines, externals, runs, notebook, UDF_FACTORIES, _STAR_NAMES)
        self.values = Values(self.model, origin, root)
        self._keys = (list(keys), list(sequence), list(key_patterns))
        self.ctx: Context | None = None
        self._trigger_lines: list[int] | None = None

    @property
    def wants(self) -> set[str]:
        """Import-qualified names looked up in other files of the tree."""
        return self.model.wants

    @property
    def deps(self) -> dict[str, str]:
        """Files read for SQL text -> content digest."""
        return self.values.deps

    def release(self) -> None:
        """Drop the analysis' structures and break the scopes' reference cycles (call when done)."""
        self.model.release()
        self.ctx = None

    def _analyze(self) -> Context:
        """Run the stages once: facts, keys, taint, the rules' module hooks."""
        if self.ctx is not None:
            return self.ctx
        model, values = self.model, self.values
        collector = Collector(model, values)
        ctx = Context(model, values, collector)
        facts = collect(collector, ctx, METHOD_HOOKS, SUBSCRIPT_HOOKS)
        keys = Keys.of(facts, model, values, *self._keys)
        ctx.facts, ctx.keys, ctx.taint = facts, keys, Taint(model, values, facts, keys, FIX_HOOKS)
        for hook in MODULE_HOOKS:
            hook(ctx)
        # DataFrames that are thrown away or only looked at give nothing (asked only where a source is)
        taint, uses = ctx.taint, Uses(model)
        kept = tuple(
            w for w in facts.writes if not (taint.column_taint(w.column) and uses.discarded(w.anchor))
        )
        rows = tuple(r for r in facts.rows if not (taint.write_taint(r) and uses.discarded(r.anchor)))
        if len(kept) != len(facts.writes) or len(rows) != len(facts.rows):
            ctx.facts = facts.keeping(kept, rows)
            ctx.taint = Taint(model, values, ctx.facts, keys, FIX_HOOKS)
        self.ctx = ctx
        return ctx

    def run(self) -> list[Reach]:
        """Analyze: what each nondeterministic source reaches (one :class:`Reach` per source)."""
        ctx = self._analyze()
        facts, keys, taint = ctx.facts, ctx.keys, ctx.taint
        assert isinstance(facts, Facts) and keys is not None and taint is not None
        built: list[Targets] = []

        def targets() -> Targets:  # where DataFrames flow: followed only in modules where a source is
            if not built:
                built.append(Targets(self.model, self.values, facts))
            return built[0]

        made: list[dict[str, frozenset[str]]] = []

        def derived() -> dict[str, frozenset[str]]:  # keys computed from other columns only (dedups)
            if not made:
                made.append(key_sources(facts, self.model, self.values, keys.keys))
            return made[0]

        # per source: (rank, target, column, decides rows, table) of everything it reaches
        reach: dict[Src, list[tuple[float, str, str, bool, str | None]]] = {}
        labels = dict(keys.labels)
        # per source arriving through column writes: the tables of those writes (None: one goes nowhere known)
        carried: dict[Src, set[str] | None] = {}
        for col_n, writes in facts.by_column.items():
            if not taint.column_taint(col_n):
                continue
            name = writes[0].column
            for w in writes:  # each write is judged against the keys of the table it goes to
                sources = taint.write_taint(w)
                if not sources:
                    continue
                found = targets().column_tables(w.anchor, w.column, w.scope)
                if found is None:
                    continue  # dropped before every write it flows into (``.drop("rn")``)
                tables = found
                unnamed = not tables and targets().unnamed_only(w.anchor)
                keyed = col_n in {norm(k) for k in keys.of_tables(tables, targets().keyless)}
                seq_n = {norm(s) for s in keys.sequences_of(tables, targets().keyless)}
                pattern = None if keyed or col_n in seq_n else keys.pattern(col_n)
                if keyed:
                    entry = (0, "key", name, False, keys.table_of_key(name, tables))
                elif col_n in seq_n:
                    entry = (1, "sequence", name, False, _one(tables))
                elif pattern is not None and facts.writes_data:
                    entry = (
                        0.2,
                        "key",
                        name,
                        False,
                        _one(tables),
                    )  # after a declared key: that explains more
                    labels.setdefault(col_n, f"key-like column (its name matches key pattern `{pattern}`)")
                else:
                    entry = (2, "column", name, False, _one(tables))
                for s in sources:
                    reach.setdefault(s, []).append(_no_table(entry) if unnamed else entry)
                    known = carried.get(s, set())
                    carried[s] = None if known is None or not tables else known | tables
        for effect in facts.rows:
            sources = taint.write_taint(effect)
            if not sources:
                continue
            tables = targets().tables_of(effect.anchor)
            lookup = targets().lookup_only(effect.anchor)  # rows of a left join's lookup side: values only
            unnamed = not tables and targets().unnamed_only(effect.anchor)
            for s in sources:
                via = carried.get(s)
                if tables and via and not via & tables:
                    continue  # a column of the same name written to other tables only
                entry = _row_target(keys, tables, effect, s, targets().keyless, derived(), facts)
                entry = _no_table(entry) if unnamed else entry
                reach.setdefault(s, []).append((2.5, "column", "*", True, _one(tables)) if lookup else entry)
        out: list[Reach] = []
        for s, entries in reach.items():
            entries.sort(key=lambda e: e[:4])
            best = entries[0]
            others: list[str] = []
            for e in entries[1:]:
                if not e[3] and e[2] != best[2] and e[2] not in others:
                    others.append(e[2])
            label = labels.get(norm(best[2]), "merge key") if best[1] == "key" else ""
            history = best[1] == "sequence" and norm(best[2]) in keys.history
            history_of = keys.history_of.get(norm(best[2]), "") if history else ""
            out.append(
                Reach(
                    s,
                    best[1],
                    best[2],
                    tuple(others),
                    best[3],
                    label or "merge key",
                    history=history,
                    history_of=history_of,
                    table=best[4],
                )
            )
        out.extend(ctx.reported)
        out.sort(key=lambda r: (r.source.line, r.source.col, r.source.rule))
        return out

    # ------------------------------------------------------------------ what other files can use
    def summary(self) -> dict:
        """What this module gives the files that import (or %run) it: per top-level function the sources
        its return value carries, the columns it writes with their sources and the keys it declares; per
        module-level name the sources of its value, or its constant text / list of strings."""
        ctx = self._analyze()
        facts, known, taint, model = ctx.facts, ctx.keys, ctx.taint, self.model
        assert isinstance(facts, Facts) and known is not None and taint is not None
        funcs: dict[str, dict] = {}
        by_top: dict[int, list[Write]] = {}  # top-level function scope -> the writes made inside it
        for w in facts.writes:
            top = top_function(w.scope)
            if top is not None:
                by_top.setdefault(id(top), []).append(w)
        keys_by_top: dict[int, set[str]] = {}
        for k, scopes in known.scopes.items():
            for sc in scopes:
                top = top_function(sc)
                if top is not None:
                    keys_by_top.setdefault(id(top), set()).add(k)
        for name, (fn, fscope) in model.module.funcs.items():
            if name.startswith("__"):
                continue
            entry: dict = {}
            if self._mentions_trigger(fn) or model.externals:
                rets = taint.returns_taint(fn, fscope)
                if rets:
                    entry["returns"] = _rows(rets)
            writes = []
            for w in by_top.get(id(fscope), ()):
                sources = taint.write_taint(w)
                if sources:
                    writes.append([w.column, _rows(sources)])
            if writes:
                entry["writes"] = writes
            keys = keys_by_top.get(id(fscope))
            if keys:
                entry["keys"] = sorted(keys)
            history = sorted(
                k for k, scopes in known.history.items() if any(top_function(sc) is fscope for sc in scopes)
            )
            if history:
                entry["history"] = history
            entry.update(param_keys(model, self.values, facts, fscope))  # keys and table given by the caller
            derives = param_reads(model, self.values, fscope)  # a key helper: the columns it reads
            if derives is not None:
                entry["derives"] = derives
            if entry:
                funcs[name] = entry
        values: dict[str, dict] = {}
        for name, bound in model.module.assigns.items():
            if name.startswith("__") or name in model.module.funcs:
                continue
            real = [v for v in bound if v is not None]
            if not real:
                continue
            entry = {}
            sources = EMPTY
            for v in real:
                sources = sources | taint.of(v, model.module)
            if sources:
                entry["sources"] = _rows(sources)
            if len(real) == 1:
                strings = self.values.const_strings(real[0], model.module)
                if strings is not None and len(strings) <= 64:
                    entry["strings"] = strings
                elif type(real[0]) is ast.Constant and type(real[0].value) is int:
                    entry["number"] = real[0].value  # e.g. SCD_TYPE = 2, passed to a sink as scd_type
                elif type(real[0]) is ast.Dict or type(real[0]) is ast.List:
                    literal = _literal(real[0])  # a config dict: its entries are read where it is imported
                    if literal is not None:
                        entry["literal"] = literal
                else:
                    text = self.values.str_value(real[0], model.module)
                    if text is not None and len(text.text) <= 20_000:
                        entry["text"] = text.text
            if entry:
                values[name] = entry
        values.update(_class_constants(model))
        out: dict = {}
        if funcs:
            out["funcs"] = funcs
        if values:
            out["values"] = values
        if model.notebook or model.runs:
            if model.notebook and model.module.imports:  # a %run brings them into the calling notebook
                out["imports"] = dict(model.module.imports)
            module_keys = [k for k, sc in known.scopes.items() if any(x is model.module for x in sc)]
            if module_keys:
                out["keys"] = sorted(module_keys)
            # the sources of each widget's default, for the notebooks that %run this one
            widgets = {name: _rows(taint.of(*default)) for name, default in facts.widgets.items()}
            if any(widgets.values()):
                out["widgets"] = {name: rows for name, rows in widgets.items() if rows}
        return out

    def _mentions_trigger(self, fn: ast.AST) -> bool:
        """Does the function's text name any catalogue word (else its return value carries no source)?"""
        if self._trigger_lines is None:
            text = "".join(self.model.lines).lower()
            starts = [0]
            for line in self.model.lines:
                starts.append(starts[-1] + len(line))
            self._trigger_lines = sorted(
                {bisect.bisect_right(starts, m.start()) for m in _trigger_re().finditer(text)}
            )
        i = bisect.bisect_left(self._trigger_lines, fn.lineno)
        return i < len(self._trigger_lines) and self._trigger_lines[i] <= (fn.end_lineno or fn.lineno)


def _class_constants(model: SemanticModel) -> dict[str, dict]:
    """The module's classes that hold string constants (column-name enums, ``class Cols: ID = "id"``): for
    the files that use ``Cols.ID`` or an Enum member's ``.value``, ``{"members": {name: [string]}}``."""
    out: dict[str, dict] = {}
    for cls in model.scopes:
        if cls.kind != "class" or cls.parent is not model.module:
            continue
        members = {}
        for attr, bound in cls.assigns.items():
            real = [v for v in bound if v is not None]
            if len(real) == 1 and type(real[0]) is ast.Constant and isinstance(real[0].value, str):
                members[attr] = [real[0].value]
        if members:
            out[cls.node.name] = {"members": members}  # type: ignore[union-attr]
    return out


def _row_target(
    keys: Keys,
    tables: frozenset[str],
    effect: RowEffect,
    src: Src,
    keyless: set[str],
    derived: dict[str, frozenset[str]] | None = None,
    facts: Facts | None = None,
) -> tuple[float, str, str, bool, str | None]:
    """What a row choice reaching ``tables`` (empty: not known) decides, judged against those tables' keys:
    against each table's own when it reaches several (the gravest of those judgements). ``derived``: the
    columns a key is computed from, when only from columns (a dedup by them keeps one row per key too);
    ``facts``: what tells a sequence computed like a dedup's column (its groups cannot differ in it)."""
    if len(tables) > 1:
        return min(
            (_row_target(keys, frozenset({t}), effect, src, keyless, derived, facts) for t in sorted(tables)),
            key=lambda e: e[0],
        )
    # a row choice ranks just after a direct reach of the same target: the direct one explains more
    table = _one(tables)
    judged = keys.of_tables(tables, keyless)
    keys_n = {norm(k) for k in judged}
    if effect.kind == "dedup":
        subset = {norm(c) for c in effect.subset or []}
        subset |= {k for k in keys_n if k in (derived or {}) and derived[k] <= subset}  # type: ignore[index]
        if keys_n and keys_n <= subset:
            # one row per written key survives, so the keys are right; which row is order-dependent
            return (2.5, "column", "*", True, table)
        for k in judged:
            if norm(k) not in subset:
                return (0.5, "key", k, True, keys.table_of_key(k, tables) or table)
        for s in keys.sequences_of(tables, keyless):
            if norm(s) not in subset and not (facts is not None and computed_alike(facts, s, subset)):
                return (1.5, "sequence", s, True, table)
        return (2.5, "column", "*", True, table)
    if effect.kind == "update":
        return (2.5, "column", "*", True, table)  # whether a matched row is updated: its values, not its key
    partition = src.partition
    if partition is not None and keys_n and keys_n <= partition:
        return (2.5, "column", "*", True, table)  # a numbering per key picks a row per key: values, not keys
    if judged:
        return (0.5, "key", judged[0], True, keys.table_of_key(judged[0], tables) or table)
    return (2.5, "column", "*", True, table)


def _no_table(entry: tuple) -> tuple:
    """A write followed only to tables of unknown name is judged against every key of the module, but it
    goes into none of the tables those keys belong to: its message names no table."""
    return (*entry[:4], None)


def _literal(node: ast.AST) -> str | None:
    """A dict or list of constants (strings, numbers, nested dicts and lists) as Python text, at most 20,000
    characters; None for anything else."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    text = repr(value)
    return text if len(text) <= 20_000 and not isinstance(value, (set, frozenset)) else None


def _one(tables: frozenset[str]) -> str | None:
    """The table when a fact goes to one table only, else None."""
    return next(iter(tables)) if len(tables) == 1 else None


def _rows(taint: frozenset) -> list[dict]:
    """Sources as plain data for a summary (another file reports them at its own call site)."""
    return sorted(
        ({"rule": s.rule, "what": s.what, "line": s.line, "path": "", "via": s.via} for s in taint),
        key=lambda r: (r["line"], r["rule"], r["what"]),
    )


def noqa_codes(line: str) -> set[str] | None:
    """None when the line has no ``# noqa``; an empty set for a bare ``# noqa``; else the listed codes."""
    if "noqa" not in line.lower():
        return None
    m = _NOQA_RE.search(line)
    if m is None:
        return None
    codes = m.group("codes")
    if not codes:
        return set()
    return {c.upper() for c in re.split(r"[\s,]+", codes) if c}
