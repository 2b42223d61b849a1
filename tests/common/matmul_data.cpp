#include "common/matmul_data.h"

namespace tokamak::testing {

std::vector<float> make_activations(int64_t tokens, int64_t k, bool exact, std::mt19937& rng) {
  std::vector<float> x(static_cast<size_t>(tokens * k));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> q(-127, 127);
  for (size_t i = 0; i < x.size(); ++i) {
    if (exact) {
      x[i] = static_cast<float>(q(rng)) / 8.0f;
      if (i % static_cast<size_t>(k) % 32 == 0) x[i] = (q(rng) < 0 ? -127.0f : 127.0f) / 8.0f;
    } else {
      x[i] = normal(rng) * (i % 97 == 0 ? 20.0f : 1.0f);
    }
  }
  return x;
}

}  // namespace tokamak::testing
