#!/usr/bin/env bash
# The serving figures of the README's Speed section: batched decode against
# prefill, prefix-cache TTFT, scheduling overhead and KV waste, through the
# Engine. Makes its TinyLlama-shaped Q4_0 file under $OUT (default /tmp/tokamak-serve).
# Slow on 2 cores: the prefix miss prefills 2 x 1,008 tokens.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/tokamak-serve}
mkdir -p "$out"
scripts/build release tokamak
t=build/release/tokamak
m=$out/tl-q4_0.gguf
[ -f "$m" ] || "$t" make-model --preset tinyllama-1.1b --type q4_0 --pure -o "$m"
serve() { "$t" bench-serve -m "$m" -t 2 --json "$@"; }
echo "== pp512 and single-stream decode"; "$t" bench -m "$m" -p 512 -n 16 -t 2 -r 2 --json
echo "== 16 streams"; serve --requests 16 --concurrency 16 --prompt-len 16 --output-len 48 --max-model-len 512
echo "== 1 stream"; serve --requests 2 --concurrency 1 --prompt-len 16 --output-len 48 --max-model-len 512
echo "== cached 1,000-token prefix (the second request hits)"
serve --requests 2 --concurrency 1 --shared-prefix 1000 --prompt-len 8 --output-len 2 --max-model-len 1100
echo "== the same, prefix caching off"
serve --requests 2 --concurrency 1 --shared-prefix 1000 --prompt-len 8 --output-len 2 --max-model-len 1100 --no-prefix-caching
echo "== 64 running sequences"; serve --requests 64 --concurrency 64 --prompt-len 24 --output-len 24 --max-model-len 256
echo "== KV waste over 64 requests of ~500 tokens (stories260K)"
"$t" bench-serve -m models/stories260K.gguf --requests 64 --concurrency 64 --prompt-len 400:50 --output-len 100:20 \
  -t 1 --max-model-len 1024 --json
