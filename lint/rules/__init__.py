"""The rule registry: stable codes ND000-ND014. ND001-ND010 find nondeterministic values, ND011-ND014
non-idempotent writes.

One rule per module, found automatically: every module of this package named ``ndNNN_<slug>.py`` exposes
one :class:`Rule` as ``RULE`` (its code ``NDNNN``), holding the rule's detector hooks, messages, examples
and fixes; the sources it reports are the catalogue's entries under its code (``base/sources.py``).
Adding a rule is adding such a module (and its sources, if any; then regenerate docs/rules.md). Modules
starting with ``_`` hold what several rules share; ``rule`` holds the :class:`Rule` class, ``hooks`` what
the analysis takes from all of them.
"""

from __future__ import annotations

import importlib
import os
import re

from .rule import Invalid, Rule, Valid

_RULE_MODULE = re.compile(r"nd(\d{3})_\w+\.py")


def _discover() -> tuple[Rule, ...]:
    """The ``RULE`` of every ``ndNNN_*`` module of this package, ordered by code."""
    found: dict[str, Rule] = {}
    # the package's folder listed directly: pkgutil (and what it imports) would be start-up time of every run
    for folder in __path__:
        for file in sorted(os.listdir(folder)):
            match = _RULE_MODULE.fullmatch(file)
            if match is None:
                continue
            code, name = f"ND{match.group(1)}", file[: -len(".py")]
            rule = importlib.import_module(f"{__name__}.{name}").RULE
            if rule.code != code:
                raise ImportError(f"rules/{file}: its RULE has code {rule.code}, not {code}")
            if code in found:
                raise ImportError(f"rules/{file}: a second module for {code}")
            found[code] = rule
    return tuple(found[code] for code in sorted(found))


ALL_RULES: tuple[Rule, ...] = _discover()
RULES: dict[str, Rule] = {r.code: r for r in ALL_RULES}

__all__ = ["ALL_RULES", "RULES", "Invalid", "Rule", "Valid"]
