#!/usr/bin/env bash
# Every check and test: formatting, lints, unit tests, and the integration tests
# against a fresh in-memory DynamoDB Local on a free port (each test makes its
# own table, so they run in parallel).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

ensure_java
ensure_dynamodb_local

log "cargo fmt --check"
cargo fmt --all -- --check
log "cargo clippy"
cargo clippy --workspace --all-targets --locked -- -D warnings

port=$(free_port)
start_dynamodb_local "$port"
trap 'kill "$DDB_PID" 2>/dev/null || true' EXIT
export DYNAMODB_ENDPOINT="http://127.0.0.1:$port"

log "cargo test"
mkdir -p "$LOCAL"
set +e
cargo test --workspace --locked 2>&1 | tee "$LOCAL/test.log"
status=${PIPESTATUS[0]}
set -e
# cargo prints one result line per test binary; the last is often an empty
# doc-test run, so close with the totals.
awk '/^test result:/ { passed += $4; failed += $6 } END { printf "total: %d passed, %d failed\n", passed, failed }' "$LOCAL/test.log"
exit "$status"
