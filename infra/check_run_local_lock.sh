#!/usr/bin/env bash
# run-local.sh keeps one stack per data directory: a second one started on a
# data directory a running stack holds stops at once, names the running one,
# and changes nothing in the directory (two DynamoDB Locals on one database
# file corrupt each other's writes). A stack is stood in for here by a
# process holding the directory's lock as run-local.sh does, with a database
# file in place; run-local.sh itself is the one refused. Prints one total line
# ("runlocal: N passed, M failed"); exits 1 on a failure.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"

data=$(mktemp -d)
trap 'kill "$holder" 2>/dev/null; rm -rf "$data"' EXIT
mkdir -p "$data/dynamodb-data"
echo "a database a running stack has open" >"$data/dynamodb-data/shared-local-instance.db"
echo '{"userPoolId": "us-east-1_running", "clientId": "running"}' >"$data/identity.json"
description="pid 4242 since 2026-01-01T00:00:00Z: API on http://127.0.0.1:9100, DynamoDB Local on port 8100, watch on port 9101"
echo "$description" >"$data/run-local.lock"
# The running stack: a process holding the lock for as long as it runs.
(exec 9>>"$data/run-local.lock"; flock 9; exec sleep 300) &
holder=$!
until ! flock -n "$data/run-local.lock" true; do sleep 0.1; done
before=$(cd "$data" && find . -type f -exec sha256sum {} + | sort)

passed=0 failed=0
check() {
  if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $1"; fi
}

out=$(BLOG_DATA_DIR=$data BLOG_PORT=9200 WATCH_PORT=9201 IDP_PORT=9202 DYNAMODB_PORT=9203 \
  timeout 60 ./infra/run-local.sh </dev/null 2>&1)
status=$?
echo "$out"
check "the second stack stops with an error (status $status)" '[ "$status" -ne 0 ] && [ "$status" -ne 124 ]'
check "it names the running stack" '[[ "$out" == *"$description"* ]]'
check "it names the data directory" '[[ "$out" == *"$data"* ]]'
check "it says how to run a second stack" '[[ "$out" == *"BLOG_DATA_DIR="* ]]'
after=$(cd "$data" && find . -type f -exec sha256sum {} + | sort)
check "nothing in the data directory changed" '[ "$before" = "$after" ]'
check "the running stack still holds its lock" 'kill -0 "$holder" && ! flock -n "$data/run-local.lock" true'
echo "runlocal: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
