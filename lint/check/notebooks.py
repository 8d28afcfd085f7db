"""Notebooks as Python: Jupyter ``.ipynb`` files and Databricks source exports, turned into one Python text
that the analysis reads like any module, with a map back to where each line came from.

- Python cells are kept line for line. IPython magics (``%pip``, ``%%time``...), shell escapes (``!pip``,
  ``files = !ls``) and help lines (``obj?``) become ``pass`` (or ``name = None``) at the same indentation,
  so one such line no longer makes the notebook unparseable.
- SQL cells (``%sql`` / ``%%sql`` in a notebook, ``# MAGIC %sql`` in a Databricks export) become
  ``spark.sql(r\"\"\"...\"\"\")`` whose text lines are the cell's lines, so SQL findings point into the cell.
- ``%run ./other`` is recorded (the names ``other`` defines are resolved when it is in the linted tree).
- Other cell languages (``%md``, ``%sh``, ``%scala``, ``%r``, ``%fs``...) are skipped.
- In a Databricks export, Python cells are kept as written except shell and magic lines (``!pip install x``,
  ``files = !ls``, ``%pip ...``), which become ``pass`` (or ``name = None``) like in a notebook, but only
  where Python cannot read them (a ``%`` or ``!`` that continues an expression or sits in a string stays);
  a cell whose first line is a non-Python magic written without ``# MAGIC `` (``%sh``, ``%%bash``...) is
  blanked, and one starting with a bare ``%sql`` is read as SQL.

For ``.ipynb`` files every line of the Python text maps to (cell, line in cell, file line), where ``cell`` is
the 1-based position of the cell in the notebook (Markdown cells count, as they appear on screen) and the
file line is the line of the ``.ipynb`` JSON text that holds it. Databricks exports are ``.py`` files whose
lines keep their numbers; only SQL lines shift by the ``# MAGIC `` prefix.
"""

from __future__ import annotations

import ast
import json
import re
import warnings

from ..base.structs import field, struct

DATABRICKS_HEADER = "# Databricks notebook source"
_DATABRICKS_SEP = re.compile(r"^# COMMAND -+\s*$")
_MAGIC_PREFIX = re.compile(r"^# MAGIC ?")
# "%run ./x", "%run /Repos/a/b", '%run "./x y"' (arguments after the path are notebook parameters)
_RUN = re.compile(r"""^\s*%run\s+(?:"([^"]+)"|'([^']+)'|(\S+))""")
_SHELL_ASSIGN = re.compile(r"^(\s*)([A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*)\s*=\s*[!%]")
_SKIP_LANGS = {"md", "markdown", "sh", "bash", "scala", "r", "fs", "html", "javascript", "js", "latex"}
# cell magics whose body is still Python
_PY_CELL_MAGICS = {"time", "timeit", "capture", "prun", "python", "python3", "debug", "pyspark", "spark"}
# a line Python may fail on because it is a shell escape or a magic: "!pip ...", "%pip ...", "x = !ls", "obj?"
_SHELL_CANDIDATE = re.compile(
    r"^\s*(?:!(?!=)|%%?[A-Za-z]|[A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)*\s*=\s*[!%]|[\w.]+\?\??\s*$)"
)


class NotebookError(ValueError):
    """The notebook's JSON cannot be read (reported as a parse error, ND000)."""


@struct
class Converted:
    """The Python text of a notebook and where each of its lines came from (index = line - 1)."""

    text: str
    cells: list[int | None] = field(default_factory=list)  # cell number per line (.ipynb), else None
    lines: list[int] = field(default_factory=list)  # line in the cell (.ipynb) or in the file
    shifts: list[int] = field(default_factory=list)  # characters removed at the line's start (# MAGIC )
    file_lines: list[int] = field(default_factory=list)  # line of the file holding it
    runs: list[str] = field(default_factory=list)  # %run targets, as written
    notebook: bool = True

    def locate(self, line: int, col: int) -> tuple[int | None, int, int, int]:
        """(cell, line, column, file line) of a position of the Python text (1-based)."""
        i = min(max(line, 1), len(self.lines)) - 1 if self.lines else -1
        if i < 0:
            return None, line, col, line
        return self.cells[i], self.lines[i], col + self.shifts[i], self.file_lines[i]


def is_databricks_source(text: str) -> bool:
    """A Databricks notebook exported as a Python source file."""
    return text.startswith(DATABRICKS_HEADER) or text.lstrip("\ufeff").startswith(DATABRICKS_HEADER)


def _sql_block(sql_lines: list[str]) -> list[str] | None:
    """Lines of ``spark.sql(r'''...''')`` around SQL lines; None when no raw literal can hold them."""
    body = "\n".join(sql_lines)
    for quote in ('"""', "'''"):
        if quote not in body and not body.endswith("\\") and not body.endswith(quote[0]):
            return [f"spark.sql(r{quote}", *sql_lines[:-1], sql_lines[-1] + f"{quote})"]
    return None


