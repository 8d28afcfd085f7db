"""What the write rules share: the module's batch functions, its calls by scope, Delta's transaction
identifiers, constant strings and the SQL statements run in a batch function.

The write rules ask whether writing the same values twice leaves the same table. They look at writes made in
*batch functions*: the functions a module passes to ``foreachBatch`` (by name, ``self.method``, lambda or
``functools.partial``), functions with a parameter named like a batch id (``batch_id``, ``epoch_id``,
``batchId``...), the query functions of a declarative pipeline (``@dlt.table``, ``@dp.materialized_view``,
``@dp.append_flow``, views: the pipeline runs them again on every update, with no batch id), and the
module's own functions they call (``self.m(...)`` methods of the same class included; a few calls deep). Each rule finds its writes with
its own module hook (run once per module, after the shared flow has seen every call); what they find out
about the module is computed once and kept in ``ctx.facts.rule_state`` (see :func:`write_state`).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..base.structs import struct

if TYPE_CHECKING:
    from ..flow.context import Context

_BATCH_PARAM = re.compile(r"^(micro_?)?(batch|epoch)_?(id|no|num|number|idx|index)$", re.IGNORECASE)
_TXN_CONFS = frozenset({"spark.databricks.delta.write.txnappid", "spark.databricks.delta.write.txnversion"})
# the words that make the pre-filter analyze a file for the write rules (``dlt`` and ``pipelines`` name the
# modules of the declarative pipelines' decorators)
# words that make the pre-filter analyze a file for the write rules
TRIGGER_WORDS = frozenset({"batch", "epoch", "merge", "upsertsink", "dlt", "pipelines"})


@struct
class BatchFn:
    """A function that writes one batch: how it was recognized and which parameter holds the batch id."""

    scope: Any
    name: str  # qualified inside the module: ``handle``, ``Job.write_batch``, ``main.<lambda>``
    epoch: str | None  # the parameter holding the epoch / batch id, when known
    how: str  # foreachBatch | param | pipeline | called
    via: str = ""  # for ``called``: the batch function that calls it
    is_lambda: bool = False
    # a query function of a declarative pipeline, or a function one calls: run again on every update
    pipeline: bool = False

    def where(self) -> str:
        """How the message names the function."""
        if self.how == "foreachBatch":
            return f"the foreachBatch function `{self.name}`"
        if self.how == "pipeline":
            return f"the pipeline function `{self.name}` (run again on every update)"
        if self.how == "called":
            kind = "pipeline function" if self.pipeline else "batch function"
            return f"`{self.name}`, called from the {kind} `{self.via}`"
        return f"`{self.name}` (it takes the batch id `{self.epoch}`)"


def advice(bf: BatchFn) -> str:
    """Which fix advice (and why) a write rule's finding in ``bf`` takes: ``pipeline`` in a declarative
    pipeline's function (no epoch id there), else ``write``."""
    return "pipeline" if bf.pipeline else "write"


def sql_module() -> Any:
    """The shared SQL module (imported late: it imports the catalogue, which imports the rules)."""
    from ..values import sql

    return sql


def write_state(ctx: Context) -> dict:
    """The write rules' memo for one module (its ``foreach`` calls, batch functions, calls by scope...)."""
    return ctx.facts.rule_state.setdefault("writes", {"foreach": []})


def on_foreach_batch(ctx: Context, call: ast.Call, scope: Any) -> None:
    """Remember a ``foreachBatch(...)`` call (its function is a batch function)."""
    write_state(ctx)["foreach"].append((call, scope))


# the method hooks of every rule that needs the module's batch functions (run once however many declare them)
BATCH_FUNCTION_HOOKS = {"foreachBatch": on_foreach_batch}


# ---------------------------------------------------------------------------------------- batch functions
def _qualname(scope: Any) -> str:
    names: list[str] = []
    s = scope
    while s is not None and s.parent is not None:
        node = s.node
        names.append(
            node.name
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            else "<lambda>"
        )
        s = s.parent
    return ".".join(reversed(names))


def _params(scope: Any) -> list[str]:
    """Positional parameters as a caller passes them (``self`` left out for methods)."""
    params = list(scope.params)
    if scope.parent is not None and scope.parent.kind == "class" and params:
        params = params[1:]
    return params


def _callables(ctx: Context, node: ast.AST, scope: Any, depth: int = 0) -> list[tuple[Any, int, bool]]:
    """(function scope, number of arguments bound before Spark's (df, epoch_id), is a lambda) for the
    function an expression names."""
    if depth > 5:
        return []
    t = type(node)
    if t is ast.Lambda:
        fscope = ctx.model.lambda_scope(node)
        return [(fscope, 0, True)] if fscope is not None else []
    if t is ast.Name:
        s = ctx.model.lookup(node.id, scope)
        if s is None:
            return []
        if node.id in s.funcs:
            return [(s.funcs[node.id][1], 0, False)]
        value = ctx.model.single_value(node, scope)
        return _callables(ctx, value[0], value[1], depth + 1) if value is not None else []
    if t is ast.Attribute:
        cls = ctx.model.self_class(node.value, scope)
        if cls is not None and node.attr in cls.funcs:
            return [(cls.funcs[node.attr][1], 0, False)]
        return []
    if t is ast.Call and node.args:
        q = ctx.model.qualname(node.func, scope) or ""
        name = node.func.id if type(node.func) is ast.Name else ""
        if q == "functools.partial" or name == "partial":
            return [
                (f, bound + len(node.args) - 1, lam)
                for f, bound, lam in _callables(ctx, node.args[0], scope, depth + 1)
            ]
    return []


