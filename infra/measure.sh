#!/usr/bin/env bash
# Measures the waits a newcomer meets, each from a fresh clone of HEAD in a
# scratch directory (the working tree is never touched), and prints one
# Markdown row per measurement for docs/timings.md, "How long things take":
#
#   infra/measure.sh test        ./infra/test.sh, fresh; then again with the
#                                warm target/; and target/ on disk after it
#   infra/measure.sh run-local   ./infra/run-local.sh to its first answer
#                                (GET /feed 200), fresh
#   infra/measure.sh sam-build   sam build, fresh; then after a one-line
#                                change to one handler
#   infra/measure.sh profiles    the release profile's candidates, each
#                                built from nothing: build time, sizes,
#                                start-up, first answer, warm invocations
#   infra/measure.sh cold [ARGS] every function's cold start as Lambda runs
#                                it: confined to its memory size's CPU share
#                                and memory (cgroup v1, as root), DynamoDB
#                                behind TLS (blog-cold-bench; ARGS go to it,
#                                e.g. --memory 128,256 --starts 3; --warm 100
#                                --latency-ms 4 for warm latency and cost per
#                                million at each memory size: prefer `warm`)
#   infra/measure.sh warm        every function's warm latency and cost per
#                                million at 128, 256, 512 and 1,024 MB
#                                (blog-cold-bench --warm 100 --latency-ms 4),
#                                each function at each size against a
#                                DynamoDB Local of its own: one Local for a
#                                whole run slows as the run goes on (fresh
#                                tables do not prevent it), and measures that
#
# Each takes as long as what it measures (the test command and sam build
# take tens of minutes on a 2-core machine); run one at a time, with nothing
# else running, for figures worth writing down.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

what=${1:?"what to measure: test, run-local, sam-build, profiles, cold or warm"}
shift
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
git clone -q "$ROOT" "$scratch/blog"
cd "$scratch/blog"
# lib.sh pointed cargo at this checkout's target/; the clone builds its own.
export CARGO_TARGET_DIR="$PWD/target"

# The functions' binary names (31), from the functions package's targets.
function_names() {
  cargo metadata --format-version 1 --no-deps |
    python3 -c 'import json,sys; print(" ".join(t["name"] for p in json.load(sys.stdin)["packages"] if p["name"] == "functions" for t in p["targets"]))'
}

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
    # SIGTERM: a background job of a non-interactive shell ignores SIGINT.
    kill -TERM "$pid"
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
  cold)
    ensure_java
    ensure_dynamodb_local
    # Two builds: `--bin` would narrow the first to the bench alone and leave
    # the functions as they were last built.
    cargo build --quiet --release --locked -p functions
    cargo build --quiet --release --locked -p bench --bin blog-cold-bench
    port=$(free_port)
    start_dynamodb_local "$port" memory
    trap 'kill "$DDB_PID" 2>/dev/null || true; rm -rf "$scratch"' EXIT
    target/release/blog-cold-bench --endpoint "http://127.0.0.1:$port" \
      --functions target/release --events events "$@"
    ;;
  warm)
    ensure_java
    ensure_dynamodb_local
    cargo build --quiet --release --locked -p functions
    cargo build --quiet --release --locked -p bench --bin blog-cold-bench
    trap 'kill "${DDB_PID:-}" 2>/dev/null || true; rm -rf "$scratch"' EXIT
    header=true
    for memory in 128 256 512 1024; do
      for function in $(function_names); do
        port=$(free_port)
        start_dynamodb_local "$port" memory
        target/release/blog-cold-bench --endpoint "http://127.0.0.1:$port" \
          --functions target/release --events events --warm 100 --latency-ms 4 \
          --memory "$memory" --only "$function" "$@" >"$scratch/warm.out"
        if $header; then sed -n '/^| function/,/^|---/p' "$scratch/warm.out"; header=false; fi
        grep -m1 "^| $function " "$scratch/warm.out"
        kill "$DDB_PID"
        wait "$DDB_PID" 2>/dev/null || true
      done
    done
    ;;
  profiles)
    # Each candidate builds the 20 functions (x86_64, this machine's: the
    # arm64 binaries cannot run here) in one cargo invocation from nothing,
    # in a target directory of its own; blog-bench --functions-only then
    # starts each binary 25 times and serves 1,000 invocations on the S data
    # set. Candidates: the workspace's profile (no cross-crate LTO, cargo's
    # default 16 codegen units), cargo-lambda's defaults (thin LTO, 1 codegen
    # unit), and the profile before 2026-11-25 (fat LTO, 1 codegen unit); all
    # keep opt-level 3, strip and panic = "abort".
    ensure_java
    ensure_dynamodb_local
    # The benchmark itself, built once (its profile does not matter here).
    CARGO_TARGET_DIR="$scratch/target-bench" CARGO_PROFILE_RELEASE_LTO=off \
      CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 cargo build --quiet --release --locked -p bench --bin blog-bench
    for candidate in "off 16" "thin 1" "fat 1"; do
      read -r lto units <<<"$candidate"
      dir="$scratch/target-$lto-$units"
      start=$(date +%s)
      CARGO_TARGET_DIR="$dir" CARGO_PROFILE_RELEASE_LTO=$lto CARGO_PROFILE_RELEASE_CODEGEN_UNITS=$units \
        cargo build --quiet --release --locked -p functions
      row "release build of the 20 functions, lto = $lto, codegen-units = $units" "$(since "$start")"
      zips=()
      for binary in $(function_names); do
        mkdir -p "$dir/zips/$binary"
        cp "$dir/release/$binary" "$dir/zips/$binary/bootstrap"
        (cd "$dir/zips/$binary" && zip -q -9 bootstrap.zip bootstrap)
        zips+=("$(stat -c %s "$dir/zips/$binary/bootstrap.zip")")
      done
      row "lto = $lto: zips (x86_64) smallest, largest" \
        "$(printf '%s\n' "${zips[@]}" | sort -n | sed -n '1p;$p' | paste -sd' ' | awk '{printf "%.2f MB, %.2f MB", $1/1e6, $2/1e6}')"
      port=$(free_port)
      start_dynamodb_local "$port" memory
      "$scratch/target-bench/release/blog-bench" --endpoint "http://127.0.0.1:$port" --functions-only \
        --functions "$dir/release" --zips "$dir/zips" | sed -n '/^| function/,$p'
      kill "$DDB_PID"
      wait "$DDB_PID" 2>/dev/null || true
    done
    ;;
  *)
    echo "unknown measurement: $what (test, run-local, sam-build, profiles, cold or warm)" >&2
    exit 2
    ;;
esac