def _python_line(line: str) -> str:
    """A notebook line as Python: magics, shell escapes and help requests become no-ops."""
    stripped = line.lstrip()
    indent = line[: len(line) - len(stripped)]
    if stripped.startswith(("%", "!")):
        return indent + "pass"
    m = _SHELL_ASSIGN.match(line)
    if m:
        names = [n.strip() for n in m.group(2).split(",")]
        return indent + ", ".join(names) + " = " + ", ".join("None" for _ in names)
    if stripped.endswith("?") and not stripped.startswith("#") and re.fullmatch(r"[\w.]+\?\??", stripped):
        return indent + "pass"
    return line


_NO_PREFIX = re.compile(r"^")


def _raw_magic_cell(lines: list[str]) -> str | None:
    """The language of a Databricks cell whose first code line is a magic written without ``# MAGIC ``:
    ``"sql"`` for ``%sql``/``%%sql``, ``"skip"`` for another language (``%sh``, ``%%bash``, ``%md``...), else
    None (a Python cell, or a line magic such as ``%pip`` that only its own line holds)."""
    first = next((t.strip() for t in lines if t.strip() and not t.lstrip().startswith("#")), "")
    if not first.startswith("%"):
        return None
    word = first.lstrip("%").split(None, 1)[0].lower() if first.lstrip("%").strip() else ""
    if word == "sql":
        return "sql"
    if first.startswith("%%"):
        return None if word in _PY_CELL_MAGICS else "skip"
    return "skip" if word in _SKIP_LANGS else None


def _skip_shell_lines(out: list[str], limit: int = 200) -> list[int]:
    """Turn the shell and magic lines of a Databricks export's Python cells into no-ops, in place: only the
    lines Python stops at (a parse is retried after each), so ``%`` and ``!`` inside expressions and strings
    are never touched. A real syntax error elsewhere is left for the checker to report (ND000). Returns the
    indexes of the lines it changed."""
    candidates = {i for i, line in enumerate(out) if _SHELL_CANDIDATE.match(line)}
    changed: list[int] = []
    for _ in range(min(len(candidates), limit)):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ast.parse("\n".join(out))
            break
        except SyntaxError as exc:
            i = (exc.lineno or 0) - 1
        except (ValueError, RecursionError, MemoryError):
            break
        if i not in candidates:
            break
        candidates.discard(i)
        out[i] = _python_line(out[i])
        changed.append(i)
    return changed


def convert_databricks(text: str) -> Converted:
    """A Databricks source export: same line numbers; SQL cells become ``spark.sql`` calls."""
    raw = text.split("\n")
    out = list(raw)
    shifts = [0] * len(raw)
    runs: list[str] = []
    # cells: runs of lines between separators
    starts = [0] + [i + 1 for i, line in enumerate(raw) if _DATABRICKS_SEP.match(line)]
    ends = [i for i, line in enumerate(raw) if _DATABRICKS_SEP.match(line)] + [len(raw)]
    for start, end in zip(starts, ends, strict=False):
        idx = [i for i in range(start, end) if raw[i].startswith("# MAGIC")]
        prefix = _MAGIC_PREFIX
        if not idx:
            lang = _raw_magic_cell(raw[start:end])
            if lang is None:
                continue
            if lang != "sql":  # "%sh" / "%%bash" / "%md" written without "# MAGIC ": not Python
                for i in range(start, end):
                    out[i] = ""
                continue
            head = next(i for i in range(start, end) if raw[i].lstrip().startswith("%"))
            idx = [i for i in range(head, end) if raw[i].strip()]
            prefix = _NO_PREFIX
        first = raw[idx[0]]
        magic = prefix.sub("", first, count=1).strip()
        for i in idx:
            m = _RUN.match(prefix.sub("", raw[i], count=1))
            if m:
                runs.append(next(g for g in m.groups() if g))
        sql_magic = magic.split(None, 1)[0:1]
        if sql_magic not in (["%sql"], ["%%sql"]):
            continue
        # SQL lines, with where each starts in the raw line; SQL may follow "%sql" on the magic line itself
        rows = [(i, prefix.sub("", raw[i], count=1)) for i in idx]
        head_text = rows[0][1].lstrip()[len(sql_magic[0]) :]
        head_at = len(raw[idx[0]]) - len(head_text)
        sql_lines = [head_text] + [text for _, text in rows[1:]]
        if not any(t.strip() for t in sql_lines):
            continue
        block = _sql_block(sql_lines)
        if block is None:
            continue
        # block = [opener, head, line 1, ..., line N + closer]; the head shares the opening line
        out[idx[0]] = block[0] + block[1]
        shifts[idx[0]] = head_at - len(block[0])
        for k, (i, line_text) in enumerate(rows[1:], 1):
            out[i] = block[k + 1] if k + 1 < len(block) else line_text
            shifts[i] = len(raw[i]) - len(line_text)
    for i in _skip_shell_lines(out):
        m = _RUN.match(raw[i])  # "%run ./setup" written without "# MAGIC "
        if m:
            runs.append(next(g for g in m.groups() if g))
    numbers = list(range(1, len(raw) + 1))
    return Converted(
        "\n".join(out),
        cells=[None] * len(raw),
        lines=numbers,
        shifts=shifts,
        file_lines=numbers,
        runs=runs,
    )


