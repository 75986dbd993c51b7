#!/usr/bin/env bash
# Measures the waits a newcomer meets, each from a fresh clone of HEAD in a
# scratch directory (the working tree is never touched), and prints one
# Markdown row per measurement for README's "How long things take":
#
#   infra/measure.sh test        ./infra/test.sh, fresh; then again with the
#                                warm target/; and target/ on disk after it
#   infra/measure.sh run-local   ./infra/run-local.sh to its first answer
#                                (GET /feed 200), fresh
#   infra/measure.sh sam-build   sam build, fresh; then after a one-line
#                                change to one handler
#
# Each takes as long as what it measures (the test command and sam build
# take tens of minutes on a 2-core machine); run one at a time, with nothing
# else running, for figures worth writing down.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

what=${1:?"what to measure: test, run-local or sam-build"}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
git clone -q "$ROOT" "$scratch/blog"
cd "$scratch/blog"

# seconds since $1 as m:ss
since() { local s=$(($(date +%s) - $1)); printf '%d:%02d' $((s / 60)) $((s % 60)); }
row() { printf '| %s | %s | %s |\n' "$1" "$2" "$(git rev-parse --short HEAD), $(nproc) cores, $(date -u +%F)"; }

case "$what" in
  test)
    start=$(date +%s)
    CI=true ./infra/test.sh </dev/null >"$scratch/test.log" 2>&1 || { tail -40 "$scratch/test.log"; exit 1; }
    row "\`./infra/test.sh\`, fresh clone" "$(since "$start")"
    start=$(date +%s)
    CI=true ./infra/test.sh </dev/null >"$scratch/test.log" 2>&1 || { tail -40 "$scratch/test.log"; exit 1; }
    row "\`./infra/test.sh\` again (warm \`target/\`)" "$(since "$start")"
    row "\`target/\` after the test command" "$(du -sh target | cut -f1)"
    ;;
  run-local)
    start=$(date +%s)
    port=$(free_port)
    BLOG_PORT=$port WATCH_PORT=$(free_port) IDP_PORT=$(free_port) DYNAMODB_PORT=$(free_port) \
      ./infra/run-local.sh </dev/null >"$scratch/run-local.log" 2>&1 &
    pid=$!
    until curl -sf -o /dev/null "http://127.0.0.1:$port/feed"; do
      kill -0 "$pid" 2>/dev/null || { tail -40 "$scratch/run-local.log"; exit 1; }
      sleep 1
    done
    row "\`./infra/run-local.sh\` to its first answer, fresh clone" "$(since "$start")"
    kill -INT "$pid"
    wait "$pid" || true
    ;;
  sam-build)
    ensure_tools
    export PATH="$TOOLS_VENV/bin:$PATH"
    start=$(date +%s)
    sam build >"$scratch/sam.log" 2>&1 || { tail -40 "$scratch/sam.log"; exit 1; }
    row "\`sam build\`, fresh clone" "$(since "$start")"
    echo "// measured: a one-line change" >>functions/get-feed/main.rs
    start=$(date +%s)
    sam build >"$scratch/sam.log" 2>&1 || { tail -40 "$scratch/sam.log"; exit 1; }
    row "\`sam build\` after a one-line change to one handler" "$(since "$start")"
    ;;
  *)
    echo "unknown measurement: $what (test, run-local or sam-build)" >&2
    exit 2
    ;;
esac
