"""The linter's findings on examples/ and on its fixtures, exactly as recorded in tests/lint/golden/.

A restructuring of the linter must reproduce them; an intended change is recorded again with
``.venv/bin/python scripts/lint_golden.py`` and reviewed in the diff of findings.json.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _golden_module():
    spec = importlib.util.spec_from_file_location("lint_golden", ROOT / "scripts" / "lint_golden.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_findings_match_the_golden_file():
    golden = _golden_module()
    want = json.loads(golden.GOLDEN.read_text(encoding="utf-8"))
    got = golden.findings()
    missing = [f for f in want if f not in got]
    extra = [f for f in got if f not in want]
    assert not missing and not extra, f"missing: {missing[:5]}\nextra: {extra[:5]}"
