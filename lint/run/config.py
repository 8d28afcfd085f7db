"""Settings: ``[tool.upsertsink.lint]`` in pyproject.toml, merged with command-line flags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from ..base.structs import field, struct
from ..check.checker import DEFAULT_KEY_PATTERNS
from . import runrecord

if TYPE_CHECKING:
    from .globs import Matcher

# The rules load when a setting needs them (a code to check), pathspec only for a glob beyond the simple forms
# of lint/run/globs.py: start-up counts.


@struct(frozen=True)
class SettingDoc:
    """One setting of ``[tool.upsertsink.lint]``: what docs/config.md says about it (generated)."""

    name: str
    type: str
    flags: str  # the command-line flags that act on it
    text: str
    example: str  # TOML lines for the table; each is loaded by the tests


SETTINGS: tuple[SettingDoc, ...] = (
    SettingDoc(
        "keys",
        "list of strings",
        "`--key COL` adds",
        "Merge-key columns for every file, added to the keys found in the code (UpsertSink calls, merge "
        "conditions, dbt `unique_key`, DDL...). A nondeterministic value that reaches one is an error.",
        'keys = ["order_id", "line_no"]',
    ),
    SettingDoc(
        "sequence",
        "list of strings",
        "`--sequence COL` adds",
        "Sequence columns (newer-wins ordering) for every file; a nondeterministic value reaching one is an "
        "error, as for a key.",
        'sequence = ["updated_at"]',
    ),
    SettingDoc(
        "select",
        "list of rule codes or prefixes",
        "`--select` replaces, `--extend-select` adds",
        "The rules to run (codes such as `ND004`, prefixes such as `ND00`, or `ALL`). Not set: every rule.",
        'select = ["ND00"]',
    ),
    SettingDoc(
        "ignore",
        "list of rule codes or prefixes",
        "`--ignore` adds",
        "Rules not to run, whatever `select` says.",
        'ignore = ["ND005"]',
    ),
    SettingDoc(
        "per-file-ignores",
        "table: glob = list of rule codes or prefixes",
        "none",
        "Rules not reported in the files a glob matches (as in ruff). Globs are gitignore-style and relative "
        "to the project root (the config file's folder): a glob without `/` matches the file name in any "
        "folder (`__init__.py`), `tests/**` a folder; a glob starting with `!` applies to the files it does "
        "*not* match. Applies to a file read from stdin under its `--stdin-filename`.",
        '[tool.upsertsink.lint.per-file-ignores]\n"tests/**" = ["ND"]\n"!jobs/**" = ["ND005", "ND013"]',
    ),
    SettingDoc(
        "exclude",
        "list of globs",
        "`--exclude` replaces",
        "Files and folders skipped while walking folders (gitignore-style globs relative to the project "
        "root), on top of `.gitignore` files and the built-in tool folders (`.git`, `.venv`, `build`, "
        "`site-packages`...), which are always skipped. A file named on the command line is linted anyway, "
        "unless `--force-exclude`.",
        'exclude = ["examples/broken_*", "tests/**"]',
    ),
    SettingDoc(
        "extend-exclude",
        "list of globs",
        "`--extend-exclude` adds",
        "More globs, added to `exclude` (as in ruff: a shared config sets `exclude`, a project extends it).",
        'extend-exclude = ["generated/"]',
    ),
    SettingDoc(
        "fail-on",
        '`"error"` or `"warning"`',
        "`--fail-on` replaces",
        "The lowest severity that makes the exit code 1.",
        'fail-on = "warning"',
    ),
    SettingDoc(
        "key-patterns",
        "list of globs (case-insensitive)",
        "none",
        "Written column names taken as keys in a file that stores data when no other key is known for "
        "them (surrogate and hash keys). `[]` switches the patterns off. `*_id` is left out of the default "
        "on purpose: `run_id`, `batch_id`, `job_id` are audit columns (docs/linter.md).",
        'key-patterns = ["id", "*_key", "*_sk", "order_no"]',
    ),
)
TABLE_KEYS = {s.name for s in SETTINGS}


class ConfigError(Exception):
    """An unreadable or invalid configuration, or a bad option value (exit code 2)."""


@struct
class Settings:
    """Everything a run needs to know besides the paths."""

    keys: list[str] = field(default_factory=list)
    sequence: list[str] = field(default_factory=list)
    select: list[str] | None = None
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    extend_exclude: list[str] = field(default_factory=list)
    # (glob, codes) pairs; a glob starting with "!" applies to the files it does NOT match (as in ruff)
    per_file_ignores: list[tuple[str, list[str]]] = field(default_factory=list)
    fail_on: str = "error"
    key_patterns: list[str] = field(default_factory=lambda: list(DEFAULT_KEY_PATTERNS))
    force_exclude: bool = False
    root: Path = field(default_factory=Path.cwd)
    config_path: Path | None = None

    def enabled(self, code: str) -> bool:
        """Is ``code`` selected and not ignored? (codes and code prefixes, like ruff)."""
        if self.select is not None and not any(code.startswith(s) for s in self.select):
            return False
        return not any(code.startswith(i) for i in self.ignore)

    def excludes(self) -> list[str]:
        """The exclude globs in force: ``exclude`` then ``extend-exclude``."""
        return [*self.exclude, *self.extend_exclude]

    def exclude_matcher(self) -> Matcher:
        """The exclude globs compiled (:class:`ConfigError` naming a glob pathspec cannot read)."""
        return _compile_globs(self.excludes(), "exclude", self.config_path)

    def ignored_in(self, path: Path) -> list[str]:
        """The codes ``per-file-ignores`` switches off for ``path`` (matched relative to the project root,
        gitignore-style: a glob without ``/`` matches the file name at any depth)."""
        if not self.per_file_ignores:
            return []
        rel = _relative(path, self.root)
        out: list[str] = []
        for glob, codes in self.per_file_ignores:
            negated = glob.startswith("!")
            spec = _compile_globs([glob[1:] if negated else glob], "per-file-ignores", self.config_path)
            if rel is not None and spec.match_file(rel) != negated:
                out.extend(codes)
        return out


def _compile_globs(globs: list[str], setting: str, config_path: Path | None) -> Matcher:
    from .globs import GlobError, compile_globs

    try:
        return compile_globs(globs)
    except GlobError as exc:
        where = config_path if config_path is not None else "the command line"
        raise ConfigError(f"{where}: {setting}: {exc} (gitignore-style globs)") from exc


def _relative(path: Path, root: Path) -> str | None:
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return None


def split_codes(values: list[str] | tuple[str, ...], where: str) -> list[str]:
    """Comma-separated, repeatable code lists -> validated list of codes or code prefixes."""
    out: list[str] = []
    for value in values:
        for part in str(value).split(","):
            code = part.strip().upper()
            if not code:
                continue
            from ..rules import RULES

            if code != "ALL" and not any(c.startswith(code) for c in RULES):
                raise ConfigError(f"{where}: unknown rule code {part.strip()!r} (known: {', '.join(RULES)})")
            out.append("ND" if code == "ALL" else code)
    return out


def find_config(start: Path) -> Path | None:
    """The nearest pyproject.toml at or above ``start`` that has a ``[tool.upsertsink.lint]`` table."""
    here = start.resolve()
    if here.is_file():
        here = here.parent
    for folder in (here, *here.parents):
        candidate = folder / "pyproject.toml"
        runrecord.note(candidate)
        if candidate.is_file():
            import tomllib  # only when there is a file to read: a run without one never loads it

            try:
                data = tomllib.loads(candidate.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                # it may well hold our settings: better stop than lint with the wrong ones
                raise ConfigError(f"cannot read {candidate}: {exc}") from exc
            if isinstance(data.get("tool", {}).get("upsertsink", {}).get("lint"), dict):
                return candidate
    return None


def _str_list(table: dict, key: str, path: Path) -> list[str]:
    value = table.get(key, [])
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: [tool.upsertsink.lint] {key} must be a string or a list of strings")
    return list(value)


def _per_file_ignores(table: dict, path: Path) -> list[tuple[str, list[str]]]:
    value = table.get("per-file-ignores", {})
    if not isinstance(value, dict):
        raise ConfigError(
            f"{path}: [tool.upsertsink.lint] per-file-ignores must be a table of glob = [codes]"
        )
    out = []
    for glob, codes in value.items():
        if isinstance(codes, str):
            codes = [codes]
        if not isinstance(codes, list) or not all(isinstance(c, str) for c in codes):
            raise ConfigError(
                f"{path}: [tool.upsertsink.lint] per-file-ignores {glob!r} must be a list of rule codes"
            )
        out.append((glob, split_codes(codes, f"{path}: per-file-ignores {glob!r}")))
    return out


def load_table(path: Path, explicit: bool) -> dict:
    """Read and validate the lint table of ``path``; an explicit --config file must exist and parse."""
    runrecord.note(path)
    import tomllib

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {path} does not exist") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    table = data.get("tool", {}).get("upsertsink", {}).get("lint")
    if table is None:
        if explicit and path.name != "pyproject.toml":
            table = data  # a standalone file holds the settings at its top level
        else:
            table = {}
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.upsertsink.lint] must be a table")
    unknown = set(table) - TABLE_KEYS
    if unknown:
        raise ConfigError(
            f"{path}: unknown setting(s) {', '.join(sorted(unknown))} in [tool.upsertsink.lint] "
            f"(known: {', '.join(sorted(TABLE_KEYS))})"
        )
    return table


def resolve_settings(
    paths: list[Path],
    config: Path | None = None,
    keys: tuple[str, ...] = (),
    sequence: tuple[str, ...] = (),
    select: tuple[str, ...] = (),
    ignore: tuple[str, ...] = (),
    fail_on: str | None = None,
    extend_select: tuple[str, ...] = (),
    exclude: tuple[str, ...] | None = None,
    extend_exclude: tuple[str, ...] = (),
) -> Settings:
    """Find and read the configuration, then apply the flags on top: ``keys``/``sequence`` add,
    ``select`` replaces and ``extend_select`` adds to the selection, ``ignore`` adds, ``exclude`` (when
    given) replaces the configured ``exclude`` and ``extend_exclude`` adds to it (as in ruff)."""
    start = paths[0] if paths else Path.cwd()
    cfg_path = config if config is not None else find_config(start)
    table = load_table(cfg_path, explicit=config is not None) if cfg_path is not None else {}
    where = str(cfg_path)
    settings = Settings()
    settings.config_path = cfg_path
    settings.root = cfg_path.resolve().parent if cfg_path is not None else Path.cwd().resolve()
    settings.keys = _str_list(table, "keys", cfg_path) if table else []
    settings.sequence = _str_list(table, "sequence", cfg_path) if table else []
    settings.exclude = _str_list(table, "exclude", cfg_path) if table else []
    settings.extend_exclude = _str_list(table, "extend-exclude", cfg_path) if table else []
    settings.per_file_ignores = _per_file_ignores(table, cfg_path) if table else []
    if table.get("select") is not None:
        settings.select = split_codes(_str_list(table, "select", cfg_path), where)
    settings.ignore = split_codes(_str_list(table, "ignore", cfg_path), where) if table else []
    cfg_fail = table.get("fail-on", "error")
    if cfg_fail not in ("error", "warning"):
        raise ConfigError(f'{where}: fail-on must be "error" or "warning", not {cfg_fail!r}')
    settings.fail_on = fail_on or cfg_fail
    if "key-patterns" in table:
        settings.key_patterns = [
            p.strip().lower() for p in _str_list(table, "key-patterns", cfg_path) if p.strip()
        ]
    # like --select, a comma-separated list is accepted (Delta rejects commas in column names anyway)
    settings.keys.extend(p.strip() for k in keys for p in k.split(",") if p.strip())
    settings.sequence.extend(p.strip() for s in sequence for p in s.split(",") if p.strip())
    if select:
        settings.select = split_codes(select, "--select")
    if extend_select and settings.select is not None:  # with no select, every rule runs already
        settings.select += split_codes(extend_select, "--extend-select")
    if ignore:
        settings.ignore += split_codes(ignore, "--ignore")
    if exclude is not None:
        settings.exclude = [p.strip() for value in exclude for p in value.split(",") if p.strip()]
    settings.extend_exclude += [p.strip() for value in extend_exclude for p in value.split(",") if p.strip()]
    return settings


def _toml(value: object) -> str:
    """A TOML value for a string or a list of strings (JSON's string escapes are TOML's)."""
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)


def settings_toml(settings: Settings, output_format: str = "text") -> str:
    """The resolved settings as a ``[tool.upsertsink.lint]`` table (``--show-settings``): what the config
    file and the flags made of them, valid as a config file itself; what only the run knows (project
    root, enabled rules, ``--force-exclude``, output format) as comments."""
    from ..rules import RULES

    lines = [
        f"# project root: {settings.root}",
        f"# enabled rules: {', '.join(c for c in RULES if settings.enabled(c))}",
        f"# force-exclude: {'true' if settings.force_exclude else 'false'}",
        f"# output-format: {output_format}",
        "[tool.upsertsink.lint]",
        f"keys = {_toml(settings.keys)}",
        f"sequence = {_toml(settings.sequence)}",
    ]
    if settings.select is not None:
        lines.append(f"select = {_toml(settings.select)}")
    lines += [
        f"ignore = {_toml(settings.ignore)}",
        f"exclude = {_toml(settings.exclude)}",
        f"extend-exclude = {_toml(settings.extend_exclude)}",
        f"fail-on = {_toml(settings.fail_on)}",
        f"key-patterns = {_toml(settings.key_patterns)}",
    ]
    if settings.per_file_ignores:
        lines += ["", "[tool.upsertsink.lint.per-file-ignores]"]
        lines += [f"{_toml(glob)} = {_toml(codes)}" for glob, codes in settings.per_file_ignores]
    return "\n".join(lines) + "\n"
