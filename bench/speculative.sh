#!/usr/bin/env bash
# Speculative decoding's speed (issue figures), on a TinyLlama-shaped F16
# target with a Q4_0 draft of the same weights (make-model, same seed), 2
# threads. Each case runs without and then with speculation in the same run of
# this script, so machine load hits both; prints each pair's output tokens/s,
# their ratio and the acceptance rate:
#   1. batch 1, draft model, greedy and temperature 1 (bench-serve, concurrency 1),
#      and temperature 1 at a fixed depth of 3;
#   2. batch 1, prompt lookup (--spec-ngram 3) on a copy-heavy prompt: a text
#      twice, then its start again (tokamak run);
#   3. 16 concurrent streams, draft model, adaptive depth (bench-serve).
# OUT (default /tmp/tokamak-spec) keeps the models and the logs.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/tokamak-spec}
mkdir -p "$out"
scripts/build release tokamak
t=build/release/tokamak
target=$out/tl-f16.gguf
draft=$out/tl-q4_0.gguf
[ -f "$target" ] || "$t" make-model --preset tinyllama-1.1b --type f16 --seed 7 -o "$target"
[ -f "$draft" ] || "$t" make-model --preset tinyllama-1.1b --type q4_0 --seed 7 -o "$draft"
engine=(-t 2 --max-model-len 512)

# pair NAME WORKLOAD...: bench-serve without, then with the draft model.
pair() {
  local name=$1
  shift
  "$t" bench-serve -m "$target" "${engine[@]}" "$@" --json > "$out/$name.base.json"
  "$t" bench-serve -m "$target" "${engine[@]}" "$@" --draft-model "$draft" --json > "$out/$name.spec.json"
  python3 - "$name" "$out/$name.base.json" "$out/$name.spec.json" <<'PY'
import json, sys
name, base, spec = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
drafted, accepted = spec["spec_draft_tokens"], spec["spec_accepted_tokens"]
rate = f"{100 * accepted / drafted:.1f}%" if drafted else "n/a"
print(f"{name:22s} output tok/s: {base['output_tokens_per_s']:.2f} -> {spec['output_tokens_per_s']:.2f} "
      f"(x{spec['output_tokens_per_s'] / base['output_tokens_per_s']:.3f}); drafted {drafted}, accepted {accepted} "
      f"({rate}), by position {spec['spec_accepted_per_position']}")
PY
}

pair batch1-greedy --requests 2 --concurrency 1 --prompt-len 32 --output-len 64 --temp 0
pair batch1-temp1 --requests 2 --concurrency 1 --prompt-len 32 --output-len 64 --temp 1
# The same with a fixed depth of 3: what drafting every step costs and keeps.
pair batch1-temp1-fixed3 --requests 2 --concurrency 1 --prompt-len 32 --output-len 64 --temp 1 --draft-fixed --draft-max 3
pair streams16-greedy --requests 16 --concurrency 16 --prompt-len 32 --output-len 32 --temp 0

text="The quick brown fox jumps over the lazy dog while the cat sleeps on the warm mat by the door."
prompt="$text $text $text The quick brown fox"
for mode in base spec; do
  extra=()
  [ "$mode" = spec ] && extra=(--spec-ngram 3)
  "$t" run -m "$target" -t 2 -p "$prompt" -n 64 --temp 0 "${extra[@]}" 2> "$out/lookup.$mode.log" > /dev/null
done
python3 - "$out/lookup.base.log" "$out/lookup.spec.log" <<'PY'
import re, sys
def tps(f):
    return float(re.search(r"decode: ([0-9.]+) tok/s", open(f).read()).group(1))
base, spec = tps(sys.argv[1]), tps(sys.argv[2])
acc = re.search(r"speculation: .*", open(sys.argv[2]).read())
print(f"{'batch1-lookup-copy':22s} decode tok/s: {base:.2f} -> {spec:.2f} (x{spec / base:.3f}); {acc.group(0) if acc else ''}")
PY
