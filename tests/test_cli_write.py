"""`upsertsink write` and `upsertsink status` through the installed console script."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sink_helpers import read_rows

CLI = str(Path(sys.executable).with_name("upsertsink"))


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([CLI, *args], check=False, capture_output=True, text=True, env={**os.environ, "NO_COLOR": "1"})


@pytest.fixture
def files(tmp_path):
    pq.write_table(pa.table({"id": [1, 2], "name": ["a", "b"], "seq": [1, 1]}), tmp_path / "b0.parquet")
    (tmp_path / "b1.csv").write_text("id,name,seq,op\n2,B,2,U\n3,c,2,I\n1,a,2,D\n")
    folder = tmp_path / "b2"
    folder.mkdir()
    (folder / "part-1.json").write_text('{"id": 4, "name": "d", "seq": 3, "op": "I"}\n')
    return tmp_path


def test_write_parquet_csv_and_json_folder_with_json_output(files):
    target = str(files / "t")
    base = ["--target", target, "--key", "id", "--sequence-by", "seq", "--json"]
    r0 = run("write", str(files / "b0.parquet"), *base, "--batch-id", "0")
    assert r0.returncode == 0, r0.stderr
    out = json.loads(r0.stdout)
    assert (out["inserted"], out["skipped"], out["batch_id"]) == (2, False, 0)
    r1 = run("write", str(files / "b1.csv"), *base, "--batch-id", "1", "--delete-when", "op = 'D'",
             "--schema-evolution")
    assert r1.returncode == 0, r1.stderr
    assert {k: json.loads(r1.stdout)[k] for k in ("inserted", "updated", "deleted")} == {
        "inserted": 1, "updated": 1, "deleted": 1}
    r2 = run("write", str(files / "b2"), *base, "--batch-id", "2", "--delete-when", "op = 'D'")
    assert r2.returncode == 0, r2.stderr
    again = run("write", str(files / "b2"), *base, "--batch-id", "2", "--delete-when", "op = 'D'")
    assert json.loads(again.stdout)["skipped"] is True
    assert [r["id"] for r in read_rows(target)] == [2, 3, 4]


def test_write_text_output_and_status(files):
    target = str(files / "t")
    r = run("write", str(files / "b0.parquet"), "--target", target, "--key", "id", "--batch-id", "7",
            "--app-id", "nightly")
    assert r.returncode == 0 and "2 inserted" in r.stdout
    st = run("status", target, "--json")
    info = json.loads(st.stdout)
    assert info["version"] == 0 and info["batches"] == {"nightly": 7}  # created with data and marker in one commit
    assert info["commits"][0]["inserted"] == 2 and info["commits"][0]["batch_id"] == 7
    text = run("status", target)
    assert text.returncode == 0 and "nightly" in text.stdout and "last batch id 7" in text.stdout
    # each commit's time (UTC), the same instant as the JSON's timestamp (ms)
    stamp = datetime.datetime.fromtimestamp(info["commits"][0]["timestamp"] / 1000, tz=datetime.UTC)
    assert info["commits"][0]["time"] == stamp.strftime("%Y-%m-%d %H:%M:%SZ")
    lines = text.stdout.splitlines()
    header = next(line for line in lines if line.startswith("version"))
    assert header.split() == ["version", "time", "(UTC)", "operation", "app", "id", "batch", "inserted",
                              "updated", "deleted", "files", "scanned", "files", "rewritten"]
    first = info["commits"][0]
    row = lines[lines.index(header) + 1].split()
    assert row[:7] == [str(first["version"]), *first["time"].split(), first["operation"], "nightly", "7", "2"]
    assert not set(text.stdout) & set("┏━┃│└─\x1b")  # piped: no box drawing, no colour codes


def test_write_without_batch_id_says_so(files):
    r = run("write", str(files / "b0.parquet"), "--target", str(files / "t"), "--key", "id")
    assert r.returncode == 0, r.stderr
    first, result = r.stdout.splitlines()
    assert first == f"created a new table at {files / 't'}"
    assert "None" not in result and result.startswith(str(files / "t") + " version ")
    assert result.endswith(": 2 inserted, 0 updated, 0 deleted (no batch id: a re-run writes again)")


def test_source_can_be_a_delta_table_version(files):
    first = str(files / "t1")
    r = run("write", str(files / "b0.parquet"), "--target", first, "--key", "id", "--batch-id", "0", "--json")
    version = json.loads(r.stdout)["version"]
    r = run("write", str(files / "b1.csv"), "--target", first, "--key", "id", "--batch-id", "1", "--schema-evolution")
    assert r.returncode == 0, r.stderr
    copy = str(files / "t2")
    r = run("write", f"{first}@{version}", "--target", copy, "--key", "id", "--json")  # the parquet rows only
    assert r.returncode == 0, r.stderr
    assert sorted((row["id"], row["name"]) for row in read_rows(copy)) == [(1, "a"), (2, "b")]


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--key", "nope"], "nope"),
        (["--key", "id", "--delete-when", "op = 'D'"], "op"),
        (["--key", "id", "--batch-id", "0", "--source", "missing.parquet"], "missing.parquet' does not exist"),
        (["--key", "id", "--batch-id", "-1"], "Invalid value for '--batch-id'"),
        (["--batch-id", "0"], "Missing option '--key'"),
        (["--key", "id", "--source", "b0.parquet@1"], "a version (@1) needs a Delta table"),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_2(files, args, needle):
    source = str(files / "b0.parquet")
    if "--source" in args:
        i = args.index("--source")
        source = str(files / args[i + 1])
        args = args[:i]
    r = run("write", source, "--target", str(files / "t"), *args)
    assert r.returncode == 2
    assert r.stdout == "" and len(r.stderr.strip().splitlines()) == 1 and needle in r.stderr
    assert r.stderr.startswith("upsertsink: error: ")
    assert not (files / "t").exists()


def test_status_of_a_non_delta_path_exits_2(tmp_path):
    r = run("status", str(tmp_path))
    assert r.returncode == 2 and r.stderr == f"upsertsink: error: {tmp_path} is not a Delta table\n"


def test_write_with_spark_engine_prints_no_jvm_noise(files, monkeypatch):
    monkeypatch.chdir(files)  # a relative target works on Spark too
    r = run("write", "b1.csv", "--target", "ts", "--key", "id", "--engine", "spark", "--batch-id", "0", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["engine"] == "spark" and json.loads(r.stdout)["inserted"] == 3
    assert r.stderr == ""  # no log4j profile, NativeCodeLoader, "Setting default log level" or JVM warnings


def test_messages_name_cli_flags_not_python_parameters(files):
    target = str(files / "t")
    assert run("write", str(files / "b0.parquet"), "--target", target, "--key", "id", "--batch-id", "0").returncode == 0
    r = run("write", str(files / "b1.csv"), "--target", target, "--key", "id", "--batch-id", "1")  # a new column
    assert r.returncode == 2
    assert "--schema-evolution" in r.stderr and "schema_evolution=True" not in r.stderr, r.stderr
    r = run("write", str(files / "b0.parquet"), "--target", target, "--key", "id", "--sequence-by", "id")
    assert r.returncode == 2 and r.stderr.startswith("upsertsink: error: --sequence-by"), r.stderr


# -- issue #19 -------------------------------------------------------------------------------------------


def test_a_batch_id_behind_the_marker_never_committed_exits_2_naming_the_flags(files):
    target = str(files / "t")
    base = ["--target", target, "--key", "id", "--sequence-by", "seq"]
    assert run("write", str(files / "b0.parquet"), *base, "--batch-id", "42").returncode == 0
    r = run("write", str(files / "b0.parquet"), *base, "--batch-id", "3")
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("upsertsink: error: batch 3 of app")
    assert "never committed" in lines[0] and "--app-id" in lines[0] and "--late-batches apply" in lines[0]
    late = run("write", str(files / "b0.parquet"), *base, "--batch-id", "3", "--late-batches", "apply", "--json")
    assert late.returncode == 0, late.stderr
    assert json.loads(late.stdout)["late"] is True
    text = run("write", str(files / "b0.parquet"), *base, "--batch-id", "3", "--late-batches", "apply")
    assert "already committed" in text.stdout


def test_write_version_is_the_commit_it_made_and_status_labels_marker_only_commits(files):
    """A batch that changes no row still commits its marker: --json must name that commit's version."""
    target = str(files / "t")
    base = ["--target", target, "--key", "id", "--sequence-by", "seq", "--json"]
    run("write", str(files / "b0.parquet"), *base, "--batch-id", "43")
    same = run("write", str(files / "b0.parquet"), *base, "--batch-id", "44")
    out = json.loads(same.stdout)
    assert (out["inserted"], out["updated"]) == (0, 0)
    info = json.loads(run("status", target, "--json").stdout)
    assert out["version"] == info["version"] == 1
    assert info["commits"][0]["marker_only"] is True and info["commits"][1]["marker_only"] is False
    assert "marker only" in info["commits"][0]["operation"]
    assert "WRITE (marker only)" in run("status", target).stdout


