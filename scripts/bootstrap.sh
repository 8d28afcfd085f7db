#!/usr/bin/env bash
# Idempotent set-up: .venv with upsertsink installed (editable, with every extra the tests need: the embedded
# engine, Spark, the Connect client, dev tools, the S3 server), and the Delta JARs in ~/.m2.
# Quick when nothing changed: it compares a stamp of pyproject.toml and of the package's file list, and checks
# the JAR files exist.
#
# The editable install is setuptools' "strict" mode: the package is a tree of links under build/ named by a
# plain path in a .pth file, so an interpreter starts without the import hook the default mode installs
# (~12 ms of every `upsertsink` command's start-up, more than the whole of a warm `upsertsink lint`).
# Edits to a file are live; a module added or removed needs this script again (the stamp sees it).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
# The interpreter of .venv (only when .venv is created): $PYTHON when given, else the first Python 3.11 or
# later of the distribution's /usr/bin/python3.11 and /usr/bin/python3, then python3 on PATH. Debian and Ubuntu
# build theirs with profile-guided and link-time optimization and libpython linked in; a default source build
# (pyenv's, often first on PATH) has neither and runs the linter's parse and analysis 20-30% slower
# (docs/benchmarks.md, "Thirteenth pass").
pick_python() {
    local c
    for c in /usr/bin/python3.11 /usr/bin/python3 python3; do
        if command -v "$c" >/dev/null 2>&1 \
            && "$c" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            echo "$c"
            return
        fi
    done
    echo python3
}
PY="${PYTHON:-$(pick_python)}"
VENV="$ROOT/.venv"
STAMP="$VENV/.upsertsink-installed"

if [ ! -x "$VENV/bin/python" ]; then
    echo "bootstrap: creating $VENV with $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])'))"
    "$PY" -m venv "$VENV"
fi

want="$( (sha256sum pyproject.toml; find upsertsink lint -type f -not -path '*/__pycache__/*' | LC_ALL=C sort) \
    | sha256sum | cut -d' ' -f1)"
have="$(cat "$STAMP" 2>/dev/null || true)"
if [ "$want" != "$have" ] || [ ! -x "$VENV/bin/upsertsink" ] \
    || ! "$VENV/bin/python" -c "import upsertsink.lint.runrecord" 2>/dev/null; then
    echo "bootstrap: installing Python packages into .venv (pip)"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        --config-settings editable_mode=strict -e ".[spark,connect,embedded,server,dev,objectstore]"
    echo "$want" > "$STAMP"
fi

# The package's bytecode, compiled once here: an environment that sets PYTHONDONTWRITEBYTECODE (containers,
# CI) would otherwise compile every imported module of upsertsink at every command's start-up, in every lint
# worker too (about 80 ms a process). Quick when the files are compiled already; an edited file is compiled
# again in memory by Python itself (the bytecode records its source's time and size).
"$VENV/bin/python" -m compileall -q "$(cd / && "$VENV/bin/python" -c 'import os, upsertsink; print(os.path.dirname(upsertsink.__file__))')"

# Delta's Spark connector is a Maven artifact. It is fetched once into ~/.m2 with Maven and passed to
# Spark as explicit spark.jars by upsertsink.spark_session(), so Spark starts without any network.
"$VENV/bin/python" -m upsertsink.jars ensure
