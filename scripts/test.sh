#!/usr/bin/env bash
# The README's test command (after set-up): the whole pytest suite in one run (one SparkSession),
# then the project's own examples linted by the determinism linter.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
# The short cluster / object-store suite (tests/cluster, UPSERTSINK_CLUSTER_SUITE=short by default) submits
# jobs with hadoop-aws and the AWS SDK: fetch them into ~/.m2 once (Maven), so no test waits on the network.
.venv/bin/python -m upsertsink.jars ensure --s3a
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
echo "linting examples/ with upsertsink lint"
.venv/bin/upsertsink lint examples
