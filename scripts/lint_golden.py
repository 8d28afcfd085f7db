"""Record (or check) the linter's findings on examples/ and the linter's fixtures: a golden file that a
restructuring of the linter must reproduce exactly (docs/design-notes.md, "The linter's house").

Usage: ``.venv/bin/python scripts/lint_golden.py [--check]``. Without ``--check`` it rewrites
tests/lint/golden/findings.json; an intended change of findings is recorded that way and reviewed in the diff.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "lint" / "golden" / "findings.json"
TREES = ("examples", "tests/lint/fixtures", "tests/jobs")


def findings() -> list[dict]:
    """Every finding of every tree, linted one tree at a time with the default settings and no cache."""
    out: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "pyproject.toml"
        config.write_text("[tool.upsertsink.lint]\n", encoding="utf-8")
        for tree in TREES:
            out.extend(_lint(tree, config))
    return sorted(out, key=lambda f: (f["path"], f["cell"] or 0, f["line"], f["column"], f["rule"]))


def _lint(tree: str, config: Path) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-m", "upsertsink", "lint", tree, "--format", "json", "--no-cache",
         "--exit-zero", "--config", str(config)],
        cwd=ROOT, capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0:
        raise SystemExit(f"lint {tree} failed ({proc.returncode}): {proc.stderr}")
    fields = ("path", "cell", "line", "column", "rule", "severity", "target", "column_name", "message")
    return [{k: f.get(k) for k in fields} for f in json.loads(proc.stdout)["findings"]]


def main() -> int:
    got = findings()
    if "--check" in sys.argv[1:]:
        want = json.loads(GOLDEN.read_text(encoding="utf-8"))
        return 0 if got == want else 1
    GOLDEN.write_text(json.dumps(got, indent=1) + "\n", encoding="utf-8")
    print(f"{len(got)} findings written to {GOLDEN.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
