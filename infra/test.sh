#!/usr/bin/env bash
# Every check and test:
# 1. formatting and lints; blog's docs without a broken link (rustdoc); the
#    features the two builds resolve (infra/check_features.py);
# 2. the deployment template: cfn-lint in every commercial region (and the
#    budget's template), `sam validate --lint`, and the IAM
#    roles as SAM expands them (infra/check_roles.py);
# 3. unit tests, and the integration tests against fresh DynamoDB Locals in
#    RAM (each test makes its own table, so they run in parallel), run as
#    their binaries while the doc tests and rustdoc (step 1's docs) build
#    beside them; the benchmark's cost tests run on one of their own beside
#    step 4;
# 4. every function invoked with its sample event through `cargo lambda invoke`
#    against `cargo lambda watch`, on the stack's DynamoDB Local (beside
#    step 3, once the docs are built); then, on the same DynamoDB Local, the
#    stack as run-local.sh runs it: the local API Gateway from template.yaml
#    in front of that watch, tokens from a local Cognito user pool (moto):
#    2,000 requests with tokens, every route, one at a time and eight at a
#    time, with the stream fan-out running: no 5xx, every status as
#    documented, counts and the feed right once it settles; CORS; the
#    metrics; docs/deploying.md's AWS CLI sign-up and refused tokens 401
#    (infra/check_gateway.py); a page on another origin signing in and
#    writing in headless Chromium (infra/check_browser.py); the hostile
#    Markdown corpus posted, read back and loaded in Chromium: no script
#    runs, no request leaves (infra/check_xss.py); docs/local.md's walk,
#    local sign-up and sample events and docs/operations.md's blog-admin run
#    as written (infra/check_readme.py);
#    a scheduled post out
#    within 60 s of its time through the template's schedule, which
#    `blog-admin scheduler` runs (infra/check_schedule.py);
# 5. schemathesis fuzzing every operation of openapi.yaml (a fixed seed, a
#    few minutes) through that gateway with a token: no 5xx, every response
#    as documented, no write without a valid token.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"
# A CI run builds once from nothing: incremental state would only fill its disk.
if [ -n "${CI:-}" ]; then export CARGO_INCREMENTAL=0; fi

ensure_java
ensure_chromium
ensure_dynamodb_local
pids=()
# watch is started in the background by the invoke check, which writes its
# pid here (a stale one from an earlier run must not be killed).
rm -f "$LOCAL/watch.pid"
trap 'for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  if [ -s "$LOCAL/watch.pid" ]; then kill "$(cat "$LOCAL/watch.pid")" 2>/dev/null || true; fi' EXIT
# Several DynamoDB Locals for the API suite, each test on one of them (the
# one with the fewest tests running when it starts,
# blog/tests/api/support.rs): an instance serves one request at a time, so
# one instance would leave a core idle. Three on two cores: with five, the
# tests' contended writes ran out of their retries and a bulk load timed out.
# Their JVMs start while the tests build.
api_ports=()
api_pids=()
for _ in 1 2 3; do
  port=$(free_port)
  launch_dynamodb_local "$port"
  pids+=("$DDB_PID")
  api_pids+=("$DDB_PID")
  api_ports+=("$port")
done
# And the stack's (step 4), whose invoke check starts beside the API suite.
stack_port=$(free_port)
# Not yet bound by the JVMs above: the same free port could come back.
while [[ " ${api_ports[*]} " == *" $stack_port "* ]]; do stack_port=$(free_port); done
launch_dynamodb_local "$stack_port"
pids+=("$DDB_PID")
stack_ddb_pid=$DDB_PID

log "cargo fmt --check"
cargo fmt --all -- --check

# The build below compiles the tests, then the bins: with the same features
# resolved for both, the second compiles only the bins themselves.
log "the tests' build and the bins' build resolve the same features (workspace-hack)"
python3 infra/check_features.py

log "run-local.sh refuses a second stack on a data directory in use"
mkdir -p "$LOCAL"
set +e
./infra/check_run_local_lock.sh 2>&1 | tee "$LOCAL/run-local-lock.log"
runlocal_status=${PIPESTATUS[0]}
set -e

