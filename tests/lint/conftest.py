"""Make ``import lint`` mean the linter package, not this test folder.

pytest puts ``tests/`` on sys.path (for tests/conftest.py); ``tests/lint`` has no ``__init__.py``, so
without help Python resolves ``import lint`` to a namespace package made of this folder (the editable
install's finder runs after the path finder). Put the project root first and drop such a namespace.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = str(Path(__file__).resolve().parents[2])
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
_loaded = sys.modules.get("lint")
if _loaded is not None and getattr(_loaded, "__file__", None) is None:
    for name in [m for m in sys.modules if m == "lint" or m.startswith("lint.")]:
        del sys.modules[name]
