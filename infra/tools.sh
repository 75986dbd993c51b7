#!/usr/bin/env bash
# The pinned Python tools (infra/lib.sh's TOOLS_PACKAGES), installed into
# .local/venv and nothing else run: those named, or all six.
#
#   ./infra/tools.sh aws-sam-cli cargo-lambda awscli   # what deploying needs
#
# NAME is a package's name as pinned: cargo-lambda, aws-sam-cli, cfn-lint,
# schemathesis, moto, awscli. run-local.sh and test.sh install what they
# need themselves.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
known=()
for spec in "${TOOLS_PACKAGES[@]}"; do known+=("${spec%%[[=]*}"); done
for name in "$@"; do
  [[ " ${known[*]} " == *" $name "* ]] || { log "no pinned tool named $name (one of: ${known[*]})"; exit 2; }
done
ensure_tools "$@"
log "installed in $TOOLS_VENV/bin; to run them by name: export PATH=\"$TOOLS_VENV/bin:\$PATH\""
