#!/usr/bin/env bash
# The README's test command (after set-up): the whole pytest suite in one run (one SparkSession),
# then the project's own examples linted by the determinism linter.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
echo "linting examples/ with upsertsink lint"
.venv/bin/upsertsink lint examples
