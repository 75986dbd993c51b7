#!/usr/bin/env bash
# Boots what `sam build` packs and `sam deploy` uploads: the arm64 release
# bootstraps of `cargo lambda build --release --arm64`, run under qemu-user
# (Debian's qemu-user-static, with Debian's arm64 glibc as the sysroot),
# against the Lambda Runtime API of `cargo lambda watch --only-lambda-apis`,
# with DynamoDB Local behind them. Then:
#   - every function serves its sample event from events/, in an order that
#     makes each a real request on data (infra/check_events.py);
#   - create-user refuses (401) an event without the authorizer's claims
#     that names a caller by headers;
#   - no binary needs a glibc symbol newer than provided.al2023's (2.34).
# Every binary of the `functions` package is built, checked and booted (31:
# the 28 routes' functions, fan-out, park-failures and publish-scheduled);
# the list comes from
# `cargo metadata`, not from this script.
# Not part of infra/test.sh: the release build alone (fat LTO, two cores) took
# about ten minutes when there were 13 binaries. Figures go to
# docs/benchmarks.md by hand.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# Amazon Linux 2023, the provided.al2023 runtime, ships glibc 2.34.
AL2023_GLIBC=2.34
ARM64="$LOCAL/arm64"
QEMU="$ARM64/usr/bin/qemu-aarch64-static"
SYSROOT="$ARM64/usr/aarch64-linux-gnu"

ensure_java
ensure_dynamodb_local
ensure_tools
cd "$ROOT"

if [ ! -x "$QEMU" ] || [ ! -e "$SYSROOT/lib/ld-linux-aarch64.so.1" ]; then
  log "fetching qemu-user-static and the arm64 glibc from Debian into $ARM64"
  apt-get update -qq
  tmp=$(mktemp -d)
  chmod a+rwx "$tmp" # apt's sandbox user writes there
  (cd "$tmp" && apt-get download -qq qemu-user-static libc6-arm64-cross libgcc-s1-arm64-cross)
  mkdir -p "$ARM64"
  for deb in "$tmp"/*.deb; do dpkg-deb -x "$deb" "$ARM64"; done
  rm -rf "$tmp"
fi

log "building the arm64 release functions (cargo lambda build --release --arm64)"
cargo lambda build --release --arm64 -p functions
cargo build --quiet --locked -p tools --bin blog-admin

functions=$(cargo metadata --format-version 1 --no-deps |
  python3 -c 'import json,sys; m=json.load(sys.stdin); print(" ".join(t["name"] for p in m["packages"] if p["name"]=="functions" for t in p["targets"] if "bin" in t["kind"]))')

log "glibc symbol versions (provided.al2023 has $AL2023_GLIBC)"
glibc_failures=0
for name in $functions; do
  bin="target/lambda/$name/bootstrap"
  newest=$(readelf -W --dyn-syms "$bin" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1)
  if [ "$(printf '%s\n%s\n' "$newest" "$AL2023_GLIBC" | sort -V | tail -1)" != "$AL2023_GLIBC" ]; then
    log "FAIL $name needs GLIBC_$newest"
    glibc_failures=$((glibc_failures + 1))
  else
    printf '%-16s %s  newest glibc symbol GLIBC_%s\n' "$name" "$(file -b "$bin" | cut -d, -f1-2)" "$newest"
  fi
done

trap stop_started EXIT INT TERM

ddb_port=$(free_port)
start_dynamodb_local "$ddb_port"
pids+=("$DDB_PID")
export DYNAMODB_ENDPOINT="http://127.0.0.1:$ddb_port" TABLE_NAME=boot-arm64
./target/debug/blog-admin create-table

port=$(free_port)
cargo lambda watch --only-lambda-apis --invoke-address 127.0.0.1 --invoke-port "$port" \
  >"$LOCAL/boot-arm64-watch.log" 2>&1 &
pids+=("$!")
# Its Runtime API only long-polls: wait for the port.
wait_for_port "$port" "${pids[-1]}"

log "starting the $(wc -w <<<"$functions") bootstraps under qemu-aarch64"
for name in $functions; do
  AWS_LAMBDA_RUNTIME_API="http://127.0.0.1:$port/.rt/$name" \
  AWS_LAMBDA_FUNCTION_NAME="$name" AWS_LAMBDA_FUNCTION_VERSION='$LATEST' \
  AWS_LAMBDA_FUNCTION_MEMORY_SIZE=128 AWS_LAMBDA_LOG_GROUP_NAME="/aws/lambda/$name" \
  AWS_LAMBDA_LOG_STREAM_NAME=boot-arm64 \
    "$QEMU" -L "$SYSROOT" "target/lambda/$name/bootstrap" >"$LOCAL/boot-arm64-$name.log" 2>&1 &
  pids+=("$!")
done

set +e
started=$(date +%s.%N)
"$TOOLS_VENV/bin/python" infra/check_events.py "$port" "$DYNAMODB_ENDPOINT" "$TABLE_NAME"
status=$?
set -e
log "invocations took $(python3 -c "print(round($(date +%s.%N) - $started, 1))") s under emulation"
for name in $functions; do
  if grep -q '"level":"ERROR"' "$LOCAL/boot-arm64-$name.log"; then
    log "$name logged errors: $LOCAL/boot-arm64-$name.log"
    status=1
  fi
done
[ "$glibc_failures" = 0 ] || status=1
[ "$status" = 0 ] && log "every arm64 function booted and served" || log "FAILED"
exit "$status"