def batch_functions(ctx: Context) -> dict[int, BatchFn]:
    """The module's batch functions by id of their scope (memoized per module)."""
    st = write_state(ctx)
    if "batch" in st:
        return st["batch"]
    out: dict[int, BatchFn] = {}
    for call, scope in st["foreach"]:
        target = call.args[0] if call.args else ctx.model.kwarg(call, "func")
        if target is None:
            continue
        for fscope, bound, lam in _callables(ctx, target, scope):
            params = _params(fscope)
            epoch = params[bound + 1] if len(params) > bound + 1 else None
            out[id(fscope)] = BatchFn(fscope, _qualname(fscope), epoch, "foreachBatch", is_lambda=lam)
    for fscope in ctx.model.decorated:
        if id(fscope) not in out and ctx.model.pipeline_decorator(fscope) is not None:
            out[id(fscope)] = BatchFn(fscope, _qualname(fscope), None, "pipeline", pipeline=True)
    scopes = {id(s): s for _c, s in ctx.model.calls if s.kind == "function"}
    for key, fscope in scopes.items():
        if key in out:
            continue
        for p in _params(fscope):
            if _BATCH_PARAM.match(p) or p in ("batchId", "epochId"):
                out[key] = BatchFn(fscope, _qualname(fscope), p, "param")
                break
    # the module's own functions that a batch function calls (a few calls deep)
    work = list(out.values())
    for _ in range(3):
        found: list[BatchFn] = []
        by_scope = calls_by_scope(ctx)
        for bf in work:
            for call in by_scope.get(id(bf.scope), ()):
                callee = _own_callee(ctx, call.func, bf.scope)
                if callee is None or id(callee) in out:
                    continue
                params = _params(callee)
                epoch = None
                for i, a in enumerate(call.args):
                    if type(a) is ast.Name and bf.epoch and a.id == bf.epoch and i < len(params):
                        epoch = params[i]
                for kw in call.keywords:
                    if type(kw.value) is ast.Name and bf.epoch and kw.value.id == bf.epoch and kw.arg:
                        epoch = kw.arg
                new = BatchFn(callee, _qualname(callee), epoch, "called", via=bf.name, pipeline=bf.pipeline)
                out[id(callee)] = new
                found.append(new)
        if not found:
            break
        work = found
    st["batch"] = out
    return out


def _own_callee(ctx: Context, func: ast.AST, scope: Any) -> Any:
    """The scope of the module's own function a call calls: ``f(...)`` of a function of the module, or
    ``self.m(...)`` of a method of the caller's class; else None."""
    if type(func) is ast.Name:
        s = ctx.model.lookup(func.id, scope)
        return s.funcs[func.id][1] if s is not None and func.id in s.funcs else None
    if type(func) is ast.Attribute:
        cls = ctx.model.self_class(func.value, scope)
        if cls is not None and func.attr in cls.funcs:
            return cls.funcs[func.attr][1]
    return None


def calls_by_scope(ctx: Context) -> dict[int, list[ast.Call]]:
    """The module's calls grouped by the scope they are made in (memoized)."""
    st = write_state(ctx)
    if "by_scope" not in st:
        by: dict[int, list[ast.Call]] = {}
        for call, scope in ctx.model.calls:
            by.setdefault(id(scope), []).append(call)
        st["by_scope"] = by
    return st["by_scope"]


def batch_calls(ctx: Context) -> Iterator[tuple[BatchFn, ast.Call]]:
    """Every method call (``x.m(...)``) made directly in one of the module's batch functions, with it."""
    by_scope = calls_by_scope(ctx)
    for key, bf in batch_functions(ctx).items():
        for call in by_scope.get(key, ()):
            if type(call.func) is ast.Attribute:
                yield bf, call


def txn_marked(ctx: Context, bf: BatchFn, write: ast.AST) -> bool:
    """Does the function set Delta's session-level transaction identifiers (both of them) before ``write``
    (a conf set after it marks only the next batch's write, with this batch's id)?"""
    seen: set[str] = set()
    at = (write.lineno, write.col_offset)
    for call in calls_by_scope(ctx).get(id(bf.scope), ()):
        if (call.lineno, call.col_offset) >= at:
            break  # the calls are in source order
        if type(call.func) is ast.Attribute and call.func.attr == "set" and call.args:
            names = ctx.values.const_strings(call.args[0], bf.scope)
            if names and names[0].lower() in _TXN_CONFS:
                seen.add(names[0].lower())
    return seen == _TXN_CONFS


def batch_sql_statements(ctx: Context, call: ast.Call, bf: BatchFn) -> Iterator[tuple[Any, Any]]:
    """(text, statement) for each statement of a ``spark.sql(...)`` call made in the batch function ``bf``;
    nothing when the text is unknown or does not parse, or when the function sets Delta's transaction
    identifiers (then its SQL writes are skipped on a replay)."""
    if call.func.attr != "sql" or not call.args:
        return
    text = ctx.values.sql_text(call.args[0], bf.scope)
    if text is None:
        return
    result = sql_module().analyze_statements(text.text)
    if not result.ok or not result.statements or txn_marked(ctx, bf, call):
        return
    for st in result.statements:
        yield text, st


# ---------------------------------------------------------------------------------------- values
def const(ctx: Context, node: ast.AST | None, scope: Any) -> str | None:
    if node is None:
        return None
    if type(node) is ast.Attribute:  # SaveMode.Append
        return node.attr.lower()
    names = ctx.values.const_strings(node, scope)
    return names[0] if names and len(names) == 1 else None
