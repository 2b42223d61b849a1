// The element-wise kernels' variants against a double-precision reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/isa.h"
#include "kernels/ops.h"

namespace tokamak::kernels {
namespace {

// silu(g) * u in double.
double swiglu_ref(float g, float u) { return static_cast<double>(g) / (1.0 + std::exp(-static_cast<double>(g))) * u; }

// Gates over the whole range a model produces and past it (e^-g overflows
// float below -88.7), zeros and both signs of up; n = 1003 leaves a tail.
std::vector<float> gates() {
  std::vector<float> g = {0.0f, -0.0f, 1e-30f, -1e-30f, 87.0f, 88.5f, 100.0f, -87.0f, -88.5f, -100.0f, -1e4f, 1e4f};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> wide(-95.0f, 95.0f);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  while (g.size() < 1003) g.push_back(g.size() % 2 ? wide(rng) : normal(rng));
  return g;
}

// Each variant within 4 ulp of float of the double result (libm's expf and
// Cephes' are ~1 ulp, the division and product one rounding each), or within
// 1e-30 of it: below g ~ -88.7, e^-g leaves float (libm: inf, so -0; Cephes
// clamps at e^88.38, so g * 4e-39 * up), where the true value is below 1e-36.
TEST(Ops, SwigluMatchesDoubleReferenceOnEveryIsa) {
  const std::vector<float> g0 = gates();
  std::vector<float> up(g0.size());
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (float& u : up) u = normal(rng);
  up[1] = 0.0f;
  for (Isa isa : supported_isas()) {
    std::vector<float> g = g0;
    swiglu(isa, g.data(), up.data(), static_cast<int64_t>(g.size()));
    for (size_t i = 0; i < g.size(); ++i) {
      const double want = swiglu_ref(g0[i], up[i]);
      const double tolerance = 4.0 * std::abs(want) * 0x1p-24 + 1e-30;
      ASSERT_NEAR(g[i], want, tolerance) << isa_name(isa) << " gate " << g0[i] << " up " << up[i];
    }
  }
}

// A value does not depend on where a range split puts it: every way of
// cutting [0, n) at two points gives the bits of one call.
TEST(Ops, SwigluDoesNotDependOnTheSplit) {
  const std::vector<float> g0 = gates();
  const int64_t n = 40;
  std::vector<float> up(g0.size(), 1.5f);
  for (Isa isa : supported_isas()) {
    std::vector<float> whole(g0.begin(), g0.begin() + n);
    swiglu(isa, whole.data(), up.data(), n);
    for (int64_t a = 0; a <= n; ++a) {
      for (int64_t b = a; b <= n; b += 3) {
        std::vector<float> cut(g0.begin(), g0.begin() + n);
        swiglu(isa, cut.data(), up.data(), a);
        swiglu(isa, cut.data() + a, up.data() + a, b - a);
        swiglu(isa, cut.data() + b, up.data() + b, n - b);
        ASSERT_EQ(cut, whole) << isa_name(isa) << " cuts at " << a << ", " << b;
      }
    }
  }
}

}  // namespace
}  // namespace tokamak::kernels
