#!/usr/bin/env bash
# HTTP overhead of `tokamak serve`: the same seeded workload (16 streams on a
# TinyLlama-shaped Q4_0 file) through an Engine in-process (bench-serve) and
# through a live server over streaming HTTP (bench-serve --url), alternating
# OFFLINE / HTTP for $ROUNDS rounds so that load on the machine hits both.
# Prints each run's JSON and the median output tokens/s of each, and their ratio.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/tokamak-serve-http}
rounds=${ROUNDS:-3}
mkdir -p "$out"
scripts/build release tokamak
t=build/release/tokamak
m=$out/tl-q4_0.gguf
[ -f "$m" ] || "$t" make-model --preset tinyllama-1.1b --type q4_0 --pure -o "$m"
engine=(-t 2 --max-model-len 512 --max-num-seqs 16)
workload=(--requests 32 --concurrency 16 --prompt-len 16 --output-len 48 --json)

"$t" serve -m "$m" --port 0 "${engine[@]}" 2> "$out/serve.log" &
server=$!
trap 'kill "$server" 2> /dev/null || true' EXIT
port=""
for _ in $(seq 100); do
  port=$(sed -n 's|^listening on http://[0-9.]*:\([0-9]*\)$|\1|p' "$out/serve.log")
  [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health" > /dev/null && break
  sleep 0.2
done
[ -n "$port" ] || { echo "serve did not start:" >&2; cat "$out/serve.log" >&2; exit 1; }

: > "$out/offline.jsonl"
: > "$out/http.jsonl"
for round in $(seq "$rounds"); do
  echo "== round $round: offline" >&2
  "$t" bench-serve -m "$m" "${engine[@]}" "${workload[@]}" | tee -a "$out/offline.jsonl"
  echo "== round $round: http://127.0.0.1:$port" >&2
  "$t" bench-serve -m "$m" --url "http://127.0.0.1:$port" --max-model-len 512 "${workload[@]}" | tee -a "$out/http.jsonl"
done
python3 - "$out/offline.jsonl" "$out/http.jsonl" <<'PY'
import json, statistics, sys
med = [statistics.median(json.loads(l)["output_tokens_per_s"] for l in open(f)) for f in sys.argv[1:3]]
print(f"median output tokens/s: offline {med[0]:.2f}, http {med[1]:.2f}; http/offline = {med[1] / med[0]:.3f} "
      f"(HTTP overhead {100 * (1 - med[1] / med[0]):.1f}%)")
PY