template_checks() {
  # A resource type one region lacks fails the whole stack there, conditions
  # or not: the template must deploy to every region cfn-lint knows but
  # China, GovCloud and the isolated partitions. The budget's own stack goes
  # to us-east-1 only (docs/deploying.md).
  local regions
  read -ra regions < <("$TOOLS_VENV/bin/python" -c 'import cfnlint.helpers as h
print(" ".join(r for r in h.REGIONS if not r.startswith(("cn-", "us-gov-", "us-iso", "eu-isoe", "eusc-"))))')
  cfn-lint --regions "${regions[@]}" -- template.yaml
  cfn-lint --regions us-east-1 -- infra/budget.yaml
  sam validate --lint --region us-east-1 >/dev/null
  # The IAM roles as the SAM transform expands them.
  "$TOOLS_VENV/bin/python" infra/check_roles.py
}
# lxml first, on its own (seconds): the API suite validates the Atom feeds
# with it (blog/tests/api/atom.rs runs infra/check_atom.py), and the tools
# below install in the background while the tests build and run.
log "lxml, for the API suite's strict Atom check"
ensure_tools lxml

# The Python tools (two minutes on a fresh clone, mostly downloads), then
# the template checks, while the tests build. The stack checks need the tools
# too: they start once this has passed.
log "installing the Python tools, then the template checks (cfn-lint in every commercial region, sam validate, the IAM roles), while the tests build"
mkdir -p "$LOCAL"
# The invoke check (below) starts once the tools are in.
rm -f "$LOCAL/tools.ready"
(set -e; ensure_tools; touch "$LOCAL/tools.ready"; template_checks) >"$LOCAL/template-checks.log" 2>&1 &
template_pid=$!
pids+=("$template_pid")

# Clippy in the build itself: clippy-driver is rustc with clippy's lints, and
# as cargo's wrapper for the workspace's own crates it lints each as it
# compiles it, with the lints `cargo clippy --workspace --all-targets -- -D
# warnings` runs (the crates have lib, bin and test targets only, all built
# here). A separate `cargo clippy` would check every dependency a second time:
# three minutes of a fresh run on two cores. Exported, so that every later
# build, watch's included, finds these artifacts fresh. (clippy-driver turns
# MIR optimisations off: these are debug builds for the tests.)
RUSTC_WORKSPACE_WRAPPER=$(rustup which clippy-driver)
export RUSTC_WORKSPACE_WRAPPER CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__"
log "building the tests, blog-admin and the functions, linted by clippy (-D warnings)"
# What it built, as cargo's JSON messages (its diagnostics still rendered on
# stderr): the test binaries below are run from this list.
cargo test --workspace --locked --no-run --message-format=json-render-diagnostics >"$LOCAL/tests-build.json"
# test_binaries TARGET...: the test binaries of the libraries, the binaries
# and the named test targets, each as `directory<TAB>executable` (the
# directory its package's, where cargo test runs it).
test_binaries() {
  python3 -c 'import json, os, sys
names = set(sys.argv[2:])
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m["profile"]["test"]:
        continue
    kinds = m["target"]["kind"]
    if "lib" in kinds or "bin" in kinds or ("test" in kinds and m["target"]["name"] in names):
        print(os.path.dirname(m["manifest_path"]) + "\t" + m["executable"])' "$LOCAL/tests-build.json" "$@"
}
# As watch builds a function (`cargo run --bin` at the workspace root), so
# that it only starts them.
cargo build --quiet --locked --workspace --bins

# Every test target but the benchmark's cost tests, which run later beside
# the stack checks (the same packages selected, so the same features: no
# second build).
read -ra test_targets < <(cargo metadata --no-deps --format-version 1 --locked | python3 -c '
import json, sys
targets = {t["name"] for p in json.load(sys.stdin)["packages"] for t in p["targets"] if "test" in t["kind"]}
print(" ".join(f"--test {t}" for t in sorted(targets - {"costs"})))')
[[ " ${test_targets[*]} " == *" api "* ]] || { log "no API suite among the test targets: ${test_targets[*]}"; exit 1; }
for i in "${!api_ports[@]}"; do await_dynamodb_local "${api_ports[$i]}" "${api_pids[$i]}"; done
endpoints=()
for port in "${api_ports[@]}"; do endpoints+=("http://127.0.0.1:$port"); done
export DYNAMODB_ENDPOINTS
DYNAMODB_ENDPOINTS=$(IFS=,; echo "${endpoints[*]}")
export DYNAMODB_ENDPOINT="${endpoints[0]}" DYNAMODB_LOCAL_HOME="$DDB_HOME"

log "cargo test: unit tests and the API suite (${test_targets[*]}), the test binaries"
set +e
tail -1 "$LOCAL/run-local-lock.log" >"$LOCAL/test.log"
# Every test binary of those targets.
read -ra target_names < <(printf '%s\n' "${test_targets[@]}" | grep -v '^--test$' | tr '\n' ' ')
mapfile -t binaries < <(test_binaries "${target_names[@]}")
# The docs, beside the tests: the doc tests, then the library's docs as
# docs.rs would build them, with and without the admin feature (an
# always-built item must not link to an admin-only one): a moved item leaves a
# broken intra-doc link that no build or test sees. They hold cargo's build
# directory lock, so the tests below run as their binaries, without cargo
# (as cargo test runs them: from their package's directory).
set -e
log "the doc tests and rustdoc (broken links refused, -D warnings), in the background beside the tests"
(
  docs_status=0
  cargo test --quiet --workspace --locked --doc || docs_status=1
  for features in --all-features --features=; do
    RUSTDOCFLAGS="-D warnings" cargo doc --quiet --locked -p blog --no-deps "$features" || docs_status=1
  done
  exit "$docs_status"
) >"$LOCAL/docs.log" 2>&1 &
docs_pid=$!
pids+=("$docs_pid")

# Step 4's first check, beside the tests once the docs are built (they hold
# cargo's build directory lock, and watch starts each function with `cargo
# run`, one after another: a minute of cargo's checks that need no more than
# a sliver of a core) and the tools are in: every function invoked with its
# sample event through `cargo lambda invoke` against `cargo lambda watch`,
# on the stack's DynamoDB Local. watch goes on serving the stack checks.
log "sample events through cargo lambda invoke, in the background once the docs are built"
watch_port=$(free_port)
(
  set -e
  while kill -0 "$docs_pid" 2>/dev/null; do sleep 1; done
  until [ -e "$LOCAL/tools.ready" ]; do
    kill -0 "$template_pid" 2>/dev/null || { log "the Python tools did not install"; exit 1; }
    sleep 1
  done
  await_dynamodb_local "$stack_port" "$stack_ddb_pid"
  unset DYNAMODB_ENDPOINTS
  export DYNAMODB_ENDPOINT="http://127.0.0.1:$stack_port" TABLE_NAME=invoke-check
  ./target/debug/blog-admin create-table
  # watch is the Lambda runtime, as run-local.sh runs it: sample events go
  # to its Invoke API, HTTP requests to the local API Gateway in front of it.
  cargo lambda watch --disable-cors --concurrency "${WATCH_CONCURRENCY:-4}" \
    --invoke-address 127.0.0.1 --invoke-port "$watch_port" \
    >"$LOCAL/watch.log" 2>&1 &
  echo "$!" >"$LOCAL/watch.pid"
  wait_for_port "$watch_port" "$!"
  log "sample events through cargo lambda invoke: watch is up"
  "$TOOLS_VENV/bin/python" infra/check_events.py "$watch_port" "$DYNAMODB_ENDPOINT" "$TABLE_NAME"
) >"$LOCAL/invoke.log" 2>&1 &
invoke_pid=$!
pids+=("$invoke_pid")

set +e
status=0
[ "${#binaries[@]}" -gt 0 ] || { log "no test binaries in $LOCAL/tests-build.json"; status=1; }
# Three tests at a time, one on each DynamoDB Local: a test spends most of
# its time waiting for DynamoDB Local, the fan-out's pauses and its own
# backoffs, so two (libtest's default on two cores) left the JVMs idle.
for binary in "${binaries[@]}"; do
  (cd "${binary%%$'\t'*}" && RUST_TEST_THREADS="${RUST_TEST_THREADS:-3}" "${binary#*$'\t'}") 2>&1 | tee -a "$LOCAL/test.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
done
set -e
kill "${api_pids[@]}" 2>/dev/null || true
unset DYNAMODB_ENDPOINTS

# The cost tests' DynamoDB Local, started now: its JVM comes up while the
# docs finish.
costs_port=$(free_port)
# Not yet bound by the stack's JVM: the same free port could come back.
while [ "$costs_port" = "$stack_port" ]; do costs_port=$(free_port); done
launch_dynamodb_local "$costs_port" memory
pids+=("$DDB_PID")
costs_ddb_pid=$DDB_PID

set +e
wait "$docs_pid"
docs_status=$?
set -e
cat "$LOCAL/docs.log" | tee -a "$LOCAL/test.log"
log "the doc tests and rustdoc: $([ "$docs_status" -eq 0 ] && echo passed || echo FAILED)"
[ "$docs_status" -eq 0 ] || status=1

set +e
wait "$template_pid"
template_status=$?
set -e
log "the Python tools and the template checks: $([ "$template_status" -eq 0 ] && echo passed || echo FAILED)"
cat "$LOCAL/template-checks.log"
[ "$template_status" -eq 0 ] || exit 1

# The benchmark's cost tests, on a DynamoDB Local of their own, while the
# stack checks below run on another (the tests use about one core, the stack
# checks' requests about one).
log "the benchmark's cost tests, in the background while the stack checks run"
await_dynamodb_local "$costs_port" "$costs_ddb_pid"
# The test binary itself (built with the others): `cargo test` would hold
# the build directory's lock while it ran, and watch's `cargo run` would wait
# for it.
costs_test=
mapfile -t built < <(test_binaries costs)
for binary in "${built[@]}"; do
  [[ "${binary#*$'\t'}" == */costs-* ]] && costs_test=${binary#*$'\t'}
done
[ -n "$costs_test" ] || { log "no cost tests binary in $LOCAL/tests-build.json"; exit 1; }
(cd bench && DYNAMODB_ENDPOINT="http://127.0.0.1:$costs_port" "$costs_test") >"$LOCAL/costs.log" 2>&1 &
costs_pid=$!
pids+=("$costs_pid")

# The stack's DynamoDB Local (fresh, as run-local.sh has) and watch, from
# the invoke check.
set +e
wait "$invoke_pid"
invoke_status=$?
set -e
log "sample events through cargo lambda invoke: $([ "$invoke_status" -eq 0 ] && echo passed || echo FAILED)"
tee -a "$LOCAL/test.log" <"$LOCAL/invoke.log"
[ -s "$LOCAL/watch.pid" ] || { log "cargo lambda watch did not start: no stack checks"; exit 1; }
pids+=("$(cat "$LOCAL/watch.pid")")
export DYNAMODB_ENDPOINT="http://127.0.0.1:$stack_port" TABLE_NAME=invoke-check

log "the stack as run-local.sh runs it: the local user pool and API Gateway in front of watch"
start_identity_provider "$(free_port)"
pool_file="$LOCAL/identity-test.json"
read -r user_pool client < <(./target/debug/blog-admin identity-provider "$IDP_ENDPOINT" --save "$pool_file")
api_port=$(free_port)
./target/debug/blog-admin api-gateway "$api_port" --functions "http://127.0.0.1:$watch_port" \
  --idp "$IDP_ENDPOINT" --user-pool "$user_pool" --client "$client" >"$LOCAL/api-gateway.log" 2>&1 &
pids+=("$!")
wait_for_ok "http://127.0.0.1:$api_port/feed" "${pids[-1]}"

log "2,000 requests with tokens through the API Gateway and watch, with the stream fan-out"
./target/debug/blog-admin stream-poller \
  --functions "http://127.0.0.1:$watch_port" >"$LOCAL/poller.log" 2>&1 &
pids+=("$!")
# EventBridge's schedules from template.yaml (publish-scheduled every minute).
./target/debug/blog-admin scheduler \
  --functions "http://127.0.0.1:$watch_port" >"$LOCAL/scheduler.log" 2>&1 &
pids+=("$!")
set +e
"$TOOLS_VENV/bin/python" infra/watch_load.py "$api_port" --pool "$pool_file" --requests 2000 | tee "$LOCAL/watch-load.log"
load_status=${PIPESTATUS[0]}
set -e
# One line for the totals below: the run counts as one check.
if [ "$load_status" -eq 0 ]; then echo "load: 1 passed, 0 failed"; else echo "load: 0 passed, 1 failed"; fi | tee -a "$LOCAL/test.log"

log "CORS through the local API Gateway: the deployed HTTP API's answers"
set +e
"$TOOLS_VENV/bin/python" infra/check_cors.py "$api_port" | tee -a "$LOCAL/test.log"
cors_status=${PIPESTATUS[0]}
set -e

log "the metrics the functions printed under watch: valid EMF, and the ones operators read"
set +e
"$TOOLS_VENV/bin/python" infra/check_metrics.py "$LOCAL/watch.log" | tee -a "$LOCAL/test.log"
metrics_status=${PIPESTATUS[0]}
set -e

# The scheduled post waits for the schedule's minute: the checks below run
# meanwhile (its post is listed under a tag of its own, so the fuzzer's posts
# do not hide it), and its result is read after them.
log "a scheduled post publishes itself through the stack's EventBridge schedule (in the background)"
"$TOOLS_VENV/bin/python" infra/check_schedule.py "$api_port" "$pool_file" >"$LOCAL/schedule.log" 2>&1 &
schedule_pid=$!
pids+=("$schedule_pid")

log "real tokens: docs/deploying.md's sign-up with the AWS CLI, refused tokens 401"
set +e
"$TOOLS_VENV/bin/python" infra/check_gateway.py "$api_port" "$IDP_ENDPOINT" "$pool_file" | tee -a "$LOCAL/test.log"
gateway_status=${PIPESTATUS[0]}
set -e

log "a page on another origin signs in and writes, in headless Chromium"
set +e
"$TOOLS_VENV/bin/python" infra/check_browser.py "$api_port" "$IDP_ENDPOINT" "$pool_file" | tee -a "$LOCAL/test.log"
browser_status=${PIPESTATUS[0]}
set -e

# In the background beside the README's commands and the fuzzer (its own
# user, its own proxy for Chromium).
log "the hostile Markdown corpus, posted and read back, loaded in headless Chromium (in the background)"
"$TOOLS_VENV/bin/python" infra/check_xss.py "$api_port" "$pool_file" >"$LOCAL/xss.log" 2>&1 &
xss_pid=$!
pids+=("$xss_pid")

# docs/local.md's walk, local sign-up and sample events and docs/operations.md's
# blog-admin, as written,
# in a shell with none of this script's variables but the stack's settings.
log "the shell blocks of docs/local.md and docs/operations.md, run as written against this stack (infra/check_readme.py)"
set +e
"$TOOLS_VENV/bin/python" infra/check_readme.py "$api_port" "${IDP_ENDPOINT##*:}" "$watch_port" \
  "$stack_port" "$TABLE_NAME" "$pool_file" | tee -a "$LOCAL/test.log"
readme_status=${PIPESTATUS[0]}
set -e

log "fuzzing the API with schemathesis, with a token, through the API Gateway"
token=$(./target/debug/blog-admin token fuzzer --pool "$pool_file")
# The fuzzer's own profile, so that its writes get past 403.
curl -sf -X POST "http://127.0.0.1:$api_port/users" -H "Authorization: Bearer $token" \
  -d '{"username":"fuzzer"}' >/dev/null
set +e
# Every check but two (infra/schemathesis.toml says which and why), requests
# without the token or with a wrong one among them. Its example database off:
# files it writes in the tree would make watch restart every function.
st --config-file infra/schemathesis.toml run openapi.yaml --url "http://127.0.0.1:$api_port" \
  -H "Authorization: Bearer $token" \
  --phases examples,fuzzing,stateful --max-examples 30 --workers 2 --seed 2 --generation-database none | tee "$LOCAL/fuzz.log"
fuzz_status=${PIPESTATUS[0]}
set -e
# Its summary reads "N generated, N passed" or "N generated, F found U unique failures".
awk '/ generated, / { generated = $1; failed = 0; for (i = 1; i < NF; i++) if ($(i + 1) ~ /^unique/) failed = $i }
     END { printf "fuzz: %d passed, %d failed\n", generated - failed, failed }' "$LOCAL/fuzz.log" | tee -a "$LOCAL/test.log"

set +e
wait "$xss_pid"
xss_status=$?
set -e
log "the hostile Markdown corpus: $([ "$xss_status" -eq 0 ] && echo passed || echo FAILED)"
tee -a "$LOCAL/test.log" <"$LOCAL/xss.log"

set +e
wait "$schedule_pid"
schedule_status=$?
set -e
log "the scheduled post: $([ "$schedule_status" -eq 0 ] && echo passed || echo FAILED)"
tee -a "$LOCAL/test.log" <"$LOCAL/schedule.log"

set +e
wait "$costs_pid"
costs_status=$?
set -e
log "the benchmark's cost tests: $([ "$costs_status" -eq 0 ] && echo passed || echo FAILED)"
tee -a "$LOCAL/test.log" <"$LOCAL/costs.log"

# cargo prints one result line per test binary (the last is often an empty
# doc-test run) and the invoke check one of its own: close with the totals.
awk '/^test result:/ { passed += $4; failed += $6 }
     /^(runlocal|invoke|fuzz|load|metrics|cors|gateway|browser|xss|schedule|readme):/ { passed += $2; failed += $4 }
     END { printf "total: %d passed, %d failed\n", passed, failed }' "$LOCAL/test.log"
[ "$status" -eq 0 ] && [ "$runlocal_status" -eq 0 ] && [ "$costs_status" -eq 0 ] && [ "$invoke_status" -eq 0 ] && [ "$load_status" -eq 0 ] && [ "$metrics_status" -eq 0 ] && [ "$cors_status" -eq 0 ] && [ "$gateway_status" -eq 0 ] && [ "$browser_status" -eq 0 ] && [ "$xss_status" -eq 0 ] && [ "$readme_status" -eq 0 ] && [ "$schedule_status" -eq 0 ] && [ "$fuzz_status" -eq 0 ]
