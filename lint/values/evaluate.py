"""Value evaluation: the strings, paths, SQL text, ``.sql`` files, constants and window specs an expression
evaluates to, as far as the module (and the summaries of the other files of the tree) tell.

Every evaluation is a function of the semantic model and of an explicit environment ``env`` (loop
variables bound while a ``join`` over a comprehension is evaluated): nothing here depends on the order in
which the linter asks. The files read for SQL text are recorded in :attr:`Values.deps` (the cache keys on
them).
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from ..base.spark_api import FRAME_PROPERTIES, NAME_ARG_FUNCTIONS, ORDER_WRAPPERS
from ..model.callsites import arguments, call_sites, default_of
from ..model.scopes import Scope
from ..model.semantic import SemanticModel
from .formats import joined, percent_format, str_format
from .paths import ABSENT, find_sql_file, path_value, shown
from .strings import PosText, literal_text, stand_in_literal

Env = tuple  # of dict[str, PosText]: loop variables, innermost last
T = TypeVar("T")


def _same(a: list[str], b: list[str]) -> bool:
    return a == b


def _same_text(a: PosText, b: PosText) -> bool:
    return a.text == b.text


class Values:
    """What expressions of one module evaluate to."""

    def __init__(self, model: SemanticModel, origin: str | None = None, root: str | None = None) -> None:
        self.model = model
        self.origin = origin  # the linted file (``__file__``, and where relative .sql paths start)
        self.root = root  # the project root: only .sql files inside it are read
        self.deps: dict[str, str] = {}  # files read for SQL text -> content digest (ABSENT: looked, none)
        self._memo: dict[int, PosText | None] = {}
        self._busy: set[int] = set()  # ids of the nodes const_strings is evaluating (a cycle is unknown)
        self._holes = 0
        # (id(function scope), parameter) -> the argument one call site gives it (see :meth:`at_call`)
        self._args: dict[tuple[int, str], tuple[ast.AST, Scope]] = {}
        self._calling: list[int] = []  # the functions whose calls are being evaluated, innermost last
        # other files' constant dicts and lists, parsed once per place they are used
        self._literals: dict[tuple[str, int, int], ast.AST] = {}
        self._param_depth = 0  # parameters being followed to their calls (see _param_value)

    @contextmanager
    def at_call(self, fscope: Scope, args: dict[str, tuple[ast.AST, Scope]]) -> Iterator[None]:
        """Evaluate as if the function of ``fscope`` ran for one call: its parameters are the arguments
        that call gives (``upsert(out, "silver.orders", ["id"])``). Values found meanwhile are not kept."""
        saved, saved_args = self._memo, self._args
        self._memo = {}
        self._args = {**saved_args, **{(id(fscope), name): arg for name, arg in args.items()}}
        self._calling.append(id(fscope))
        try:
            yield
        finally:
            self._memo, self._args = saved, saved_args
            self._calling.pop()

    def may_call(self, fscope: Scope) -> bool:
        """May :meth:`at_call` bind ``fscope``'s parameters now? Not inside a call of itself (recursion),
        nor more than a few calls deep."""
        return id(fscope) not in self._calling and len(self._calling) < 6

    def _arg(self, node: ast.Name, scope: Scope) -> tuple[ast.AST, Scope] | None:
        """The argument bound to the parameter ``node`` names, while :meth:`at_call` binds one."""
        if not self._args:
            return None
        s = self.model.lookup(node.id, scope)
        return self._args.get((id(s), node.id)) if s is not None else None

    def binding(self, node: ast.Name, scope: Scope) -> tuple[ast.AST, Scope] | None:
        """The one value a name is bound to (the argument, while a call of its function is evaluated)."""
        return self._arg(node, scope) or self.model.single_value(node, scope)

    # ------------------------------------------------------------------ strings
    def str_value(self, node: ast.AST | None, scope: Scope, env: Env = ()) -> PosText | None:
        """The text a string expression evaluates to, with the file position of every character: literals,
        f-strings, ``+``, ``%``, ``str.format``, ``sep.join(...)`` over literal lists and comprehensions,
        ``textwrap.dedent``/``strip``, variables, ``self`` attributes, other files' constants and ``.sql``
        files read with ``Path(...).read_text()`` or ``open(...).read()``."""
        if node is None:
            return None
        if env:
            return self._str_value(node, scope, env)
        key = id(node)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = None  # a cycle evaluates to unknown
        out = self._str_value(node, scope, env)
        self._memo[key] = out
        return out

    def _str_value(self, node: ast.AST, scope: Scope, env: Env) -> PosText | None:
        t = type(node)
        if t is ast.Constant:
            if getattr(node, "stand_in", False):  # a parameter's stand-in, another file's constant: not here
                return PosText.at(node.value, (node.lineno, node.col_offset + 1))
            return literal_text(node, self.model.lines) if isinstance(node.value, str) else None
        if t is ast.JoinedStr:
            out = literal_text(node, self.model.lines)
            return self._inline_holes(out, scope, env) if out is not None else None
        if t is ast.Name:
            for bound in reversed(env):
                if node.id in bound:
                    return bound[node.id]
            arg = self._arg(node, scope)
            if arg is not None:
                return self.str_value(arg[0], arg[1], env)
            s = self.model.lookup(node.id, scope)
            if s is not None and node.id in s.assigns:
                values = [v for v in s.assigns[node.id] if v is not None]
                if len(values) == 1 and values[0] is not node:
                    return self.str_value(values[0], s, env)
                if not values and s.kind == "function" and node.id in s.params:
                    return self._param_value(s, node.id, lambda n, sc: self.str_value(n, sc, env), _same_text)
                return None
            return self._external_text(node, scope)
        if t is ast.Attribute:
            bound = self.model.attr_values(node, scope)
            if bound is not None:
                return self.str_value(bound[0][0], bound[0][1], env) if len(bound) == 1 else None
            member = self._class_member(node, scope)
            if member is not None:
                return self.str_value(member[0], member[1], env)
            return self._external_text(node, scope)
        if t is ast.Subscript:
            item = self.dict_item(node, scope)
            return self.str_value(item[0], item[1], env) if item is not None else None
        if t is ast.BinOp:
            if isinstance(node.op, ast.Add):
                left, right = self.str_value(node.left, scope, env), self.str_value(node.right, scope, env)
                return left + right if left is not None and right is not None else None
            if isinstance(node.op, ast.Mod):
                base = self.str_value(node.left, scope, env)
                return percent_format(self, base, node.right, scope, env) if base is not None else None
            return None
        if t is not ast.Call:
            return None
        func = node.func
        name = func.attr if type(func) is ast.Attribute else func.id if type(func) is ast.Name else ""
        if name == "dedent" and len(node.args) == 1:
            inner = self.str_value(node.args[0], scope, env)
            return inner.dedent() if inner is not None else None
        returned = self.model.returned(node, scope)
        if returned is not None:  # a helper or method that builds the text, from this call's arguments
            if not self.may_call(returned[1]):
                return None
            with self.at_call(returned[1], arguments(node, scope, returned[1])):
                return self.str_value(returned[0], returned[1], env)
        if type(func) is not ast.Attribute:
            if name == "str" and len(node.args) == 1:
                return self.str_value(node.args[0], scope, env)
            return None
        if name == "strip" and not node.args:
            inner = self.str_value(func.value, scope, env)
            return inner.strip() if inner is not None else None
        if name in ("lower", "upper") and not node.args:  # f"{c.lower()}_clean"
            inner = self.str_value(func.value, scope, env)
            changed = getattr(inner.text, name)() if inner is not None else ""
            return PosText(changed, inner.positions) if inner is not None and len(changed) == len(inner.text) else None
        if name in ("format", "format_map"):  # "...{k}...".format(k=v, **params), .format_map(params)
            base = self.str_value(func.value, scope, env)
            return str_format(self, base, node, scope, env) if base is not None else None
        if name == "join" and len(node.args) == 1:
            sep = self.str_value(func.value, scope, env)
            return joined(self, sep, node.args[0], scope, env) if sep is not None else None
        if name == "read_text":
            return self._file_text(func.value, scope, node)
        if name == "read" and not node.args:
            opened = func.value
            if type(opened) is ast.Name:
                value = self.model.single_value(opened, scope)
                opened = value[0] if value is not None else opened
            if type(opened) is ast.Call and type(opened.func) is ast.Name and opened.func.id == "open":
                return self._file_text(opened.args[0], scope, node) if opened.args else None
            if type(opened) is ast.Call and type(opened.func) is ast.Attribute and opened.func.attr == "open":
                return self._file_text(opened.func.value, scope, node)
        return None

    def hole(self, node: ast.AST, pos: tuple[int, int]) -> PosText:
        """A placeholder for a value not known as text, at ``pos``; ``node`` still carries its sources."""
        self._holes += 1
        name = f"__ph{self._holes}x__"
        out = PosText.at(name, pos)
        out.holes[name] = node
        return out

    def _inline_holes(self, text: PosText, scope: Scope, env: Env) -> PosText:
        """Replace the f-string fields whose value is known text by that text (``f"t.{k} = s.{k}"``), and the
        others by a placeholder no other literal uses: each literal numbers its fields from 0, so
        ``f"{a}..." + f"{b}..."`` would otherwise give ``a`` and ``b`` one name (and one value)."""
        for name, hole in list(text.holes.items()):
            i = text.text.find(name)
            if i < 0:
                continue
            value = self.str_value(hole, scope, env)
            if value is None:
                value = self.hole(hole, text.positions[i])
            while i >= 0:
                text = text[:i] + value + text[i + len(name) :]
                i = text.text.find(name, i + len(value.text))
        return text

    def _external_text(self, node: ast.AST, scope: Scope) -> PosText | None:
        ext = self.model.resolve_external(node, scope)
        if ext is None or ext[1] != "value":
            return None
        entry, _kind, label = ext
        text = entry.get("text")
        if text is None and isinstance(entry.get("strings"), list) and len(entry["strings"]) == 1:
            text = entry["strings"][0]
        if text is None:
            return None
        return PosText.at(text, self.model.span(node)[:2], [f"`{label}`"] * len(text))

    def _file_text(self, path_node: ast.AST, scope: Scope, call: ast.AST) -> PosText | None:
        """The text of a ``.sql`` file of the linted tree that the code reads (a dependency of the file)."""
        raw = path_value(self, path_node, scope)
        if raw is None or not raw.lower().endswith(".sql"):
            return None
        found, empty = find_sql_file(raw, self.origin, self.root)
        for place in empty:  # a file created there later changes what the code reads
            self.deps.setdefault(str(place), ABSENT)
        if found is None:
            return None
        try:
            data = found.read_bytes()
        except OSError:
            return None
        text = data.decode("utf-8", "replace")
        label = shown(found, self.root)
        # imported here: loading OpenSSL costs every worker 3 ms, and few files read SQL files
        from hashlib import blake2b

        self.deps[str(found)] = blake2b(data, digest_size=16).hexdigest()
        origins: list[str | None] = []
        for number, line in enumerate(text.splitlines(keepends=True), 1):
            origins.extend([f"`{label}` (line {number})"] * len(line))
        return PosText.at(text, self.model.span(call)[:2], origins)

    def const_strings(self, node: ast.AST | None, scope: Scope) -> list[str] | None:
        """The strings a constant expression evaluates to (a literal, a list of them, ``+``, a name or
        ``self.attr`` bound once to one, another file's constant); None when unknown. Names bound to each
        other in a cycle (``a = b`` ... ``b = a``) are unknown."""
        if node is None:
            return None
        key = id(node)
        if key in self._busy:
            return None
        self._busy.add(key)
        try:
            return self._const_strings(node, scope)
        finally:
            self._busy.discard(key)

    def _const_strings(self, node: ast.AST, scope: Scope) -> list[str] | None:
        t = type(node)
        if t is ast.Constant and isinstance(node.value, str):
            return [node.value]
        if t is ast.List or t is ast.Tuple or t is ast.Set:
            out: list[str] = []
            for elt in node.elts:
                sub = self.const_strings(elt, scope)
                if sub is None:
                    return None
                out.extend(sub)
            return out
        if t is ast.Name:
            arg = self._arg(node, scope)
            if arg is not None:
                return self.const_strings(arg[0], arg[1])
            s = self.model.lookup(node.id, scope)
            if s is not None and node.id in s.assigns:
                values = [v for v in s.assigns[node.id] if v is not None]
                if len(values) == 1 and values[0] is not node:
                    return self.const_strings(values[0], s)
                if not values and s.kind == "function" and node.id in s.params:
                    return self._param_value(s, node.id, self.const_strings, _same)
                return None
        if t is ast.Attribute:
            bound = self.model.attr_values(node, scope)
            if bound is not None:
                return self.const_strings(bound[0][0], bound[0][1]) if len(bound) == 1 else None
            member = self._class_member(node, scope)
            if member is not None:
                return self.const_strings(*member)
        if t is ast.Name or t is ast.Attribute:
            ext = self.model.resolve_external(node, scope)
            if ext is not None and ext[1] == "value" and isinstance(ext[0].get("strings"), list):
                return list(ext[0]["strings"])
            return None
        if t is ast.Subscript:
            item = self.dict_item(node, scope)
            return self.const_strings(item[0], item[1]) if item is not None else None
        if t is ast.BinOp and isinstance(node.op, ast.Add):
            left, right = self.const_strings(node.left, scope), self.const_strings(node.right, scope)
            return left + right if left is not None and right is not None else None
        if t is ast.Call and type(node.func) is ast.Name and node.func.id in ("list", "tuple") and node.args:
            return self.const_strings(node.args[0], scope)
        return None

    def _param_value(
        self, fscope: Scope, name: str, evaluate: Callable[[ast.AST, Scope], T | None], same: Callable[[T, T], bool]
    ) -> T | None:
        """A parameter of a function of the module where no call of it is being evaluated: what every call of
        the function here gives it, when all give the same (its default where a call leaves it out); its
        default when no call of it is known here; None when unknown or when the calls differ. Followed a few
        functions deep (``self.helper(df, self.key_col)`` to the constructor's ``key_col``)."""
        node = fscope.node
        if self._param_depth > 4 or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            return None
        self._param_depth += 1
        try:
            sites = call_sites(self.model, fscope)
            if not sites:
                default = default_of(fscope, name)
                return evaluate(default, fscope.parent or fscope) if default is not None else None
            found: T | None = None
            for site, where in sites[:16]:
                given = arguments(site, where, fscope).get(name)
                value = evaluate(*given) if given is not None else None
                if value is None or (found is not None and not same(found, value)):
                    return None
                found = value
            return found if len(sites) <= 16 else None
        finally:
            self._param_depth -= 1

    def _class_member(self, node: ast.Attribute, scope: Scope) -> tuple[ast.AST, Scope] | None:
        """``Cols.ORDER_ID``, ``ResultCol.order_id`` / ``ResultCol.order_id.value`` (an Enum member's value):
        the one value a class of this module binds to the name in its body."""
        if node.attr == "value" and type(node.value) is ast.Attribute:
            inner = self._class_member(node.value, scope)
            if inner is not None:
                return inner
        if type(node.value) is not ast.Name:
            return None
        cls = self.model.class_named(node.value.id, scope)
        bound = [v for v in cls.assigns.get(node.attr, ()) if v is not None] if cls is not None else []
        return (bound[0], cls) if len(bound) == 1 else None

    def dict_item(self, node: ast.Subscript, scope: Scope, depth: int = 0) -> tuple[ast.AST, Scope] | None:
        """The value ``CFG["keys"]`` reads from a config dict: a dict literal, or a name or ``self`` attribute
        bound once to one, indexed by a constant string or integer; nested entries (``CFG["orders"]["keys"]``,
        ``CFG["jobs"][0]``) at any depth, an integer also indexing a list or tuple literal; None when unknown."""
        sl = node.slice
        if type(sl) is not ast.Constant or type(sl.value) not in (str, int) or depth > 20:
            return None
        base, where = node.value, scope
        for _ in range(20):  # a name, ``self`` attribute or entry bound to one (JOB = CFG["jobs"][0])
            if type(base) is ast.Subscript:
                bound = self.dict_item(base, where, depth + 1)
            elif type(base) is ast.Name:
                bound = self.binding(base, where) or self._imported_literal(base, where)
            elif type(base) is ast.Attribute:
                attrs = self.model.attr_values(base, where)
                bound = attrs[0] if attrs is not None and len(attrs) == 1 else self._imported_literal(base, where)
            else:
                break
            if bound is None:
                return None
            base, where = bound
        if type(base) in (ast.List, ast.Tuple) and type(sl.value) is int:
            items = base.elts
            if any(type(e) is ast.Starred for e in items) or not -len(items) <= sl.value < len(items):
                return None
            return items[sl.value], where
        if type(base) is not ast.Dict:
            return None
        found = None
        for k, v in zip(base.keys, base.values, strict=False):
            if k is None:
                return None  # {**other, ...}: the key may come from elsewhere
            if type(k) is ast.Constant and type(k.value) is type(sl.value) and k.value == sl.value:
                found = v  # the last one wins, as in Python
        return (found, where) if found is not None else None

    def _imported_literal(self, node: ast.AST, scope: Scope) -> tuple[ast.AST, Scope] | None:
        """Another file's constant dict or list (``from config import TABLES``), as the literal it exports."""
        ext = self.model.resolve_external(node, scope)
        text = ext[0].get("literal") if ext is not None and ext[1] == "value" else None
        if not isinstance(text, str):
            return None
        key = (text, node.lineno, node.col_offset)
        if key not in self._literals:
            self._literals[key] = stand_in_literal(text, node)
        return self._literals[key], self.model.module

    def const_int(self, node: ast.AST | None, scope: Scope, depth: int = 0) -> int | None:
        """The integer a constant expression evaluates to: a literal, a name or ``self.attr`` bound once to
        one, or a constant of another file of the tree; None when unknown."""
        if node is None or depth > 20:
            return None
        t = type(node)
        if t is ast.Constant:
            v = node.value
            return v if type(v) is int else None
        if t is ast.Name:
            bound = self.binding(node, scope)
            if bound is not None:
                return self.const_int(bound[0], bound[1], depth + 1)
        if t is ast.Attribute:
            attrs = self.model.attr_values(node, scope)
            if attrs is not None:
                return self.const_int(attrs[0][0], attrs[0][1], depth + 1) if len(attrs) == 1 else None
        if t is ast.Name or t is ast.Attribute:
            ext = self.model.resolve_external(node, scope)
            if ext is not None and ext[1] == "value":
                number = ext[0].get("number")
                return number if type(number) is int else None
        return None

    def col_names(self, node: ast.AST, scope: Scope) -> list[str]:
        t = type(node)
        if t is ast.Constant and isinstance(node.value, str):
            return [node.value]
        if t is ast.List or t is ast.Tuple:
            return [c for e in node.elts for c in self.col_names(e, scope)]
        if t is ast.Starred:
            return self.col_names(node.value, scope)
        if (
            (t is ast.ListComp or t is ast.GeneratorExp)
            and len(node.generators) == 1
            and not node.generators[0].ifs
        ):
            return self.col_names(node.elt, scope)  # [F.col(c).desc() for c in COLS]: c is bound to COLS
        if t is ast.Call:
            func = node.func
            if type(func) is ast.Attribute and func.attr in ORDER_WRAPPERS and not node.args:
                return self.col_names(func.value, scope)
            sname = self.model.spark_name(self.model.qualname(func, scope))
            if (sname in NAME_ARG_FUNCTIONS or sname in ORDER_WRAPPERS) and node.args:
                return self.col_names(node.args[0], scope)
        if t is ast.Subscript:
            return self.col_names(node.slice, scope)
        if t is ast.Attribute and node.attr not in FRAME_PROPERTIES:  # df.a (df.columns: every column)
            if self.model.attr_values(node, scope) is not None or self._class_member(node, scope) is not None:
                strs = self.const_strings(node, scope)  # self.keys, Cols.ORDER_ID: names held, not a column
                return strs if strs is not None else [f"<{self.model.segment(node, 30)}>"]
            return [node.attr]
        if t is ast.Name:
            strs = self.const_strings(node, scope)
            if strs is not None:
                return strs
        return [f"<{self.model.segment(node, 30)}>"]

    def sql_text(self, node: ast.AST, scope: Scope) -> PosText | None:
        """The SQL text an expression evaluates to (with file positions), or None (also for blank text)."""
        text = self.str_value(node, scope)
        if text is None or not text.text.strip():
            return None
        return text

    def may_be_text(self, node: ast.AST, scope: Scope) -> bool:
        """Could ``node`` be SQL text rather than a Column expression?"""
        return type(node) in (ast.Constant, ast.JoinedStr, ast.Name, ast.BinOp) or (
            type(node) is ast.Call and self.str_value(node, scope) is not None
        )