def test_status_of_an_older_version(files):
    target = str(files / "t")
    base = ["--target", target, "--key", "id", "--app-id", "job"]
    run("write", str(files / "b0.parquet"), *base, "--batch-id", "1")
    run("write", str(files / "b0.parquet"), *base, "--batch-id", "2")
    run("write", str(files / "b0.parquet"), *base, "--batch-id", "3")
    old = run("status", f"{target}@1", "--json")
    assert old.returncode == 0, old.stderr
    info = json.loads(old.stdout)
    assert info["version"] == 1 and info["latest_version"] == 2 and info["batches"] == {"job": 2}
    assert [c["version"] for c in info["commits"]] == [1, 0]
    assert "version 1 (latest is 2)" in run("status", f"{target}@1").stdout
    missing = run("status", f"{target}@9")
    assert missing.returncode == 2 and "has no version 9 (latest is 2)" in missing.stderr


def test_an_embedded_command_ends_without_the_native_teardown_that_could_abort_it(tmp_path):
    """`upsertsink diff` printed `equal` and then died with SIGABRT ("terminate called without an active
    exception", exit -6) in a CI run: deltalake's and Arrow's native threads torn down with the interpreter
    (12 of 120 runs on a loaded 2-core machine). A command that never loaded pyspark now ends as soon as it
    has returned, with its own exit code and output, and no teardown: an exit hook never runs."""
    pq.write_table(pa.table({"a": [1, 2], "v": [1, 2]}), tmp_path / "s.parquet")
    target = str(tmp_path / "t")
    assert run("write", str(tmp_path / "s.parquet"), "--target", target, "--key", "a", "--batch-id", "0").returncode == 0
    probe = (
        "import atexit, sys; atexit.register(lambda: print('teardown ran', file=sys.stderr)); "
        "sys.argv = ['upsertsink', *sys.argv[1:]]; from upsertsink.launch import main; main()"
    )
    for args, code, out in (
        (["diff", str(tmp_path / "s.parquet"), target, "--key", "a"], 0, "equal: 2 rows"),
        (["diff", str(tmp_path / "s.parquet"), str(tmp_path / "missing"), "--key", "a"], 2, ""),
    ):
        done = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, check=False)
        assert done.returncode == code, done.stderr
        assert out in done.stdout
        assert "teardown ran" not in done.stderr


def test_key_lists_mean_the_same_in_write_and_diff(tmp_path):
    pq.write_table(pa.table({"a": [1, 1, 2], "b": ["x", "y", "x"], "v": [1, 2, 3]}), tmp_path / "s.parquet")
    target = str(tmp_path / "t")
    r = run("write", str(tmp_path / "s.parquet"), "--target", target, "--key", "a,b", "--batch-id", "0", "--json")
    assert r.returncode == 0, r.stderr  # one row per (a, b): with only "a" it would be a duplicate key
    assert json.loads(r.stdout)["inserted"] == 3
    for flags in (["--key", "a,b"], ["--key", "a", "--key", "b"], ["--key", " a , b "]):
        d = run("diff", str(tmp_path / "s.parquet"), target, *flags)
        assert d.returncode == 0, (flags, d.stdout, d.stderr)
    assert run("diff", str(tmp_path / "s.parquet"), target, "--key", "a").returncode == 1  # a is not unique
