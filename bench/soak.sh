#!/usr/bin/env bash
# The server soak of the issue: 64 concurrent streaming clients for 10 minutes
# (or SECONDS) on stories260K over loopback; fails on any failed request, on
# resident memory at the end over 1.05 x after the warm-up, on KV blocks left
# in use. Builds nothing: it runs $TOKAMAK_BIN (default build/release/tokamak).
#   bench/soak.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(realpath -m "${TOKAMAK_BIN:-build/release/tokamak}")
seconds=${1:-600}
[ -x "$bin" ] || { echo "bench/soak.sh: no tokamak executable at $bin (build it, or set TOKAMAK_BIN)" >&2; exit 1; }
command -v node > /dev/null || { echo "bench/soak.sh: needs Node.js 20 or later (node, npm)" >&2; exit 1; }
(cd tests/server && npm ci --no-audit --no-fund --loglevel=error > /dev/null)
node tests/server/soak.mjs --bin "$bin" --model models/stories260K.gguf --clients 64 --seconds "$seconds"
