#!/usr/bin/env bash
# The benchmark behind docs/benchmarks.md. Builds the functions twice: as the
# arm64 zips that `sam deploy` uploads (for their sizes) and as release
# binaries for this machine (to time their start-up and measure their memory);
# starts a DynamoDB Local of its own, in memory; runs blog-bench, which loads
# the data set at S and 10×S, measures, and rewrites the tables of
# docs/benchmarks.md. Options go to blog-bench (e.g. --users 101, --quick).
#
#   ./infra/bench.sh --home [--memory MB] [--followers 10,1000,100000,1000000] [--scale 0.1]
#                       [--follows 10,500,5000] [--pulls 8]
#                                           a post delivered to its author's
#                                           followers' homes under DynamoDB's
#                                           limits (scaled), and home reads
#                                           (docs/benchmarks.md, "Follows and
#                                           homes")
#   ./infra/bench.sh --rename [--items N]   the rename fan-out of one user who
#                                           wrote N items (100,000), instead
#   ./infra/bench.sh --viral [--scale 0.1] [--seconds 20] [--rates 50,100,...]
#                        [--readers 10] [--ramp 1] [--confine [--instances N]]
#                                           one post liked at rising rates on
#                                           a DynamoDB that enforces its
#                                           per-partition limits (scaled),
#                                           each rate reached from quiet in
#                                           --ramp s, with readers at
#                                           --readers x the like rate (Q2, Q4
#                                           and Q5 first pages); --confine
#                                           (as root, cgroup v1) runs the
#                                           request calls and the fan-out
#                                           under the CPU share Lambda gives
#                                           their busy instances (256 and
#                                           512 MB), the proxy and DynamoDB
#                                           Local outside. The issue's rows:
#     ./infra/bench.sh --viral --designs hot --scale 0.01 --seconds 20 \
#       --rates 1000,10000,20000,40000 --readers 10 [--confine]
#   ./infra/bench.sh --notifications [--scale 0.01] [--seconds 10] [--rates 1000,5000,10000]
#                                           the same, hot design, with what
#                                           the author's notifications
#                                           partition takes, and a quiet
#                                           post's like's notification latency
#   ./infra/bench.sh --stream [--likes 3000] [--quiet] [--memory MB]
#                                           the local stream poller and the
#                                           fan-out draining one post's likes
#                                           (with --memory, under the CPU
#                                           share Lambda gives that size: a
#                                           cgroup v1 cpu quota, as root)
#   ./infra/bench.sh --markdown [--memory MB] [--runs N]
#                                           rendering 50,000-character posts'
#                                           Markdown (no DynamoDB), with
#                                           --memory under that CPU share
#   ./infra/bench.sh --account [--users N] [--runs N]
#                                           the export's pages and erasures
#                                           at S and 10×S (V3 only), instead
#   ./infra/bench.sh --audit [--users N] [--segments 1,4,8]
#                                           `blog-admin audit` on the data set
#                                           at 10×S (V3 only), instead
set -euo pipefail
source "$(dirname "$0")/lib.sh"

ensure_java
ensure_dynamodb_local
cd "$ROOT"

if [ "${1:-}" = "--audit" ]; then
  shift
  cargo build --release --locked -p bench --bin blog-audit-bench -p tools --bin blog-admin
  # Copies of their own: a shared target directory may be rebuilt meanwhile.
  target=${CARGO_TARGET_DIR:-target}
  bin="$LOCAL/audit-bench"
  mkdir -p "$bin"
  cp "$target/release/blog-audit-bench" "$target/release/blog-admin" "$bin/"
  usage=$("$bin/blog-admin" 2>&1 || true)
  [[ $usage == *--segments* ]] || { log "blog-admin was rebuilt from another tree meanwhile; run again"; exit 1; }
  port=$(free_port)
  start_dynamodb_local "$port" memory
  trap 'kill "$DDB_PID" 2>/dev/null || true' EXIT
  "$bin/blog-audit-bench" --endpoint "http://127.0.0.1:$port" --admin "$bin/blog-admin" "$@"
  exit
fi

ensure_tools