def _cell_source(cell: dict) -> str:
    src = cell.get("source", "")
    if isinstance(src, list):
        return "".join(str(s) for s in src)
    return str(src)


def _file_line_finder(raw_text: str):
    """Find, in order, the line of the JSON text that holds each source line (best effort)."""
    raw_lines = raw_text.split("\n")
    pos = [0]

    def find(line: str) -> int:
        if not line.strip():
            return pos[0] + 1
        needles = {json.dumps(line)[1:-1], json.dumps(line, ensure_ascii=False)[1:-1]}
        for j in range(pos[0], len(raw_lines)):
            if any(n in raw_lines[j] for n in needles):
                pos[0] = j
                return j + 1
        return pos[0] + 1

    return find


def convert_ipynb(raw_text: str) -> Converted:
    """A Jupyter notebook: code cells concatenated, each line mapped to (cell, line in cell, file line)."""
    try:
        nb = json.loads(raw_text)
    except ValueError as exc:
        raise NotebookError(f"not valid notebook JSON: {exc}") from exc
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise NotebookError("not a Jupyter notebook (no cells list)")
    meta = nb.get("metadata") or {}
    lang = str(
        (meta.get("language_info") or {}).get("name")
        or (meta.get("kernelspec") or {}).get("language")
        or "python"
    ).lower()
    find_line = _file_line_finder(raw_text)
    conv = Converted("")
    out: list[str] = []

    def emit(text: str, cell: int, line_in_cell: int, file_line: int, shift: int = 0) -> None:
        out.append(text)
        conv.cells.append(cell)
        conv.lines.append(line_in_cell)
        conv.shifts.append(shift)
        conv.file_lines.append(file_line)

    for number, cell in enumerate(nb["cells"], 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        src_lines = _cell_source(cell).split("\n")
        file_lines = [find_line(s) for s in src_lines]
        first = src_lines[0].strip() if src_lines else ""
        cell_lang = lang if lang in ("python", "sql") else "python"
        dbx = (cell.get("metadata") or {}).get("application/vnd.databricks.v1+cell") or {}
        if isinstance(dbx, dict) and str(dbx.get("language", "")).lower() in ("sql", "python"):
            cell_lang = str(dbx["language"]).lower()
        body_start = 0
        if first.startswith("%%"):
            magic = first[2:].split(None, 1)[0].lower() if first[2:].strip() else ""
            if magic == "sql":
                cell_lang, body_start = "sql", 1
            elif magic in _PY_CELL_MAGICS:
                cell_lang, body_start = "python", 1
            else:
                continue  # %%bash, %%html, %%writefile...: not Python
        elif first.startswith("%"):
            magic = first[1:].split(None, 1)[0].lower() if first[1:].strip() else ""
            if magic == "sql":
                cell_lang, body_start = "sql", 1
            elif magic in ("python", "pyspark"):
                cell_lang, body_start = "python", 1
            elif magic in _SKIP_LANGS:
                continue
        head = src_lines[0].lstrip()[len("%sql") :] if first.startswith("%sql") and body_start else ""
        if cell_lang == "sql" and head.strip():
            # "%sql INSERT ...": the SQL starts on the magic line (as in a Databricks export) and shares the
            # opening line of the spark.sql(...) it becomes, shifted to where it stands in the cell
            sql_lines = [head, *src_lines[1:]]
            while len(sql_lines) > 1 and not sql_lines[-1].strip():
                sql_lines = sql_lines[:-1]
            block = _sql_block(sql_lines)
            if block is None:
                continue
            emit(block[0] + block[1], number, 1, file_lines[0], len(src_lines[0]) - len(head) - len(block[0]))
            for k in range(1, len(sql_lines)):
                emit(block[k + 1], number, k + 1, file_lines[k])
            continue
        if cell_lang == "sql":
            sql_lines = src_lines[body_start:]
            while sql_lines and not sql_lines[-1].strip():
                sql_lines = sql_lines[:-1]
            if not any(s.strip() for s in sql_lines):
                continue
            block = _sql_block(sql_lines)
            if block is None:
                continue
            head_line = max(body_start, 1)
            emit(block[0], number, head_line, file_lines[head_line - 1])
            for k, text in enumerate(block[1:]):
                i = body_start + k
                emit(text, number, i + 1, file_lines[i])
            continue
        for i, text in enumerate(src_lines):
            if i < body_start:
                emit("pass" if text.strip() else "", number, i + 1, file_lines[i])
                continue
            m = _RUN.match(text)
            if m:
                conv.runs.append(next(g for g in m.groups() if g))
            emit(_python_line(text), number, i + 1, file_lines[i])
    conv.text = "\n".join(out) + ("\n" if out else "")
    return conv
