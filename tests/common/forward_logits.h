// Logits of a token sequence through Forward and a KvCache, for the tests
// that compare them with llama.cpp's fixtures or with each other.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/matmul.h"
#include "kv/kv_layout.h"
#include "model/model.h"

namespace tokamak::testing {

// The token ids of fixture sequence `name` ("A", "B") from fixtures/logits/manifest.json.
std::vector<int32_t> fixture_sequence(const std::string& name);

// KV storage of `k` and `v` (f32 unless told), `recent` positions kept in f16.
kv::KvFormat kv_format(kernels::KvType k = kernels::KvType::F32, kernels::KvType v = kernels::KvType::F32,
                       int32_t recent = 0);

struct LogitsRun {
  kv::KvFormat kv = kv_format();
  bool incremental = false;  // one token per forward pass, else the whole sequence as one batch
  int threads = 1;
  kernels::MatmulOptions matmul;
};

// [ids.size(), n_vocab] logits, row i after token i, of one sequence from position 0.
std::vector<float> forward_logits(const Model& model, const std::vector<int32_t>& ids, const LogitsRun& run = {});

// max |a[i] - b[i]|; infinity when the sizes differ.
float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b);

}  // namespace tokamak::testing
