"""The labelled corpus (tests/lint/fixtures/corpus): exactly the expected findings, line by line.

Each expected finding is written on the line where it must be reported: ``# expect: RULE SEVERITY TARGET
COLUMN`` (``-- expect: ...`` inside SQL text). The corpus is linted as one tree, so helpers, %run notebooks
and .sql files resolve as they would in a repository.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from lint_helpers import labelled, lint_tree, reported
from upsertsink.lint.command.cli import lint_command
from upsertsink.lint.run.config import DEFAULT_KEY_PATTERNS

CORPUS = Path(__file__).resolve().parent / "fixtures" / "corpus"


def expected() -> set[tuple]:
    """(path, cell, line, rule, severity, target, column) for every label in the corpus."""
    return labelled(CORPUS)


@pytest.fixture(scope="module")
def linted(tmp_path_factory) -> dict:
    return lint_tree(CORPUS, tmp_path_factory.mktemp("corpus"))


def got(doc: dict) -> set[tuple]:
    return reported(doc)


def test_corpus_has_labels_in_every_kind_of_file() -> None:
    labels = expected()
    kinds = {path.split("/")[0] for path, *_ in labels}
    assert {"etl", "streaming", "dbt", "notebooks", "lib", "jobs", "ml"} <= kinds
    assert any(cell is not None for _, cell, *_ in labels)  # a Jupyter notebook
    assert sum(1 for label in labels if label[4] == "error") >= 8


def test_corpus_findings_are_exactly_the_labelled_ones(linted: dict) -> None:
    want, have = expected(), got(linted)
    missed = sorted(want - have, key=str)
    extra = sorted(have - want, key=str)
    assert not missed and not extra, f"missed: {missed}\nunexpected: {extra}"


def test_every_corpus_file_was_checked_and_none_failed_to_parse(linted: dict) -> None:
    files = [p for p in CORPUS.rglob("*") if p.suffix in (".py", ".ipynb")]
    assert linted["files_checked"] == len(files)
    assert not [f for f in linted["findings"] if f["rule"] == "ND000"]


def test_default_key_patterns_make_no_false_error_and_star_id_would(tmp_path: Path, monkeypatch) -> None:
    """The measurement behind the default `key-patterns` (docs/linter.md): on this corpus the default gives
    no error the labels call a warning, while adding `*_id` turns the audit ids of jobs/audit_ids.py (and
    others) into false errors."""
    shutil.copytree(CORPUS, tmp_path / "corpus")
    monkeypatch.chdir(tmp_path / "corpus")
    labels = {(p, c, line, rule): sev for p, c, line, rule, sev, _t, _col in expected()}

    def errors(patterns: list[str]) -> tuple[int, int]:
        """(true errors, false errors) against the labels."""
        quoted = ", ".join(f"'{p}'" for p in patterns)
        (tmp_path / "corpus" / "pyproject.toml").write_text(
            f"[tool.upsertsink.lint]\nkey-patterns = [{quoted}]\n"
        )
        out = CliRunner().invoke(lint_command, [".", "--format", "json", "--no-cache"])
        verdicts = [
            labels.get((f["path"], f.get("cell"), f["line"], f["rule"]))
            for f in json.loads(out.output)["findings"]
            if f["severity"] == "error"
        ]
        return verdicts.count("error"), verdicts.count("warning")

    default_true, default_false = errors(DEFAULT_KEY_PATTERNS)
    none_true, none_false = errors([])
    assert default_false == 0 and none_false == 0
    assert default_true - none_true == 4  # surrogate_key, row_key, customer_sk, session_key
    assert errors([*DEFAULT_KEY_PATTERNS, "*_id"])[1] == 3
