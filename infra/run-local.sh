#!/usr/bin/env bash
# The whole stack on this machine: DynamoDB Local (data kept in .local/ or
# BLOG_DATA_DIR), the
# table, a Cognito user pool as template.yaml makes it (moto's emulator), the
# functions under `cargo lambda watch`, the local API Gateway in front of them
# (`blog-admin api-gateway`: template.yaml's routes, CORS, throttles and JWT
# authorizer, payload 2.0 events through watch's Invoke API), and the stream
# fan-out: a poller reads DynamoDB Local's stream and invokes the `fan-out`
# function through watch's Lambda Invoke API, as Lambda would; and
# template.yaml's EventBridge schedule (`blog-admin scheduler`: the
# scheduled-post publisher every minute).
# Ctrl-C stops everything it started.
#
#   BLOG_PORT      API port                  (default 9000)
#   WATCH_PORT     watch's Lambda Invoke API (default 9001)
#   IDP_PORT       the Cognito emulator      (default 9229)
#   DYNAMODB_PORT  DynamoDB Local port       (default 8000)
#   TABLE_NAME     table name          (default blog)
#   WATCH_CONCURRENCY
#                  instances of each function watch may run at once, as
#                  Lambda runs one per request in flight (default 4)
#   BLOG_DATA_DIR  where the stack keeps what outlives it: DynamoDB Local's
#                  database (dynamodb-data/), the local user pool's ids
#                  (identity.json) and the stream position
#                  (stream-checkpoint.json)    (default .local)
#                  One stack per data directory: a second run-local.sh on
#                  the same one stops at once, naming the running one, and
#                  touches nothing. A second stack beside the first needs a
#                  data directory and ports of its own.
#   BLOG_HOSTILE_DYNAMODB=1
#                  put `blog-admin hostile-dynamodb` (the `hostile` crate)
#                  between everything and DynamoDB Local, on a free port: it
#                  throttles, cancels transactions, fails writes with
#                  conflicts, loses committed transactions' responses and
#                  hides fresh items from index queries, as real DynamoDB
#                  does under load and DynamoDB Local never does. The
#                  functions and the stream poller (table writes and stream
#                  reads alike; stream reads pass untouched) use it through
#                  DYNAMODB_ENDPOINT. Off by default
#   BLOG_HOSTILE_ARGS
#                  its options, e.g. "--seed 7 --rate throttle=0.2
#                  --gsi-lag-ms 2000" (default: hostile::Faults::hostile()),
#                  or "--faults none --partition-scale 0.1" for DynamoDB's
#                  per-partition limits (scaled) and no faults; the rate
#                  that turns a post hot (HOT_WRITES_PER_SECOND, 25 an
#                  instance) is scaled with them unless set
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

API_PORT=${BLOG_PORT:-9000}
WATCH_PORT=${WATCH_PORT:-9001}
IDP_PORT=${IDP_PORT:-9229}
DDB_PORT=${DYNAMODB_PORT:-8000}
export TABLE_NAME=${TABLE_NAME:-blog}
export DYNAMODB_ENDPOINT="http://127.0.0.1:$DDB_PORT"
mkdir -p "${BLOG_DATA_DIR:-$LOCAL}"
DATA=$(cd "${BLOG_DATA_DIR:-$LOCAL}" && pwd)
export BLOG_DATA_DIR=$DATA

# One stack per data directory, before anything touches it: two DynamoDB
# Locals on one database file corrupt each other's writes. The lock is held
# as long as this script, or anything it started, runs.
exec {lock_fd}>>"$DATA/run-local.lock"
if ! flock -n "$lock_fd"; then
  log "another run-local.sh is using $DATA: $(cat "$DATA/run-local.lock" 2>/dev/null || echo '(no description)')"
  log "stop it first, or give this one a data directory and ports of its own, e.g." \
    "BLOG_DATA_DIR=.local/stack2 BLOG_PORT=9100 WATCH_PORT=9101 IDP_PORT=9329 DYNAMODB_PORT=8100 ./infra/run-local.sh"
  exit 1
fi
printf 'pid %s since %s: API on http://127.0.0.1:%s, DynamoDB Local on port %s, watch on port %s\n' \
  "$$" "$(date -u +%FT%TZ)" "$API_PORT" "$DDB_PORT" "$WATCH_PORT" >"$DATA/run-local.lock"

ensure_java
ensure_dynamodb_local

trap stop_started EXIT INT TERM

