#include "common/forward_logits.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <span>

#include "common/test_data.h"
#include "core/thread_pool.h"
#include "kv/kv_cache.h"
#include "model/batch.h"
#include "model/forward.h"

namespace tokamak::testing {

std::vector<int32_t> fixture_sequence(const std::string& name) {
  std::ifstream in(test_data("fixtures/logits/manifest.json"));
  const nlohmann::json manifest = nlohmann::json::parse(in);
  return manifest.at("sequences").at(name).at("token_ids").get<std::vector<int32_t>>();
}

kv::KvFormat kv_format(kernels::KvType k, kernels::KvType v, int32_t recent) {
  kv::KvFormat f;
  f.k_type = k;
  f.v_type = v;
  f.recent = recent;
  return f;
}

std::vector<float> forward_logits(const Model& model, const std::vector<int32_t>& ids, const LogitsRun& run) {
  ThreadPool pool(run.threads);
  const kv::KvLayout layout = kv_layout_for(model.config(), run.kv);
  kv::KvCache kv(layout, static_cast<int32_t>(ids.size() / 16 + 8) + layout.recent_blocks());
  Forward forward(model, pool, run.matmul);
  std::vector<float> out;
  Batch batch;
  for (size_t i = 0; i < ids.size(); ++i) {
    batch.add(ids[i], static_cast<int32_t>(i), 0, true);
    if (run.incremental) {
      const std::span<const float> row = forward.run(batch, kv);
      out.insert(out.end(), row.begin(), row.end());
      batch.clear();
    }
  }
  if (!run.incremental) {
    const std::span<const float> rows = forward.run(batch, kv);
    out.assign(rows.begin(), rows.end());
  }
  return out;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::numeric_limits<float>::infinity();
  float m = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

}  // namespace tokamak::testing
