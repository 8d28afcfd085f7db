#!/usr/bin/env bash
# The README's test command (after set-up): the whole pytest suite, then the project's own examples linted by
# the determinism linter.
#
# With no arguments the suite runs as two pytest processes side by side, so it ends well inside CI's 90
# minutes on a 2-core machine: the tests that use the run's one in-process SparkSession (marked `session` at
# collection by tests/conftest.py: the spark, connect or schema fixture, or a Spark engine parameter) in the
# foreground, every other test (the linter, the embedded engine, the CLI and the crash tests that run their
# writers in child processes, the cluster suite) in the background, where a test that starts Spark in-process
# fails (UPSERTSINK_TESTS_SIDE=1). The background run's output is printed when both are done; the command
# fails if either fails. With arguments (`make test` passes none; `bash scripts/test.sh tests/x`) one pytest
# process runs them. Tests marked `long` (two short Spark stress runs whose long versions `make stress` runs)
# are left out of the no-argument run: `make test-long` runs them. Both processes print their 25 slowest
# tests (`--durations`), so a CI run that nears its limit says where its time went.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
# The short cluster / object-store suite (tests/cluster, UPSERTSINK_CLUSTER_SUITE=short by default) submits
# jobs with hadoop-aws and the AWS SDK: fetch them into ~/.m2 once (Maven), so no test waits on the network.
.venv/bin/python -m upsertsink.jars ensure --s3a
if [ "$#" -gt 0 ]; then
    .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
else
    side_log="$(mktemp "${TMPDIR:-/tmp}/upsertsink-tests-side.XXXXXX")"
    trap 'rm -f "$side_log"' EXIT
    start=$SECONDS
    UPSERTSINK_TESTS_SIDE=1 .venv/bin/python -m pytest -q -p no:cacheprovider --durations=25 \
        -m "not session and not long" \
        >"$side_log" 2>&1 &
    side=$!
    main_rc=0
    .venv/bin/python -m pytest -q -p no:cacheprovider --durations=25 --ignore=tests/lint --ignore=tests/cluster \
        -m "session and not long" \
        || main_rc=$?
    side_rc=0
    wait "$side" || side_rc=$?
    echo "---- the tests without the SparkSession (run beside the above) ----"
    cat "$side_log"
    echo "---- whole suite: $((SECONDS - start)) s; exit codes: session $main_rc, side $side_rc ----"
    if [ "$main_rc" -ne 0 ] || [ "$side_rc" -ne 0 ]; then
        exit 1
    fi
fi
echo "linting examples/ with upsertsink lint"
.venv/bin/upsertsink lint examples