# Of the pinned Python tools cargo-lambda (watch) and moto (the user pool)
# serve the local stack, and docs/local.md's local sign-up runs the AWS CLI
# (.local/venv/bin/aws); they install while cargo builds.
ensure_tools cargo-lambda moto awscli &
tools_pid=$!
pids=("$tools_pid")

launch_dynamodb_local "$DDB_PORT" "$DATA/dynamodb-data"
pids+=("$DDB_PID")
ddb_pid=$DDB_PID

# blog-admin and every function, as watch builds a function (`cargo run
# --bin` at the workspace root: the workspace's features), so that watch only
# starts them. Before the API is announced: a function built on its first
# request would keep that request past the API Gateway's 30 s integration
# timeout (a 503) on a fresh clone. A first build from nothing takes about
# three minutes on two cores. Only these binaries (not the benchmark's), but
# the whole workspace's features: a build of its own features would not be
# the one watch's `cargo run` finds fresh.
log "building blog-admin and the functions (debug)"
read -ra binaries < <(cargo metadata --no-deps --format-version 1 | python3 -c 'import json, sys
print(" ".join("--bin " + t["name"] for p in json.load(sys.stdin)["packages"] if p["name"] in ("functions", "tools")
               for t in p["targets"] if "bin" in t["kind"]))')
cargo build --quiet --workspace "${binaries[@]}"
wait "$tools_pid" || { log "installing cargo-lambda, moto and the AWS CLI failed"; exit 1; }
unset 'pids[0]'
await_dynamodb_local "$DDB_PORT" "$ddb_pid"
if [ "${BLOG_HOSTILE_DYNAMODB:-0}" = 1 ]; then
  read -ra hostile_args <<<"${BLOG_HOSTILE_ARGS:-}"
  hostile_port=$(free_port)
  ./target/debug/blog-admin hostile-dynamodb "$hostile_port" --upstream "$DYNAMODB_ENDPOINT" \
    "${hostile_args[@]}" &
  pids+=("$!")
  wait_for_http "http://127.0.0.1:$hostile_port" "${pids[-1]}"
  export DYNAMODB_ENDPOINT="http://127.0.0.1:$hostile_port"
  log "hostile DynamoDB proxy on $DYNAMODB_ENDPOINT in front of DynamoDB Local"
  # Partition limits scaled down: the rate that turns a post hot scales with
  # them (25 likes and comments a second an instance at DynamoDB's own).
  for i in "${!hostile_args[@]}"; do
    if [ "${hostile_args[$i]}" = --partition-scale ] && [ -z "${HOT_WRITES_PER_SECOND:-}" ]; then
      HOT_WRITES_PER_SECOND=$(awk -v s="${hostile_args[$((i + 1))]:-1}" 'BEGIN { print 25 * s }')
      export HOT_WRITES_PER_SECOND
      log "a post turns hot at $HOT_WRITES_PER_SECOND likes and comments a second an instance"
    fi
  done
fi
./target/debug/blog-admin create-table

start_identity_provider "$IDP_PORT"
read -r USER_POOL CLIENT < <(./target/debug/blog-admin identity-provider "$IDP_ENDPOINT" --save "$DATA/identity.json")
log "user pool $USER_POOL, app client $CLIENT at $IDP_ENDPOINT (saved in $DATA/identity.json)"

# watch is the Lambda runtime (its own HTTP routing unused); the API Gateway
# in front of it is blog-admin's, and identity comes only from its JWT
# authorizer's claims, as deployed.
cargo lambda watch --disable-cors --concurrency "${WATCH_CONCURRENCY:-4}" \
  --invoke-address 127.0.0.1 --invoke-port "$WATCH_PORT" &
pids+=("$!")
wait_for_port "$WATCH_PORT" "${pids[-1]}"
./target/debug/blog-admin api-gateway "$API_PORT" --functions "http://127.0.0.1:$WATCH_PORT" \
  --idp "$IDP_ENDPOINT" --user-pool "$USER_POOL" --client "$CLIENT" &
pids+=("$!")
wait_for_ok "http://127.0.0.1:$API_PORT/feed" "${pids[-1]}"
log "API on http://127.0.0.1:$API_PORT; a token for a local user: ./target/debug/blog-admin token alice"

./target/debug/blog-admin stream-poller --checkpoint "$DATA/stream-checkpoint.json" \
  --functions "http://127.0.0.1:$WATCH_PORT" &
pids+=("$!")
# EventBridge's schedules from template.yaml: publish-scheduled every minute.
./target/debug/blog-admin scheduler --functions "http://127.0.0.1:$WATCH_PORT" &
pids+=("$!")
wait -n "${pids[@]}"