# raise_open_files: as many open files as this shell may have (as root, the
# kernel's most): a viral post's readers open thousands of connections at
# once (a hot post's merged first page one a shard, each through the proxy,
# which opens one more upstream), past the usual 20,000.
raise_open_files() {
  ulimit -n "$(cat /proc/sys/fs/nr_open 2>/dev/null || echo 1048576)" 2>/dev/null ||
    ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
}

# run_alone BIN ARGS...: builds the bench's BIN and runs it on a DynamoDB
# Local of its own.
run_alone() {
  local bin=$1
  shift
  cargo build --release --locked -p bench --bin "$bin"
  port=$(free_port)
  start_dynamodb_local "$port" memory
  trap 'kill "$DDB_PID" 2>/dev/null || true' EXIT
  raise_open_files
  "target/release/$bin" --endpoint "http://127.0.0.1:$port" "$@"
}

# run_confined MB BIN ARGS...: run_alone, the benchmark (not DynamoDB Local)
# inside a cgroup v1 `cpu` quota of period x MB / 1,769: the CPU share Lambda
# gives a function of MB (one vCPU at 1,769 MB).
run_confined() {
  local memory=$1 bin=$2
  shift 2
  cargo build --release --locked -p bench --bin "$bin"
  port=$(free_port)
  start_dynamodb_local "$port" memory
  trap 'kill "$DDB_PID" 2>/dev/null || true' EXIT
  confine "$memory" "target/release/$bin" --endpoint "http://127.0.0.1:$port" "$@"
}

# confine MB COMMAND...: COMMAND inside a cgroup v1 `cpu` quota of period x
# MB / 1,769: the CPU share Lambda gives a function of MB (one vCPU at
# 1,769 MB).
confine() {
  local memory=$1
  shift
  local group="/sys/fs/cgroup/cpu/blog-bench-$memory"
  mkdir -p "$group" || { log "cannot make $group (cgroup v1, as root)"; exit 1; }
  echo 100000 >"$group/cpu.cfs_period_us"
  echo $((100000 * memory / 1769)) >"$group/cpu.cfs_quota_us"
  log "$1 under a ${memory} MB function's CPU share ($((100000 * memory / 1769)) µs per 100 ms)"
  sh -c 'echo $$ > "$1/cgroup.procs" && shift && exec "$@"' sh "$group" "$@"
  log "throttled by the quota: $(tr '\n' ' ' <"$group/cpu.stat")"
}

case "${1:-}" in
  --markdown)
    shift
    cargo build --release --locked -p bench --bin blog-markdown-bench
    if [ "${1:-}" = "--memory" ]; then
      memory=$2
      shift 2
      confine "$memory" target/release/blog-markdown-bench "$@"
    else
      target/release/blog-markdown-bench "$@"
    fi
    exit ;;
  --viral) shift; run_alone blog-viral-bench "$@"; exit ;;
  --notifications)
    shift
    run_alone blog-viral-bench --notifications --designs hot --scale 0.01 \
      --rates 1000,5000,10000 --seconds 10 "$@"
    exit ;;
  --account) shift; run_alone blog-account-bench "$@"; exit ;;
  --rename) shift; run_alone blog-rename-bench "$@"; exit ;;
  --home)
    shift
    if [ "${1:-}" = "--memory" ]; then
      memory=$2
      shift 2
      run_confined "$memory" blog-home-bench "$@"
    else
      run_alone blog-home-bench "$@"
    fi
    exit ;;
  --stream)
    shift
    if [ "${1:-}" = "--memory" ]; then
      memory=$2
      shift 2
      run_confined "$memory" blog-stream-bench "$@"
    else
      run_alone blog-stream-bench "$@"
    fi
    exit ;;
esac

log "building the arm64 Lambda zips (cargo lambda) and this machine's release binaries"
cargo lambda build --release --arm64 --output-format zip -p functions
cargo build --release --locked -p functions -p bench

port=$(free_port)
start_dynamodb_local "$port" memory
trap 'kill "$DDB_PID" 2>/dev/null || true' EXIT

log "running the benchmark"
target/release/blog-bench --endpoint "http://127.0.0.1:$port" \
  --functions target/release --zips target/lambda --events events --out docs/benchmarks.md "$@"
