#!/usr/bin/env bash
# Run a test program under Oclgrind's checkers; any report (out-of-bounds access,
# data race, uninitialized value, API misuse) fails the run.
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
TSR_TEST_MODE=oclgrind oclgrind --data-races --uninitialized --check-api --log "$log" "$@"
rc=$?
if [ -s "$log" ]; then
    echo "# Oclgrind reported problems:" >&2
    sed 's/^/# /' "$log" >&2
    exit 1
fi
exit $rc
