#!/usr/bin/env bash
# `make cluster-test` (after set-up): the full cluster / object-store suite (tests/cluster). The tests start a
# Spark standalone cluster (master + 2 workers) and moto's S3 server in a temporary folder and stop them at
# the end, whatever happens. Needs: the venv with the `objectstore` extra (bootstrap), Java 17 with javac,
# Maven (hadoop-aws and the AWS SDK are fetched into ~/.m2 once).
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
.venv/bin/python -m upsertsink.jars ensure --s3a
UPSERTSINK_CLUSTER_SUITE=full .venv/bin/python -m pytest -q -p no:cacheprovider --durations=0 tests/cluster "$@"
