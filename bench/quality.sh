#!/usr/bin/env bash
# What each weight type and KV format costs in quality: for stories260K and a
# micro model of each family, PPL and KL divergence against the same model with
# F32 weights and F32 KV (tokamak perplexity --kl-divergence), over Ambrose
# Bierce's "The Devil's Dictionary" (public domain; Debian's dict-devil ships it
# as /usr/share/dictd/devil.dict.dz). Prints a Markdown table on stdout.
#   bench/quality.sh [CHUNKS]   (default 100 chunks of -c 128: 6,300 scored tokens per row)
# Work files go to $OUT (default /tmp/tokamak-quality). Random-weight micro
# models have a PPL near their vocabulary size; their KL is what matters.
set -euo pipefail
cd "$(dirname "$0")/.."
chunks=${1:-100}
out=${OUT:-/tmp/tokamak-quality}
mkdir -p "$out"
scripts/install-deps quality
scripts/build release tokamak
t=build/release/tokamak
text=$out/devil.txt
[ -f "$text" ] || zcat /usr/share/dictd/devil.dict.dz > "$text"
common=(-f "$text" -c 128 --chunks "$chunks" -t 2)

models=(stories260K micro llama3-micro qwen2-micro smollm2-micro mistral-micro)
for name in "${models[@]}"; do
  f32=$out/$name-f32.gguf
  if [ ! -f "$f32" ]; then
    if [ "$name" = stories260K ]; then
      cp models/stories260K.gguf "$f32"
    else
      "$t" make-model --preset "$name" --type f32 --vocab-from models/stories260K.gguf -o "$f32" --seed 1 2> /dev/null
    fi
  fi
done

# One row: model, weights, KV, then the comparison's figures.
row() {
  local name=$1 weights=$2 kv=$3 file=$4
  shift 4
  local report
  report=$("$t" perplexity -m "$file" --kl-divergence --kl-divergence-base "$out/$name.base" -t 2 "$@" 2> /dev/null)
  local ppl ratio kl kl99 top
  ppl=$(sed -n 's/^PPL  *: \([0-9.]*\).*/\1/p' <<< "$report")
  ratio=$(sed -n 's/^PPL ratio *: \([0-9.]*\).*/\1/p' <<< "$report")
  kl=$(sed -n 's/^Mean KLD *: \([0-9.]*\) +\/- \([0-9.]*\)/\1 ± \2/p' <<< "$report")
  kl99=$(sed -n 's/^99.0% KLD *: \([0-9.]*\)/\1/p' <<< "$report")
  top=$(sed -n 's/^Same top token *: \([0-9.]*\) %/\1/p' <<< "$report")
  echo "| $name | $weights | $kv | $ppl | $ratio | $kl | $kl99 | $top % |"
}

echo "| model | weights | KV | PPL | PPL / PPL(base) | mean KLD | 99% KLD | same top token |"
echo "|---|---|---|---:|---:|---:|---:|---:|"
for name in "${models[@]}"; do
  f32=$out/$name-f32.gguf
  # The reference: F32 weights (so f32 activations) and F32 KV.
  "$t" perplexity -m "$f32" "${common[@]}" --kv-type f32 \
    --kl-divergence-base "$out/$name.base" > "$out/$name.base.txt" 2> /dev/null
  for type in f16 q8_0 q6_k q5_k_m q4_k_m q4_0; do
    q=$out/$name-$type.gguf
    [ -f "$q" ] || "$t" quantize "$f32" "$q" "$type" -t 2 2> /dev/null
    row "$name" "${type^^}" f16 "$q"
  done
  row "$name" F32 f16 "$f32" --kv-type f16
  row "$name" F32 bf16 "$f32" --kv-type bf16
  row "$name" F32 q8 "$f32" --kv-type q8
  row "$name" F32 q4 "$f32" --kv-type q4
  row "$name" F32 "q8 + 64 recent" "$f32" --kv-type q8 --kv-recent 64
  row "$name" F32 "q4 + 64 recent" "$f32" --kv-type q4 --kv-recent 64
  row "$name" F32 "K q8 / V q4" "$f32" --kv-type-k q8 --kv-type-v q4
done
