"""Settings: ``[tool.upsertsink.lint]`` in pyproject.toml, merged with command-line flags."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from upsertsink.lint.rules import RULES

TABLE_KEYS = {"keys", "sequence", "select", "ignore", "exclude", "fail-on", "key-patterns"}
# Column names taken as keys of a table the code writes when no other key is known for them (fnmatch
# globs, case-insensitive): surrogate and hash keys. `*_id` is left out on purpose: run_id, batch_id and
# job_id audit columns are often filled from a uuid or the clock and are not keys (docs/linter.md).
DEFAULT_KEY_PATTERNS = ["id", "pk", "sk", "*_key", "*_pk", "*_sk"]


class ConfigError(Exception):
    """An unreadable or invalid configuration, or a bad option value (exit code 2)."""


@dataclass
class Settings:
    """Everything a run needs to know besides the paths."""

    keys: list[str] = field(default_factory=list)
    sequence: list[str] = field(default_factory=list)
    select: list[str] | None = None
    ignore: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
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


def split_codes(values: list[str] | tuple[str, ...], where: str) -> list[str]:
    """Comma-separated, repeatable code lists -> validated list of codes or code prefixes."""
    out: list[str] = []
    for value in values:
        for part in str(value).split(","):
            code = part.strip().upper()
            if not code:
                continue
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
        if candidate.is_file():
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


def load_table(path: Path, explicit: bool) -> dict:
    """Read and validate the lint table of ``path``; an explicit --config file must exist and parse."""
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
) -> Settings:
    """Find and read the configuration, then apply the flags on top (flags add keys, replace select)."""
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
    if ignore:
        settings.ignore += split_codes(ignore, "--ignore")
    return settings
