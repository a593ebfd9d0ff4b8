#!/usr/bin/env bash
# One MPI rank under Oclgrind's checkers (out-of-bounds access, data races, uninitialized values,
# API misuse), with its own log: any report is printed with the rank and fails the rank (exit 1).
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
oclgrind --data-races --uninitialized --check-api --log "$log" "$@"
rc=$?
if [ -s "$log" ]; then
    echo "# Oclgrind reported problems on rank ${OMPI_COMM_WORLD_RANK:-?}:" >&2
    sed 's/^/# /' "$log" >&2
    exit 1
fi
exit $rc
