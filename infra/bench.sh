#!/usr/bin/env bash
# The benchmark behind docs/benchmarks.md. Builds the functions twice: as the
# arm64 zips that `sam deploy` uploads (for their sizes) and as release
# binaries for this machine (to time their start-up and measure their memory);
# starts a DynamoDB Local of its own, in memory; runs blog-bench, which loads
# the data set at S and 10×S, measures, and rewrites the tables of
# docs/benchmarks.md. Options go to blog-bench (e.g. --users 101, --quick).
#
#   ./infra/bench.sh --rename [--items N]   the rename fan-out of one user who
#                                           wrote N items (100,000), instead
#   ./infra/bench.sh --viral [--scale 0.1] [--seconds 20] [--rates 50,100,...]
#                                           one post liked at rising rates on
#                                           a DynamoDB that enforces its
#                                           per-partition limits (scaled)
#   ./infra/bench.sh --stream [--likes 3000] [--quiet]
#                                           the local stream poller and the
#                                           fan-out draining one post's likes
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

# run_alone BIN ARGS...: builds the bench's BIN and runs it on a DynamoDB
# Local of its own.
run_alone() {
  local bin=$1
  shift
  cargo build --release --locked -p bench --bin "$bin"
  port=$(free_port)
  start_dynamodb_local "$port" memory
  trap 'kill "$DDB_PID" 2>/dev/null || true' EXIT
  "target/release/$bin" --endpoint "http://127.0.0.1:$port" "$@"
}

case "${1:-}" in
  --viral) shift; run_alone blog-viral-bench "$@"; exit ;;
  --account) shift; run_alone blog-account-bench "$@"; exit ;;
  --rename) shift; run_alone blog-rename-bench "$@"; exit ;;
  --stream) shift; run_alone blog-stream-bench "$@"; exit ;;
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
