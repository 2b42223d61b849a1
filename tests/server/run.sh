#!/usr/bin/env bash
# The server's tests on the official `openai` npm client: installs the locked
# packages (npm ci), runs openai.test.mjs under Node's test runner, then the
# 30-second soak (64 streaming clients). About 30 s + the test file.
#   TOKAMAK_BIN=build/release/tokamak tests/server/run.sh [api|soak|all]
# ctest runs `all` in Release and `api` under ASan (whose allocator
# quarantine grows resident memory by design, which the soak would flag).
# TOKAMAK_TEST_DATA: the shared data folder (default: ../shared beside the checkout).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [ -z "${TOKAMAK_BIN:-}" ]; then
  echo "tests/server/run.sh: set TOKAMAK_BIN to the tokamak executable" >&2
  exit 1
fi
bin=$(realpath -m "$TOKAMAK_BIN")
data=$(realpath -m "${TOKAMAK_TEST_DATA:-$repo/../shared}")
model=$data/models/stories260K/stories260K.gguf
[ -x "$bin" ] || { echo "tests/server/run.sh: TOKAMAK_BIN '$TOKAMAK_BIN' is not an executable" >&2; exit 1; }
[ -f "$model" ] || { echo "tests/server/run.sh: no model at $model (TOKAMAK_TEST_DATA '$data')" >&2; exit 1; }
command -v node > /dev/null || { echo "tests/server/run.sh: needs Node.js 20 or later (node, npm)" >&2; exit 1; }
what=${1:-all}
case "$what" in
  api | soak | all) ;;
  *) echo "tests/server/run.sh: unknown part '$what' (api, soak or all)" >&2; exit 2 ;;
esac
cd "$here"
npm ci --no-audit --no-fund --loglevel=error > /dev/null
if [ "$what" != soak ]; then
  TOKAMAK_BIN=$bin TOKAMAK_TEST_DATA=$data node --test --test-reporter=spec openai.test.mjs
fi
if [ "$what" != api ]; then
  # A third of the run to warm up: every client connected and every connection thread started.
  node soak.mjs --bin "$bin" --model "$model" --clients 64 --seconds 30 --warmup 10
fi
